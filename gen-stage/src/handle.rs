//! Handles: typed addresses of running stages.
//!
//! - [`StageRef<S>`]: everything about one stage of a known type (calls,
//!   casts, infos, stop), plus [`producer`](StageRef::producer) /
//!   [`consumer`](StageRef::consumer) views.
//! - [`ProducerRef<T>`]: any producer of `T` events (a producer or a
//!   producer_consumer); what consumers subscribe to.
//! - [`ConsumerRef<T>`]: any consumer of `T` events; what can be told to
//!   subscribe, ask and cancel.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use weir_dispatchers::SubscriptionId;

use crate::drain::DrainRequest;
use crate::mailbox::Sender;
use crate::message::{Msg, SubscribeRequest, SubscribeTo};
use crate::shared::StageShared;
use crate::stage::{ConsumesEvents, ProducesEvents, Stage};
use crate::{DemandMode, Error, ReplyTo, StageId, StageStatus, StopReason, SubscribeOptions};

/// How long the handle operations without an explicit timeout wait for the
/// stage (GenStage's default of 5 000 ms).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a consumer needs from its producer.
pub(crate) trait ProducerEndpoint<T>: Send + Sync {
    fn shared(&self) -> &Arc<StageShared>;
    fn subscribe(&self, request: Box<SubscribeRequest<T>>) -> bool;
    fn ask(&self, sub: SubscriptionId, n: usize, from: Option<ConsumerRef<T>>) -> bool;
    fn cancel(&self, sub: SubscriptionId, reason: StopReason) -> bool;
    fn demand_mode(
        &self,
        set: Option<DemandMode>,
        reply: Option<oneshot::Sender<Result<DemandMode, Error>>>,
    ) -> bool;
    fn estimate_buffered_count(&self, reply: oneshot::Sender<Result<usize, Error>>) -> bool;
    /// Ask for a [`StageStatus`]; refused by ends that are not stages.
    fn status(&self, reply: oneshot::Sender<StageStatus>) -> Result<(), Error>;
    /// Part of a [`Drain`](crate::Drain); refused by ends that are not stages.
    fn drain(&self, request: DrainRequest) -> Result<(), Error>;
    fn stop(&self, reason: StopReason) -> bool;
}

/// What a producer (and a handle) needs from a consumer.
pub(crate) trait ConsumerEndpoint<T>: Send + Sync {
    fn shared(&self) -> &Arc<StageShared>;
    /// Send a batch; the events back if the consumer's mailbox is closed.
    fn events(
        &self,
        sub: SubscriptionId,
        events: Vec<T>,
        from: Option<ProducerRef<T>>,
    ) -> Option<Vec<T>>;
    fn ack(&self, sub: SubscriptionId) -> bool;
    fn cancel(&self, sub: SubscriptionId, reason: StopReason) -> bool;
    fn subscribe_to(&self, request: Box<SubscribeTo<T>>) -> bool;
    fn cancel_upstream(&self, sub: SubscriptionId, reason: StopReason) -> bool;
    fn ask_upstream(
        &self,
        sub: SubscriptionId,
        n: usize,
        reply: Option<oneshot::Sender<Result<(), Error>>>,
    ) -> bool;
    /// Ask for a [`StageStatus`]; refused by ends that are not stages.
    fn status(&self, reply: oneshot::Sender<StageStatus>) -> Result<(), Error>;
    /// Part of a [`Drain`](crate::Drain); refused by ends that are not stages.
    fn drain(&self, request: DrainRequest) -> Result<(), Error>;
    fn stop(&self, reason: StopReason) -> bool;
}

/// A stage's mailbox: its one queue, and its shared life.
pub(crate) struct Mailbox<S: Stage> {
    pub(crate) tx: Sender<Msg<S>>,
    pub(crate) shared: Arc<StageShared>,
}

