//! [`DatasetVocabulary`] on the wire: ODF's type, with this protocol's FlatBuffers table.
//!
//! An absent table or column name reads as ODF's default name, as the reference engine does.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use crate::generated as fb;
pub use weir_odf::DatasetVocabulary;

/// The wire form of [`DatasetVocabulary`].
pub(crate) trait VocabularyWire: Sized {
    fn from_fb(vocab: Option<fb::DatasetVocabulary<'_>>) -> Self;
    fn to_fb<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::DatasetVocabulary<'b>>;
}

impl VocabularyWire for DatasetVocabulary {
    fn from_fb(vocab: Option<fb::DatasetVocabulary<'_>>) -> Self {
        let name = |value: Option<&str>, default: &str| value.unwrap_or(default).to_owned();
        Self {
            offset_column: name(
                vocab.and_then(|v| v.offset_column()),
                Self::DEFAULT_OFFSET_COLUMN,
            ),
            operation_type_column: name(
                vocab.and_then(|v| v.operation_type_column()),
                Self::DEFAULT_OPERATION_TYPE_COLUMN,
            ),
            system_time_column: name(
                vocab.and_then(|v| v.system_time_column()),
                Self::DEFAULT_SYSTEM_TIME_COLUMN,
            ),
            event_time_column: name(
                vocab.and_then(|v| v.event_time_column()),
                Self::DEFAULT_EVENT_TIME_COLUMN,
            ),
        }
    }

    fn to_fb<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::DatasetVocabulary<'b>> {
        let args = fb::DatasetVocabularyArgs {
            offset_column: Some(fbb.create_string(&self.offset_column)),
            operation_type_column: Some(fbb.create_string(&self.operation_type_column)),
            system_time_column: Some(fbb.create_string(&self.system_time_column)),
            event_time_column: Some(fbb.create_string(&self.event_time_column)),
        };
        fb::DatasetVocabulary::create(fbb, &args)
    }
}
