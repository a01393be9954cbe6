//! Consumers: stages that receive events and emit none.

use std::convert::Infallible;
use std::future::Future;

use weir_dispatchers::SubscriptionOptions;

use crate::options::Setup;
use crate::shared::Kind;
use crate::stage::{Callbacks, ConsumerStage, ConsumesEvents, Stage, unhandled};
use crate::{
    CallOf, Cancellation, CastOf, ConsumerDemand, ConsumerOptions, Context, Error, InfoOf,
    Messages, Noreply, Reply, ReplyOf, ReplyTo, StageRef, StopReason, SubscribeOptions,
    Subscription,
};

/// The context handed to a [`Consumer`]'s callbacks.
pub type ConsumerContext<'a, C> = Context<'a, ConsumerStage<C>>;

/// A stage that receives events from producers (GenStage's `:consumer`).
///
/// Only [`handle_events`](Self::handle_events) is required. Callbacks return
/// [`Noreply`] (a consumer's has no events: `Noreply::none()`, or
/// `Noreply::Stop(reason)`).
///
/// [`Messages`](Self::Messages) names the stage's calls, casts and infos
/// once, `()` for none (see [`Producer`](crate::Producer)).
///
/// # Example
///
/// A consumer that sums what it receives and stops when it has seen 100
/// events, fed by a producer built from an iterator:
///
/// ```
/// use weir_gen_stage::{Consumer, ConsumerContext, Noreply, StopReason, SubscribeOptions, Subscription};
/// use tokio::sync::oneshot;
///
/// struct Summer { sum: u64, seen: usize, done: Option<oneshot::Sender<u64>> }
///
/// impl Consumer for Summer {
///     type Messages = ();
///     type Event = u64;
///
///     async fn handle_events(&mut self, events: Vec<u64>, _from: Subscription,
///                            _ctx: &mut ConsumerContext<'_, Self>) -> Noreply {
///         self.sum += events.iter().sum::<u64>();
///         self.seen += events.len();
///         if self.seen == 100 {
///             if let Some(done) = self.done.take() { let _ = done.send(self.sum); }
///         }
///         Noreply::none()
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let numbers = weir_gen_stage::from_iter(1..=100u64).await?;
/// let (done, sum) = oneshot::channel();
/// let summer = weir_gen_stage::start_consumer(Summer { sum: 0, seen: 0, done: Some(done) }).await?;
/// summer.subscribe(&numbers, SubscribeOptions::new().max_demand(10)).await?;
/// assert_eq!(sum.await.expect("the consumer reports"), 5050);
/// // The producer stops normally after its last event; the permanent
/// // subscription then stops the consumer with the same reason.
/// assert_eq!(summer.stopped().await, StopReason::Normal);
/// # Ok(())
/// # }
/// ```
pub trait Consumer: Send + Sized + 'static {
    /// The events received.
    type Event: Send + 'static;
    /// The types of its calls, casts and infos: `()` for none, or a bundle
    /// (see [`Producer::Messages`](crate::Producer::Messages)).
    type Messages: Messages;

    /// Runs in the stage's task before anything else; returns the options
    /// (initial subscriptions). An `Err` stops the stage and makes its start
    /// fail.
    fn init(
        &mut self,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = Result<ConsumerOptions<Self::Event>, StopReason>> + Send {
        async { Ok(ConsumerOptions::new()) }
    }

    /// This consumer subscribed to a producer. Choose automatic (default) or
    /// manual demand; an `Err` stops the consumer.
    fn handle_subscribe(
        &mut self,
        _subscription: Subscription,
        _options: &SubscribeOptions<Self::Event>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = Result<ConsumerDemand, StopReason>> + Send {
        async { Ok(ConsumerDemand::Automatic) }
    }

    /// Events from the producer of `from`: a piece of at most
    /// `max_demand - min_demand` events in automatic mode, a whole message in
    /// manual mode.
    fn handle_events(
        &mut self,
        events: Vec<Self::Event>,
        from: Subscription,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send;

    /// A subscription ended: the producer cancelled or refused it
    /// ([`Cancellation::Cancel`]) or stopped ([`Cancellation::Down`]). The
    /// subscription's cancel mode then decides whether the consumer stops.
    fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        _subscription: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send {
        async { Noreply::none() }
    }

    /// A call; see [`Producer::handle_call`](crate::Producer::handle_call).
    fn handle_call(
        &mut self,
        _request: CallOf<Self::Messages>,
        _from: ReplyTo<ReplyOf<Self::Messages>>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = Reply<ReplyOf<Self::Messages>>> + Send {
        unhandled("handle_call", std::any::type_name::<Self>());
        async { Reply::noreply() }
    }

    /// A cast. The default logs a warning.
    fn handle_cast(
        &mut self,
        _request: CastOf<Self::Messages>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send {
        unhandled("handle_cast", std::any::type_name::<Self>());
        async { Noreply::none() }
    }

    /// An info message. The default logs a warning.
    fn handle_info(
        &mut self,
        _info: InfoOf<Self::Messages>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send {
        unhandled("handle_info", std::any::type_name::<Self>());
        async { Noreply::none() }
    }

    /// Work this stage started and has not finished, outside the runtime's
    /// view (e.g. tasks it spawned for events it handled). A stage being
    /// [drained](crate::Drain) stops only once this is 0; it is asked again
    /// after every message, so the work should report its end with one
    /// (a cast or an info to the stage). Default 0.
    fn in_flight(&self) -> usize {
        0
    }

    /// The stage is stopping with `reason` (also after a panic).
    fn terminate(
        &mut self,
        _reason: &StopReason,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Start this consumer in its own tokio task (see [`start_consumer`]).
    fn start(self) -> impl Future<Output = Result<StageRef<ConsumerStage<Self>>, Error>> + Send {
        start_consumer::<Self>(self)
    }

    /// Start this consumer in its own tokio task with `options` (see
    /// [`start_consumer_with`]).
    fn start_with(
        self,
        options: ConsumerOptions<Self::Event>,
    ) -> impl Future<Output = Result<StageRef<ConsumerStage<Self>>, Error>> + Send {
        start_consumer_with::<Self>(self, options)
    }
}

/// Start `consumer` in its own tokio task; returns once its `init` has run
/// and its initial subscriptions were sent. Must be called within a tokio
/// runtime.
pub async fn start_consumer<C: Consumer>(consumer: C) -> Result<StageRef<ConsumerStage<C>>, Error> {
    crate::run::start(ConsumerStage::new(consumer)).await
}

/// Start `consumer` in its own tokio task with `options` (its initial
/// subscriptions), so that its `init` need not return them. Subscriptions
/// its `init` returns are made too, after these.
///
/// ```
/// use weir_gen_stage::{ConsumerOptions, ForEach, SubscribeOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let numbers = weir_gen_stage::from_iter(1..=3u32).await?;
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let options = ConsumerOptions::new().subscribe_to(&numbers, SubscribeOptions::new());
/// weir_gen_stage::start_consumer_with(ForEach::new(move |n: u32| {
///     let _ = tx.send(n);
/// }), options).await?;
/// assert_eq!(rx.recv().await, Some(1));
/// # Ok(())
/// # }
/// ```
pub async fn start_consumer_with<C: Consumer>(
    consumer: C,
    options: ConsumerOptions<C::Event>,
) -> Result<StageRef<ConsumerStage<C>>, Error> {
    crate::run::start_in(ConsumerStage::new(consumer), None, Some(options.into())).await
}

impl<C: Consumer> Stage for ConsumerStage<C> {
    type In = C::Event;
    type Out = Infallible;
    type Call = CallOf<C::Messages>;
    type Reply = ReplyOf<C::Messages>;
    type Cast = CastOf<C::Messages>;
    type Info = InfoOf<C::Messages>;
}

impl<C: Consumer> ConsumesEvents for ConsumerStage<C> {}

impl<C: Consumer> Callbacks for ConsumerStage<C> {
    const KIND: Kind = Kind::Consumer;

    fn type_name(&self) -> &'static str {
        std::any::type_name::<C>()
    }

    async fn init(
        &mut self,
        ctx: &mut Context<'_, Self>,
    ) -> Result<Setup<C::Event, Infallible>, StopReason> {
        self.0.init(ctx).await.map(Setup::from)
    }

    async fn handle_demand(&mut self, _demand: usize, _ctx: &mut Context<'_, Self>) -> Noreply {
        Noreply::none()
    }

    async fn handle_subscribe_consumer(
        &mut self,
        _subscription: Subscription,
        _options: &SubscriptionOptions<Infallible>,
        _ctx: &mut Context<'_, Self>,
    ) -> Result<(), StopReason> {
        Ok(())
    }

    fn handle_subscribe_producer(
        &mut self,
        subscription: Subscription,
        options: &SubscribeOptions<C::Event>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Result<ConsumerDemand, StopReason>> + Send {
        self.0.handle_subscribe(subscription, options, ctx)
    }

    fn handle_events(
        &mut self,
        events: Vec<C::Event>,
        from: Subscription,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send {
        self.0.handle_events(events, from, ctx)
    }

    fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send {
        self.0.handle_cancel(cancellation, subscription, ctx)
    }

    fn handle_call(
        &mut self,
        request: CallOf<C::Messages>,
        from: ReplyTo<ReplyOf<C::Messages>>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Reply<ReplyOf<C::Messages>>> + Send {
        self.0.handle_call(request, from, ctx)
    }

    fn handle_cast(
        &mut self,
        request: CastOf<C::Messages>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send {
        self.0.handle_cast(request, ctx)
    }

    fn handle_info(
        &mut self,
        info: InfoOf<C::Messages>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply> + Send {
        self.0.handle_info(info, ctx)
    }

    fn handle_discarded(&mut self, _discarded: usize) -> bool {
        true
    }

    fn in_flight(&self) -> usize {
        self.0.in_flight()
    }

    fn terminate(
        &mut self,
        reason: &StopReason,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = ()> + Send {
        self.0.terminate(reason, ctx)
    }
}
