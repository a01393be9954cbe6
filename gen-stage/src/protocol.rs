//! The subscription protocol's raw ends: a consumer and a producer that are
//! not stages, driven by hand.
//!
//! They speak the same protocol as stages (subscribe, ask, events, cancel,
//! and monitors for "down"), so they can stand in for either side: to
//! consume a producer from ordinary async code (the [`EventStream`](crate::EventStream)
//! is built on [`RawConsumer`]), or to test exactly what a stage sends and
//! how it reacts (duplicated subscriptions, unknown subscriptions, refusals).
//!
//! ```
//! use weir_gen_stage::protocol::{RawConsumer, ToConsumer};
//! use weir_gen_stage::{SubscriptionOptions, new_subscription_id};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), weir_gen_stage::Error> {
//! let producer = weir_gen_stage::from_iter(0..10u32).await?;
//! let mut consumer = RawConsumer::new();
//! let sub = new_subscription_id();
//! consumer.subscribe(&producer, sub, SubscriptionOptions::new(3, 1));
//! consumer.ask(&producer, sub, 3);
//! assert_eq!(consumer.recv().await, Some(ToConsumer::Ack { subscription: sub }));
//! assert_eq!(
//!     consumer.recv().await,
//!     Some(ToConsumer::Events { subscription: sub, events: vec![0, 1, 2] })
//! );
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use weir_dispatchers::{SubscriptionId, SubscriptionOptions};

use crate::handle::{ConsumerEndpoint, ProducerEndpoint};
use crate::ids::IdMap;
use crate::message::{SubscribeRequest, SubscribeTo};
use crate::shared::{Kind, MonitorId, StageShared};
use crate::{AsProducer, ConsumerRef, DemandMode, Error, ProducerRef, StageId, StopReason};

/// What a producer sends to a [`RawConsumer`].
#[derive(Debug, PartialEq)]
pub enum ToConsumer<T> {
    /// The producer accepted the subscription.
    Ack {
        /// The subscription.
        subscription: SubscriptionId,
    },
    /// A batch of events (never empty, never more than asked).
    Events {
        /// The subscription.
        subscription: SubscriptionId,
        /// The events, in order.
        events: Vec<T>,
    },
    /// The producer cancelled or refused the subscription.
    Cancel {
        /// The subscription.
        subscription: SubscriptionId,
        /// Why.
        reason: StopReason,
    },
    /// The producer stopped (or was not alive): its reason, or `Noproc`.
    Down {
        /// The subscription.
        subscription: SubscriptionId,
        /// The producer's stop reason.
        reason: StopReason,
    },
}

struct RawConsumerEnd<T> {
    tx: UnboundedSender<ToConsumer<T>>,
    shared: Arc<StageShared>,
}

impl<T: Send + 'static> ConsumerEndpoint<T> for RawConsumerEnd<T> {
    fn shared(&self) -> &Arc<StageShared> {
        &self.shared
    }
    fn events(
        &self,
        subscription: SubscriptionId,
        events: Vec<T>,
        _from: Option<ProducerRef<T>>,
    ) -> Option<Vec<T>> {
        match self.tx.send(ToConsumer::Events {
            subscription,
            events,
        }) {
            Ok(()) => None,
            Err(tokio::sync::mpsc::error::SendError(ToConsumer::Events { events, .. })) => {
                Some(events)
            }
            Err(_) => None,
        }
    }
    fn ack(&self, subscription: SubscriptionId) -> bool {
        self.tx.send(ToConsumer::Ack { subscription }).is_ok()
    }
    fn cancel(&self, subscription: SubscriptionId, reason: StopReason) -> bool {
        self.tx
            .send(ToConsumer::Cancel {
                subscription,
                reason,
            })
            .is_ok()
    }
    // A raw consumer is driven by its owner, not through handles.
    fn subscribe_to(&self, _request: Box<SubscribeTo<T>>) -> bool {
        false
    }
    fn cancel_upstream(&self, _sub: SubscriptionId, _reason: StopReason) -> bool {
        false
    }
    fn ask_upstream(
        &self,
        _sub: SubscriptionId,
        _n: usize,
        _reply: Option<oneshot::Sender<Result<(), Error>>>,
    ) -> bool {
        false
    }
    fn status(&self, _reply: oneshot::Sender<crate::StageStatus>) -> Result<(), Error> {
        crate::handle::no_status(&self.shared)
    }
    fn drain(&self, _request: crate::drain::DrainRequest) -> Result<(), Error> {
        crate::handle::no_drain(&self.shared)
    }
    fn stop(&self, _reason: StopReason) -> bool {
        false
    }
}

