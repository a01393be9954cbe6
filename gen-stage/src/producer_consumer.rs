//! Producer_consumers: stages that receive events, transform them and emit
//! the result.

use std::future::Future;

use weir_dispatchers::SubscriptionOptions;

use crate::options::Setup;
use crate::shared::Kind;
use crate::stage::{
    Callbacks, ConsumesEvents, ProducerConsumerStage, ProducesEvents, Stage, unhandled,
};
use crate::{
    CallOf, Cancellation, CastOf, ConsumerDemand, Context, Error, InfoOf, Messages, Noreply,
    ProducerConsumerOptions, Reply, ReplyOf, ReplyTo, StageRef, StopReason, SubscribeOptions,
    Subscription,
};

/// The context handed to a [`ProducerConsumer`]'s callbacks.
pub type ProducerConsumerContext<'a, P> = Context<'a, ProducerConsumerStage<P>>;

/// A stage that consumes events from producers and emits events to its own
/// consumers (GenStage's `:producer_consumer`).
///
/// Incoming events are handed to [`handle_events`](Self::handle_events) only
/// while its consumers have demand; otherwise they wait in a queue, so
/// without downstream demand it takes at most `max_demand` events per
/// subscription and back-pressure reaches its producers. It has no
/// `handle_demand`. Its buffer is unbounded by default.
///
/// [`Messages`](Self::Messages) names the stage's calls, casts and infos
/// once, `()` for none (see [`Producer`](crate::Producer)).
///
/// # Example
///
/// A doubler between a producer and a stream:
///
/// ```
/// use futures::StreamExt;
/// use weir_gen_stage::{Noreply, ProducerConsumer, ProducerConsumerContext, ProducerConsumerOptions,
///                 SubscribeOptions, Subscription, StopReason};
///
/// struct Doubler;
///
/// impl ProducerConsumer for Doubler {
///     type Messages = ();
///     type In = u64;
///     type Out = u64;
///
///     async fn handle_events(&mut self, events: Vec<u64>, _from: Subscription,
///                            _ctx: &mut ProducerConsumerContext<'_, Self>) -> Noreply<u64> {
///         Noreply::Emit(events.into_iter().map(|n| n * 2).collect())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let numbers = weir_gen_stage::from_iter(0..5u64).await?;
/// let doubler = weir_gen_stage::start_producer_consumer(Doubler).await?;
/// doubler.subscribe(&numbers, SubscribeOptions::new()).await?;
/// let doubled: Vec<u64> = weir_gen_stage::stream([(doubler.producer(), SubscribeOptions::new())])?
///     .map(|e| e.expect("an event"))
///     .collect()
///     .await;
/// assert_eq!(doubled, vec![0, 2, 4, 6, 8]);
/// # Ok(())
/// # }
/// ```
pub trait ProducerConsumer: Send + Sized + 'static {
    /// The events received.
    type In: Send + 'static;
    /// The events emitted.
    type Out: Send + 'static;
    /// The types of its calls, casts and infos: `()` for none, or a bundle
    /// (see [`Producer::Messages`](crate::Producer::Messages)).
    type Messages: Messages;

    /// Runs in the stage's task before anything else; returns the options
    /// (dispatcher, buffer, initial subscriptions).
    fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Result<ProducerConsumerOptions<Self::In, Self::Out>, StopReason>> + Send
    {
        async { Ok(ProducerConsumerOptions::new()) }
    }

    /// This stage subscribed to a producer (GenStage's
    /// `handle_subscribe(:producer, ...)`): choose automatic or manual demand.
    fn handle_subscribe_producer(
        &mut self,
        _subscription: Subscription,
        _options: &SubscribeOptions<Self::In>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Result<ConsumerDemand, StopReason>> + Send {
        async { Ok(ConsumerDemand::Automatic) }
    }

    /// A consumer subscribed to this stage (GenStage's
    /// `handle_subscribe(:consumer, ...)`).
    fn handle_subscribe_consumer(
        &mut self,
        _subscription: Subscription,
        _options: &SubscriptionOptions<Self::Out>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Result<(), StopReason>> + Send {
        async { Ok(()) }
    }

    /// Events from the producer of `from`; return the events to emit.
    fn handle_events(
        &mut self,
        events: Vec<Self::In>,
        from: Subscription,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send;

    /// A subscription ended, on either side: `subscription.consumer ==
    /// ctx.id()` for this stage's subscriptions to producers,
    /// `subscription.producer == ctx.id()` for its consumers'.
    fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        _subscription: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send {
        async { Noreply::none() }
    }

    /// A call; see [`Producer::handle_call`](crate::Producer::handle_call).
    fn handle_call(
        &mut self,
        _request: CallOf<Self::Messages>,
        _from: ReplyTo<ReplyOf<Self::Messages>>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Reply<ReplyOf<Self::Messages>, Self::Out>> + Send {
        unhandled("handle_call", std::any::type_name::<Self>());
        async { Reply::noreply() }
    }

    /// A cast. The default logs a warning.
    fn handle_cast(
        &mut self,
        _request: CastOf<Self::Messages>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send {
        unhandled("handle_cast", std::any::type_name::<Self>());
        async { Noreply::none() }
    }

    /// An info message. The default logs a warning.
    fn handle_info(
        &mut self,
        _info: InfoOf<Self::Messages>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send {
        unhandled("handle_info", std::any::type_name::<Self>());
        async { Noreply::none() }
    }

    /// The buffer overflowed and `discarded` events were dropped. Return
    /// `true` to log the default warning too.
    fn handle_discarded(&mut self, _discarded: usize) -> bool {
        true
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
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Start this stage in its own tokio task (see
    /// [`start_producer_consumer`]).
    fn start(
        self,
    ) -> impl Future<Output = Result<StageRef<ProducerConsumerStage<Self>>, Error>> + Send {
        start_producer_consumer::<Self>(self)
    }

    /// Start this stage in its own tokio task with `options` (see
    /// [`start_producer_consumer_with`]).
    fn start_with(
        self,
        options: ProducerConsumerOptions<Self::In, Self::Out>,
    ) -> impl Future<Output = Result<StageRef<ProducerConsumerStage<Self>>, Error>> + Send {
        start_producer_consumer_with::<Self>(self, options)
    }
}

/// Start a producer_consumer in its own tokio task; returns once its `init`
/// has run and its initial subscriptions were sent. Must be called within a
/// tokio runtime.
pub async fn start_producer_consumer<P: ProducerConsumer>(
    stage: P,
) -> Result<StageRef<ProducerConsumerStage<P>>, Error> {
    crate::run::start(ProducerConsumerStage::new(stage)).await
}

/// Start a producer_consumer in its own tokio task with `options`
/// (dispatcher, buffer, initial subscriptions), so that its `init` need not
/// return them. Options its `init` sets win over these, one by one; the
/// subscriptions of both are made, these first.
pub async fn start_producer_consumer_with<P: ProducerConsumer>(
    stage: P,
    options: ProducerConsumerOptions<P::In, P::Out>,
) -> Result<StageRef<ProducerConsumerStage<P>>, Error> {
    crate::run::start_in(
        ProducerConsumerStage::new(stage),
        None,
        Some(options.into()),
    )
    .await
}

impl<P: ProducerConsumer> Stage for ProducerConsumerStage<P> {
    type In = P::In;
    type Out = P::Out;
    type Call = CallOf<P::Messages>;
    type Reply = ReplyOf<P::Messages>;
    type Cast = CastOf<P::Messages>;
    type Info = InfoOf<P::Messages>;
}

impl<P: ProducerConsumer> ProducesEvents for ProducerConsumerStage<P> {}
impl<P: ProducerConsumer> ConsumesEvents for ProducerConsumerStage<P> {}

impl<P: ProducerConsumer> Callbacks for ProducerConsumerStage<P> {
    const KIND: Kind = Kind::ProducerConsumer;

    fn type_name(&self) -> &'static str {
        std::any::type_name::<P>()
    }

    async fn init(
        &mut self,
        ctx: &mut Context<'_, Self>,
    ) -> Result<Setup<P::In, P::Out>, StopReason> {
        self.0.init(ctx).await.map(Setup::from)
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut Context<'_, Self>,
    ) -> Noreply<P::Out> {
        // A producer_consumer's demand goes to its queue of incoming events.
        Noreply::none()
    }

    fn handle_subscribe_consumer(
        &mut self,
        subscription: Subscription,
        options: &SubscriptionOptions<P::Out>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Result<(), StopReason>> + Send {
        self.0.handle_subscribe_consumer(subscription, options, ctx)
    }

    fn handle_subscribe_producer(
        &mut self,
        subscription: Subscription,
        options: &SubscribeOptions<P::In>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Result<ConsumerDemand, StopReason>> + Send {
        self.0.handle_subscribe_producer(subscription, options, ctx)
    }

    fn handle_events(
        &mut self,
        events: Vec<P::In>,
        from: Subscription,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Out>> + Send {
        self.0.handle_events(events, from, ctx)
    }

    fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Out>> + Send {
        self.0.handle_cancel(cancellation, subscription, ctx)
    }

    fn handle_call(
        &mut self,
        request: CallOf<P::Messages>,
        from: ReplyTo<ReplyOf<P::Messages>>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Reply<ReplyOf<P::Messages>, P::Out>> + Send {
        self.0.handle_call(request, from, ctx)
    }

    fn handle_cast(
        &mut self,
        request: CastOf<P::Messages>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Out>> + Send {
        self.0.handle_cast(request, ctx)
    }

    fn handle_info(
        &mut self,
        info: InfoOf<P::Messages>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Out>> + Send {
        self.0.handle_info(info, ctx)
    }

    fn handle_discarded(&mut self, discarded: usize) -> bool {
        self.0.handle_discarded(discarded)
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
