//! Multihashes: the content addresses of blocks, data files and checkpoints, and the logical hash of data.
//!
//! Bytes: varint code, varint digest length (32), digest. Text: multibase base16, `f` + lower-case hex, so a
//! SHA3-256 multihash prints as `f1620…` and a logical hash as `f9680c00120…`.

use std::fmt;
use std::str::FromStr;

use crate::Multicodec;
use crate::multibase::{self, Base16Error};
use crate::varint::{self, VarintError};

/// The digest length of every hash ODF uses (SHA3-256).
pub const DIGEST_LEN: usize = 32;

/// A multihash: a hash [`Multicodec`] and a 32-byte digest.
///
/// ```
/// use weir_odf::{Multicodec, Multihash};
/// let h = Multihash::sha3_256(b"hello");
/// assert_eq!(h.codec(), Multicodec::Sha3_256);
/// let text = h.to_string();
/// assert!(text.starts_with("f1620"));
/// assert_eq!(text.parse::<Multihash>()?, h);
/// assert_eq!(Multihash::from_bytes(&h.to_bytes())?, h);
/// # Ok::<(), weir_odf::MultihashError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Multihash {
    codec: Multicodec,
    digest: [u8; DIGEST_LEN],
}

/// Why bytes or text are not a multihash this crate reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MultihashError {
    /// The bytes end before the code, the length or the digest is complete.
    #[error("multihash is truncated ({len} bytes)")]
    Truncated {
        /// How many bytes there were.
        len: usize,
    },
    /// The code or length varint is longer than 9 bytes or not minimal.
    #[error("multihash has a malformed varint")]
    InvalidVarint,
    /// The code is not a hash function this crate knows (`sha3-256`, `arrow0-sha3-256`).
    #[error("multihash code 0x{code:x} is not a supported hash function")]
    UnsupportedCodec {
        /// The code found.
        code: u64,
    },
    /// The declared digest length is not 32.
    #[error("multihash digest length is {len}, expected 32")]
    UnsupportedDigestLength {
        /// The declared length.
        len: u64,
    },
    /// Bytes follow the digest.
    #[error("multihash has {extra} bytes after the digest")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// The text does not start with `f` (multibase base16).
    #[error("multihash text must start with `f` (multibase base16): {text:?}")]
    NotBase16 {
        /// The text as given.
        text: String,
    },
    /// The text after `f` is not lower-case hex.
    #[error("multihash text is not lower-case hex: {text:?}")]
    NotHex {
        /// The text as given.
        text: String,
    },
}

impl Multihash {
    /// A multihash from its parts. Fails if `codec` is not a hash function.
    pub fn new(codec: Multicodec, digest: [u8; DIGEST_LEN]) -> Result<Self, MultihashError> {
        if codec.is_hash() {
            Ok(Self { codec, digest })
        } else {
            Err(MultihashError::UnsupportedCodec { code: codec.code() })
        }
    }

    /// The SHA3-256 multihash of `bytes`: a block hash (over the block file) or a physical hash.
    pub fn sha3_256(bytes: &[u8]) -> Self {
        let mut hasher = Sha3Hasher::new();
        hasher.update(bytes);
        hasher.finish()
    }

    /// Wraps a finished SHA3-256 digest.
    pub fn from_sha3_256_digest(digest: [u8; DIGEST_LEN]) -> Self {
        Self {
            codec: Multicodec::Sha3_256,
            digest,
        }
    }

    /// The hash function.
    pub fn codec(&self) -> Multicodec {
        self.codec
    }

    /// The raw digest.
    pub fn digest(&self) -> &[u8; DIGEST_LEN] {
        &self.digest
    }

    /// The multihash bytes: varint code, varint length, digest.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(6 + DIGEST_LEN);
        varint::write(self.codec.code(), &mut out);
        varint::write(DIGEST_LEN as u64, &mut out);
        out.extend_from_slice(&self.digest);
        out
    }

    /// Parses multihash bytes; all of `bytes` must be the multihash.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, MultihashError> {
        let varint_error = |e| match e {
            VarintError::Truncated => MultihashError::Truncated { len: bytes.len() },
            VarintError::Invalid => MultihashError::InvalidVarint,
        };
        let (code, rest) = varint::read(bytes).map_err(varint_error)?;
        let codec = Multicodec::from_code(code)
            .filter(|c| c.is_hash())
            .ok_or(MultihashError::UnsupportedCodec { code })?;
        let (len, rest) = varint::read(rest).map_err(varint_error)?;
        if len != DIGEST_LEN as u64 {
            return Err(MultihashError::UnsupportedDigestLength { len });
        }
        if rest.len() < DIGEST_LEN {
            return Err(MultihashError::Truncated { len: bytes.len() });
        }
        let (digest, trailing) = rest.split_at(DIGEST_LEN);
        if !trailing.is_empty() {
            return Err(MultihashError::TrailingBytes {
                extra: trailing.len(),
            });
        }
        let mut d = [0u8; DIGEST_LEN];
        d.copy_from_slice(digest);
        Ok(Self { codec, digest: d })
    }
}

impl fmt::Display for Multihash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        multibase::write_base16(&self.to_bytes(), f)
    }
}

impl fmt::Debug for Multihash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Multihash({self})")
    }
}

