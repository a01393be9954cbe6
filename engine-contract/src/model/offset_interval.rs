//! [`OffsetInterval`]: a closed range of record offsets.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::DecodeError;
use crate::generated as fb;

/// A closed interval of record offsets, `[start, end]`.
///
/// ```
/// use engine_contract::model::OffsetInterval;
///
/// let interval = OffsetInterval::new(10, 11).unwrap();
/// assert_eq!(interval.len(), 2);
/// assert!(interval.contains(11));
/// assert!(OffsetInterval::new(5, 4).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetInterval {
    /// First offset in the interval.
    pub start: u64,
    /// Last offset in the interval (inclusive).
    pub end: u64,
}

impl OffsetInterval {
    /// `[start, end]`, or `None` when `start > end`.
    pub const fn new(start: u64, end: u64) -> Option<Self> {
        if start <= end {
            Some(Self { start, end })
        } else {
            None
        }
    }

    /// Number of offsets in the interval (saturating at `u64::MAX`).
    pub const fn len(&self) -> u64 {
        (self.end - self.start).saturating_add(1)
    }

    /// Always false: a closed interval holds at least one offset.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Whether `offset` lies in the interval.
    pub const fn contains(&self, offset: u64) -> bool {
        self.start <= offset && offset <= self.end
    }

    pub(crate) fn from_fb(
        interval: fb::OffsetInterval<'_>,
        table: &'static str,
    ) -> Result<Self, DecodeError> {
        let (start, end) = (interval.start(), interval.end());
        Self::new(start, end).ok_or(DecodeError::InvalidOffsetInterval { table, start, end })
    }

    pub(crate) fn to_fb<'b>(
        self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::OffsetInterval<'b>> {
        fb::OffsetInterval::create(
            fbb,
            &fb::OffsetIntervalArgs {
                start: self.start,
                end: self.end,
            },
        )
    }
}
