//! Producers: stages that emit events on demand.

use std::convert::Infallible;
use std::future::Future;

use weir_dispatchers::SubscriptionOptions;

use crate::options::Setup;
use crate::shared::Kind;
use crate::stage::{Callbacks, ProducerStage, ProducesEvents, Stage, unhandled};
use crate::{
    CallOf, Cancellation, CastOf, ConsumerDemand, Context, Error, InfoOf, Messages, Noreply,
    ProducerOptions, Reply, ReplyOf, ReplyTo, StageRef, StopReason, SubscribeOptions, Subscription,
};

/// The context handed to a [`Producer`]'s callbacks.
pub type ProducerContext<'a, P> = Context<'a, ProducerStage<P>>;

/// A stage that emits events when consumers ask for them (GenStage's
/// `:producer`).
///
/// Only [`handle_demand`](Self::handle_demand) is required. Every callback
/// gets `&mut self` (the stage's state) and a [`ProducerContext`]; those that
/// return [`Noreply`] may emit events (dispatched to consumers, or buffered)
/// or stop the stage.
///
/// [`Messages`](Self::Messages) names the stage's bundle of call, cast
/// and info types once (`type Messages = ();` for none,
/// `type Messages = Calls<Query, Answer>;` for calls, see
/// [`Msgs`](crate::Msgs)); the contexts and handles take it from the stage:
/// `ProducerContext<'_, Self>`, `ProducerHandle<MyStage>`.
///
/// # Example
///
/// A counter emitting 0, 1, 2, ... exactly as demanded, consumed as a stream:
///
/// ```
/// use weir_gen_stage::{Noreply, Producer, ProducerContext, SubscribeOptions};
/// use futures::StreamExt;
///
/// struct Counter(u64);
///
/// impl Producer for Counter {
///     type Messages = ();
///     type Event = u64;
///
///     async fn handle_demand(&mut self, demand: usize, _ctx: &mut ProducerContext<'_, Self>) -> Noreply<u64> {
///         let events = (self.0..self.0 + demand as u64).collect();
///         self.0 += demand as u64;
///         Noreply::Emit(events)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let counter = weir_gen_stage::start_producer(Counter(0)).await?;
/// let stream = weir_gen_stage::stream([(counter.producer(), SubscribeOptions::new().max_demand(10))])?;
/// let first: Vec<u64> = stream.take(5).map(|e| e.expect("an event")).collect().await;
/// assert_eq!(first, vec![0, 1, 2, 3, 4]);
/// # Ok(())
/// # }
/// ```
pub trait Producer: Send + Sized + 'static {
    /// The events emitted.
    type Event: Send + 'static;
    /// The types of its calls, casts and infos: `()` for none, or a bundle
    /// ([`Calls`](crate::Calls), [`Casts`](crate::Casts),
    /// [`Infos`](crate::Infos), [`Msgs`](crate::Msgs), ...).
    type Messages: Messages;

    /// Runs in the stage's task before anything else; returns the options
    /// (dispatcher, buffer, demand mode). An `Err` stops the stage and makes
    /// its start fail.
    fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = Result<ProducerOptions<Self::Event>, StopReason>> + Send {
        async { Ok(ProducerOptions::new()) }
    }

    /// Consumers asked for `demand` (> 0) more events that the buffer could
    /// not serve. Called once per ask; demands are never summed. Emit up to
    /// `demand` events now, or fewer and the rest later from another callback
    /// (GenStage does not ask again); more are buffered.
    fn handle_demand(
        &mut self,
        demand: usize,
        ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Event>> + Send;

    /// A consumer subscribed, with these options (including any extra ones).
    /// An `Err` stops the producer. Producers cannot choose manual demand.
    fn handle_subscribe(
        &mut self,
        _subscription: Subscription,
        _options: &SubscriptionOptions<Self::Event>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = Result<(), StopReason>> + Send {
        async { Ok(()) }
    }

    /// A consumer's subscription ended: it cancelled ([`Cancellation::Cancel`])
    /// or stopped ([`Cancellation::Down`]).
    fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        _subscription: Subscription,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Event>> + Send {
        async { Noreply::none() }
    }

    /// A call. Reply with [`Reply::Reply`] (events go out first), or keep
    /// `from` and reply later (an early `from.reply(..)` goes out before the
    /// returned events). The default logs a warning and does not reply.
    fn handle_call(
        &mut self,
        _request: CallOf<Self::Messages>,
        _from: ReplyTo<ReplyOf<Self::Messages>>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = Reply<ReplyOf<Self::Messages>, Self::Event>> + Send {
        unhandled("handle_call", std::any::type_name::<Self>());
        async { Reply::noreply() }
    }

    /// A cast. The default logs a warning.
    fn handle_cast(
        &mut self,
        _request: CastOf<Self::Messages>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Event>> + Send {
        unhandled("handle_cast", std::any::type_name::<Self>());
        async { Noreply::none() }
    }

    /// An info message: sent directly, or through the buffer with
    /// [`StageRef::sync_info`]/[`async_info`](StageRef::async_info), in which
    /// case it arrives after the events buffered before it were dispatched.
    /// The default logs a warning.
    fn handle_info(
        &mut self,
        _info: InfoOf<Self::Messages>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Event>> + Send {
        unhandled("handle_info", std::any::type_name::<Self>());
        async { Noreply::none() }
    }

    /// The buffer overflowed and `discarded` events were dropped (GenStage's
    /// `format_discarded`). Return `true` to log the default warning too.
    fn handle_discarded(&mut self, _discarded: usize) -> bool {
        true
    }

    /// The stage is stopping with `reason` (also after a panic).
    fn terminate(
        &mut self,
        _reason: &StopReason,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Start this producer in its own tokio task (see [`start_producer`]).
    fn start(self) -> impl Future<Output = Result<StageRef<ProducerStage<Self>>, Error>> + Send {
        start_producer::<Self>(self)
    }

    /// Start this producer in its own tokio task with `options` (see
    /// [`start_producer_with`]).
    fn start_with(
        self,
        options: ProducerOptions<Self::Event>,
    ) -> impl Future<Output = Result<StageRef<ProducerStage<Self>>, Error>> + Send {
        start_producer_with::<Self>(self, options)
    }
}

/// Start `producer` in its own tokio task; returns once its `init` has run.
/// Must be called within a tokio runtime.
pub async fn start_producer<P: Producer>(producer: P) -> Result<StageRef<ProducerStage<P>>, Error> {
    crate::run::start(ProducerStage::new(producer)).await
}

/// Start `producer` in its own tokio task with `options` (dispatcher,
/// buffer, demand mode), so that its `init` need not return them. Options
/// its `init` sets win over these, one by one.
///
/// ```
/// use weir_gen_stage::{BroadcastDispatcher, Noreply, Producer, ProducerContext, ProducerOptions};
///
/// struct Ticks(u64);
///
/// impl Producer for Ticks {
///     type Messages = ();
///     type Event = u64;
///
///     async fn handle_demand(&mut self, demand: usize, _ctx: &mut ProducerContext<'_, Self>) -> Noreply<u64> {
///         let events = (self.0..self.0 + demand as u64).collect();
///         self.0 += demand as u64;
///         Noreply::Emit(events)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let options = ProducerOptions::new().dispatcher(BroadcastDispatcher::new());
/// let ticks = weir_gen_stage::start_producer_with(Ticks(0), options).await?;
/// let status = ticks.status().await?;
/// assert_eq!(status.producer.expect("a producer side").dispatcher, "broadcast");
/// # Ok(())
/// # }
/// ```
pub async fn start_producer_with<P: Producer>(
    producer: P,
    options: ProducerOptions<P::Event>,
) -> Result<StageRef<ProducerStage<P>>, Error> {
    crate::run::start_in(ProducerStage::new(producer), None, Some(options.into())).await
}

impl<P: Producer> Stage for ProducerStage<P> {
    type In = Infallible;
    type Out = P::Event;
    type Call = CallOf<P::Messages>;
    type Reply = ReplyOf<P::Messages>;
    type Cast = CastOf<P::Messages>;
    type Info = InfoOf<P::Messages>;
}

impl<P: Producer> ProducesEvents for ProducerStage<P> {}

impl<P: Producer> Callbacks for ProducerStage<P> {
    const KIND: Kind = Kind::Producer;

    fn type_name(&self) -> &'static str {
        std::any::type_name::<P>()
    }

    async fn init(
        &mut self,
        ctx: &mut Context<'_, Self>,
    ) -> Result<Setup<Infallible, P::Event>, StopReason> {
        self.0.init(ctx).await.map(Setup::from)
    }

    fn handle_demand(
        &mut self,
        demand: usize,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Event>> + Send {
        self.0.handle_demand(demand, ctx)
    }

    fn handle_subscribe_consumer(
        &mut self,
        subscription: Subscription,
        options: &SubscriptionOptions<P::Event>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Result<(), StopReason>> + Send {
        self.0.handle_subscribe(subscription, options, ctx)
    }

    async fn handle_subscribe_producer(
        &mut self,
        _subscription: Subscription,
        _options: &SubscribeOptions<Infallible>,
        _ctx: &mut Context<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        Ok(ConsumerDemand::Automatic)
    }

    async fn handle_events(
        &mut self,
        _events: Vec<Infallible>,
        _from: Subscription,
        _ctx: &mut Context<'_, Self>,
    ) -> Noreply<P::Event> {
        Noreply::none()
    }

    fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Event>> + Send {
        self.0.handle_cancel(cancellation, subscription, ctx)
    }

    fn handle_call(
        &mut self,
        request: CallOf<P::Messages>,
        from: ReplyTo<ReplyOf<P::Messages>>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Reply<ReplyOf<P::Messages>, P::Event>> + Send {
        self.0.handle_call(request, from, ctx)
    }

    fn handle_cast(
        &mut self,
        request: CastOf<P::Messages>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Event>> + Send {
        self.0.handle_cast(request, ctx)
    }

    fn handle_info(
        &mut self,
        info: InfoOf<P::Messages>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<P::Event>> + Send {
        self.0.handle_info(info, ctx)
    }

    fn handle_discarded(&mut self, discarded: usize) -> bool {
        self.0.handle_discarded(discarded)
    }

    fn in_flight(&self) -> usize {
        0
    }

    fn terminate(
        &mut self,
        reason: &StopReason,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = ()> + Send {
        self.0.terminate(reason, ctx)
    }
}
