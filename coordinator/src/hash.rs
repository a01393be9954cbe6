//! SHA3-256 multihashes: the content addresses of blocks, data slices and checkpoints.
//!
//! A [`Multihash`] is written on the wire as the multihash bytes (`0x16` = sha3-256, `0x20` = 32 bytes, then
//! the digest) and as text in multibase base16 (`f` + lower-case hex), e.g. `f1620ab...`, which is also the
//! name of the file that holds the content.

use std::fmt;
use std::str::FromStr;

use sha3::{Digest, Sha3_256};

/// Multicodec code of SHA3-256.
const SHA3_256_CODE: u8 = 0x16;
/// Digest length of SHA3-256 in bytes.
const SHA3_256_LEN: usize = 32;

/// A SHA3-256 multihash.
///
/// ```
/// use coordinator::hash::Multihash;
/// let h = Multihash::of(b"hello");
/// let text = h.to_string();
/// assert!(text.starts_with("f1620"));
/// assert_eq!(text.parse::<Multihash>().unwrap(), h);
/// assert_eq!(Multihash::from_bytes(&h.to_bytes()).unwrap(), h);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Multihash([u8; SHA3_256_LEN]);

/// Why some bytes or text are not a SHA3-256 multihash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultihashError {
    /// The multibase prefix is not `f` (base16).
    #[error("multihash text must start with `f` (multibase base16), got {text:?}")]
    UnsupportedMultibase {
        /// The text as given.
        text: String,
    },
    /// The text after the prefix is not hex.
    #[error("multihash text is not hex: {text:?}")]
    NotHex {
        /// The text as given.
        text: String,
    },
    /// The hash function code or length is not SHA3-256 / 32 bytes.
    #[error("not a sha3-256 multihash: code 0x{code:02x}, length {len}")]
    UnsupportedHash {
        /// The multicodec code found.
        code: u8,
        /// The declared or actual digest length.
        len: usize,
    },
}

impl Multihash {
    /// The SHA3-256 multihash of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha3_256::digest(bytes).into())
    }

    /// Wraps a finished SHA3-256 digest.
    pub fn from_digest(digest: [u8; SHA3_256_LEN]) -> Self {
        Self(digest)
    }

    /// The raw 32-byte digest.
    pub fn digest(&self) -> &[u8; SHA3_256_LEN] {
        &self.0
    }

    /// The multihash bytes: code, length, digest.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + SHA3_256_LEN);
        out.push(SHA3_256_CODE);
        out.push(SHA3_256_LEN as u8);
        out.extend_from_slice(&self.0);
        out
    }

    /// Parses multihash bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, MultihashError> {
        match bytes {
            [SHA3_256_CODE, len, digest @ ..]
                if *len as usize == SHA3_256_LEN && digest.len() == SHA3_256_LEN =>
            {
                let mut d = [0u8; SHA3_256_LEN];
                d.copy_from_slice(digest);
                Ok(Self(d))
            }
            [code, ..] => Err(MultihashError::UnsupportedHash {
                code: *code,
                len: bytes.len().saturating_sub(2),
            }),
            [] => Err(MultihashError::UnsupportedHash { code: 0, len: 0 }),
        }
    }

    /// A short form for humans: the last 8 hex digits.
    pub fn short(&self) -> String {
        let text = self.to_string();
        text[text.len() - 8..].to_string()
    }
}

impl fmt::Display for Multihash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("f")?;
        for b in self.to_bytes() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
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
        let hex = text
            .strip_prefix('f')
            .ok_or_else(|| MultihashError::UnsupportedMultibase {
                text: text.to_string(),
            })?;
        let bytes = decode_hex(hex).ok_or_else(|| MultihashError::NotHex {
            text: text.to_string(),
        })?;
        Self::from_bytes(&bytes)
    }
}

impl serde::Serialize for Multihash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Lower-case hex of `bytes`.
pub fn encode_hex(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Decodes hex (either case); `None` when the text is not an even number of hex digits.
pub fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha3_256_of_empty_input_matches_the_standard_digest() {
        let h = Multihash::of(b"");
        assert_eq!(
            encode_hex(h.digest()),
            "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
        );
    }

    #[test]
    fn text_form_round_trips_and_rejects_other_bases() {
        let h = Multihash::of(b"block");
        assert_eq!(h.to_string().parse::<Multihash>().unwrap(), h);
        assert!(matches!(
            "z123".parse::<Multihash>(),
            Err(MultihashError::UnsupportedMultibase { .. })
        ));
        assert!(matches!(
            "f12zz".parse::<Multihash>(),
            Err(MultihashError::NotHex { .. })
        ));
        assert!(matches!(
            "f1220aa".parse::<Multihash>(),
            Err(MultihashError::UnsupportedHash { code: 0x12, .. })
        ));
    }
}
