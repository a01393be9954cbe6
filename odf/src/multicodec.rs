//! The multicodec codes ODF uses: hash functions, the metadata block resource kind, the dataset key type.

use std::fmt;

/// A multicodec code known to ODF (<https://github.com/multiformats/multicodec>).
///
/// ```
/// use weir_odf::Multicodec;
/// assert_eq!(Multicodec::from_code(0x16), Some(Multicodec::Sha3_256));
/// assert_eq!(Multicodec::OdfMetadataBlock.code(), 0x40_0000);
/// assert_eq!(Multicodec::Arrow0_Sha3_256.to_string(), "arrow0-sha3-256");
/// ```
#[allow(non_camel_case_types)] // the multicodec table's own names, as kamu spells them
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Multicodec {
    /// SHA3-256 (`sha3-256`, 0x16): block hashes and physical hashes of files.
    Sha3_256,
    /// arrow-digest's `RecordDigestV0` with SHA3-256 (`arrow0-sha3-256`, 0x300016): logical hashes of data.
    Arrow0_Sha3_256,
    /// An ODF metadata block (`odf-metadata-block`, 0x400000): the `kind` of a block's manifest.
    OdfMetadataBlock,
    /// An Ed25519 public key (`ed25519-pub`, 0xed): the key type of dataset ids.
    Ed25519Pub,
}

impl Multicodec {
    /// Every code this crate knows.
    pub const ALL: [Multicodec; 4] = [
        Multicodec::Sha3_256,
        Multicodec::Arrow0_Sha3_256,
        Multicodec::OdfMetadataBlock,
        Multicodec::Ed25519Pub,
    ];

    /// The numeric code.
    pub const fn code(self) -> u64 {
        match self {
            Multicodec::Sha3_256 => 0x16,
            Multicodec::Arrow0_Sha3_256 => 0x30_0016,
            Multicodec::OdfMetadataBlock => 0x40_0000,
            Multicodec::Ed25519Pub => 0xed,
        }
    }

    /// The codec of a numeric code, if this crate knows it.
    pub fn from_code(code: u64) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }

    /// The name in the multicodec table.
    pub const fn name(self) -> &'static str {
        match self {
            Multicodec::Sha3_256 => "sha3-256",
            Multicodec::Arrow0_Sha3_256 => "arrow0-sha3-256",
            Multicodec::OdfMetadataBlock => "odf-metadata-block",
            Multicodec::Ed25519Pub => "ed25519-pub",
        }
    }

    /// Whether the code names a hash function (so it can head a [`Multihash`](crate::Multihash)).
    pub const fn is_hash(self) -> bool {
        matches!(self, Multicodec::Sha3_256 | Multicodec::Arrow0_Sha3_256)
    }
}

impl fmt::Display for Multicodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