/// A consumer driven by hand: subscribe, ask and cancel explicitly, and read
/// what producers send with [`recv`](Self::recv).
///
/// It monitors the producers it subscribes to ([`ToConsumer::Down`]), and
/// they monitor it: dropping it (or [`stop`](Self::stop)) ends its
/// subscriptions as a stopping consumer would.
pub struct RawConsumer<T> {
    rx: UnboundedReceiver<ToConsumer<T>>,
    end: Arc<RawConsumerEnd<T>>,
    monitors: IdMap<SubscriptionId, (Arc<StageShared>, MonitorId)>,
}

impl<T: Send + 'static> RawConsumer<T> {
    /// A consumer with no subscriptions.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(StageShared::new(Kind::RawConsumer));
        Self {
            rx,
            end: Arc::new(RawConsumerEnd { tx, shared }),
            monitors: IdMap::default(),
        }
    }

    /// This consumer's id.
    pub fn id(&self) -> StageId {
        self.end.shared.id()
    }

    /// This consumer's address (what producers send to). Handle requests
    /// through it (subscribe, ask, stop) are refused with
    /// [`Error::NotAlive`]: drive a raw consumer through its own methods.
    pub fn consumer_ref(&self) -> ConsumerRef<T> {
        ConsumerRef {
            inner: self.end.clone(),
        }
    }

    /// Subscribe to `producer` with the given subscription id (normally
    /// [`new_subscription_id`](crate::new_subscription_id); reusing one shows
    /// the producer's `duplicated_subscription` refusal). Nothing is asked
    /// yet. Returns `false` if the producer's mailbox is closed (a
    /// [`ToConsumer::Down`] follows).
    pub fn subscribe(
        &mut self,
        producer: &impl AsProducer<T>,
        subscription: SubscriptionId,
        options: SubscriptionOptions<T>,
    ) -> bool {
        let producer = producer.producer_ref();
        let tx = self.end.tx.clone();
        let monitor = producer
            .shared()
            .monitor(Box::new(move |reason: &StopReason| {
                let _ = tx.send(ToConsumer::Down {
                    subscription,
                    reason: reason.clone(),
                });
            }));
        if let Some(monitor) = monitor {
            self.monitors
                .insert(subscription, (producer.shared().clone(), monitor));
        }
        producer.subscribe(SubscribeRequest {
            sub: subscription,
            consumer: self.consumer_ref(),
            options,
            cancel: None,
        })
    }

    /// Ask `producer` for `n` more events on `subscription`. Unknown
    /// subscriptions are answered with a `Cancel(UnknownSubscription)`.
    pub fn ask(
        &self,
        producer: &impl AsProducer<T>,
        subscription: SubscriptionId,
        n: usize,
    ) -> bool {
        producer
            .producer_ref()
            .ask_from(subscription, n, self.consumer_ref())
    }

    /// Ask `producer` to cancel `subscription`; it answers with a
    /// [`ToConsumer::Cancel`].
    pub fn cancel(
        &self,
        producer: &impl AsProducer<T>,
        subscription: SubscriptionId,
        reason: StopReason,
    ) -> bool {
        producer.producer_ref().inner.cancel(subscription, reason)
    }

    /// Stop watching the producer of `subscription` (after it ended).
    pub fn forget(&mut self, subscription: SubscriptionId) {
        if let Some((shared, monitor)) = self.monitors.remove(&subscription) {
            shared.demonitor(monitor);
        }
    }

    /// The next message from a producer.
    pub async fn recv(&mut self) -> Option<ToConsumer<T>> {
        self.rx.recv().await
    }

    /// The next message from a producer, if one is waiting.
    pub fn try_recv(&mut self) -> Option<ToConsumer<T>> {
        self.rx.try_recv().ok()
    }

    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<ToConsumer<T>>> {
        self.rx.poll_recv(cx)
    }

    /// Stop with `reason`: producers see their subscriptions from this
    /// consumer go down with it.
    pub fn stop(self, reason: StopReason) {
        self.end.shared.mark_dead(reason);
    }
}