impl<S: Stage> Clone for Mailbox<S> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S: Stage> Mailbox<S> {
    #[inline]
    pub(crate) fn send(&self, msg: Msg<S>) -> bool {
        // Matched rather than `is_ok()`: dropping the whole `Result` is an
        // out-of-line call on every send; only a refused message needs one.
        match self.tx.send(msg) {
            Ok(()) => true,
            Err(msg) => {
                drop(msg);
                false
            }
        }
    }

    fn send_status(&self, reply: oneshot::Sender<StageStatus>) -> Result<(), Error> {
        if self.send(Msg::Status { reply }) {
            Ok(())
        } else {
            Err(not_alive(&self.shared))
        }
    }

    fn send_drain(&self, request: DrainRequest) -> Result<(), Error> {
        if self.send(Msg::Drain(request)) {
            Ok(())
        } else {
            Err(not_alive(&self.shared))
        }
    }
}

/// What a [`Drain`](crate::Drain) needs from a stage, whatever its type.
pub(crate) trait Drainable: Send + Sync {
    fn shared(&self) -> &Arc<StageShared>;
    fn drain(&self, request: DrainRequest) -> Result<(), Error>;
    /// Ask the stage to stop with `reason`; `false` if it is not running.
    fn stop(&self, reason: StopReason) -> bool;
}

impl<S: Stage> Drainable for Mailbox<S> {
    fn shared(&self) -> &Arc<StageShared> {
        &self.shared
    }
    fn drain(&self, request: DrainRequest) -> Result<(), Error> {
        self.send_drain(request)
    }
    fn stop(&self, reason: StopReason) -> bool {
        self.send(Msg::Stop { reason })
    }
}

impl<T> Drainable for ProducerRef<T> {
    fn shared(&self) -> &Arc<StageShared> {
        self.inner.shared()
    }
    fn drain(&self, request: DrainRequest) -> Result<(), Error> {
        self.inner.drain(request)
    }
    fn stop(&self, reason: StopReason) -> bool {
        self.inner.stop(reason)
    }
}

impl<T> Drainable for ConsumerRef<T> {
    fn shared(&self) -> &Arc<StageShared> {
        self.inner.shared()
    }
    fn drain(&self, request: DrainRequest) -> Result<(), Error> {
        self.inner.drain(request)
    }
    fn stop(&self, reason: StopReason) -> bool {
        self.inner.stop(reason)
    }
}

/// A stage's answer to a status request.
async fn status(
    shared: &StageShared,
    send: impl FnOnce(oneshot::Sender<StageStatus>) -> Result<(), Error>,
) -> Result<StageStatus, Error> {
    let (tx, rx) = oneshot::channel();
    send(tx)?;
    answer(shared, rx, DEFAULT_TIMEOUT).await
}

/// What raw protocol ends answer to a drain: they are not stages.
pub(crate) fn no_drain(shared: &StageShared) -> Result<(), Error> {
    Err(Error::WrongKind {
        stage: shared.id(),
        kind: shared.kind().name(),
        operation: "drain",
        expected: "stages (producers, producer_consumers and consumers)",
    })
}

/// What raw protocol ends answer to a status request: they are not stages.
pub(crate) fn no_status(shared: &StageShared) -> Result<(), Error> {
    Err(Error::WrongKind {
        stage: shared.id(),
        kind: shared.kind().name(),
        operation: "status",
        expected: "stages (producers, producer_consumers and consumers)",
    })
}

