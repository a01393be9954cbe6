//! A consistent-hash ring: each subscription owns `virtual_nodes` points on a
//! 64-bit circle; a key belongs to the first point at or after its hash.
//!
//! Points are derived from the subscription's *affinity* name only (FNV-1a,
//! then a SplitMix64 finaliser), never from process-random state, so the same
//! names give the same ring in every process and on every platform. Adding a
//! subscription moves only the keys that now fall on its points; removing one
//! moves only the keys it owned.

use std::collections::BTreeMap;

use weir_plugin_interface::SubscriptionId;

/// SplitMix64's finaliser: spreads any 64-bit value over the whole circle
/// (host keys are often small integers).
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The position of point `replica` of the subscription named `affinity`.
fn point(affinity: &str, replica: u32) -> u64 {
    let mut bytes = Vec::with_capacity(affinity.len() + 5);
    bytes.extend_from_slice(affinity.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&replica.to_le_bytes());
    mix(fnv1a(&bytes))
}

#[derive(Debug, Clone)]
pub(crate) struct Ring {
    virtual_nodes: u32,
    points: BTreeMap<u64, SubscriptionId>,
}

impl Ring {
    pub(crate) fn new(virtual_nodes: u32) -> Self {
        Self {
            virtual_nodes,
            points: BTreeMap::new(),
        }
    }

    /// Place `subscription`'s points. A point already taken (a 64-bit
    /// collision) stays with its first owner.
    pub(crate) fn insert(&mut self, affinity: &str, subscription: SubscriptionId) {
        for replica in 0..self.virtual_nodes {
            self.points
                .entry(point(affinity, replica))
                .or_insert(subscription);
        }
    }

    /// Remove `subscription`'s points.
    pub(crate) fn remove(&mut self, affinity: &str, subscription: SubscriptionId) {
        for replica in 0..self.virtual_nodes {
            let position = point(affinity, replica);
            if self.points.get(&position) == Some(&subscription) {
                self.points.remove(&position);
            }
        }
    }

    /// The subscription that owns `key`, if the ring has any point.
    pub(crate) fn owner(&self, key: u64) -> Option<SubscriptionId> {
        let position = mix(key);
        self.points
            .range(position..)
            .next()
            .or_else(|| self.points.iter().next())
            .map(|(_, subscription)| *subscription)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_ring_has_no_owner() {
        assert_eq!(Ring::new(8).owner(42), None);
    }

    #[test]
    fn keys_spread_over_every_subscription() {
        let mut ring = Ring::new(64);
        for id in 0..4 {
            ring.insert(&format!("consumer-{id}"), SubscriptionId(id));
        }
        let mut counts = [0u32; 4];
        for key in 0..10_000 {
            let owner = ring.owner(key).expect("the ring has points");
            counts[owner.0 as usize] += 1;
        }
        // Each of 4 owners gets a fair share (2500 expected), give or take.
        assert!(
            counts.iter().all(|c| (1200..=3800).contains(c)),
            "{counts:?}"
        );
    }

    #[test]
    fn adding_a_subscription_only_moves_keys_to_it() {
        let mut ring = Ring::new(64);
        for id in 0..3 {
            ring.insert(&format!("consumer-{id}"), SubscriptionId(id));
        }
        let before: Vec<_> = (0..5_000).map(|k| ring.owner(k)).collect();
        ring.insert("consumer-3", SubscriptionId(3));
        let mut moved = 0;
        for (key, owner) in (0..5_000).zip(before) {
            let now = ring.owner(key);
            if now != owner {
                assert_eq!(now, Some(SubscriptionId(3)), "key {key} moved elsewhere");
                moved += 1;
            }
        }
        assert!((500..=2_000).contains(&moved), "{moved} of 5000 moved");
    }

    #[test]
    fn points_depend_only_on_the_affinity_name() {
        let mut a = Ring::new(16);
        let mut b = Ring::new(16);
        a.insert("billing", SubscriptionId(1));
        a.insert("search", SubscriptionId(2));
        b.insert("search", SubscriptionId(2));
        b.insert("billing", SubscriptionId(1));
        assert!((0..1_000).all(|k| a.owner(k) == b.owner(k)));
    }
}
