//! The Broadcast dispatcher: every event to every consumer, at the pace of the
//! slowest one (GenStage's `GenStage.BroadcastDispatcher`).

use std::collections::BTreeSet;
use std::fmt;

use crate::{
    ConsumerId, Dispatcher, Outbox, Selector, SubscribeError, Subscriber, SubscriptionId,
    SubscriptionOptions,
};

/// Sends every event to every consumer without exceeding any consumer's
/// demand: upstream demand is the smallest outstanding demand among the
/// consumers.
///
/// GenStage's bookkeeping, kept as is:
///
/// - Each subscription has a *counter*: its outstanding demand minus
///   `waiting`, the demand every consumer shares and that is waiting for
///   events. An ask raises the counter; the smallest counter then moves into
///   `waiting`.
/// - `requested` is what was asked upstream and has not arrived yet. Upstream
///   is asked only for `waiting - requested`, so demand is never requested
///   twice (e.g. after a slow consumer cancels, or a new one subscribes and
///   later catches up).
/// - A new subscriber starts with zero demand: nobody receives anything until
///   it asks, and it never sees earlier events. Subscribing gives `waiting`
///   back to the existing counters.
/// - A subscription may carry a [`Selector`]: it receives only the events it
///   selects, and the demand of the events it rejects is given back with an
///   [`Emit::Ask`](crate::Emit::Ask) (GenStage sends itself that ask).
/// - The same consumer subscribing twice is refused with
///   [`SubscribeError::AlreadySubscribed`]; its first subscription keeps
///   working.
///
/// Each consumer gets its own copy of a batch (the last one in the list gets
/// the original), so events must be `Clone`; share large events as `Arc<_>`.
///
/// # Example
///
/// ```
/// use weir_dispatchers::{BroadcastDispatcher, ConsumerId, Dispatcher, Emit, Outbox, Subscriber,
///                   SubscriptionId, SubscriptionOptions};
///
/// let mut dispatcher = BroadcastDispatcher::new();
/// let mut out = Outbox::new();
/// let a = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
/// let b = Subscriber { subscription: SubscriptionId(2), consumer: ConsumerId(2) };
/// dispatcher.subscribe(a, &SubscriptionOptions::new(10, 5), &mut out)?;
/// dispatcher.subscribe(b, &SubscriptionOptions::new(10, 5), &mut out)?;
///
/// // Upstream demand follows the slowest consumer.
/// assert_eq!(dispatcher.ask(a.subscription, 3, &mut out), 0);
/// assert_eq!(dispatcher.ask(b.subscription, 2, &mut out), 2);
///
/// let leftover = dispatcher.dispatch(vec!["x", "y", "z"], &mut out);
/// assert_eq!(leftover, vec!["z"]);
/// let sent: Vec<_> = out.drain().collect();
/// assert!(sent.contains(&Emit::Events { to: a.subscription, events: vec!["x", "y"] }));
/// assert!(sent.contains(&Emit::Events { to: b.subscription, events: vec!["x", "y"] }));
/// # Ok::<(), weir_dispatchers::SubscribeError>(())
/// ```
pub struct BroadcastDispatcher<T> {
    /// Subscriptions, most recently subscribed or asking first (GenStage's
    /// `demands` list of `{counter, pid, ref, selector}`).
    demands: Vec<Subscription<T>>,
    /// Demand shared by every consumer that waits for events.
    waiting: usize,
    /// Asked upstream and not dispatched yet.
    requested: usize,
    /// Consumers with a subscription (GenStage's `subscribed_processes`).
    subscribed: BTreeSet<ConsumerId>,
}

struct Subscription<T> {
    counter: usize,
    subscriber: Subscriber,
    selector: Option<Selector<T>>,
}

impl<T> BroadcastDispatcher<T> {
    /// A dispatcher with no consumers.
    pub fn new() -> Self {
        Self {
            demands: Vec::new(),
            waiting: 0,
            requested: 0,
            subscribed: BTreeSet::new(),
        }
    }

    /// The outstanding demand of `subscription` (its counter plus the shared
    /// `waiting` demand), if it is subscribed.
    pub fn demand(&self, subscription: SubscriptionId) -> Option<usize> {
        self.demands
            .iter()
            .find(|s| s.subscriber.subscription == subscription)
            .map(|s| s.counter + self.waiting)
    }

