//! Identifiers the host hands to a dispatcher.

use std::fmt;

/// One subscription of one consumer to this producer.
///
/// Assigned by the host (the `gen-stage` runtime), unique for the producer's
/// lifetime, never reused. It plays the role of GenStage's subscription
/// reference (`from = {pid, ref}`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriptionId(pub u64);

/// The consumer stage behind a subscription (GenStage's `pid`).
///
/// One consumer may hold several subscriptions to the same producer; the
/// Broadcast dispatcher refuses that, the others allow it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumerId(pub u64);

/// An info message handed to [`Dispatcher::info`](crate::Dispatcher::info).
///
/// The host keeps the message itself; the dispatcher only decides *when* it is
/// released (after the events queued before it), by pushing the id into the
/// [`Outbox`](crate::Outbox).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InfoId(pub u64);

/// The consumer and subscription a dispatcher call is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Subscriber {
    /// The subscription.
    pub subscription: SubscriptionId,
    /// The consumer that holds it.
    pub consumer: ConsumerId,
}

impl fmt::Display for SubscriptionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "subscription#{}", self.0)
    }
}

impl fmt::Display for ConsumerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stage#{}", self.0)
    }
}