impl<S: Stage> ProducerEndpoint<S::Out> for Mailbox<S> {
    fn shared(&self) -> &Arc<StageShared> {
        &self.shared
    }
    fn subscribe(&self, request: Box<SubscribeRequest<S::Out>>) -> bool {
        self.send(Msg::Subscribe(request))
    }
    fn ask(&self, sub: SubscriptionId, n: usize, from: Option<ConsumerRef<S::Out>>) -> bool {
        self.send(Msg::Ask { sub, n, from })
    }
    fn cancel(&self, sub: SubscriptionId, reason: StopReason) -> bool {
        self.send(Msg::Cancel { sub, reason })
    }
    fn demand_mode(
        &self,
        set: Option<DemandMode>,
        reply: Option<oneshot::Sender<Result<DemandMode, Error>>>,
    ) -> bool {
        self.send(Msg::DemandMode { set, reply })
    }
    fn estimate_buffered_count(&self, reply: oneshot::Sender<Result<usize, Error>>) -> bool {
        self.send(Msg::EstimateBufferedCount { reply })
    }
    fn status(&self, reply: oneshot::Sender<StageStatus>) -> Result<(), Error> {
        self.send_status(reply)
    }
    fn drain(&self, request: DrainRequest) -> Result<(), Error> {
        self.send_drain(request)
    }
    fn stop(&self, reason: StopReason) -> bool {
        self.send(Msg::Stop { reason })
    }
}

impl<S: Stage> ConsumerEndpoint<S::In> for Mailbox<S> {
    fn shared(&self) -> &Arc<StageShared> {
        &self.shared
    }
    fn events(
        &self,
        sub: SubscriptionId,
        events: Vec<S::In>,
        from: Option<ProducerRef<S::In>>,
    ) -> Option<Vec<S::In>> {
        match self.tx.send(Msg::Events { sub, events, from }) {
            Ok(()) => None,
            Err(msg) => bounced(msg),
        }
    }
    fn ack(&self, sub: SubscriptionId) -> bool {
        self.send(Msg::Ack { sub })
    }
    fn cancel(&self, sub: SubscriptionId, reason: StopReason) -> bool {
        self.send(Msg::ProducerCancel { sub, reason })
    }
    fn subscribe_to(&self, request: Box<SubscribeTo<S::In>>) -> bool {
        self.send(Msg::SubscribeTo(request))
    }
    fn cancel_upstream(&self, sub: SubscriptionId, reason: StopReason) -> bool {
        self.send(Msg::CancelUpstream { sub, reason })
    }
    fn ask_upstream(
        &self,
        sub: SubscriptionId,
        n: usize,
        reply: Option<oneshot::Sender<Result<(), Error>>>,
    ) -> bool {
        self.send(Msg::AskUpstream { sub, n, reply })
    }
    fn status(&self, reply: oneshot::Sender<StageStatus>) -> Result<(), Error> {
        self.send_status(reply)
    }
    fn drain(&self, request: DrainRequest) -> Result<(), Error> {
        self.send_drain(request)
    }
    fn stop(&self, reason: StopReason) -> bool {
        self.send(Msg::Stop { reason })
    }
}

/// The events of a message a closed mailbox refused.
#[cold]
fn bounced<S: Stage>(msg: Msg<S>) -> Option<Vec<S::In>> {
    match msg {
        Msg::Events { events, .. } => Some(events),
        _ => None,
    }
}

/// Waits for a stage's answer on `rx`.
pub(crate) async fn answer<A>(
    shared: &StageShared,
    rx: oneshot::Receiver<A>,
    timeout: Duration,
) -> Result<A, Error> {
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err(match shared.reason() {
            Some(reason) => Error::Stopped {
                stage: shared.id(),
                reason,
            },
            None => Error::NoReply { stage: shared.id() },
        }),
        Err(_) => Err(Error::Timeout {
            stage: shared.id(),
            timeout,
        }),
    }
}

fn not_alive(shared: &StageShared) -> Error {
    Error::NotAlive { stage: shared.id() }
}

/// Stops a stage and waits until it has stopped (GenStage's `stop/3`).
async fn stop_and_wait(shared: &StageShared, sent: bool) -> Result<(), Error> {
    if !sent {
        return Err(not_alive(shared));
    }
    shared.stopped().await;
    Ok(())
}

/// Anything a consumer can subscribe to: a [`ProducerRef<T>`] or the
/// [`StageRef`] of a producer or producer_consumer emitting `T`.
pub trait AsProducer<T> {
    /// The producer's address.
    fn producer_ref(&self) -> ProducerRef<T>;
}

