//! The crate's SHA3-256 (`weir_odf::Sha3Hasher`: CRYPTOGAMS assembly on x86_64 and aarch64) gives RustCrypto's
//! portable SHA3-256 for any bytes fed in any pieces: every hash ODF stores goes through it.

use proptest::prelude::*;
use sha3::Digest as _;

/// The crate's digest of `bytes`, in one update.
fn digest(bytes: &[u8]) -> [u8; 32] {
    let mut hasher = weir_odf::Sha3Hasher::new();
    hasher.update(bytes);
    *hasher.finish().digest()
}

fn portable(bytes: &[u8]) -> [u8; 32] {
    sha3::Sha3_256::digest(bytes).into()
}

#[test]
fn every_length_around_the_rate_matches() {
    // SHA3-256 absorbs 136-byte blocks: lengths on and around one, two and three blocks.
    let bytes: Vec<u8> = (0..1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    for len in 0..=bytes.len() {
        assert_eq!(
            digest(&bytes[..len]),
            portable(&bytes[..len]),
            "{len} bytes"
        );
    }
}

#[test]
fn a_large_input_matches() {
    let bytes: Vec<u8> = (0..(8u32 << 20))
        .map(|i| (i.wrapping_mul(40_503) >> 7) as u8)
        .collect();
    assert_eq!(digest(&bytes), portable(&bytes));
    assert_eq!(
        weir_odf::Multihash::sha3_256(&bytes),
        weir_odf::Multihash::from_sha3_256_digest(portable(&bytes))
    );
}

proptest! {
    #[test]
    fn any_split_into_updates_matches(bytes in proptest::collection::vec(any::<u8>(), 0..2048),
                                      cuts in proptest::collection::vec(0usize..2048, 0..12)) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
        cuts.sort_unstable();
        let mut hasher = weir_odf::Sha3Hasher::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            hasher.update(&bytes[from..cut]);
            from = cut;
        }
        prop_assert_eq!(*hasher.finish().digest(), portable(&bytes));
    }
}
