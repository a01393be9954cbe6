//! [`RawQueryRequest`] and [`RawQueryResponse`]: ExecuteRawQuery, a one-off
//! query over data files.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{DecodeError, required_string, strings};
use super::response::{EngineResponse, request_wire, response_wire};
use super::transform::{Transform, TransformWire};
use crate::generated as fb;

/// Run a query over Parquet files and write the result to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawQueryRequest {
    /// Input Parquet files.
    pub input_data_paths: Vec<String>,
    /// What to compute.
    pub transform: Transform,
    /// Where to write the result.
    pub output_data_path: String,
}

impl RawQueryRequest {
    fn from_fb(request: fb::RawQueryRequest<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "RawQueryRequest";
        Ok(Self {
            input_data_paths: strings(request.input_data_paths()),
            transform: Transform::from_fb(
                request.transform_type(),
                request.transform_as_transform_sql(),
                TABLE,
                "transform",
            )?,
            output_data_path: required_string(
                request.output_data_path(),
                TABLE,
                "output_data_path",
            )?,
        })
    }

    fn to_fb<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::RawQueryRequest<'b>> {
        let paths: Vec<_> = self
            .input_data_paths
            .iter()
            .map(|p| fbb.create_string(p))
            .collect();
        let input_data_paths = fbb.create_vector(&paths);
        let (transform_type, transform) = self.transform.to_fb(fbb);
        let output_data_path = fbb.create_string(&self.output_data_path);
        fb::RawQueryRequest::create(
            fbb,
            &fb::RawQueryRequestArgs {
                input_data_paths: Some(input_data_paths),
                transform_type,
                transform: Some(transform),
                output_data_path: Some(output_data_path),
            },
        )
    }
}

request_wire!(RawQueryRequest, RawQueryRequest);

/// A message of the ExecuteRawQuery response stream.
pub type RawQueryResponse = EngineResponse<RawQuerySuccess>;

/// What a finished raw query produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RawQuerySuccess {
    /// Rows written to the output file.
    pub num_records: u64,
}

impl RawQuerySuccess {
    pub(crate) fn from_fb(success: fb::RawQueryResponseSuccess<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            num_records: success.num_records(),
        })
    }

    pub(crate) fn to_fb<'b>(
        self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::RawQueryResponseSuccess<'b>> {
        fb::RawQueryResponseSuccess::create(
            fbb,
            &fb::RawQueryResponseSuccessArgs {
                num_records: self.num_records,
            },
        )
    }
}

response_wire! {
    success: RawQuerySuccess,
    root: RawQueryResponseRoot, RawQueryResponseRootArgs,
    union: RawQueryResponse,
    progress: RawQueryResponseProgress, RawQueryResponseProgressArgs,
        value_as_raw_query_response_progress,
    success_table: RawQueryResponseSuccess, value_as_raw_query_response_success,
    invalid_query(plain): RawQueryResponseInvalidQuery, RawQueryResponseInvalidQueryArgs,
        value_as_raw_query_response_invalid_query,
    internal_error: RawQueryResponseInternalError, RawQueryResponseInternalErrorArgs,
        value_as_raw_query_response_internal_error,
}