/// Any producer of `T` events (producer or producer_consumer): what
/// consumers subscribe to.
pub struct ProducerRef<T> {
    pub(crate) inner: Arc<dyn ProducerEndpoint<T>>,
}

impl<T> Clone for ProducerRef<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for ProducerRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProducerRef").field(&self.id()).finish()
    }
}

impl<T> AsProducer<T> for ProducerRef<T> {
    fn producer_ref(&self) -> ProducerRef<T> {
        self.clone()
    }
}

impl<T> ProducerRef<T> {
    pub(crate) fn shared(&self) -> &Arc<StageShared> {
        self.inner.shared()
    }

    /// The producer's id.
    pub fn id(&self) -> StageId {
        self.shared().id()
    }

    /// Whether the producer is still running.
    pub fn is_alive(&self) -> bool {
        self.shared().is_alive()
    }

    /// Wait until the producer stops; why it stopped.
    pub async fn stopped(&self) -> StopReason {
        self.shared().stopped().await
    }

    /// Stop the producer with `reason` and wait until it has stopped.
    pub async fn stop(&self, reason: StopReason) -> Result<(), Error> {
        stop_and_wait(self.shared(), self.inner.stop(reason)).await
    }

    /// Cancel one of this producer's subscriptions (GenStage's
    /// `cancel({producer, subscription}, reason)`): the producer removes it
    /// and tells its consumer, whose cancel mode decides what happens next.
    /// Unknown subscriptions are ignored.
    pub fn cancel(&self, subscription: SubscriptionId, reason: StopReason) -> Result<(), Error> {
        if self.inner.cancel(subscription, reason) {
            Ok(())
        } else {
            Err(not_alive(self.shared()))
        }
    }

    /// A snapshot of the producer (see [`StageRef::status`]).
    pub async fn status(&self) -> Result<StageStatus, Error> {
        status(self.shared(), |reply| self.inner.status(reply)).await
    }

    /// Events buffered by the producer, including those its dispatcher holds
    /// (GenStage's `estimate_buffered_count`).
    pub async fn estimate_buffered_count(&self) -> Result<usize, Error> {
        let (tx, rx) = oneshot::channel();
        if !self.inner.estimate_buffered_count(tx) {
            return Err(not_alive(self.shared()));
        }
        answer(self.shared(), rx, DEFAULT_TIMEOUT).await?
    }

    /// The producer's demand mode (GenStage's `demand/1`).
    pub async fn demand_mode(&self) -> Result<DemandMode, Error> {
        let (tx, rx) = oneshot::channel();
        if !self.inner.demand_mode(None, Some(tx)) {
            return Err(not_alive(self.shared()));
        }
        answer(self.shared(), rx, DEFAULT_TIMEOUT).await?
    }

    /// Switch the demand mode (GenStage's `demand/2`). Switching to
    /// [`Forward`](DemandMode::Forward) replays what was accumulated.
    /// Producer_consumers are always forward: `Forward` is accepted and
    /// ignored, `Accumulate` is refused.
    pub async fn set_demand_mode(&self, mode: DemandMode) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        if !self.inner.demand_mode(Some(mode), Some(tx)) {
            return Err(not_alive(self.shared()));
        }
        answer(self.shared(), rx, DEFAULT_TIMEOUT)
            .await?
            .map(|_| ())
    }

    /// Switch the demand mode without waiting (GenStage's `demand/2` is a
    /// cast).
    pub fn async_set_demand_mode(&self, mode: DemandMode) -> Result<(), Error> {
        if self.inner.demand_mode(Some(mode), None) {
            Ok(())
        } else {
            Err(not_alive(self.shared()))
        }
    }

    pub(crate) fn subscribe(&self, request: SubscribeRequest<T>) -> bool {
        self.inner.subscribe(Box::new(request))
    }

    pub(crate) fn ask(&self, sub: SubscriptionId, n: usize) -> bool {
        self.inner.ask(sub, n, None)
    }

    pub(crate) fn ask_from(&self, sub: SubscriptionId, n: usize, from: ConsumerRef<T>) -> bool {
        self.inner.ask(sub, n, Some(from))
    }
}