    /// Every subscription with its outstanding demand.
    pub fn demands(&self) -> impl Iterator<Item = (SubscriptionId, usize)> + '_ {
        self.demands
            .iter()
            .map(|s| (s.subscriber.subscription, s.counter + self.waiting))
    }

    /// Demand every consumer has and that waits for events: the most the
    /// next dispatch sends.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Demand asked upstream whose events have not been dispatched yet.
    pub fn requested(&self) -> usize {
        self.requested
    }

    /// How many subscriptions there are.
    pub fn len(&self) -> usize {
        self.demands.len()
    }

    /// Whether there are no subscriptions.
    pub fn is_empty(&self) -> bool {
        self.demands.is_empty()
    }

    fn pop_demand(&mut self, subscription: SubscriptionId) -> Option<Subscription<T>> {
        let index = self
            .demands
            .iter()
            .position(|s| s.subscriber.subscription == subscription)?;
        Some(self.demands.remove(index))
    }

    /// Move the smallest counter into `waiting` and ask upstream for what
    /// was not requested yet.
    fn sync_demands(&mut self) -> usize {
        let min = self.demands.iter().map(|s| s.counter).min().unwrap_or(0);
        if min > 0 {
            for s in &mut self.demands {
                s.counter -= min;
            }
        }
        self.waiting += min;
        let request = self.waiting.saturating_sub(self.requested);
        self.requested += request;
        request
    }
}

impl<T> Default for BroadcastDispatcher<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for BroadcastDispatcher<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BroadcastDispatcher")
            .field("demands", &self.demands)
            .field("waiting", &self.waiting)
            .field("requested", &self.requested)
            .field("subscribed", &self.subscribed)
            .finish()
    }
}

impl<T> fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("counter", &self.counter)
            .field("subscriber", &self.subscriber)
            .field("selector", &self.selector.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

impl<T: Clone> Dispatcher<T> for BroadcastDispatcher<T> {
    fn subscribe(
        &mut self,
        subscriber: Subscriber,
        options: &SubscriptionOptions<T>,
        _out: &mut Outbox<T>,
    ) -> Result<usize, SubscribeError> {
        if self.subscribed.contains(&subscriber.consumer) {
            return Err(SubscribeError::AlreadySubscribed {
                consumer: subscriber.consumer,
            });
        }
        self.subscribed.insert(subscriber.consumer);
        // The newcomer has no demand, so nothing is waiting any more: give
        // the waiting demand back to everyone else.
        for s in &mut self.demands {
            s.counter += self.waiting;
        }
        self.waiting = 0;
        self.demands.insert(
            0,
            Subscription {
                counter: 0,
                subscriber,
                selector: options.selector.clone(),
            },
        );
        Ok(0)
    }

    fn cancel(&mut self, subscription: SubscriptionId, _out: &mut Outbox<T>) -> usize {
        let Some(cancelled) = self.pop_demand(subscription) else {
            return 0;
        };
        self.subscribed.remove(&cancelled.subscriber.consumer);
        if self.demands.is_empty() {
            self.waiting = 0;
            return 0;
        }
        // The cancelled consumer may have been the slowest one, so
        // cancelling may create demand.
        self.sync_demands()
    }

    fn ask(&mut self, subscription: SubscriptionId, n: usize, _out: &mut Outbox<T>) -> usize {
        let Some(mut asking) = self.pop_demand(subscription) else {
            return 0;
        };
        asking.counter += n;
        self.demands.insert(0, asking);
        self.sync_demands()
    }

    fn dispatch(&mut self, mut events: Vec<T>, out: &mut Outbox<T>) -> Vec<T> {
        if self.waiting == 0 {
            return events;
        }
        let Some((last, others)) = self.demands.split_last() else {
            return events;
        };
        let now = self.waiting.min(events.len());
        let later = events.split_off(now);
        self.waiting -= now;
        self.requested = self.requested.saturating_sub(now);

        // Every consumer gets the batch (filtered by its selector), in list
        // order; the last one takes the batch itself instead of a copy.
        let mut given_back = Vec::new();
        for s in others {
            let (selected, rejected) = select_cloned(&events, s.selector.as_ref());
            out.send(s.subscriber.subscription, selected);
            if rejected > 0 {
                given_back.push((s.subscriber.subscription, rejected));
            }
        }
        let (selected, rejected) = select_owned(events, last.selector.as_ref());
        out.send(last.subscriber.subscription, selected);
        if rejected > 0 {
            given_back.push((last.subscriber.subscription, rejected));
        }

        // Rejected events must not consume demand: ask again on behalf of
        // the consumer, after its batch went out.
        for (subscription, rejected) in given_back {
            out.ask(subscription, rejected);
        }
        later
    }

    fn name(&self) -> &str {
        "broadcast"
    }
}

/// The events `selector` accepts, copied, and how many it rejected.
fn select_cloned<T: Clone>(events: &[T], selector: Option<&Selector<T>>) -> (Vec<T>, usize) {
    match selector {
        None => (events.to_vec(), 0),
        Some(selector) => {
            let selected: Vec<T> = events.iter().filter(|e| selector(e)).cloned().collect();
            let rejected = events.len() - selected.len();
            (selected, rejected)
        }
    }
}

/// The events `selector` accepts, and how many it rejected.
fn select_owned<T>(mut events: Vec<T>, selector: Option<&Selector<T>>) -> (Vec<T>, usize) {
    match selector {
        None => (events, 0),
        Some(selector) => {
            let before = events.len();
            events.retain(|e| selector(e));
            let rejected = before - events.len();
            (events, rejected)
        }
    }
}

#[cfg(test)]
mod tests;
