//! `ExecuteTransform`: one transform step of a derivative dataset.

use chrono::{DateTime, Utc};
use flatbuffers::WIPOffset;

use crate::codec::{
    Builder, decode_dataset_id, decode_each, decode_opt_multihash, decode_timestamp, encode_bytes,
    encode_each, required,
};
use crate::generated as fb;
use crate::timestamp::to_flatbuffers;
use crate::{Checkpoint, DataSlice, DatasetId, Error, Multihash};

/// A transform step: the inputs' blocks and records consumed, and what it wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ExecuteTransform {
    /// One entry per input, in `SetTransform` order.
    pub query_inputs: Vec<ExecuteTransformInput>,
    /// The checkpoint the engine started from, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub prev_checkpoint: Option<Multihash>,
    /// The last offset of the previous data slice, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub prev_offset: Option<u64>,
    /// The records written, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub new_data: Option<DataSlice>,
    /// The checkpoint written, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub new_checkpoint: Option<Checkpoint>,
    /// The output's watermark.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub new_watermark: Option<DateTime<Utc>>,
}

/// One input of a transform step: blocks `(prev_block_hash, new_block_hash]` and records
/// `(prev_offset, new_offset]` of the input dataset.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ExecuteTransformInput {
    /// The input dataset.
    pub dataset_id: DatasetId,
    /// The input block consumed by the previous step, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub prev_block_hash: Option<Multihash>,
    /// The last input block consumed by this step, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub new_block_hash: Option<Multihash>,
    /// The last input offset consumed by the previous step, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub prev_offset: Option<u64>,
    /// The last input offset consumed by this step, if any.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub new_offset: Option<u64>,
}

impl ExecuteTransformInput {
    /// An input position after a step: `last_block` and `last_offset` are what the step has consumed up to,
    /// `prev_*` what the previous step had. As kamu writes it, a `new_*` equal to its `prev_*` (nothing new
    /// from this input) is left out, and the `prev_*` carry the position on.
    ///
    /// ```
    /// # use weir_odf::{DatasetId, ExecuteTransformInput, Multihash};
    /// let id = DatasetId::from_key([1; 32]);
    /// let b = Multihash::sha3_256(b"block");
    /// let same = ExecuteTransformInput::advanced(id, Some(b), Some(9), Some(b), Some(9));
    /// assert_eq!((same.new_block_hash, same.new_offset), (None, None));
    /// assert_eq!((same.last_block_hash(), same.last_offset()), (Some(&b), Some(9)));
    /// ```
    pub fn advanced(
        dataset_id: DatasetId,
        prev_block_hash: Option<Multihash>,
        prev_offset: Option<u64>,
        last_block_hash: Option<Multihash>,
        last_offset: Option<u64>,
    ) -> Self {
        Self {
            dataset_id,
            prev_block_hash,
            new_block_hash: last_block_hash.filter(|_| last_block_hash != prev_block_hash),
            prev_offset,
            new_offset: last_offset.filter(|_| last_offset != prev_offset),
        }
    }

    /// The last input block consumed once this step is done: the new one, or the previous step's.
    pub fn last_block_hash(&self) -> Option<&Multihash> {
        self.new_block_hash
            .as_ref()
            .or(self.prev_block_hash.as_ref())
    }

    /// The last input offset consumed once this step is done: the new one, or the previous step's.
    pub fn last_offset(&self) -> Option<u64> {
        self.new_offset.or(self.prev_offset)
    }

    /// Whether the step read anything new of this input (a block, maybe with records).
    pub fn has_new(&self) -> bool {
        self.new_block_hash.is_some() || self.new_offset.is_some()
    }

    /// The number of input records the step read; `None` when the offsets go backwards.
    pub fn num_records(&self) -> Option<u64> {
        match (self.prev_offset, self.new_offset) {
            (_, None) => Some(0),
            (None, Some(new)) => new.checked_add(1),
            (Some(prev), Some(new)) => new.checked_sub(prev),
        }
    }
}

impl ExecuteTransform {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::ExecuteTransform<'b>> {
        let query_inputs = encode_each(fbb, &self.query_inputs, ExecuteTransformInput::encode);
        let prev_checkpoint = self
            .prev_checkpoint
            .map(|h| encode_bytes(fbb, &h.to_bytes()));
        let new_data = self.new_data.as_ref().map(|d| d.encode(fbb));
        let new_checkpoint = self.new_checkpoint.as_ref().map(|c| c.encode(fbb));
        let mut b = fb::ExecuteTransformBuilder::new(fbb);
        b.add_query_inputs(query_inputs);
        if let Some(x) = prev_checkpoint {
            b.add_prev_checkpoint(x);
        }
        if let Some(x) = self.prev_offset {
            b.add_prev_offset(x);
        }
        if let Some(x) = new_data {
            b.add_new_data(x);
        }
        if let Some(x) = new_checkpoint {
            b.add_new_checkpoint(x);
        }
        if let Some(w) = &self.new_watermark {
            b.add_new_watermark(&to_flatbuffers(w));
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::ExecuteTransform<'_>) -> Result<Self, Error> {
        Ok(Self {
            query_inputs: decode_each(
                required(t.query_inputs(), "ExecuteTransform.query_inputs")?,
                ExecuteTransformInput::decode,
            )?,
            prev_checkpoint: decode_opt_multihash(
                t.prev_checkpoint(),
                "ExecuteTransform.prev_checkpoint",
            )?,
            prev_offset: t.prev_offset(),
            new_data: t.new_data().map(DataSlice::decode).transpose()?,
            new_checkpoint: t.new_checkpoint().map(Checkpoint::decode).transpose()?,
            new_watermark: t
                .new_watermark()
                .map(|w| decode_timestamp(w, "ExecuteTransform.new_watermark"))
                .transpose()?,
        })
    }
}

impl ExecuteTransformInput {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> WIPOffset<fb::ExecuteTransformInput<'b>> {
        let dataset_id = encode_bytes(fbb, &self.dataset_id.to_bytes());
        let prev_block_hash = self
            .prev_block_hash
            .map(|h| encode_bytes(fbb, &h.to_bytes()));
        let new_block_hash = self
            .new_block_hash
            .map(|h| encode_bytes(fbb, &h.to_bytes()));
        let mut b = fb::ExecuteTransformInputBuilder::new(fbb);
        b.add_dataset_id(dataset_id);
        if let Some(x) = prev_block_hash {
            b.add_prev_block_hash(x);
        }
        if let Some(x) = new_block_hash {
            b.add_new_block_hash(x);
        }
        if let Some(x) = self.prev_offset {
            b.add_prev_offset(x);
        }
        if let Some(x) = self.new_offset {
            b.add_new_offset(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::ExecuteTransformInput<'_>) -> Result<Self, Error> {
        const ID: &str = "ExecuteTransformInput.dataset_id";
        Ok(Self {
            dataset_id: decode_dataset_id(required(t.dataset_id(), ID)?, ID)?,
            prev_block_hash: decode_opt_multihash(
                t.prev_block_hash(),
                "ExecuteTransformInput.prev_block_hash",
            )?,
            new_block_hash: decode_opt_multihash(
                t.new_block_hash(),
                "ExecuteTransformInput.new_block_hash",
            )?,
            prev_offset: t.prev_offset(),
            new_offset: t.new_offset(),
        })
    }
}
