//! Data slices: the Parquet file a transaction wrote, by hash, size and offsets.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_multihash, encode_bytes, required};
use crate::generated as fb;
use crate::{Error, Multihash, OffsetInterval};

/// A slice of data added to a dataset or produced by a transform: one data file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataSlice {
    /// Hash of the records, independent of the file's encoding (`arrow0-sha3-256`).
    pub logical_hash: Multihash,
    /// SHA3-256 of the file's bytes; also the file's name under `data/`.
    pub physical_hash: Multihash,
    /// Offsets of the records in the file.
    pub offset_interval: OffsetInterval,
    /// File size in bytes.
    pub size: u64,
}

impl DataSlice {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::DataSlice<'b>> {
        let logical_hash = encode_bytes(fbb, &self.logical_hash.to_bytes());
        let physical_hash = encode_bytes(fbb, &self.physical_hash.to_bytes());
        let offset_interval = self.offset_interval.encode(fbb);
        let mut b = fb::DataSliceBuilder::new(fbb);
        b.add_logical_hash(logical_hash);
        b.add_physical_hash(physical_hash);
        b.add_offset_interval(offset_interval);
        b.add_size(self.size);
        b.finish()
    }

    pub(crate) fn decode(t: fb::DataSlice<'_>) -> Result<Self, Error> {
        Ok(Self {
            logical_hash: decode_multihash(
                required(t.logical_hash(), "DataSlice.logical_hash")?,
                "DataSlice.logical_hash",
            )?,
            physical_hash: decode_multihash(
                required(t.physical_hash(), "DataSlice.physical_hash")?,
                "DataSlice.physical_hash",
            )?,
            offset_interval: OffsetInterval::decode(required(
                t.offset_interval(),
                "DataSlice.offset_interval",
            )?),
            size: t.size(),
        })
    }
}