impl<T: Send + 'static> Default for RawConsumer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for RawConsumer<T> {
    fn drop(&mut self) {
        for (_, (shared, monitor)) in self.monitors.drain() {
            shared.demonitor(monitor);
        }
        self.end.shared.mark_dead(StopReason::Normal);
    }
}

impl<T> fmt::Debug for RawConsumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawConsumer")
            .field("id", &self.end.shared.id())
            .field("subscriptions", &self.monitors.len())
            .finish()
    }
}

/// What consumers send to a [`RawProducer`].
#[derive(Debug)]
pub enum ToProducer<T> {
    /// A consumer subscribes.
    Subscribe {
        /// The subscription id the consumer chose.
        subscription: SubscriptionId,
        /// Where to send events, acks and cancellations.
        consumer: ConsumerRef<T>,
        /// The options, as a dispatcher would see them.
        options: SubscriptionOptions<T>,
        /// Resubscribe: the subscription to cancel first, and why.
        cancel: Option<(SubscriptionId, StopReason)>,
    },
    /// A consumer asks for `n` more events.
    Ask {
        /// The subscription.
        subscription: SubscriptionId,
        /// How many.
        n: usize,
    },
    /// Someone cancels a subscription.
    Cancel {
        /// The subscription.
        subscription: SubscriptionId,
        /// Why.
        reason: StopReason,
    },
    /// A consumer watched with [`RawProducer::monitor`] stopped.
    Down {
        /// The subscription given to `monitor`.
        subscription: SubscriptionId,
        /// The consumer's stop reason.
        reason: StopReason,
    },
}

struct RawProducerEnd<T> {
    tx: UnboundedSender<ToProducer<T>>,
    shared: Arc<StageShared>,
}

impl<T: Send + 'static> ProducerEndpoint<T> for RawProducerEnd<T> {
    fn shared(&self) -> &Arc<StageShared> {
        &self.shared
    }
    fn subscribe(&self, request: Box<SubscribeRequest<T>>) -> bool {
        let SubscribeRequest {
            sub,
            consumer,
            options,
            cancel,
        } = *request;
        self.tx
            .send(ToProducer::Subscribe {
                subscription: sub,
                consumer,
                options,
                cancel,
            })
            .is_ok()
    }
    fn ask(&self, subscription: SubscriptionId, n: usize, _from: Option<ConsumerRef<T>>) -> bool {
        self.tx.send(ToProducer::Ask { subscription, n }).is_ok()
    }
    fn cancel(&self, subscription: SubscriptionId, reason: StopReason) -> bool {
        self.tx
            .send(ToProducer::Cancel {
                subscription,
                reason,
            })
            .is_ok()
    }
    fn demand_mode(
        &self,
        _set: Option<DemandMode>,
        reply: Option<oneshot::Sender<Result<DemandMode, Error>>>,
    ) -> bool {
        if let Some(reply) = reply {
            let _ = reply.send(Ok(DemandMode::Forward));
        }
        self.shared.is_alive()
    }
    fn estimate_buffered_count(&self, reply: oneshot::Sender<Result<usize, Error>>) -> bool {
        let _ = reply.send(Ok(0));
        self.shared.is_alive()
    }
    fn status(&self, _reply: oneshot::Sender<crate::StageStatus>) -> Result<(), Error> {
        crate::handle::no_status(&self.shared)
    }
    fn drain(&self, _request: crate::drain::DrainRequest) -> Result<(), Error> {
        crate::handle::no_drain(&self.shared)
    }
    fn stop(&self, _reason: StopReason) -> bool {
        false
    }
}

