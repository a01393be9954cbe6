//! What a stage's `init` returns: its dispatcher, buffer, demand mode and
//! initial subscriptions.

use std::fmt;

use weir_dispatchers::{DemandDispatcher, Dispatcher};

use crate::buffer::{BufferKeep, BufferSize};
use crate::{AsProducer, Error, ProducerRef, StopReason, SubscribeOptions};

/// Where a stage hands events it will never deliver or handle (see
/// [`ProducerOptions::on_undelivered`] and [`ConsumerOptions::on_unhandled`]).
pub(crate) type EventsHook<T> = Box<dyn FnMut(Vec<T>, &StopReason) + Send>;

/// A producer's demand mode (GenStage's `:demand` option and
/// `GenStage.demand/2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DemandMode {
    /// Demand goes to `handle_demand` and events out as they come (default).
    #[default]
    Forward,
    /// Demand and emitted events are recorded, in order, and nothing is
    /// dispatched until the mode switches to `Forward`, which replays them.
    /// Used to hold a pipeline until every consumer is subscribed.
    Accumulate,
}

/// A producer's options (GenStage's `init` options for `:producer`).
///
/// Given when the stage starts ([`start_producer_with`](crate::start_producer_with))
/// or returned by its `init`, or both: what `init` sets wins, option by
/// option; what neither sets has its default.
///
/// ```
/// use weir_gen_stage::{BroadcastDispatcher, BufferKeep, DemandMode, ProducerOptions};
///
/// let options = ProducerOptions::<u64>::new()
///     .dispatcher(BroadcastDispatcher::new())
///     .buffer_size(100)
///     .buffer_keep(BufferKeep::First)
///     .demand(DemandMode::Accumulate);
/// # let _ = options;
/// ```
pub struct ProducerOptions<T> {
    pub(crate) setup: ProducerSetup<T>,
}

impl<T: 'static> ProducerOptions<T> {
    /// Nothing set: the Demand dispatcher, a buffer of 10 000 keeping the
    /// last events, forward demand, unless set here or by the other side
    /// (start or `init`).
    pub fn new() -> Self {
        Self {
            setup: ProducerSetup::default(),
        }
    }
}

impl<T> ProducerOptions<T> {
    /// The dispatcher (default: [`DemandDispatcher`]).
    pub fn dispatcher(mut self, dispatcher: impl Dispatcher<T> + 'static) -> Self {
        self.setup.dispatcher = Some(Box::new(dispatcher));
        self
    }

    /// A dispatcher already boxed (e.g. a plugin).
    pub fn boxed_dispatcher(mut self, dispatcher: Box<dyn Dispatcher<T>>) -> Self {
        self.setup.dispatcher = Some(dispatcher);
        self
    }

    /// How many undispatched events to keep (default 10 000; `0` is refused
    /// when the stage starts).
    pub fn buffer_size(mut self, size: impl Into<BufferSize>) -> Self {
        self.setup.buffer_size = Some(size.into());
        self
    }

    /// Which events a full buffer keeps (default [`BufferKeep::Last`]).
    pub fn buffer_keep(mut self, keep: BufferKeep) -> Self {
        self.setup.buffer_keep = Some(keep);
        self
    }

    /// The initial demand mode (default [`DemandMode::Forward`]).
    pub fn demand(mut self, mode: DemandMode) -> Self {
        self.setup.demand = Some(mode);
        self
    }