/// Any consumer of `T` events (consumer or producer_consumer): what can be
/// told to subscribe to producers, ask (manual demand) and cancel.
pub struct ConsumerRef<T> {
    pub(crate) inner: Arc<dyn ConsumerEndpoint<T>>,
}

impl<T> Clone for ConsumerRef<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for ConsumerRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ConsumerRef").field(&self.id()).finish()
    }
}

impl<T> ConsumerRef<T> {
    pub(crate) fn shared(&self) -> &Arc<StageShared> {
        self.inner.shared()
    }

    /// The consumer's id.
    pub fn id(&self) -> StageId {
        self.shared().id()
    }

    /// Whether the consumer is still running.
    pub fn is_alive(&self) -> bool {
        self.shared().is_alive()
    }

    /// Wait until the consumer stops; why it stopped.
    pub async fn stopped(&self) -> StopReason {
        self.shared().stopped().await
    }

    /// Stop the consumer with `reason` and wait until it has stopped.
    pub async fn stop(&self, reason: StopReason) -> Result<(), Error> {
        stop_and_wait(self.shared(), self.inner.stop(reason)).await
    }

    /// A snapshot of the consumer (see [`StageRef::status`]).
    pub async fn status(&self) -> Result<StageStatus, Error> {
        status(self.shared(), |reply| self.inner.status(reply)).await
    }

    fn send_subscribe(
        &self,
        to: ProducerRef<T>,
        options: SubscribeOptions<T>,
        cancel: Option<(SubscriptionId, StopReason)>,
        reply: Option<oneshot::Sender<Result<SubscriptionId, Error>>>,
    ) -> Result<(), Error> {
        options.validate()?;
        let request = SubscribeTo {
            producer: to,
            options,
            cancel,
            reply,
        };
        if self.inner.subscribe_to(Box::new(request)) {
            Ok(())
        } else {
            Err(not_alive(self.shared()))
        }
    }

    async fn sync_subscribe(
        &self,
        to: ProducerRef<T>,
        options: SubscribeOptions<T>,
        cancel: Option<(SubscriptionId, StopReason)>,
    ) -> Result<SubscriptionId, Error> {
        let (tx, rx) = oneshot::channel();
        self.send_subscribe(to, options, cancel, Some(tx))?;
        answer(self.shared(), rx, DEFAULT_TIMEOUT).await?
    }

