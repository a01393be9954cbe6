//! Checkpoints: an engine's state file, by hash and size.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_multihash, encode_bytes, required};
use crate::generated as fb;
use crate::{Error, Multihash};

/// A checkpoint produced by an engine: one file under `checkpoints/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct Checkpoint {
    /// SHA3-256 of the file's bytes; also the file's name.
    pub physical_hash: Multihash,
    /// File size in bytes.
    pub size: u64,
}

impl Checkpoint {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::Checkpoint<'b>> {
        let physical_hash = encode_bytes(fbb, &self.physical_hash.to_bytes());
        let mut b = fb::CheckpointBuilder::new(fbb);
        b.add_physical_hash(physical_hash);
        b.add_size(self.size);
        b.finish()
    }

    pub(crate) fn decode(t: fb::Checkpoint<'_>) -> Result<Self, Error> {
        Ok(Self {
            physical_hash: decode_multihash(
                required(t.physical_hash(), "Checkpoint.physical_hash")?,
                "Checkpoint.physical_hash",
            )?,
            size: t.size(),
        })
    }
}