    /// Events this stage produced and will never send, handed to `hook`
    /// instead of being dropped: when the stage stops (however it stops:
    /// returned a stop, panicked, was stopped), what is still in its buffer,
    /// held by its dispatcher or recorded while accumulating, with the
    /// stage's stop reason; while it runs, a batch sent to a consumer that
    /// had stopped before receiving it, and the events a dispatcher gives up
    /// (a cancelled partition's queue), with the reason they were not
    /// delivered. Without a hook those are dropped (with a warning for a
    /// dispatcher's). `hook` runs on the stage's task; a panic in it is
    /// logged.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use weir_gen_stage::{Noreply, Producer, ProducerContext, ProducerOptions, StopReason, SubscribeOptions};
    ///
    /// /// Emits three events for every one asked: two wait in the buffer.
    /// struct Eager(u32);
    ///
    /// impl Producer for Eager {
    ///     type Messages = ();
    ///     type Event = u32;
    ///
    ///     async fn handle_demand(&mut self, demand: usize, _: &mut ProducerContext<'_, Self>) -> Noreply<u32> {
    ///         let events: Vec<u32> = (self.0..self.0 + 3 * demand as u32).collect();
    ///         self.0 += 3 * demand as u32;
    ///         Noreply::Emit(events)
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), weir_gen_stage::Error> {
    /// let returned = Arc::new(Mutex::new(Vec::new()));
    /// let sink = returned.clone();
    /// let options = ProducerOptions::new().on_undelivered(move |events: Vec<u32>, reason: &StopReason| {
    ///     assert_eq!(reason, &StopReason::custom("gone"));
    ///     sink.lock().expect("no panic while locked").extend(events);
    /// });
    /// let eager = weir_gen_stage::start_producer_with(Eager(0), options).await?;
    /// let stream = weir_gen_stage::stream([(eager.producer(), SubscribeOptions::new().max_demand(1))])?;
    /// // The stream asked for one: 0 went to it, 1 and 2 wait.
    /// let status = eager.status().await?;
    /// assert_eq!(status.producer.expect("a producer side").buffer.len, 2);
    /// eager.stop(StopReason::custom("gone")).await?;
    /// // The two events left in its buffer, and none lost.
    /// assert_eq!(*returned.lock().expect("no panic while locked"), vec![1, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_undelivered(
        mut self,
        hook: impl FnMut(Vec<T>, &StopReason) + Send + 'static,
    ) -> Self {
        self.setup.undelivered = Some(Box::new(hook));
        self
    }
}

impl<T: 'static> Default for ProducerOptions<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for ProducerOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProducerOptions")
            .field(
                "dispatcher",
                &self.setup.dispatcher.as_ref().map(|d| d.name()),
            )
            .field("buffer_size", &self.setup.buffer_size)
            .field("buffer_keep", &self.setup.buffer_keep)
            .field("demand", &self.setup.demand)
            .finish()
    }
}

/// The producers a consumer subscribes to when it starts (GenStage's
/// `:subscribe_to`).
pub(crate) type SubscribeTo<T> = Vec<(ProducerRef<T>, SubscribeOptions<T>)>;

/// A consumer's options (GenStage's `init` options for `:consumer`).
///
/// Given when the stage starts ([`start_consumer_with`](crate::start_consumer_with))
/// or returned by its `init`, or both: the subscriptions of both are made,
/// those given at the start first.
///
/// ```no_run
/// # async fn example(producer: weir_gen_stage::ProducerRef<u64>) {
/// use weir_gen_stage::{ConsumerOptions, SubscribeOptions};
///
/// let options = ConsumerOptions::new()
///     .subscribe_to(&producer, SubscribeOptions::new().max_demand(10));
/// # let _ = options;
/// # }
/// ```
pub struct ConsumerOptions<T> {
    pub(crate) subscribe_to: SubscribeTo<T>,
    pub(crate) unhandled: Option<EventsHook<T>>,
}

impl<T: 'static> ConsumerOptions<T> {
    /// No initial subscriptions.
    pub fn new() -> Self {
        Self {
            subscribe_to: Vec::new(),
            unhandled: None,
        }
    }

    /// Events sent to this stage that it will never hand to
    /// `handle_events`, handed to `hook` with its stop reason when it stops
    /// (however it stops): those still in its mailbox (and, for a
    /// producer_consumer, queued for downstream demand). From then on its
    /// mailbox is closed, and a producer sending it more gets them back
    /// (its [`on_undelivered`](ProducerOptions::on_undelivered) hook).
    /// Without a hook they are dropped. `hook` runs on the stage's task; a
    /// panic in it is logged.
    pub fn on_unhandled(mut self, hook: impl FnMut(Vec<T>, &StopReason) + Send + 'static) -> Self {
        self.unhandled = Some(Box::new(hook));
        self
    }

    /// Subscribe to `producer` when the stage starts. Invalid options make
    /// the start fail.
    pub fn subscribe_to(
        mut self,
        producer: &impl AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Self {
        self.subscribe_to.push((producer.producer_ref(), options));
        self
    }
}