    /// Subscribe to `producer` and wait until it accepts (the subscription's
    /// id) or refuses ([`Error::SubscriptionRefused`]). Invalid options are
    /// refused at once ([`Error::InvalidOption`]).
    ///
    /// Like GenStage, the consumer asks right away, without waiting for the
    /// producer's answer.
    pub async fn subscribe(
        &self,
        producer: &impl AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Result<SubscriptionId, Error> {
        self.sync_subscribe(producer.producer_ref(), options, None)
            .await
    }

    /// Subscribe without waiting for the producer (GenStage's
    /// `async_subscribe`). Invalid options are still refused at once.
    pub fn async_subscribe(
        &self,
        producer: &impl AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Result<(), Error> {
        self.send_subscribe(producer.producer_ref(), options, None, None)
    }

    /// Cancel `old` with `reason` (if it is a subscription to `producer`) and
    /// subscribe again with new options (GenStage's `sync_resubscribe`).
    pub async fn resubscribe(
        &self,
        old: SubscriptionId,
        reason: StopReason,
        producer: &impl AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Result<SubscriptionId, Error> {
        self.sync_subscribe(producer.producer_ref(), options, Some((old, reason)))
            .await
    }

    /// [`resubscribe`](Self::resubscribe) without waiting (GenStage's
    /// `async_resubscribe`).
    pub fn async_resubscribe(
        &self,
        old: SubscriptionId,
        reason: StopReason,
        producer: &impl AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Result<(), Error> {
        self.send_subscribe(producer.producer_ref(), options, Some((old, reason)), None)
    }

    /// Manual demand: ask the producer of `subscription` for `n` more events
    /// (GenStage's `ask/3`; `0` does nothing). Unknown subscriptions are
    /// reported by [`ask_and_wait`](Self::ask_and_wait) only.
    pub fn ask(&self, subscription: SubscriptionId, n: usize) -> Result<(), Error> {
        if self.inner.ask_upstream(subscription, n, None) {
            Ok(())
        } else {
            Err(not_alive(self.shared()))
        }
    }

    /// [`ask`](Self::ask), waiting until the consumer has passed it on.
    pub async fn ask_and_wait(&self, subscription: SubscriptionId, n: usize) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        if !self.inner.ask_upstream(subscription, n, Some(tx)) {
            return Err(not_alive(self.shared()));
        }
        answer(self.shared(), rx, DEFAULT_TIMEOUT).await?
    }

    /// Cancel one of this consumer's subscriptions: the consumer asks its
    /// producer to cancel, and handles the cancellation (by its cancel mode)
    /// when the producer confirms. Unknown subscriptions are ignored.
    pub fn cancel(&self, subscription: SubscriptionId, reason: StopReason) -> Result<(), Error> {
        if self.inner.cancel_upstream(subscription, reason) {
            Ok(())
        } else {
            Err(not_alive(self.shared()))
        }
    }
}

/// The handle of a running [`Producer`](crate::Producer) `P`, whatever its
/// [`Messages`](crate::Messages).
pub type ProducerHandle<P> = StageRef<crate::ProducerStage<P>>;

/// The handle of a running [`ProducerConsumer`](crate::ProducerConsumer) `P`.
pub type ProducerConsumerHandle<P> = StageRef<crate::ProducerConsumerStage<P>>;

/// The handle of a running [`Consumer`](crate::Consumer) `C`.
pub type ConsumerHandle<C> = StageRef<crate::ConsumerStage<C>>;

/// A running stage of type `S` (one of [`ProducerStage`](crate::ProducerStage),
/// [`ConsumerStage`](crate::ConsumerStage),
/// [`ProducerConsumerStage`](crate::ProducerConsumerStage)), returned by the
/// `start_*` functions. Cheap to clone.
pub struct StageRef<S: Stage> {
    pub(crate) mailbox: Mailbox<S>,
}

impl<S: Stage> Clone for StageRef<S> {
    fn clone(&self) -> Self {
        Self {
            mailbox: self.mailbox.clone(),
        }
    }
}

impl<S: Stage> fmt::Debug for StageRef<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StageRef")
            .field("id", &self.id())
            .field("kind", &self.mailbox.shared.kind().name())
            .finish()
    }
}

impl<S: Stage> StageRef<S> {
    pub(crate) fn shared(&self) -> &StageShared {
        &self.mailbox.shared
    }

    fn send(&self, msg: Msg<S>) -> Result<(), Error> {
        if self.mailbox.send(msg) {
            Ok(())
        } else {
            Err(not_alive(self.shared()))
        }
    }

    /// The stage's id.
    pub fn id(&self) -> StageId {
        self.shared().id()
    }

    /// Whether the stage is still running.
    pub fn is_alive(&self) -> bool {
        self.shared().is_alive()
    }

    /// Wait until the stage stops; why it stopped.
    pub async fn stopped(&self) -> StopReason {
        self.shared().stopped().await
    }

    /// Stop the stage with `reason` and wait until it has stopped (its
    /// `terminate` has run and every subscriber has been told).
    ///
    /// A stage stopping itself returns [`Noreply::Stop`](crate::Noreply::Stop)
    /// from a callback instead: awaiting its own `stop` would wait forever.
    pub async fn stop(&self, reason: StopReason) -> Result<(), Error> {
        stop_and_wait(self.shared(), self.mailbox.send(Msg::Stop { reason })).await
    }

