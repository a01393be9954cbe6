//! The default partition hash: the same partition for the same event in every
//! run, unlike `std`'s randomly keyed `RandomState`, and cheap enough to run
//! once per event.

use std::hash::{Hash, Hasher};

/// A word-at-a-time multiplicative hash (FxHash's step: rotate, xor the
/// word in, multiply), finished with MurmurHash3's 64-bit mixer so that
/// every input bit reaches the high bits the partition is taken from.
///
/// Integers are one step each, whatever their width; byte strings are fed 8
/// bytes at a time, little-endian, the last word padded and tagged with its
/// length. So the hash of integers and strings is the same on every
/// platform (`usize` is hashed as a `u64`); other `Hash` impls may feed
/// native-endian bytes, which makes them deterministic per platform.
///
/// For a single `u64` the result is a bijection of the input (both the step
/// and the mixer are), so distinct keys never collide before the partition
/// is taken.
#[derive(Debug, Clone)]
pub(super) struct StableHasher {
    state: u64,
}

const SEED: u64 = 0xCBF2_9CE4_8422_2325;
const MULTIPLIER: u64 = 0x517C_C1B7_2722_0A95;

impl Default for StableHasher {
    fn default() -> Self {
        Self { state: SEED }
    }
}

impl StableHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.state = (self.state.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for StableHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(word);
            self.add(u64::from_le_bytes(buf));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            // The top byte of a padded word is free: tag it with the length,
            // so that "a" and "a\0" differ.
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf) | ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_u128(&mut self, n: u128) {
        self.add(n as u64);
        self.add((n >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut z = self.state;
        z = (z ^ (z >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        z = (z ^ (z >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        z ^ (z >> 33)
    }
}

/// The partition in `0..count` for `event` (0 when `count` is 0, which the
/// caller then treats as an unknown partition).
#[inline]
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
        // Values worked out by hand from the definition (step, then mixer),
        // so that an accidental change of the algorithm shows up here.
        let mut word = StableHasher::default();
        word.write_u64(42);
        assert_eq!(word.state, 0xF10A_79C4_6842_478F);
        assert_eq!(word.finish(), 0x68B7_EC50_F224_1CA7);

        let mut bytes = StableHasher::default();
        bytes.write(b"a");
        assert_eq!(bytes.state, 0x7CAA_B021_F46F_21B8);
        assert_eq!(bytes.finish(), 0x6FB1_58B7_7044_205F);

        // A `str` is its bytes and a 0xff terminator.
        let mut text = StableHasher::default();
        "apple".hash(&mut text);
        assert_eq!(text.finish(), 0x034D_BED8_1240_BF26);
    }

    #[test]
    fn integers_hash_by_value_whatever_their_width() {
        let hash = |f: &dyn Fn(&mut StableHasher)| {
            let mut hasher = StableHasher::default();
            f(&mut hasher);
            hasher.finish()
        };
        let n = hash(&|h| h.write_u64(7));
        assert_eq!(hash(&|h| h.write_u8(7)), n);
        assert_eq!(hash(&|h| h.write_u32(7)), n);
        assert_eq!(hash(&|h| h.write_usize(7)), n);
        assert_eq!(hash(&|h| 7i64.hash(h)), n);
    }

    #[test]
    fn byte_strings_differ_by_length_and_content() {
        let hash = |bytes: &[u8]| {
            let mut hasher = StableHasher::default();
            hasher.write(bytes);
            hasher.finish()
        };
        let inputs: [&[u8]; 7] = [
            b"",
            b"a",
            b"a\0",
            b"b",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
        ];
        for (i, a) in inputs.iter().enumerate() {
            for b in &inputs[i + 1..] {
                assert_ne!(hash(a), hash(b), "{a:?} and {b:?}");
            }
        }
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
