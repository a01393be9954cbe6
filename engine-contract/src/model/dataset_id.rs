//! Dataset identifiers: an ed25519 public key, multicodec-tagged on the wire
//! (`ED 01` + 32 bytes), `did:odf:` + multibase as text.

use std::fmt;
use std::str::FromStr;

/// The unsigned-varint multicodec code of an ed25519 public key (0xed).
pub const ED25519_MULTICODEC: [u8; 2] = [0xED, 0x01];

const DID_PREFIX: &str = "did:odf:";

/// A dataset's identity: the ed25519 public key of its creator key pair.
///
/// ```
/// use engine_contract::model::{DatasetId, Multibase};
///
/// let id = DatasetId::from_public_key([7; 32]);
/// let text = id.to_string();
/// assert!(text.starts_with("did:odf:fed01"));
/// assert_eq!(text.parse::<DatasetId>().unwrap(), id);
///
/// let base58 = id.to_did_string(Multibase::Base58Btc);
/// assert!(base58.starts_with("did:odf:z"));
/// assert_eq!(base58.parse::<DatasetId>().unwrap(), id);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DatasetId {
    public_key: [u8; 32],
}

/// The multibase encodings [`DatasetId`] reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Multibase {
    /// `f`: lower-case hexadecimal (the form ODF tools print).
    Base16,
    /// `z`: Bitcoin's base58 alphabet.
    Base58Btc,
}

/// Why bytes or text are not a dataset id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatasetIdError {
    /// The binary form is not 34 bytes.
    #[error("dataset id must be 34 bytes (ED 01 + 32-byte key), got {len}")]
    WrongLength {
        /// Bytes received.
        len: usize,
    },
    /// The binary form does not start with the ed25519 multicodec.
    #[error("dataset id must start with the ed25519 multicodec ED 01, got {found:02X?}")]
    NotEd25519 {
        /// The first two bytes found.
        found: [u8; 2],
    },
    /// The text does not start with `did:odf:`.
    #[error("dataset id text must start with `did:odf:`, got {text:?}")]
    MissingDidPrefix {
        /// The rejected text.
        text: String,
    },
    /// The multibase prefix is not one this crate reads.
    #[error(
        "unsupported multibase prefix {prefix:?} (supported: `f` base16, `F` base16 upper, `z` base58btc)"
    )]
    UnsupportedMultibase {
        /// The prefix character, if there was one.
        prefix: Option<char>,
    },
    /// The multibase payload does not decode.
    #[error("dataset id is not valid {encoding}: {detail}")]
    InvalidEncoding {
        /// The multibase encoding that was tried.
        encoding: &'static str,
        /// What the decoder reported.
        detail: String,
    },
}

impl DatasetId {
    /// The id of a public key.
    pub const fn from_public_key(public_key: [u8; 32]) -> Self {
        Self { public_key }
    }

    /// The ed25519 public key.
    pub const fn public_key(&self) -> &[u8; 32] {
        &self.public_key
    }

    /// The binary (wire) form: `ED 01` + the key.
    pub fn to_bytes(&self) -> [u8; 34] {
        let mut bytes = [0u8; 34];
        bytes[..2].copy_from_slice(&ED25519_MULTICODEC);
        bytes[2..].copy_from_slice(&self.public_key);
        bytes
    }

    /// Parses the binary (wire) form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DatasetIdError> {
        let (codec, key) = bytes
            .split_at_checked(2)
            .ok_or(DatasetIdError::WrongLength { len: bytes.len() })?;
        if codec != ED25519_MULTICODEC {
            return Err(DatasetIdError::NotEd25519 {
                found: [codec[0], codec[1]],
            });
        }
        let public_key: [u8; 32] = key
            .try_into()
            .map_err(|_| DatasetIdError::WrongLength { len: bytes.len() })?;
        Ok(Self { public_key })
    }

    /// The text form in the given multibase encoding.
    pub fn to_did_string(&self, encoding: Multibase) -> String {
        let bytes = self.to_bytes();
        match encoding {
            Multibase::Base16 => {
                let mut text = String::with_capacity(DID_PREFIX.len() + 1 + 68);
                text.push_str(DID_PREFIX);
                text.push('f');
                for byte in bytes {
                    text.push(hex_digit(byte >> 4));
                    text.push(hex_digit(byte & 0x0F));
                }
                text
            }
            Multibase::Base58Btc => {
                format!("{DID_PREFIX}z{}", bs58::encode(bytes).into_string())
            }
        }
    }
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0x0F)])
}

