//! Offset intervals: which records of a dataset a data slice holds.

use crate::codec::Builder;
use crate::generated as fb;
use flatbuffers::WIPOffset;

/// A closed interval of record offsets `[start, end]`.
///
/// ```
/// let slice = weir_odf::OffsetInterval { start: 10, end: 19 };
/// assert_eq!(slice.len(), 10);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct OffsetInterval {
    /// First offset.
    pub start: u64,
    /// Last offset, inclusive.
    pub end: u64,
}

impl OffsetInterval {
    /// The interval `[start, end]`, or `None` when `start > end` (ODF intervals are never empty).
    pub const fn new(start: u64, end: u64) -> Option<Self> {
        if start <= end {
            Some(Self { start, end })
        } else {
            None
        }
    }

    /// Whether `offset` lies in the interval.
    pub const fn contains(&self, offset: u64) -> bool {
        self.start <= offset && offset <= self.end
    }

    /// Number of records, or 0 if `end < start` (which is not a valid interval).
    pub fn len(&self) -> u64 {
        self.end
            .checked_sub(self.start)
            .map_or(0, |d| d.saturating_add(1))
    }

    /// Whether the interval holds no record (only when it is not valid: `end < start`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::OffsetInterval<'b>> {
        let mut b = fb::OffsetIntervalBuilder::new(fbb);
        b.add_start(self.start);
        b.add_end(self.end);
        b.finish()
    }

    pub(crate) fn decode(t: fb::OffsetInterval<'_>) -> Self {
        Self {
            start: t.start(),
            end: t.end(),
        }
    }
}
