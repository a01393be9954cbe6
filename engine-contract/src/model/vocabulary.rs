//! [`DatasetVocabulary`]: the names of a dataset's system columns.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use crate::generated as fb;

/// Names of the system columns of a dataset.
///
/// When receiving, any missing name takes its default (some peers omit
/// them); when sending, all four are always written (some engines crash
/// without them).
///
/// ```
/// use engine_contract::model::DatasetVocabulary;
///
/// let vocab = DatasetVocabulary::default();
/// assert_eq!(vocab.offset_column, "offset");
/// assert_eq!(vocab.operation_type_column, "op");
/// assert_eq!(vocab.system_time_column, "system_time");
/// assert_eq!(vocab.event_time_column, "event_time");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DatasetVocabulary {
    /// Column holding each record's offset (default `offset`).
    pub offset_column: String,
    /// Column holding each record's [`OperationType`](crate::model::OperationType) (default `op`).
    pub operation_type_column: String,
    /// Column holding the time the record was added (default `system_time`).
    pub system_time_column: String,
    /// Column holding the time the event happened (default `event_time`).
    pub event_time_column: String,
}

impl DatasetVocabulary {
    /// Default name of the offset column.
    pub const DEFAULT_OFFSET_COLUMN: &'static str = "offset";
    /// Default name of the operation type column.
    pub const DEFAULT_OPERATION_TYPE_COLUMN: &'static str = "op";
    /// Default name of the system time column.
    pub const DEFAULT_SYSTEM_TIME_COLUMN: &'static str = "system_time";
    /// Default name of the event time column.
    pub const DEFAULT_EVENT_TIME_COLUMN: &'static str = "event_time";

    pub(crate) fn from_fb(vocab: Option<fb::DatasetVocabulary<'_>>) -> Self {
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

    pub(crate) fn to_fb<'b>(
        &self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::DatasetVocabulary<'b>> {
        let args = fb::DatasetVocabularyArgs {
            offset_column: Some(fbb.create_string(&self.offset_column)),
            operation_type_column: Some(fbb.create_string(&self.operation_type_column)),
            system_time_column: Some(fbb.create_string(&self.system_time_column)),
            event_time_column: Some(fbb.create_string(&self.event_time_column)),
        };
        fb::DatasetVocabulary::create(fbb, &args)
    }
}

impl Default for DatasetVocabulary {
    fn default() -> Self {
        Self {
            offset_column: Self::DEFAULT_OFFSET_COLUMN.to_owned(),
            operation_type_column: Self::DEFAULT_OPERATION_TYPE_COLUMN.to_owned(),
            system_time_column: Self::DEFAULT_SYSTEM_TIME_COLUMN.to_owned(),
            event_time_column: Self::DEFAULT_EVENT_TIME_COLUMN.to_owned(),
        }
    }
}
