//! Decoding untrusted bytes: the verifier, [`DecodeError`], and helpers the
//! model's `from_fb` functions share.

use chrono::{DateTime, Utc};
use flatbuffers::{Follow, ForwardsUOffset, Vector, Verifiable, VerifierOptions};

use super::timestamp::{TimestampError, WireTimestamp};
use crate::generated as fb;
use weir_odf::{DatasetId, DatasetIdError};

/// Why bytes are not a valid message of the expected root.
///
/// Decoding never panics: the FlatBuffers verifier runs first, then every
/// field the model needs is checked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes fail the FlatBuffers verifier (out-of-bounds offsets,
    /// misaligned data, invalid UTF-8, too deep, ...).
    #[error("not a valid {root} FlatBuffer: {source}")]
    InvalidFlatbuffer {
        /// The expected root table.
        root: &'static str,
        /// What the verifier found.
        source: flatbuffers::InvalidFlatbuffer,
    },
    /// A field the protocol requires is absent.
    #[error("{table}.{field} is required but absent")]
    MissingField {
        /// Table name.
        table: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// A union holds a type tag this version does not know (or NONE where a
    /// value is required).
    #[error("{table}.{field} has union tag {tag}, which is not one of {known}")]
    UnknownUnionTag {
        /// Table name.
        table: &'static str,
        /// Union field name.
        field: &'static str,
        /// The tag found.
        tag: u8,
        /// The tags this version accepts.
        known: &'static str,
    },
    /// A dataset id field is not an ed25519 multicodec key.
    #[error("{table}.{field}: {source}")]
    InvalidDatasetId {
        /// Table name.
        table: &'static str,
        /// Field name.
        field: &'static str,
        /// What is wrong with it.
        source: DatasetIdError,
    },
    /// A timestamp names no instant.
    #[error("{table}.{field}: {source}")]
    InvalidTimestamp {
        /// Table name.
        table: &'static str,
        /// Field name.
        field: &'static str,
        /// The rejected value.
        source: TimestampError,
    },
    /// An offset interval with `start > end`.
    #[error("{table}: offset interval [{start}, {end}] has start after end")]
    InvalidOffsetInterval {
        /// The table holding the interval.
        table: &'static str,
        /// Start found.
        start: u64,
        /// End found.
        end: u64,
    },
}

/// A root message: a typed value with a FlatBuffers byte form.
///
/// Implemented by every request and response root of the protocol.
///
/// ```
/// use weir_engine_contract::model::{RawQueryResponse, RawQuerySuccess, WireMessage};
///
/// let response = RawQueryResponse::Success(RawQuerySuccess { num_records: 3 });
/// let bytes = response.encode();
/// assert_eq!(RawQueryResponse::decode(&bytes).unwrap(), response);
/// assert!(RawQueryResponse::decode(b"garbage").is_err());
/// ```
pub trait WireMessage: Sized {
    /// Name of the FlatBuffers root table.
    const ROOT: &'static str;

    /// The FlatBuffers bytes (no size prefix, no file identifier).
    fn encode(&self) -> Vec<u8>;

    /// Verifies and decodes untrusted bytes.
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>;
}

/// Runs the verifier and returns the root table.
pub(crate) fn verified_root<'a, T>(
    root: &'static str,
    bytes: &'a [u8],
) -> Result<T::Inner, DecodeError>
where
    T: Follow<'a> + Verifiable + 'a,
{
    let options = VerifierOptions {
        // The protocol's deepest path is well under 16 tables.
        max_depth: 32,
        ..VerifierOptions::default()
    };
    flatbuffers::root_with_opts::<T>(&options, bytes)
        .map_err(|source| DecodeError::InvalidFlatbuffer { root, source })
}

pub(crate) fn required<T>(
    value: Option<T>,
    table: &'static str,
    field: &'static str,
) -> Result<T, DecodeError> {
    value.ok_or(DecodeError::MissingField { table, field })
}

pub(crate) fn required_string(
    value: Option<&str>,
    table: &'static str,
    field: &'static str,
) -> Result<String, DecodeError> {
    required(value, table, field).map(str::to_owned)
}

pub(crate) fn optional_string(value: Option<&str>) -> Option<String> {
    value.map(str::to_owned)
}

/// An absent vector of strings reads as empty.
pub(crate) fn strings(value: Option<Vector<'_, ForwardsUOffset<&str>>>) -> Vec<String> {
    value
        .map(|v| v.iter().map(str::to_owned).collect())
        .unwrap_or_default()
}

pub(crate) fn timestamp(
    value: &fb::Timestamp,
    table: &'static str,
    field: &'static str,
) -> Result<DateTime<Utc>, DecodeError> {
    WireTimestamp::from_fb(value)
        .to_utc()
        .map_err(|source| DecodeError::InvalidTimestamp {
            table,
            field,
            source,
        })
}

pub(crate) fn optional_timestamp(
    value: Option<&fb::Timestamp>,
    table: &'static str,
    field: &'static str,
) -> Result<Option<DateTime<Utc>>, DecodeError> {
    value.map(|v| timestamp(v, table, field)).transpose()
}

pub(crate) fn dataset_id(
    value: Option<Vector<'_, u8>>,
    table: &'static str,
    field: &'static str,
) -> Result<DatasetId, DecodeError> {
    let bytes = required(value, table, field)?;
    DatasetId::from_bytes(bytes.bytes()).map_err(|source| DecodeError::InvalidDatasetId {
        table,
        field,
        source,
    })
}

/// Decodes each element of an optional vector of tables; absent reads as
/// empty.
pub(crate) fn tables<'a, T, U>(
    value: Option<Vector<'a, ForwardsUOffset<T>>>,
    decode: impl Fn(T::Inner) -> Result<U, DecodeError>,
) -> Result<Vec<U>, DecodeError>
where
    T: Follow<'a> + 'a,
{
    value
        .map(|v| v.iter().map(decode).collect())
        .unwrap_or_else(|| Ok(Vec::new()))
}

pub(crate) fn unknown_union_tag(
    table: &'static str,
    field: &'static str,
    tag: u8,
    known: &'static str,
) -> DecodeError {
    DecodeError::UnknownUnionTag {
        table,
        field,
        tag,
        known,
    }
}
