//! The messages in a stage's mailbox: the GenStage protocol between stages
//! (subscribe, ask, events, cancel) and the requests from handles.

use tokio::sync::oneshot;
use weir_dispatchers::{SubscriptionId, SubscriptionOptions};

use crate::drain::DrainRequest;
use crate::stage::Stage;
use crate::{
    ConsumerRef, DemandMode, Error, ProducerRef, ReplyTo, StageStatus, StopReason, SubscribeOptions,
};

/// One message to a stage. The protocol variants are small (the event path
/// moves one `Vec` and two words); rare, large ones are boxed.
pub(crate) enum Msg<S: Stage> {
    // ---- from consumers: this stage is their producer ($gen_producer) ----
    /// A consumer subscribes.
    Subscribe(Box<SubscribeRequest<S::Out>>),
    /// A consumer asks for `n` more events. `from` is only set by raw
    /// consumers, so an unknown subscription can be answered.
    Ask {
        sub: SubscriptionId,
        n: usize,
        from: Option<ConsumerRef<S::Out>>,
    },
    /// Someone cancels one of this producer's subscriptions.
    Cancel {
        sub: SubscriptionId,
        reason: StopReason,
    },
    /// A consumer of this producer stopped (monitor).
    ConsumerDown {
        sub: SubscriptionId,
        reason: StopReason,
    },

    // ---- from producers: this stage is their consumer ($gen_consumer) ----
    /// A batch of events (never empty). `from` is only set by raw producers.
    Events {
        sub: SubscriptionId,
        events: Vec<S::In>,
        from: Option<ProducerRef<S::In>>,
    },
    /// The producer accepted the subscription.
    Ack {
        sub: SubscriptionId,
    },
    /// The producer cancelled (or refused) the subscription.
    ProducerCancel {
        sub: SubscriptionId,
        reason: StopReason,
    },
    /// A producer of this consumer stopped (monitor).
    ProducerDown {
        sub: SubscriptionId,
        reason: StopReason,
    },

    // ---- from handles ----
    /// Subscribe this stage to a producer.
    SubscribeTo(Box<SubscribeTo<S::In>>),
    /// Cancel one of this stage's subscriptions to a producer.
    CancelUpstream {
        sub: SubscriptionId,
        reason: StopReason,
    },
    /// Manual demand: ask the producer of `sub` for `n` more.
    AskUpstream {
        sub: SubscriptionId,
        n: usize,
        reply: Option<oneshot::Sender<Result<(), Error>>>,
    },
    Call {
        request: S::Call,
        from: ReplyTo<S::Reply>,
    },
    Cast(S::Cast),
    /// Straight to `handle_info`.
    Info(S::Info),
    /// To `handle_info` once the events buffered before it are dispatched.
    InfoThrough {
        info: S::Info,
        ack: Option<oneshot::Sender<()>>,
    },
    /// Read, and optionally set, the demand mode.
    DemandMode {
        set: Option<DemandMode>,
        reply: Option<oneshot::Sender<Result<DemandMode, Error>>>,
    },
    EstimateBufferedCount {
        reply: oneshot::Sender<Result<usize, Error>>,
    },
    /// A snapshot of the stage.
    Status {
        reply: oneshot::Sender<StageStatus>,
    },
    Stop {
        reason: StopReason,
    },
    /// Part of a [`Drain`](crate::Drain).
    Drain(DrainRequest),
}

/// A consumer's subscription request, as the producer receives it.
pub(crate) struct SubscribeRequest<T> {
    pub(crate) sub: SubscriptionId,
    /// Where events and cancellations for this subscription go.
    pub(crate) consumer: ConsumerRef<T>,
    pub(crate) options: SubscriptionOptions<T>,
    /// Resubscribe: first cancel this subscription (if it is one of this
    /// producer's) with this reason.
    pub(crate) cancel: Option<(SubscriptionId, StopReason)>,
}

/// A request to a consumer stage to subscribe to `producer`.
pub(crate) struct SubscribeTo<T> {
    pub(crate) producer: ProducerRef<T>,
    /// Already validated by the sender.
    pub(crate) options: SubscribeOptions<T>,
    pub(crate) cancel: Option<(SubscriptionId, StopReason)>,
    /// Sync subscribe: answered when the producer accepts or refuses.
    pub(crate) reply: Option<oneshot::Sender<Result<SubscriptionId, Error>>>,
}