    /// A snapshot of the stage (GenStage's `:sys.get_state` /
    /// `format_status`): its kind, the consumers subscribed to it with the
    /// demand each has given, its subscriptions to producers with the demand
    /// pending on each, its dispatcher, demand mode and buffer.
    ///
    /// The request is queued behind the messages already sent to the stage
    /// and answered by the stage's own task between two callbacks, so the
    /// snapshot is consistent. A stage that has stopped answers
    /// [`Error::NotAlive`] ([`Error::Stopped`] if it stopped with the
    /// request queued); one that does not answer within
    /// [`DEFAULT_TIMEOUT`] (a callback running for long), [`Error::Timeout`].
    ///
    /// ```
    /// use weir_gen_stage::{StageKind, SubscribeOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), weir_gen_stage::Error> {
    /// let numbers = weir_gen_stage::from_iter(0..u64::MAX).await?;
    /// let status = numbers.status().await?;
    /// assert_eq!(status.kind, StageKind::Producer);
    /// assert!(status.consumers.is_empty());
    /// let producer = status.producer.expect("a producer side");
    /// assert_eq!(producer.dispatcher, "demand");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn status(&self) -> Result<StageStatus, Error> {
        status(self.shared(), |reply| self.mailbox.send_status(reply)).await
    }

    /// Call the stage's `handle_call` and wait up to `timeout` for the reply
    /// (GenStage's `call/3`).
    pub async fn call(&self, request: S::Call, timeout: Duration) -> Result<S::Reply, Error> {
        let (from, rx) = ReplyTo::new();
        self.send(Msg::Call { request, from })?;
        match answer(self.shared(), rx, timeout).await? {
            Ok(reply) => Ok(reply),
            Err(reason) => Err(Error::Stopped {
                stage: self.id(),
                reason,
            }),
        }
    }

    /// Send a request to the stage's `handle_cast` (GenStage's `cast/2`).
    pub fn cast(&self, request: S::Cast) -> Result<(), Error> {
        self.send(Msg::Cast(request))
    }

    /// Send a message straight to the stage's `handle_info` (Erlang's
    /// `send/2`).
    pub fn send_info(&self, info: S::Info) -> Result<(), Error> {
        self.send(Msg::Info(info))
    }

    /// Queue an info message *through* the stage (GenStage's `async_info/2`):
    /// a producer delivers it to its `handle_info` only once the events it
    /// buffered before it have been dispatched; a producer_consumer also
    /// waits for the events queued before it; a consumer delivers it at once.
    pub fn async_info(&self, info: S::Info) -> Result<(), Error> {
        self.send(Msg::InfoThrough { info, ack: None })
    }

    /// [`async_info`](Self::async_info), waiting until the stage has queued
    /// it (GenStage's `sync_info/3`).
    pub async fn sync_info(&self, info: S::Info) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.send(Msg::InfoThrough {
            info,
            ack: Some(tx),
        })?;
        answer(self.shared(), rx, DEFAULT_TIMEOUT).await
    }
}

impl<S: ProducesEvents> StageRef<S> {
    /// This stage as a producer, to subscribe consumers to.
    pub fn producer(&self) -> ProducerRef<S::Out> {
        ProducerRef {
            inner: Arc::new(self.mailbox.clone()),
        }
    }

    /// See [`ProducerRef::estimate_buffered_count`].
    pub async fn estimate_buffered_count(&self) -> Result<usize, Error> {
        self.producer().estimate_buffered_count().await
    }

    /// See [`ProducerRef::demand_mode`].
    pub async fn demand_mode(&self) -> Result<DemandMode, Error> {
        self.producer().demand_mode().await
    }

    /// See [`ProducerRef::set_demand_mode`].
    pub async fn set_demand_mode(&self, mode: DemandMode) -> Result<(), Error> {
        self.producer().set_demand_mode(mode).await
    }

