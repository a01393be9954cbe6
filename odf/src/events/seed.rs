//! `Seed`: the first event of every chain.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_dataset_id, encode_bytes, required};
use crate::generated as fb;
use crate::{DatasetId, DatasetKind, Error};

/// Establishes a dataset's identity and kind; always the chain's first block.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct Seed {
    /// The dataset's id.
    pub dataset_id: DatasetId,
    /// Root or derivative.
    pub dataset_kind: DatasetKind,
}

impl Seed {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::Seed<'b>> {
        let dataset_id = encode_bytes(fbb, &self.dataset_id.to_bytes());
        let mut b = fb::SeedBuilder::new(fbb);
        b.add_dataset_id(dataset_id);
        b.add_dataset_kind(self.dataset_kind.encode());
        b.finish()
    }

    pub(crate) fn decode(t: fb::Seed<'_>) -> Result<Self, Error> {
        Ok(Self {
            dataset_id: decode_dataset_id(
                required(t.dataset_id(), "Seed.dataset_id")?,
                "Seed.dataset_id",
            )?,
            dataset_kind: DatasetKind::decode(t.dataset_kind(), "Seed.dataset_kind")?,
        })
    }
}