/// A producer driven by hand: read what consumers send with
/// [`recv`](Self::recv), answer with [`ack`](Self::ack),
/// [`send_events`](Self::send_events) and [`cancel`](Self::cancel).
///
/// Consumers subscribe to it through [`producer_ref`](Self::producer_ref)
/// and monitor it: dropping it (or [`stop`](Self::stop)) is seen as the
/// producer going down.
///
/// ```
/// use weir_gen_stage::protocol::{RawProducer, ToProducer};
/// use weir_gen_stage::{Error, StopReason, SubscribeOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// // A consumer subscribing to a producer that refuses it.
/// let mut producer = RawProducer::<u8>::new();
/// let stream = weir_gen_stage::stream([(producer.producer_ref(), SubscribeOptions::new())])?;
/// if let Some(ToProducer::Subscribe { subscription, consumer, .. }) = producer.recv().await {
///     producer.cancel(&consumer, subscription, StopReason::custom("no_thanks"));
/// }
/// # drop(stream);
/// # Ok(())
/// # }
/// ```
pub struct RawProducer<T> {
    rx: UnboundedReceiver<ToProducer<T>>,
    end: Arc<RawProducerEnd<T>>,
}

impl<T: Send + 'static> RawProducer<T> {
    /// A producer with no consumers.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(StageShared::new(Kind::RawProducer));
        Self {
            rx,
            end: Arc::new(RawProducerEnd { tx, shared }),
        }
    }

    /// This producer's id.
    pub fn id(&self) -> StageId {
        self.end.shared.id()
    }

    /// This producer's address, to subscribe consumers to.
    pub fn producer_ref(&self) -> ProducerRef<T> {
        ProducerRef {
            inner: self.end.clone(),
        }
    }

    /// Accept a subscription.
    pub fn ack(&self, consumer: &ConsumerRef<T>, subscription: SubscriptionId) -> bool {
        consumer.inner.ack(subscription)
    }

    /// Send a batch of events. A consumer that does not know the
    /// subscription answers with a [`ToProducer::Cancel`]
    /// (`UnknownSubscription`).
    pub fn send_events(
        &self,
        consumer: &ConsumerRef<T>,
        subscription: SubscriptionId,
        events: Vec<T>,
    ) -> bool {
        consumer
            .inner
            .events(subscription, events, Some(self.producer_ref()))
            .is_none()
    }

    /// Cancel (or refuse) a subscription.
    pub fn cancel(
        &self,
        consumer: &ConsumerRef<T>,
        subscription: SubscriptionId,
        reason: StopReason,
    ) -> bool {
        consumer.inner.cancel(subscription, reason)
    }

    /// Watch `consumer`: a [`ToProducer::Down`] for `subscription` arrives
    /// when it stops.
    pub fn monitor(&self, consumer: &ConsumerRef<T>, subscription: SubscriptionId) {
        let tx = self.end.tx.clone();
        consumer
            .shared()
            .monitor(Box::new(move |reason: &StopReason| {
                let _ = tx.send(ToProducer::Down {
                    subscription,
                    reason: reason.clone(),
                });
            }));
    }

    /// The next message from a consumer.
    pub async fn recv(&mut self) -> Option<ToProducer<T>> {
        self.rx.recv().await
    }

    /// The next message from a consumer, if one is waiting.
    pub fn try_recv(&mut self) -> Option<ToProducer<T>> {
        self.rx.try_recv().ok()
    }

    /// Stop with `reason`: subscribed consumers see it go down.
    pub fn stop(self, reason: StopReason) {
        self.end.shared.mark_dead(reason);
    }
}

impl<T: Send + 'static> Default for RawProducer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for RawProducer<T> {
    fn drop(&mut self) {
        self.end.shared.mark_dead(StopReason::Normal);
    }
}

impl<T> fmt::Debug for RawProducer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawProducer")
            .field("id", &self.end.shared.id())
            .finish()
    }
}