    /// Cancel a consumer's subscription to this stage (its downstream
    /// side; GenStage's `cancel({producer, subscription}, reason)` with
    /// this stage as the producer): the stage removes it and tells the
    /// consumer, whose cancel mode decides what happens next. Unknown
    /// subscriptions are ignored. See [`ProducerRef::cancel`].
    pub fn cancel_downstream(
        &self,
        subscription: SubscriptionId,
        reason: StopReason,
    ) -> Result<(), Error> {
        self.producer().cancel(subscription, reason)
    }

    /// The old name of [`cancel_downstream`](Self::cancel_downstream).
    #[deprecated(
        note = "use `cancel_downstream`: it cancels a consumer's subscription to this stage"
    )]
    pub fn cancel_consumer(
        &self,
        subscription: SubscriptionId,
        reason: StopReason,
    ) -> Result<(), Error> {
        self.cancel_downstream(subscription, reason)
    }
}

impl<S: ProducesEvents> AsProducer<S::Out> for StageRef<S> {
    fn producer_ref(&self) -> ProducerRef<S::Out> {
        self.producer()
    }
}

impl<S: ConsumesEvents> StageRef<S> {
    /// This stage as a consumer.
    pub fn consumer(&self) -> ConsumerRef<S::In> {
        ConsumerRef {
            inner: Arc::new(self.mailbox.clone()),
        }
    }

    /// See [`ConsumerRef::subscribe`].
    pub async fn subscribe(
        &self,
        producer: &impl AsProducer<S::In>,
        options: SubscribeOptions<S::In>,
    ) -> Result<SubscriptionId, Error> {
        self.consumer().subscribe(producer, options).await
    }

    /// See [`ConsumerRef::async_subscribe`].
    pub fn async_subscribe(
        &self,
        producer: &impl AsProducer<S::In>,
        options: SubscribeOptions<S::In>,
    ) -> Result<(), Error> {
        self.consumer().async_subscribe(producer, options)
    }

    /// See [`ConsumerRef::resubscribe`].
    pub async fn resubscribe(
        &self,
        old: SubscriptionId,
        reason: StopReason,
        producer: &impl AsProducer<S::In>,
        options: SubscribeOptions<S::In>,
    ) -> Result<SubscriptionId, Error> {
        self.consumer()
            .resubscribe(old, reason, producer, options)
            .await
    }

    /// See [`ConsumerRef::async_resubscribe`].
    pub fn async_resubscribe(
        &self,
        old: SubscriptionId,
        reason: StopReason,
        producer: &impl AsProducer<S::In>,
        options: SubscribeOptions<S::In>,
    ) -> Result<(), Error> {
        self.consumer()
            .async_resubscribe(old, reason, producer, options)
    }

    /// See [`ConsumerRef::ask`].
    pub fn ask(&self, subscription: SubscriptionId, n: usize) -> Result<(), Error> {
        self.consumer().ask(subscription, n)
    }

    /// See [`ConsumerRef::ask_and_wait`].
    pub async fn ask_and_wait(&self, subscription: SubscriptionId, n: usize) -> Result<(), Error> {
        self.consumer().ask_and_wait(subscription, n).await
    }

    /// Cancel one of this stage's subscriptions to a producer (its
    /// upstream side): the stage asks its producer to cancel, and handles
    /// the cancellation (by its cancel mode) when the producer confirms.
    /// Unknown subscriptions are ignored. See [`ConsumerRef::cancel`].
    pub fn cancel_upstream(
        &self,
        subscription: SubscriptionId,
        reason: StopReason,
    ) -> Result<(), Error> {
        self.consumer().cancel(subscription, reason)
    }

    /// The old name of [`cancel_upstream`](Self::cancel_upstream).
    #[deprecated(
        note = "use `cancel_upstream`: it cancels this stage's subscription to a producer"
    )]
    pub fn cancel(&self, subscription: SubscriptionId, reason: StopReason) -> Result<(), Error> {
        self.cancel_upstream(subscription, reason)
    }
}
