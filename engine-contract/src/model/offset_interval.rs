//! [`OffsetInterval`] on the wire: ODF's type, with this protocol's FlatBuffers table.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::DecodeError;
use crate::generated as fb;
pub use weir_odf::OffsetInterval;

/// The wire form of [`OffsetInterval`].
pub(crate) trait OffsetIntervalWire: Sized {
    /// Decodes an interval, refusing `start > end`.
    fn from_fb(interval: fb::OffsetInterval<'_>, table: &'static str) -> Result<Self, DecodeError>;
    fn to_fb<'b>(self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::OffsetInterval<'b>>;
}

impl OffsetIntervalWire for OffsetInterval {
    fn from_fb(interval: fb::OffsetInterval<'_>, table: &'static str) -> Result<Self, DecodeError> {
        let (start, end) = (interval.start(), interval.end());
        Self::new(start, end).ok_or(DecodeError::InvalidOffsetInterval { table, start, end })
    }

    fn to_fb<'b>(self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::OffsetInterval<'b>> {
        fb::OffsetInterval::create(
            fbb,
            &fb::OffsetIntervalArgs {
                start: self.start,
                end: self.end,
            },
        )
    }
}
