//! The three kinds of stage as one internal interface.
//!
//! Users implement [`Producer`](crate::Producer),
//! [`ProducerConsumer`](crate::ProducerConsumer) or
//! [`Consumer`](crate::Consumer). Each is wrapped in an adapter
//! ([`ProducerStage`], [`ProducerConsumerStage`], [`ConsumerStage`]) that
//! implements [`Stage`] (the types a stage works with, which name its
//! handles: `StageRef<ProducerStage<MyProducer>>`, whatever its
//! [`Messages`](crate::Messages)) and the runtime's internal `Callbacks`, so
//! one run loop serves all three.

use std::fmt;
use std::future::Future;

use weir_dispatchers::SubscriptionOptions;

use crate::options::Setup;
use crate::shared::Kind;
use crate::{
    Cancellation, ConsumerDemand, Context, Noreply, Reply, ReplyTo, StopReason, SubscribeOptions,
    Subscription,
};

mod sealed {
    pub trait Sealed {}
}

/// The types a running stage works with. Implemented only by the adapters
/// [`ProducerStage`], [`ProducerConsumerStage`] and [`ConsumerStage`].
pub trait Stage: sealed::Sealed + Send + Sized + 'static {
    /// Events received (`Infallible` for producers).
    type In: Send + 'static;
    /// Events emitted (`Infallible` for consumers).
    type Out: Send + 'static;
    /// `handle_call` requests.
    type Call: Send + 'static;
    /// `handle_call` replies.
    type Reply: Send + 'static;
    /// `handle_cast` requests.
    type Cast: Send + 'static;
    /// `handle_info` messages.
    type Info: Send + 'static;
}

/// Stages that emit events: producers and producer_consumers.
pub trait ProducesEvents: Stage {}

/// Stages that receive events: consumers and producer_consumers.
pub trait ConsumesEvents: Stage {}

/// A [`Producer`](crate::Producer) as a running stage.
pub struct ProducerStage<P>(pub(crate) P);

/// A [`ProducerConsumer`](crate::ProducerConsumer) as a running stage.
pub struct ProducerConsumerStage<P>(pub(crate) P);

/// A [`Consumer`](crate::Consumer) as a running stage.
pub struct ConsumerStage<C>(pub(crate) C);

impl<P> ProducerStage<P> {
    pub(crate) fn new(producer: P) -> Self {
        Self(producer)
    }
}

impl<P> ProducerConsumerStage<P> {
    pub(crate) fn new(stage: P) -> Self {
        Self(stage)
    }
}

impl<C> ConsumerStage<C> {
    pub(crate) fn new(consumer: C) -> Self {
        Self(consumer)
    }
}

impl<P> fmt::Debug for ProducerStage<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProducerStage<{}>", std::any::type_name::<P>())
    }
}

impl<P> fmt::Debug for ProducerConsumerStage<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProducerConsumerStage<{}>", std::any::type_name::<P>())
    }
}

impl<C> fmt::Debug for ConsumerStage<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConsumerStage<{}>", std::any::type_name::<C>())
    }
}

impl<P> sealed::Sealed for ProducerStage<P> {}
impl<P> sealed::Sealed for ProducerConsumerStage<P> {}
impl<C> sealed::Sealed for ConsumerStage<C> {}

/// What the run loop calls. Each adapter forwards to its user trait; the
/// callbacks a kind does not have are never called for it.
pub(crate) trait Callbacks: Stage {
    const KIND: Kind;

    /// The user type's name, for logs.
    fn type_name(&self) -> &'static str;

    fn init(
        &mut self,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Result<Setup<Self::In, Self::Out>, StopReason>> + Send;

    fn handle_demand(
        &mut self,
        demand: usize,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send;

    /// A consumer subscribed to this stage (GenStage's
    /// `handle_subscribe(:consumer, ...)`).
    fn handle_subscribe_consumer(
        &mut self,
        subscription: Subscription,
        options: &SubscriptionOptions<Self::Out>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Result<(), StopReason>> + Send;

    /// This stage subscribed to a producer (GenStage's
    /// `handle_subscribe(:producer, ...)`).
    fn handle_subscribe_producer(
        &mut self,
        subscription: Subscription,
        options: &SubscribeOptions<Self::In>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Result<ConsumerDemand, StopReason>> + Send;

    fn handle_events(
        &mut self,
        events: Vec<Self::In>,
        from: Subscription,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send;

    fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send;

    fn handle_call(
        &mut self,
        request: Self::Call,
        from: ReplyTo<Self::Reply>,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Reply<Self::Reply, Self::Out>> + Send;

    fn handle_cast(
        &mut self,
        request: Self::Cast,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send;

    fn handle_info(
        &mut self,
        info: Self::Info,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = Noreply<Self::Out>> + Send;

    fn handle_discarded(&mut self, discarded: usize) -> bool;

    /// Work in flight outside the runtime's view (a draining stage stops
    /// only at 0).
    fn in_flight(&self) -> usize;

    fn terminate(
        &mut self,
        reason: &StopReason,
        ctx: &mut Context<'_, Self>,
    ) -> impl Future<Output = ()> + Send;
}

/// Logs a message a stage has no callback for (GenStage's "Undefined
/// handle_info" warning).
pub(crate) fn unhandled(callback: &'static str, stage: &'static str) {
    tracing::warn!(
        callback,
        stage_type = stage,
        "unhandled message: {stage} does not implement {callback}"
    );
}
