//! [`TransformResponse`]: the ExecuteTransform response stream.

use chrono::{DateTime, Utc};
use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{DecodeError, optional_timestamp};
use super::offset_interval::{OffsetInterval, OffsetIntervalWire};
use super::response::{EngineResponse, response_wire};
use super::timestamp::to_fb;
use crate::generated as fb;

/// A message of the ExecuteTransform response stream.
pub type TransformResponse = EngineResponse<TransformSuccess>;

/// What a finished transform step produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TransformSuccess {
    /// Offsets of the output records; `None` when no rows were produced.
    pub new_offset_interval: Option<OffsetInterval>,
    /// The minimum over inputs of their latest explicit watermark's event
    /// time; `None` when no input has one.
    pub new_watermark: Option<DateTime<Utc>>,
}

impl TransformSuccess {
    pub(crate) fn from_fb(success: fb::TransformResponseSuccess<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "TransformResponseSuccess";
        Ok(Self {
            new_offset_interval: success
                .new_offset_interval()
                .map(|interval| OffsetInterval::from_fb(interval, TABLE))
                .transpose()?,
            new_watermark: optional_timestamp(success.new_watermark(), TABLE, "new_watermark")?,
        })
    }

    pub(crate) fn to_fb<'b>(
        self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::TransformResponseSuccess<'b>> {
        let new_offset_interval = self.new_offset_interval.map(|i| i.to_fb(fbb));
        let new_watermark = self.new_watermark.as_ref().map(to_fb);
        fb::TransformResponseSuccess::create(
            fbb,
            &fb::TransformResponseSuccessArgs {
                new_offset_interval,
                new_watermark: new_watermark.as_ref(),
            },
        )
    }
}

response_wire! {
    success: TransformSuccess,
    root: TransformResponseRoot, TransformResponseRootArgs,
    union: TransformResponse,
    progress: TransformResponseProgress, TransformResponseProgressArgs,
        value_as_transform_response_progress,
    success_table: TransformResponseSuccess, value_as_transform_response_success,
    invalid_query(plain): TransformResponseInvalidQuery, TransformResponseInvalidQueryArgs,
        value_as_transform_response_invalid_query,
    internal_error: TransformResponseInternalError, TransformResponseInternalErrorArgs,
        value_as_transform_response_internal_error,
}
