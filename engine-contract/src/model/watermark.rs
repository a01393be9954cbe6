//! [`Watermark`] on the wire: ODF's type, with this protocol's FlatBuffers table.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{DecodeError, required, timestamp};
use super::timestamp::to_fb;
use crate::generated as fb;
pub use weir_odf::Watermark;

/// The wire form of [`Watermark`].
pub(crate) trait WatermarkWire: Sized {
    fn from_fb(watermark: fb::Watermark<'_>) -> Result<Self, DecodeError>;
    fn to_fb<'b>(self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::Watermark<'b>>;
}

impl WatermarkWire for Watermark {
    fn from_fb(watermark: fb::Watermark<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "Watermark";
        Ok(Self {
            system_time: timestamp(
                required(watermark.system_time(), TABLE, "system_time")?,
                TABLE,
                "system_time",
            )?,
            event_time: timestamp(
                required(watermark.event_time(), TABLE, "event_time")?,
                TABLE,
                "event_time",
            )?,
        })
    }

    fn to_fb<'b>(self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::Watermark<'b>> {
        let system_time = to_fb(&self.system_time);
        let event_time = to_fb(&self.event_time);
        fb::Watermark::create(
            fbb,
            &fb::WatermarkArgs {
                system_time: Some(&system_time),
                event_time: Some(&event_time),
            },
        )
    }
}
