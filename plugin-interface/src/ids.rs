//! Identifiers that cross the ABI, as plain `u64` newtypes.

use std::fmt;

use abi_stable::StableAbi;

/// One subscription of one consumer to the producer (the host's
/// `weir_dispatchers::SubscriptionId`). Unique for the producer's lifetime.
#[repr(transparent)]
#[derive(StableAbi, Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriptionId(pub u64);

/// The consumer stage behind a subscription (the host's
/// `weir_dispatchers::ConsumerId`). One consumer may hold several subscriptions.
#[repr(transparent)]
#[derive(StableAbi, Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumerId(pub u64);

/// An info message the host asked the dispatcher to release (the host's
/// `weir_dispatchers::InfoId`). The message itself stays on the host.
#[repr(transparent)]
#[derive(StableAbi, Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InfoId(pub u64);

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
