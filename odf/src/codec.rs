//! What every type's FlatBuffers encoding and decoding shares.
//!
//! Each type of the model encodes and decodes itself in its own module (`encode` / `decode`, crate-private),
//! through the generated builders and accessors of [`crate::generated`]. The rules that make the bytes
//! kamu's, for every table:
//!
//! 1. create the table's variable-size children (strings, vectors, nested tables, union values) first, in
//!    schema field order, each depth-first;
//! 2. then start the table with the generated `…Builder::new` and add its fields in schema order with the
//!    generated `add_*` (which omits a scalar equal to its default and writes an `= null` scalar when it is
//!    `Some`); a `None` string, vector or table is not written.
//!
//! Decoding reads only buffers the verifier accepted ([`crate::manifest`]), and turns every absent required
//! field, unknown enum value and unknown union tag into an [`Error`].

use flatbuffers::{FlatBufferBuilder, ForwardsUOffset, Vector, WIPOffset};

use crate::{DatasetId, Error, Multihash};

/// The builder every encoder writes into.
pub(crate) type Builder<'b> = FlatBufferBuilder<'b>;

/// A vector of strings being built.
pub(crate) type StringsOffset<'b> = WIPOffset<Vector<'b, ForwardsUOffset<&'b str>>>;

/// A verified vector of strings.
pub(crate) type Strings<'a> = Vector<'a, ForwardsUOffset<&'a str>>;

/// Creates each string in order, then the vector of them.
pub(crate) fn encode_strings<'b>(fbb: &mut Builder<'b>, items: &[String]) -> StringsOffset<'b> {
    let offsets: Vec<_> = items.iter().map(|s| fbb.create_string(s)).collect();
    fbb.create_vector(&offsets)
}

/// Creates the string if there is one.
pub(crate) fn encode_opt_str<'b>(
    fbb: &mut Builder<'b>,
    value: Option<&String>,
) -> Option<WIPOffset<&'b str>> {
    value.map(|s| fbb.create_string(s))
}

/// Creates a byte vector.
pub(crate) fn encode_bytes<'b>(fbb: &mut Builder<'b>, bytes: &[u8]) -> WIPOffset<Vector<'b, u8>> {
    fbb.create_vector(bytes)
}

/// The owned strings of a verified string vector.
pub(crate) fn decode_strings(v: Strings<'_>) -> Vec<String> {
    v.iter().map(str::to_owned).collect()
}

/// A required field's value, or [`Error::MissingField`].
pub(crate) fn required<T>(value: Option<T>, field: &'static str) -> Result<T, Error> {
    value.ok_or(Error::MissingField { field })
}

/// A multihash field's value.
pub(crate) fn decode_multihash(
    bytes: Vector<'_, u8>,
    field: &'static str,
) -> Result<Multihash, Error> {
    Multihash::from_bytes(bytes.bytes()).map_err(|source| Error::InvalidMultihash { field, source })
}

/// An optional multihash field's value.
pub(crate) fn decode_opt_multihash(
    bytes: Option<Vector<'_, u8>>,
    field: &'static str,
) -> Result<Option<Multihash>, Error> {
    bytes.map(|b| decode_multihash(b, field)).transpose()
}

/// A dataset id field's value.
pub(crate) fn decode_dataset_id(
    bytes: Vector<'_, u8>,
    field: &'static str,
) -> Result<DatasetId, Error> {
    DatasetId::from_bytes(bytes.bytes()).map_err(|source| Error::InvalidDatasetId { field, source })
}

/// A timestamp field's value.
pub(crate) fn decode_timestamp(
    ts: &crate::generated::Timestamp,
    field: &'static str,
) -> Result<chrono::DateTime<chrono::Utc>, Error> {
    crate::timestamp::from_flatbuffers(ts)
        .map_err(|source| Error::InvalidTimestamp { field, source })
}

/// Each element of a verified vector of tables, decoded.
pub(crate) fn decode_each<'a, T: flatbuffers::Follow<'a> + 'a, U>(
    v: Vector<'a, ForwardsUOffset<T>>,
    decode: impl Fn(T::Inner) -> Result<U, Error>,
) -> Result<Vec<U>, Error> {
    v.iter().map(decode).collect()
}

/// Encodes each element (depth-first, in order), then the vector of their offsets.
pub(crate) fn encode_each<'b, T, U: 'b>(
    fbb: &mut Builder<'b>,
    items: &[T],
    encode: impl Fn(&T, &mut Builder<'b>) -> WIPOffset<U>,
) -> WIPOffset<Vector<'b, ForwardsUOffset<U>>> {
    let offsets: Vec<_> = items.iter().map(|i| encode(i, fbb)).collect();
    fbb.create_vector(&offsets)
}
