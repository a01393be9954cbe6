//! Dataset ids: `did:odf:` + multibase base16 of the multicodec-prefixed Ed25519 public key.

use std::fmt;
use std::str::FromStr;

use crate::Multicodec;
use crate::multibase::{self, Base16Error};

/// The DID method prefix of ODF dataset ids.
pub const DID_ODF_PREFIX: &str = "did:odf:";

/// The length of the key.
pub const KEY_LEN: usize = 32;

/// The multicodec prefix of the key: the varint of `ed25519-pub` (0xed).
const ED25519_PUB_PREFIX: [u8; 2] = [0xed, 0x01];

/// The multibase prefix of base58btc.
const BASE58BTC_PREFIX: char = 'z';

/// A dataset's identity: an Ed25519 public key, stored as `ed 01` + 32 key bytes and printed as
/// `did:odf:fed01…`.
///
/// ```
/// use weir_odf::DatasetId;
/// let id = DatasetId::from_key([7; 32]);
/// let text = id.to_string();
/// assert!(text.starts_with("did:odf:fed01"));
/// assert_eq!(text.parse::<DatasetId>()?, id);
/// assert_eq!(DatasetId::from_bytes(&id.to_bytes())?, id);
/// // The older base58btc text form (`did:odf:z…`) still parses:
/// let base58 = id.to_base58_did();
/// assert!(base58.starts_with("did:odf:z"));
/// assert_eq!(base58.parse::<DatasetId>()?, id);
/// # Ok::<(), weir_odf::DatasetIdError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DatasetId {
    key: [u8; KEY_LEN],
}

/// Why bytes or text are not a dataset id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetIdError {
    /// The bytes do not start with the `ed25519-pub` multicodec (`ed 01`).
    #[error("dataset id is not an ed25519 public key (it must start with `ed 01`)")]
    NotEd25519,
    /// The key is not 32 bytes.
    #[error("dataset id is {len} bytes, expected 34 (`ed 01` + a 32-byte key)")]
    WrongLength {
        /// The length of the whole id in bytes.
        len: usize,
    },
    /// The text does not start with `did:odf:`.
    #[error("dataset id text must start with `did:odf:`: {text:?}")]
    NotDidOdf {
        /// The text as given.
        text: String,
    },
    /// The text after `did:odf:` is neither `f` + lower-case hex nor `z` + base58btc.
    #[error(
        "dataset id text is not multibase base16 (`f` + lower-case hex) or base58btc (`z` + base58): {text:?}"
    )]
    NotBase16 {
        /// The text as given.
        text: String,
    },
}

impl DatasetId {
    /// The id of a 32-byte Ed25519 public key.
    pub const fn from_key(key: [u8; KEY_LEN]) -> Self {
        Self { key }
    }

    /// The 32 key bytes.
    pub fn key(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// The bytes a Seed stores: `ed 01` + the 32 key bytes.
    pub fn to_bytes(&self) -> [u8; 2 + KEY_LEN] {
        let mut out = [0u8; 2 + KEY_LEN];
        out[..2].copy_from_slice(&ED25519_PUB_PREFIX);
        out[2..].copy_from_slice(&self.key);
        out
    }

    /// The older text form, `did:odf:z` + base58btc of [`to_bytes`](Self::to_bytes). [`Display`](fmt::Display)
    /// writes the canonical base16 form; parsing accepts both.
    pub fn to_base58_did(&self) -> String {
        format!(
            "{DID_ODF_PREFIX}{BASE58BTC_PREFIX}{}",
            bs58::encode(self.to_bytes()).into_string()
        )
    }

    /// Parses the stored bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DatasetIdError> {
        debug_assert_eq!(Multicodec::Ed25519Pub.code(), 0xed);
        let key = bytes
            .strip_prefix(&ED25519_PUB_PREFIX)
            .ok_or(DatasetIdError::NotEd25519)?;
        let key = key
            .try_into()
            .map_err(|_| DatasetIdError::WrongLength { len: bytes.len() })?;
        Ok(Self { key })
    }
}

impl fmt::Display for DatasetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DID_ODF_PREFIX)?;
        multibase::write_base16(&self.to_bytes(), f)
    }
}

impl fmt::Debug for DatasetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatasetId({self})")
    }
}

impl FromStr for DatasetId {
    type Err = DatasetIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let multibase = text
            .strip_prefix(DID_ODF_PREFIX)
            .ok_or_else(|| DatasetIdError::NotDidOdf { text: text.into() })?;
        let not_multibase = || DatasetIdError::NotBase16 { text: text.into() };
        let bytes = match multibase.strip_prefix(BASE58BTC_PREFIX) {
            // The form dataset ids had before ODF settled on base16; kamu still reads it.
            Some(base58) => bs58::decode(base58)
                .into_vec()
                .map_err(|_| not_multibase())?,
            None => multibase::read_base16(multibase).map_err(|e| match e {
                Base16Error::NotBase16 | Base16Error::NotHex => not_multibase(),
            })?,
        };
        Self::from_bytes(&bytes)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for DatasetId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for DatasetId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_three_byte_id_is_the_wrong_length() {
        assert_eq!(
            DatasetId::from_bytes(&[0xed, 0x01, 0x00]),
            Err(DatasetIdError::WrongLength { len: 3 })
        );
        assert_eq!(
            DatasetId::from_bytes(&[0x16, 0x20]),
            Err(DatasetIdError::NotEd25519)
        );
        assert!(matches!(
            "did:key:fed01".parse::<DatasetId>(),
            Err(DatasetIdError::NotDidOdf { .. })
        ));
        assert!(matches!(
            "did:odf:xed01".parse::<DatasetId>(),
            Err(DatasetIdError::NotBase16 { .. })
        ));
        assert!(matches!(
            "did:odf:z0OIl".parse::<DatasetId>(),
            Err(DatasetIdError::NotBase16 { .. })
        ));
    }
}
