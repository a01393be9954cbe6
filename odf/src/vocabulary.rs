//! The dataset vocabulary: the names of the system columns.

use crate::SetVocab;

/// The names of a dataset's system columns, with ODF's defaults filled in (what `SetVocab` leaves out).
///
/// ```
/// let vocab = weir_odf::DatasetVocabulary::default();
/// assert_eq!(vocab.offset_column, "offset");
/// let custom = weir_odf::SetVocab { event_time_column: Some("date".into()), ..Default::default() };
/// assert_eq!(weir_odf::DatasetVocabulary::from(&custom).event_time_column, "date");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DatasetVocabulary {
    /// Offset column (`offset`).
    pub offset_column: String,
    /// Operation type column (`op`).
    pub operation_type_column: String,
    /// System time column (`system_time`).
    pub system_time_column: String,
    /// Event time column (`event_time`).
    pub event_time_column: String,
}

impl DatasetVocabulary {
    /// ODF's default offset column.
    pub const DEFAULT_OFFSET_COLUMN: &'static str = "offset";
    /// ODF's default operation type column.
    pub const DEFAULT_OPERATION_TYPE_COLUMN: &'static str = "op";
    /// ODF's default system time column.
    pub const DEFAULT_SYSTEM_TIME_COLUMN: &'static str = "system_time";
    /// ODF's default event time column.
    pub const DEFAULT_EVENT_TIME_COLUMN: &'static str = "event_time";

    /// Whether `name` is one of the system columns an engine's output must not redefine (offset, operation
    /// type, system time).
    pub fn is_system_column(&self, name: &str) -> bool {
        name == self.offset_column
            || name == self.operation_type_column
            || name == self.system_time_column
    }
}

impl Default for DatasetVocabulary {
    fn default() -> Self {
        Self::from(&SetVocab::default())
    }
}

impl From<&SetVocab> for DatasetVocabulary {
    fn from(v: &SetVocab) -> Self {
        let or = |value: &Option<String>, default: &str| {
            value.clone().unwrap_or_else(|| default.to_owned())
        };
        Self {
            offset_column: or(&v.offset_column, Self::DEFAULT_OFFSET_COLUMN),
            operation_type_column: or(
                &v.operation_type_column,
                Self::DEFAULT_OPERATION_TYPE_COLUMN,
            ),
            system_time_column: or(&v.system_time_column, Self::DEFAULT_SYSTEM_TIME_COLUMN),
            event_time_column: or(&v.event_time_column, Self::DEFAULT_EVENT_TIME_COLUMN),
        }
    }
}

impl From<DatasetVocabulary> for SetVocab {
    /// Every name written out, as kamu's `SetVocab` of the defaults is.
    fn from(v: DatasetVocabulary) -> Self {
        Self {
            offset_column: Some(v.offset_column),
            operation_type_column: Some(v.operation_type_column),
            system_time_column: Some(v.system_time_column),
            event_time_column: Some(v.event_time_column),
        }
    }
}
