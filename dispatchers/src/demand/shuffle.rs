//! A tiny seeded generator for shuffling the consumer list (no `rand`
//! dependency: a shuffle of a handful of consumers needs nothing stronger).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// SplitMix64 (Steele, Lea and Flood): one 64-bit state word, good enough
/// statistical quality for picking an order, fully deterministic per seed.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..bound` (`bound > 0`), by multiply-shift.
    fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }

    /// Fisher-Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// A seed that differs between processes: the standard library draws random
/// keys for each `RandomState`.
pub(crate) fn random_seed() -> u64 {
    RandomState::new().hash_one(0x5EED_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_same_order() {
        let mut a: Vec<u32> = (0..20).collect();
        let mut b = a.clone();
        SplitMix64::new(42).shuffle(&mut a);
        SplitMix64::new(42).shuffle(&mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn shuffle_is_a_permutation_and_moves_items() {
        let mut items: Vec<u32> = (0..20).collect();
        SplitMix64::new(1).shuffle(&mut items);
        assert_ne!(items, (0..20).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn every_order_of_two_items_occurs_over_seeds() {
        let mut swapped = 0;
        for seed in 0..100 {
            let mut items = [0, 1];
            SplitMix64::new(seed).shuffle(&mut items);
            if items == [1, 0] {
                swapped += 1;
            }
        }
        assert!((25..=75).contains(&swapped), "swapped {swapped} of 100");
    }
}
