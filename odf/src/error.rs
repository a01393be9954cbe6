//! The crate's error: why bytes are not an ODF metadata block this crate reads.

use crate::{DatasetIdError, MultihashError, TimestampError};

/// Why bytes do not decode into a [`MetadataBlock`](crate::MetadataBlock). Decoding never panics: every
/// malformed input ends in one of these.
///
/// Fields are named `Table.field` as in the ODF schema (`Seed.dataset_id`, `MetadataBlock.system_time`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The FlatBuffers verifier rejected the bytes (truncated, garbage, offsets out of bounds, ...).
    #[error("{buffer} is not a valid FlatBuffers buffer: {source}")]
    InvalidFlatbuffer {
        /// Which buffer: `manifest` (the block file) or `metadata block` (the manifest's content).
        buffer: &'static str,
        /// What the verifier found.
        #[source]
        source: flatbuffers::InvalidFlatbuffer,
    },
    /// The manifest holds something other than a metadata block.
    #[error("manifest kind 0x{kind:x} is not an ODF metadata block (0x400000)")]
    NotAMetadataBlock {
        /// The manifest's `kind`.
        kind: i64,
    },
    /// The manifest version is not one this crate reads.
    #[error("metadata block manifest version {version} is not supported (versions 2 and 3 are)")]
    UnsupportedManifestVersion {
        /// The manifest's `version`.
        version: i32,
    },
    /// A field the ODF spec requires is absent.
    #[error("required field `{field}` is missing")]
    MissingField {
        /// `Table.field`.
        field: &'static str,
    },
    /// An enum field holds a value the schema does not define.
    #[error("field `{field}` has unknown enum value {value}")]
    UnknownEnumValue {
        /// `Table.field`.
        field: &'static str,
        /// The value found.
        value: i64,
    },
    /// A union field holds a type tag the schema does not define (or `NONE` where a value is required).
    #[error("field `{field}` has unknown union type {tag}")]
    UnknownUnionType {
        /// `Table.field`.
        field: &'static str,
        /// The tag found.
        tag: u8,
    },
    /// A hash field does not hold a multihash this crate reads.
    #[error("field `{field}` is not a valid multihash: {source}")]
    InvalidMultihash {
        /// `Table.field`.
        field: &'static str,
        /// What is wrong with it.
        #[source]
        source: MultihashError,
    },
    /// A dataset id field does not hold `ed 01` + 32 bytes.
    #[error("field `{field}` is not a valid dataset id: {source}")]
    InvalidDatasetId {
        /// `Table.field`.
        field: &'static str,
        /// What is wrong with it.
        #[source]
        source: DatasetIdError,
    },
    /// A timestamp field is not a valid UTC date and time.
    #[error("field `{field}` is not a valid timestamp: {source}")]
    InvalidTimestamp {
        /// `Table.field`.
        field: &'static str,
        /// What is wrong with it.
        #[source]
        source: TimestampError,
    },
}
