//! `SetVocab`: the names of the system columns.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, encode_opt_str};
use crate::generated as fb;

/// Names the system columns; an absent name keeps ODF's default (see [`crate::DatasetVocabulary`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SetVocab {
    /// Offset column.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub offset_column: Option<String>,
    /// Operation type column.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub operation_type_column: Option<String>,
    /// System time column.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub system_time_column: Option<String>,
    /// Event time column.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub event_time_column: Option<String>,
}

impl SetVocab {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SetVocab<'b>> {
        let offset = encode_opt_str(fbb, self.offset_column.as_ref());
        let op = encode_opt_str(fbb, self.operation_type_column.as_ref());
        let system_time = encode_opt_str(fbb, self.system_time_column.as_ref());
        let event_time = encode_opt_str(fbb, self.event_time_column.as_ref());
        let mut b = fb::SetVocabBuilder::new(fbb);
        if let Some(x) = offset {
            b.add_offset_column(x);
        }
        if let Some(x) = op {
            b.add_operation_type_column(x);
        }
        if let Some(x) = system_time {
            b.add_system_time_column(x);
        }
        if let Some(x) = event_time {
            b.add_event_time_column(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::SetVocab<'_>) -> Self {
        Self {
            offset_column: t.offset_column().map(str::to_owned),
            operation_type_column: t.operation_type_column().map(str::to_owned),
            system_time_column: t.system_time_column().map(str::to_owned),
            event_time_column: t.event_time_column().map(str::to_owned),
        }
    }
}
