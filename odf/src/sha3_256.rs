//! SHA3-256, the one hash function behind every ODF hash: block hashes, physical hashes and (through
//! arrow-digest) the logical hash.
//!
//! On x86_64 and aarch64 it is `keccak-asm` (the CRYPTOGAMS/OpenSSL Keccak-f[1600] in assembly, the
//! SHA3 backend of the Reth Ethereum client): about 1.2x the rate of RustCrypto's portable `sha3` on the
//! 2-core machines Weir is benchmarked on (docs/benchmarks.md, `odf` section). Elsewhere it is
//! RustCrypto's `sha3`. Both are SHA3-256 as FIPS 202 defines it; `tests/sha3_backends.rs` checks them
//! against each other and against the reference's hashes in the vectors.
//!
//! With feature `arrow` the type also implements `digest` 0.11's traits, the release arrow-digest is
//! generic over, so `ArrayDigestV0<Sha3_256>` is ODF's logical hash.
//!
//! ```
//! let mut hasher = odf::Sha3_256::default();
//! hasher.update(b"hel");
//! hasher.update(b"lo");
//! assert_eq!(odf::Multihash::from_sha3_256_digest(hasher.finalize()), odf::Multihash::sha3_256(b"hello"));
//! ```

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use keccak_asm::{Digest as _, Sha3_256 as Backend};
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
use sha3::{Digest as _, Sha3_256 as Backend};

use crate::multihash::DIGEST_LEN;

/// An incremental SHA3-256.
#[derive(Clone, Default)]
pub struct Sha3_256(Backend);

impl std::fmt::Debug for Sha3_256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sha3_256").finish_non_exhaustive()
    }
}

impl Sha3_256 {
    /// The implementation in use: `"keccak-asm"` or `"sha3"` (RustCrypto).
    pub const BACKEND: &'static str = if cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
    {
        "keccak-asm"
    } else {
        "sha3"
    };

    /// Hashes more bytes.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest of every byte seen.
    pub fn finalize(self) -> [u8; DIGEST_LEN] {
        self.0.finalize().into()
    }

    /// The digest of `bytes`.
    pub fn digest(bytes: &[u8]) -> [u8; DIGEST_LEN] {
        let mut hasher = Self::default();
        hasher.update(bytes);
        hasher.finalize()
    }
}

/// `digest` 0.11's traits, for arrow-digest's generic digests. `Digest` itself comes from its blanket
/// implementation over these.
#[cfg(feature = "arrow")]
mod for_arrow_digest {
    use digest_for_arrow_digest::consts::U32;
    use digest_for_arrow_digest::{FixedOutput, HashMarker, Output, OutputSizeUser, Update};

    use super::Sha3_256;

    impl HashMarker for Sha3_256 {}

    impl OutputSizeUser for Sha3_256 {
        type OutputSize = U32;
    }

    impl Update for Sha3_256 {
        #[inline]
        fn update(&mut self, data: &[u8]) {
            Sha3_256::update(self, data);
        }
    }

    impl FixedOutput for Sha3_256 {
        fn finalize_into(self, out: &mut Output<Self>) {
            out.copy_from_slice(&self.finalize());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        // FIPS 202 example values.
        let hex = |d: [u8; 32]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(
            hex(Sha3_256::digest(b"")),
            "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
        );
        assert_eq!(
            hex(Sha3_256::digest(b"abc")),
            "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532"
        );
    }
}
