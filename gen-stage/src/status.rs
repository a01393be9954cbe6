//! Introspection: a running stage's state, seen from outside (GenStage's
//! `:sys.get_state` and `format_status`).
//!
//! [`StageRef::status`](crate::StageRef::status) asks the stage itself: the
//! request waits in its mailbox behind the messages sent before it and is
//! answered by the stage's own task between two callbacks, so every number
//! in one [`StageStatus`] belongs to the same moment of the stage's life.

use weir_dispatchers::SubscriptionId;

use crate::{
    BufferKeep, BufferSize, CancelMode, ConsumerDemand, DemandMode, StageId, Subscription,
};

/// The three kinds of stage (GenStage's `:producer`, `:producer_consumer`,
/// `:consumer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StageKind {
    /// Emits events when its consumers ask.
    Producer,
    /// Receives events from producers and emits events to consumers.
    ProducerConsumer,
    /// Receives events from producers.
    Consumer,
}

impl StageKind {
    /// GenStage's name for it: `"producer"`, `"producer_consumer"` or
    /// `"consumer"`.
    pub fn name(self) -> &'static str {
        match self {
            StageKind::Producer => "producer",
            StageKind::ProducerConsumer => "producer_consumer",
            StageKind::Consumer => "consumer",
        }
    }
}

impl std::fmt::Display for StageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A snapshot of a running stage, taken by the stage itself between two
/// callbacks ([`StageRef::status`](crate::StageRef::status)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StageStatus {
    /// The stage.
    pub id: StageId,
    /// What kind of stage it is.
    pub kind: StageKind,
    /// The consumers subscribed to this stage (producers and
    /// producer_consumers; empty for consumers), in subscription id order.
    pub consumers: Vec<ConsumerSubscriptionStatus>,
    /// This stage's subscriptions to producers (consumers and
    /// producer_consumers; empty for producers), in subscription id order.
    pub producers: Vec<ProducerSubscriptionStatus>,
    /// The producer side: dispatcher, demand mode and buffer (`None` for
    /// consumers).
    pub producer: Option<ProducerStatus>,
    /// Producer_consumers: events received and not yet handed to
    /// `handle_events`, waiting for downstream demand (always 0 for the
    /// other kinds). Their subscriptions count them as received only once
    /// they are handed over, as GenStage does.
    pub queued_events: usize,
}

/// A consumer's subscription to the stage, seen by the stage (its producer
/// side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerSubscriptionStatus {
    /// The subscription: its id, this stage as producer, and the consumer.
    pub subscription: Subscription,
    /// Demand the consumer has given and not yet been sent events for: the
    /// sum of its asks minus the events dispatched to it (events a
    /// Broadcast selector filtered out do not count as sent).
    pub demand: usize,
}

impl ConsumerSubscriptionStatus {
    /// The subscription's id.
    pub fn id(&self) -> SubscriptionId {
        self.subscription.id
    }

    /// The consumer.
    pub fn consumer(&self) -> StageId {
        self.subscription.consumer
    }
}

/// One of the stage's subscriptions to a producer, seen by the stage (its
/// consumer side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerSubscriptionStatus {
    /// The subscription: its id, the producer, and this stage as consumer.
    pub subscription: Subscription,
    /// Whether the runtime asks (automatic) or the stage does (manual).
    pub mode: ConsumerDemand,
    /// Demand asked of the producer and not received yet. In automatic
    /// mode this is the demand algorithm's outstanding count (see
    /// [`demand`](crate::demand)); in manual mode, the asks made minus the
    /// events received.
    pub pending_demand: usize,
    /// The subscription's `max_demand`.
    pub max_demand: usize,
    /// The subscription's `min_demand`.
    pub min_demand: usize,
    /// What the stage does when this subscription ends.
    pub cancel: CancelMode,
    /// The producer has acknowledged the subscription.
    pub acknowledged: bool,
}

impl ProducerSubscriptionStatus {
    /// The subscription's id.
    pub fn id(&self) -> SubscriptionId {
        self.subscription.id
    }

    /// The producer.
    pub fn producer(&self) -> StageId {
        self.subscription.producer
    }
}

/// The producer side of a producer or producer_consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerStatus {
    /// The dispatcher's name ([`Dispatcher::name`](crate::Dispatcher::name):
    /// `"demand"`, `"broadcast"`, `"partition"`, or a plugin's).
    pub dispatcher: String,
    /// Forward or accumulate.
    pub demand_mode: DemandMode,
    /// The producer's buffer.
    pub buffer: BufferStatus,
}

/// A producer's buffer of events it could not dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufferStatus {
    /// Events in the buffer.
    pub len: usize,
    /// Events the dispatcher holds itself (partition queues); they count
    /// toward [`size`](Self::size) and
    /// [`estimate_buffered_count`](crate::ProducerRef::estimate_buffered_count),
    /// which is `len + held_by_dispatcher`.
    pub held_by_dispatcher: usize,
    /// Info messages waiting behind buffered events.
    pub waiting_infos: usize,
    /// The buffer's capacity (GenStage's `buffer_size`).
    pub size: BufferSize,
    /// Which events a full buffer keeps (GenStage's `buffer_keep`).
    pub keep: BufferKeep,
    /// Events dropped because the buffer was full, since the stage started.
    pub discarded: u64,
}
