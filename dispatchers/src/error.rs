//! Why a dispatcher refused a subscription.

use crate::{ConsumerId, PartitionKey};

/// A subscription the dispatcher cannot accept. The host cancels that one
/// subscription with this as the reason; the producer keeps running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscribeError {
    /// Partition dispatcher: the subscription named no partition.
    #[error(
        "the partition dispatcher needs a `partition` subscription option (one of {available})"
    )]
    PartitionMissing {
        /// The partitions that exist, for the message.
        available: String,
    },
    /// Partition dispatcher: no such partition.
    #[error("unknown partition {partition} (the partitions are {available})")]
    PartitionUnknown {
        /// What was asked for.
        partition: PartitionKey,
        /// The partitions that exist, for the message.
        available: String,
    },
    /// Partition dispatcher: another consumer holds this partition.
    #[error("partition {partition} already has a consumer")]
    PartitionTaken {
        /// The partition.
        partition: PartitionKey,
    },
    /// Broadcast dispatcher: this consumer is already subscribed.
    #[error("{consumer} is already subscribed to this broadcast producer")]
    AlreadySubscribed {
        /// The consumer.
        consumer: ConsumerId,
    },
    /// An option has a value the dispatcher cannot use.
    #[error("invalid subscription option `{option}`: {reason}")]
    InvalidOption {
        /// The option's name.
        option: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A dispatcher-specific refusal (e.g. from a plugin).
    #[error("{0}")]
    Refused(String),
}
