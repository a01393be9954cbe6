//! [`Watermark`]: an explicit watermark of an input, as engines are given it.

use chrono::{DateTime, Utc};

/// An input's watermark as of a system time: no event older than `event_time` is expected after
/// `system_time` (ODF's `Watermark` table, which engine requests carry per input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct Watermark {
    /// When the watermark was recorded.
    pub system_time: DateTime<Utc>,
    /// The event time it guarantees.
    pub event_time: DateTime<Utc>,
}
