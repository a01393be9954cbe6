//! `AddData`: data ingested into a root dataset.

use chrono::{DateTime, Utc};
use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_opt_multihash, decode_timestamp, encode_bytes};
use crate::generated as fb;
use crate::timestamp::to_flatbuffers;
use crate::{Checkpoint, DataSlice, Error, ExtraAttributes, Multihash, SourceState};

/// Data ingested into a root dataset (or only a new watermark, checkpoint or source state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct AddData {
    /// The checkpoint ingest resumed from, if any.
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
    /// The output's watermark (monotonically non-decreasing once set).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub new_watermark: Option<DateTime<Utc>>,
    /// Where the source resumes next time.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub new_source_state: Option<SourceState>,
    /// ODF extensions.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub extra: Option<ExtraAttributes>,
}

impl AddData {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::AddData<'b>> {
        let prev_checkpoint = self
            .prev_checkpoint
            .map(|h| encode_bytes(fbb, &h.to_bytes()));
        let new_data = self.new_data.as_ref().map(|d| d.encode(fbb));
        let new_checkpoint = self.new_checkpoint.as_ref().map(|c| c.encode(fbb));
        let new_source_state = self.new_source_state.as_ref().map(|s| s.encode(fbb));
        let extra = self.extra.as_ref().map(|e| e.encode(fbb));
        let mut b = fb::AddDataBuilder::new(fbb);
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
        if let Some(x) = new_source_state {
            b.add_new_source_state(x);
        }
        if let Some(x) = extra {
            b.add_extra(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::AddData<'_>) -> Result<Self, Error> {
        Ok(Self {
            prev_checkpoint: decode_opt_multihash(t.prev_checkpoint(), "AddData.prev_checkpoint")?,
            prev_offset: t.prev_offset(),
            new_data: t.new_data().map(DataSlice::decode).transpose()?,
            new_checkpoint: t.new_checkpoint().map(Checkpoint::decode).transpose()?,
            new_watermark: t
                .new_watermark()
                .map(|w| decode_timestamp(w, "AddData.new_watermark"))
                .transpose()?,
            new_source_state: t.new_source_state().map(SourceState::decode).transpose()?,
            extra: t.extra().map(ExtraAttributes::decode).transpose()?,
        })
    }
}