fn decode_hex(text: &str) -> Result<Vec<u8>, DatasetIdError> {
    let invalid = |detail: String| DatasetIdError::InvalidEncoding {
        encoding: "base16",
        detail,
    };
    if !text.len().is_multiple_of(2) {
        return Err(invalid(format!("odd number of digits ({})", text.len())));
    }
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            let digit = |c: u8| {
                char::from(c)
                    .to_digit(16)
                    .ok_or_else(|| invalid(format!("{:?} is not a hex digit", char::from(c))))
            };
            Ok(u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).unwrap_or(u8::MAX))
        })
        .collect()
}

impl fmt::Display for DatasetId {
    /// `did:odf:` + base16 (`f` prefix).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_did_string(Multibase::Base16))
    }
}

impl fmt::Debug for DatasetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatasetId({self})")
    }
}

impl FromStr for DatasetId {
    type Err = DatasetIdError;

    /// Parses `did:odf:` + `f`/`F` (base16) or `z` (base58btc).
    fn from_str(text: &str) -> Result<Self, DatasetIdError> {
        let multibase =
            text.strip_prefix(DID_PREFIX)
                .ok_or_else(|| DatasetIdError::MissingDidPrefix {
                    text: text.to_owned(),
                })?;
        let mut chars = multibase.chars();
        let prefix = chars.next();
        let payload = chars.as_str();
        let bytes = match prefix {
            Some('f') | Some('F') => decode_hex(payload)?,
            Some('z') => bs58::decode(payload).into_vec().map_err(|error| {
                DatasetIdError::InvalidEncoding {
                    encoding: "base58btc",
                    detail: error.to_string(),
                }
            })?,
            _ => return Err(DatasetIdError::UnsupportedMultibase { prefix }),
        };
        Self::from_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_form_is_multicodec_then_key() {
        let id = DatasetId::from_public_key([0xAB; 32]);
        let bytes = id.to_bytes();
        assert_eq!(&bytes[..2], &[0xED, 0x01]);
        assert_eq!(DatasetId::from_bytes(&bytes), Ok(id));
    }

    #[test]
    fn wrong_length_and_codec_are_rejected() {
        assert_eq!(
            DatasetId::from_bytes(&[0xED]),
            Err(DatasetIdError::WrongLength { len: 1 })
        );
        assert_eq!(
            DatasetId::from_bytes(&[0xED, 0x01, 1, 2]),
            Err(DatasetIdError::WrongLength { len: 4 })
        );
        let mut bytes = [0u8; 34];
        bytes[0] = 0x12;
        bytes[1] = 0x20;
        assert_eq!(
            DatasetId::from_bytes(&bytes),
            Err(DatasetIdError::NotEd25519 {
                found: [0x12, 0x20]
            })
        );
    }

    #[test]
    fn base16_text_is_lower_case_hex_of_the_binary_form() {
        let id = DatasetId::from_public_key([0x0F; 32]);
        let expected = format!("did:odf:fed01{}", "0f".repeat(32));
        assert_eq!(id.to_string(), expected);
        assert_eq!(
            expected
                .to_uppercase()
                .replace("DID:ODF:", "did:odf:")
                .parse(),
            Ok(id)
        );
    }

    #[test]
    fn text_errors_are_specific() {
        assert!(matches!(
            "odf:fed01".parse::<DatasetId>(),
            Err(DatasetIdError::MissingDidPrefix { .. })
        ));
        assert_eq!(
            "did:odf:mAAAA".parse::<DatasetId>(),
            Err(DatasetIdError::UnsupportedMultibase { prefix: Some('m') })
        );
        assert_eq!(
            "did:odf:".parse::<DatasetId>(),
            Err(DatasetIdError::UnsupportedMultibase { prefix: None })
        );
        assert!(matches!(
            "did:odf:fxyz0".parse::<DatasetId>(),
            Err(DatasetIdError::InvalidEncoding {
                encoding: "base16",
                ..
            })
        ));
        assert!(matches!(
            "did:odf:z0OIl".parse::<DatasetId>(),
            Err(DatasetIdError::InvalidEncoding {
                encoding: "base58btc",
                ..
            })
        ));
    }
}
