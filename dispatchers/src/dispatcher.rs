//! The dispatcher contract.

use crate::{InfoId, Outbox, SubscribeError, Subscriber, SubscriptionId, SubscriptionOptions};

/// A producer's policy for handing events to its consumers.
///
/// This is GenStage's `GenStage.Dispatcher` behaviour as a synchronous state
/// machine. The host (a producer or producer_consumer stage) calls it and then
/// carries out what it pushed into the [`Outbox`], in order. Every method that
/// returns a `usize` returns **upstream demand**: how many more events the
/// producer should now obtain, first from its buffer, then from
/// `handle_demand`.
///
/// A dispatcher never blocks, never spawns, never sends: it only decides.
///
/// # Example
///
/// ```
/// use weir_dispatchers::{ConsumerId, DemandDispatcher, Dispatcher, Emit, Outbox, Subscriber,
///                   SubscriptionId, SubscriptionOptions};
///
/// let mut dispatcher = DemandDispatcher::new();
/// let mut out = Outbox::new();
/// let a = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(10) };
///
/// // Subscribing asks for nothing yet; the consumer's first ask does.
/// assert_eq!(dispatcher.subscribe(a, &SubscriptionOptions::new(10, 5), &mut out), Ok(0));
/// assert_eq!(dispatcher.ask(a.subscription, 10, &mut out), 10);
///
/// // The producer obtained 12 events: 10 go out, 2 are left over for its buffer.
/// let leftover = dispatcher.dispatch((0..12).collect(), &mut out);
/// assert_eq!(leftover, vec![10, 11]);
/// let sent: Vec<_> = out.drain().collect();
/// assert_eq!(sent, vec![Emit::Events { to: a.subscription, events: (0..10).collect() }]);
/// ```
pub trait Dispatcher<T>: Send {
    /// A consumer subscribes. Returns the upstream demand to ask for now, or
    /// refuses the subscription.
    fn subscribe(
        &mut self,
        subscriber: Subscriber,
        options: &SubscriptionOptions<T>,
        out: &mut Outbox<T>,
    ) -> Result<usize, SubscribeError>;

    /// A subscription ends (for any reason). Returns upstream demand.
    /// Unknown subscriptions are ignored.
    fn cancel(&mut self, subscription: SubscriptionId, out: &mut Outbox<T>) -> usize;

    /// The consumer of `subscription` asks for `n` more events. May send
    /// queued events right away. Returns upstream demand. Unknown
    /// subscriptions are ignored.
    fn ask(&mut self, subscription: SubscriptionId, n: usize, out: &mut Outbox<T>) -> usize;

    /// Hand `events` (in order) to consumers. Returns the events that could
    /// not be placed, in order; the host buffers them.
    fn dispatch(&mut self, events: Vec<T>, out: &mut Outbox<T>) -> Vec<T>;

    /// An info message reached the front of the producer's buffer. The
    /// dispatcher releases it through the outbox once every event it queued
    /// before it has gone out (immediately if it queues nothing).
    fn info(&mut self, info: InfoId, out: &mut Outbox<T>) {
        out.info(info);
    }

    /// Events the dispatcher itself holds (e.g. partition queues). They count
    /// toward the producer's buffer size and its buffered-count estimate.
    fn buffered(&self) -> usize {
        0
    }

    /// Hand over every event the dispatcher holds (those counted by
    /// [`buffered`](Self::buffered)), in the order each would have gone
    /// out, leaving it holding none: the producer is stopping, and the host
    /// gives them to whoever wants its undelivered events. The default
    /// holds nothing.
    fn take_held(&mut self) -> Vec<T> {
        Vec::new()
    }

    /// A short name for logs and errors (`"demand"`, `"broadcast"`, ...).
    fn name(&self) -> &str;
}

impl<T, D: Dispatcher<T> + ?Sized> Dispatcher<T> for Box<D> {
    fn subscribe(
        &mut self,
        subscriber: Subscriber,
        options: &SubscriptionOptions<T>,
        out: &mut Outbox<T>,
    ) -> Result<usize, SubscribeError> {
        (**self).subscribe(subscriber, options, out)
    }
    fn cancel(&mut self, subscription: SubscriptionId, out: &mut Outbox<T>) -> usize {
        (**self).cancel(subscription, out)
    }
    fn ask(&mut self, subscription: SubscriptionId, n: usize, out: &mut Outbox<T>) -> usize {
        (**self).ask(subscription, n, out)
    }
    fn dispatch(&mut self, events: Vec<T>, out: &mut Outbox<T>) -> Vec<T> {
        (**self).dispatch(events, out)
    }
    fn info(&mut self, info: InfoId, out: &mut Outbox<T>) {
        (**self).info(info, out)
    }
    fn buffered(&self) -> usize {
        (**self).buffered()
    }
    fn take_held(&mut self) -> Vec<T> {
        (**self).take_held()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
}