impl<T: 'static> Default for ConsumerOptions<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: 'static> fmt::Debug for ConsumerOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumerOptions")
            .field("subscribe_to", &self.subscribe_to)
            .finish()
    }
}

/// A producer_consumer's options (GenStage's `init` options for
/// `:producer_consumer`): a dispatcher and buffer like a producer (but an
/// unbounded buffer by default, and always forward demand), and initial
/// subscriptions like a consumer.
///
/// Given when the stage starts
/// ([`start_producer_consumer_with`](crate::start_producer_consumer_with))
/// or returned by its `init`, or both: what `init` sets wins, option by
/// option, and the subscriptions of both are made (the start's first).
pub struct ProducerConsumerOptions<In, Out> {
    pub(crate) setup: ProducerSetup<Out>,
    pub(crate) subscribe_to: SubscribeTo<In>,
    pub(crate) unhandled: Option<EventsHook<In>>,
}

impl<In, Out: 'static> ProducerConsumerOptions<In, Out> {
    /// Nothing set: the Demand dispatcher, an unbounded buffer, no
    /// subscriptions, unless set here or by the other side.
    pub fn new() -> Self {
        Self {
            setup: ProducerSetup::default(),
            subscribe_to: Vec::new(),
            unhandled: None,
        }
    }
}

impl<In: 'static, Out> ProducerConsumerOptions<In, Out> {
    /// The dispatcher (default: [`DemandDispatcher`]).
    pub fn dispatcher(mut self, dispatcher: impl Dispatcher<Out> + 'static) -> Self {
        self.setup.dispatcher = Some(Box::new(dispatcher));
        self
    }

    /// A dispatcher already boxed (e.g. a plugin).
    pub fn boxed_dispatcher(mut self, dispatcher: Box<dyn Dispatcher<Out>>) -> Self {
        self.setup.dispatcher = Some(dispatcher);
        self
    }

    /// How many undispatched events to keep (default unbounded).
    pub fn buffer_size(mut self, size: impl Into<BufferSize>) -> Self {
        self.setup.buffer_size = Some(size.into());
        self
    }

    /// Which events a full buffer keeps.
    pub fn buffer_keep(mut self, keep: BufferKeep) -> Self {
        self.setup.buffer_keep = Some(keep);
        self
    }

    /// Subscribe to `producer` when the stage starts.
    pub fn subscribe_to(
        mut self,
        producer: &impl AsProducer<In>,
        options: SubscribeOptions<In>,
    ) -> Self {
        self.subscribe_to.push((producer.producer_ref(), options));
        self
    }

    /// Events this stage produced and will never send: see
    /// [`ProducerOptions::on_undelivered`].
    pub fn on_undelivered(
        mut self,
        hook: impl FnMut(Vec<Out>, &StopReason) + Send + 'static,
    ) -> Self {
        self.setup.undelivered = Some(Box::new(hook));
        self
    }

    /// Events sent to this stage that it will never hand to
    /// `handle_events`: see [`ConsumerOptions::on_unhandled`].
    pub fn on_unhandled(mut self, hook: impl FnMut(Vec<In>, &StopReason) + Send + 'static) -> Self {
        self.unhandled = Some(Box::new(hook));
        self
    }
}

impl<In, Out: 'static> Default for ProducerConsumerOptions<In, Out> {
    fn default() -> Self {
        Self::new()
    }
}

impl<In: 'static, Out> fmt::Debug for ProducerConsumerOptions<In, Out> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProducerConsumerOptions")
            .field(
                "dispatcher",
                &self.setup.dispatcher.as_ref().map(|d| d.name()),
            )
            .field("buffer_size", &self.setup.buffer_size)
            .field("buffer_keep", &self.setup.buffer_keep)
            .field("subscribe_to", &self.subscribe_to)
            .finish()
    }
}

/// Everything `init` (or the start) decided, whatever the kind of stage.
pub(crate) struct Setup<In, Out> {
    pub(crate) producer: Option<ProducerSetup<Out>>,
    pub(crate) subscribe_to: SubscribeTo<In>,
    pub(crate) unhandled: Option<EventsHook<In>>,
}

