//! Identifiers: stages, subscriptions, and the map keyed by them.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use weir_dispatchers::{ConsumerId, SubscriptionId};

/// A running stage (GenStage's pid). Unique for the life of the process,
/// never reused.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StageId(pub u64);

static NEXT_STAGE: AtomicU64 = AtomicU64::new(1);
static NEXT_SUBSCRIPTION: AtomicU64 = AtomicU64::new(1);

impl StageId {
    /// A fresh id.
    pub(crate) fn next() -> Self {
        StageId(NEXT_STAGE.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for StageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stage#{}", self.0)
    }
}

impl From<StageId> for ConsumerId {
    fn from(id: StageId) -> Self {
        ConsumerId(id.0)
    }
}

/// A fresh subscription id, unique for the life of the process (GenStage's
/// subscription reference). Consumers pick their subscription ids with it;
/// the [`protocol`](crate::protocol) module's raw ends may use it too.
pub fn new_subscription_id() -> SubscriptionId {
    SubscriptionId(NEXT_SUBSCRIPTION.fetch_add(1, Ordering::Relaxed))
}

/// A hasher for the runtime's own `u64` ids: one multiplication (Fibonacci
/// hashing) instead of SipHash, since the keys come from a counter and are
/// not chosen by an adversary.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash map keyed by the runtime's ids.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_ids_are_never_reused() {
        let a = new_subscription_id();
        let b = new_subscription_id();
        assert_ne!(a, b);
    }

    #[test]
    fn id_map_finds_what_it_stored() {
        let mut map: IdMap<SubscriptionId, usize> = IdMap::default();
        for i in 0..1000 {
            map.insert(SubscriptionId(i), i as usize);
        }
        for i in 0..1000 {
            assert_eq!(map.get(&SubscriptionId(i)), Some(&(i as usize)));
        }
    }
}