impl FromStr for Multihash {
    type Err = MultihashError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bytes = multibase::read_base16(text).map_err(|e| match e {
            Base16Error::NotBase16 => MultihashError::NotBase16 { text: text.into() },
            Base16Error::NotHex => MultihashError::NotHex { text: text.into() },
        })?;
        Self::from_bytes(&bytes)
    }
}

/// A streaming SHA3-256 hasher that finishes into a [`Multihash`], for files too big to hold in memory:
/// the one SHA3-256 behind every ODF hash (block hashes, physical hashes and, through arrow-digest, the
/// logical hash). It is also an [`std::io::Write`], so `std::io::copy(&mut file, &mut hasher)` hashes a
/// file, and with feature `arrow` it implements `digest` 0.11's traits, the release arrow-digest is generic
/// over.
///
/// On x86_64 and aarch64 it is `keccak-asm` (the CRYPTOGAMS/OpenSSL Keccak-f\[1600\] in assembly, Reth's
/// SHA3 backend): about 1.2x the rate of RustCrypto's portable `sha3` on the machines Weir is measured on
/// (docs/benchmarks.md). Elsewhere it is RustCrypto's `sha3`. `tests/sha3_backends.rs` holds the two to
/// each other, `tests/vectors.rs` to the reference's hashes.
///
/// ```
/// use weir_odf::{Multihash, Sha3Hasher};
/// let mut hasher = Sha3Hasher::new();
/// hasher.update(b"hel");
/// hasher.update(b"lo");
/// assert_eq!(hasher.finish(), Multihash::sha3_256(b"hello"));
/// ```
#[derive(Clone, Default)]
pub struct Sha3Hasher(backend::Sha3_256);

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod backend {
    pub(super) use keccak_asm::{Digest, Sha3_256};
    pub(super) const NAME: &str = "keccak-asm";
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod backend {
    pub(super) use sha3::{Digest, Sha3_256};
    pub(super) const NAME: &str = "sha3";
}

impl fmt::Debug for Sha3Hasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sha3Hasher")
            .field("backend", &Self::BACKEND)
            .finish_non_exhaustive()
    }
}

impl Sha3Hasher {
    /// The SHA3-256 implementation in use: `"keccak-asm"` or `"sha3"` (RustCrypto).
    pub const BACKEND: &'static str = backend::NAME;

    /// A hasher that has seen no bytes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hashes more bytes.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        backend::Digest::update(&mut self.0, bytes);
    }

    /// The SHA3-256 multihash of every byte seen.
    pub fn finish(self) -> Multihash {
        Multihash::from_sha3_256_digest(self.digest())
    }

    /// The raw digest of every byte seen.
    fn digest(self) -> [u8; DIGEST_LEN] {
        backend::Digest::finalize(self.0).into()
    }
}

impl std::io::Write for Sha3Hasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `digest` 0.11's traits, for arrow-digest's generic digests (`Digest` comes from its blanket
/// implementation over these): `ArrayDigestV0<Sha3Hasher>` is ODF's logical hash.
#[cfg(feature = "arrow")]
mod for_arrow_digest {
    use digest_for_arrow_digest::consts::U32;
    use digest_for_arrow_digest::{FixedOutput, HashMarker, Output, OutputSizeUser, Update};

    use super::Sha3Hasher;

    impl HashMarker for Sha3Hasher {}

    impl OutputSizeUser for Sha3Hasher {
        type OutputSize = U32;
    }

    impl Update for Sha3Hasher {
        #[inline]
        fn update(&mut self, data: &[u8]) {
            Sha3Hasher::update(self, data);
        }
    }

    impl FixedOutput for Sha3Hasher {
        fn finalize_into(self, out: &mut Output<Self>) {
            out.copy_from_slice(&self.digest());
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Multihash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Multihash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha3_256_of_nothing_prints_as_its_known_digest() {
        assert_eq!(
            Multihash::sha3_256(b"").to_string(),
            "f1620a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
        );
    }

    #[test]
    fn logical_hash_codec_is_a_four_byte_varint() {
        let h = Multihash::new(Multicodec::Arrow0_Sha3_256, [0; 32]).expect("a hash codec");
        assert!(h.to_string().starts_with("f9680c00120"));
        assert_eq!(h.to_bytes().len(), 4 + 1 + 32);
    }

    #[test]
    fn malformed_multihashes_say_what_is_wrong() {
        let good = Multihash::sha3_256(b"x").to_bytes();
        assert_eq!(
            Multihash::from_bytes(&good[..10]),
            Err(MultihashError::Truncated { len: 10 })
        );
        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            Multihash::from_bytes(&long),
            Err(MultihashError::TrailingBytes { extra: 1 })
        );
        assert_eq!(
            Multihash::from_bytes(&[0xed, 0x01, 0x20]),
            Err(MultihashError::UnsupportedCodec { code: 0xed })
        );
        assert_eq!(
            Multihash::from_bytes(&[0x16, 0x10]),
            Err(MultihashError::UnsupportedDigestLength { len: 16 })
        );
        assert!(matches!(
            "F1620".parse::<Multihash>(),
            Err(MultihashError::NotBase16 { .. })
        ));
        assert!(matches!(
            "f16zz".parse::<Multihash>(),
            Err(MultihashError::NotHex { .. })
        ));
        assert!(Multihash::new(Multicodec::Ed25519Pub, [0; 32]).is_err());
    }
}