/// A producer side's options, each unset until someone sets it.
pub(crate) struct ProducerSetup<T> {
    pub(crate) dispatcher: Option<Box<dyn Dispatcher<T>>>,
    pub(crate) buffer_size: Option<BufferSize>,
    pub(crate) buffer_keep: Option<BufferKeep>,
    pub(crate) demand: Option<DemandMode>,
    pub(crate) undelivered: Option<EventsHook<T>>,
}

impl<T> Default for ProducerSetup<T> {
    fn default() -> Self {
        Self {
            dispatcher: None,
            buffer_size: None,
            buffer_keep: None,
            demand: None,
            undelivered: None,
        }
    }
}

impl<T> ProducerSetup<T> {
    /// These options, with `base`'s where these leave one unset.
    fn over(self, base: Self) -> Self {
        Self {
            dispatcher: self.dispatcher.or(base.dispatcher),
            buffer_size: self.buffer_size.or(base.buffer_size),
            buffer_keep: self.buffer_keep.or(base.buffer_keep),
            demand: self.demand.or(base.demand),
            undelivered: self.undelivered.or(base.undelivered),
        }
    }
}

/// A producer side's options with every default filled in.
pub(crate) struct ProducerConfig<T> {
    pub(crate) dispatcher: Box<dyn Dispatcher<T>>,
    pub(crate) buffer_size: BufferSize,
    pub(crate) buffer_keep: BufferKeep,
    pub(crate) demand: DemandMode,
    pub(crate) undelivered: Option<EventsHook<T>>,
}

impl<T: 'static> ProducerConfig<T> {
    /// GenStage's defaults: the Demand dispatcher, a buffer of 10 000
    /// (unbounded for producer_consumers) keeping the last events, forward
    /// demand (always, for producer_consumers).
    pub(crate) fn new(setup: ProducerSetup<T>, producer_consumer: bool) -> Self {
        let default_size = if producer_consumer {
            BufferSize::Infinity
        } else {
            BufferSize::Limited(10_000)
        };
        Self {
            dispatcher: setup
                .dispatcher
                .unwrap_or_else(|| Box::new(DemandDispatcher::new())),
            buffer_size: setup.buffer_size.unwrap_or(default_size),
            buffer_keep: setup.buffer_keep.unwrap_or(BufferKeep::Last),
            demand: match producer_consumer {
                true => DemandMode::Forward,
                false => setup.demand.unwrap_or_default(),
            },
            undelivered: setup.undelivered,
        }
    }

    /// Refuses `buffer_size: 0` (GenStage accepts it, then crashes).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.buffer_size == BufferSize::Limited(0) {
            return Err(Error::InvalidOption {
                option: "buffer_size",
                value: "0".to_owned(),
                expected: "a value equal to or greater than 1, or infinity".to_owned(),
            });
        }
        Ok(())
    }
}

impl<In, Out> Setup<In, Out> {
    /// What `init` returned (`self`) over what the start gave (`base`):
    /// option by option, and the subscriptions of both, the start's first.
    pub(crate) fn over(self, base: Self) -> Self {
        let producer = match (self.producer, base.producer) {
            (Some(mine), Some(base)) => Some(mine.over(base)),
            (mine, base) => mine.or(base),
        };
        let mut subscribe_to = base.subscribe_to;
        subscribe_to.extend(self.subscribe_to);
        Setup {
            producer,
            subscribe_to,
            unhandled: self.unhandled.or(base.unhandled),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        for (_, options) in &self.subscribe_to {
            options.validate()?;
        }
        Ok(())
    }
}

impl<T> From<ProducerOptions<T>> for Setup<std::convert::Infallible, T> {
    fn from(options: ProducerOptions<T>) -> Self {
        Setup {
            producer: Some(options.setup),
            subscribe_to: Vec::new(),
            unhandled: None,
        }
    }
}

impl<T> From<ConsumerOptions<T>> for Setup<T, std::convert::Infallible> {
    fn from(options: ConsumerOptions<T>) -> Self {
        Setup {
            producer: None,
            subscribe_to: options.subscribe_to,
            unhandled: options.unhandled,
        }
    }
}

impl<In, Out> From<ProducerConsumerOptions<In, Out>> for Setup<In, Out> {
    fn from(options: ProducerConsumerOptions<In, Out>) -> Self {
        Setup {
            producer: Some(options.setup),
            subscribe_to: options.subscribe_to,
            unhandled: options.unhandled,
        }
    }
}
