//! [`Watermark`]: an explicit watermark of an input.

use chrono::{DateTime, Utc};
use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{DecodeError, required, timestamp};
use super::timestamp::to_fb;
use crate::generated as fb;

/// An input's statement that no events older than `event_time` will arrive
/// after `system_time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Watermark {
    /// When the watermark was recorded.
    pub system_time: DateTime<Utc>,
    /// The event time the input has reached.
    pub event_time: DateTime<Utc>,
}

impl Watermark {
    pub(crate) fn from_fb(watermark: fb::Watermark<'_>) -> Result<Self, DecodeError> {
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

    pub(crate) fn to_fb<'b>(self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::Watermark<'b>> {
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
