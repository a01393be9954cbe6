//! The default partition hash: the same partition for the same event in every
//! run, unlike `std`'s randomly keyed `RandomState`.

use std::hash::{Hash, Hasher};

/// FNV-1a over the bytes `Hash` feeds it, finished with MurmurHash3's 64-bit
/// mixer so that every input bit reaches the high bits the partition is taken
/// from.
///
/// Deterministic for a given build and platform (`Hash` impls feed integers in
/// native byte order and `usize` at native width).
#[derive(Debug, Clone)]
pub(super) struct StableHasher {
    state: u64,
}

const FNV_OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

impl Default for StableHasher {
    fn default() -> Self {
        Self {
            state: FNV_OFFSET_BASIS,
        }
    }
}

impl Hasher for StableHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.state ^= u64::from(byte);
            self.state = self.state.wrapping_mul(FNV_PRIME);
        }
    }

    fn finish(&self) -> u64 {
        let mut z = self.state;
        z = (z ^ (z >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        z = (z ^ (z >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        z ^ (z >> 33)
    }
}

/// The partition in `0..count` for `event` (0 when `count` is 0, which the
/// caller then treats as an unknown partition).
pub(super) fn partition_of<T: Hash + ?Sized>(event: &T, count: usize) -> usize {
    let mut hasher = StableHasher::default();
    event.hash(&mut hasher);
    // Multiply-shift: the high bits of hash * count, uniform in 0..count.
    ((u128::from(hasher.finish()) * count as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_event_same_partition_across_hashers() {
        for n in 0..100u64 {
            assert_eq!(partition_of(&n, 7), partition_of(&n, 7));
        }
        assert_eq!(
            partition_of("apple", 5),
            partition_of(&String::from("apple"), 5)
        );
    }

    #[test]
    fn fixed_inputs_hash_to_fixed_values() {
        // The FNV-1a 64 reference vector for "a", then the mixed value, so
        // an accidental change of the algorithm shows up here.
        let mut one = StableHasher::default();
        one.write(b"a");
        assert_eq!(one.state, 0xAF63_DC4C_8601_EC8C);
        assert_eq!(one.finish(), 0x82A2_A958_A9BE_CE5B);
    }

    #[test]
    fn partitions_stay_in_range_and_are_roughly_even() {
        let mut counts = [0usize; 4];
        for n in 0..4000u64 {
            let p = partition_of(&n, 4);
            assert!(p < 4);
            counts[p] += 1;
        }
        for count in counts {
            assert!((800..=1200).contains(&count), "{counts:?}");
        }
    }

    #[test]
    fn even_keys_spread_over_two_partitions() {
        let zeros = (0..1000u64)
            .map(|n| n * 2)
            .filter(|n| partition_of(n, 2) == 0)
            .count();
        assert!(
            (400..=600).contains(&zeros),
            "{zeros} of 1000 in partition 0"
        );
    }

    #[test]
    fn zero_partitions_gives_index_zero() {
        assert_eq!(partition_of(&42u32, 0), 0);
    }
}
