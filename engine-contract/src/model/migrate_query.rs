//! MigrateQuery (Weir): move a dataset from one transform to the next,
//! carrying its state across.

use chrono::{DateTime, Utc};
use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{
    DecodeError, dataset_id, optional_string, optional_timestamp, required, required_string,
    tables, timestamp,
};
use super::offset_interval::{OffsetInterval, OffsetIntervalWire};
use super::response::{EngineResponse, request_wire, response_wire};
use super::timestamp::to_fb;
use super::transform::{Transform, TransformWire};
use super::transform_request::TransformRequestInput;
use super::vocabulary::{DatasetVocabulary, VocabularyWire};
use crate::generated as fb;
use weir_odf::DatasetId;

/// Migrate a dataset's state from `prev_transform` to `next_transform`.
///
/// The engine reads the previous checkpoint, writes a checkpoint the next
/// transform can continue from to `new_checkpoint_path`, and, when the
/// previous transform still holds output (e.g. open windows), writes that
/// final output to `new_data_path` with offsets from `next_offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateQueryRequest {
    /// The output dataset.
    pub dataset_id: DatasetId,
    /// The output dataset's alias.
    pub dataset_alias: String,
    /// System time to stamp on any final output.
    pub system_time: DateTime<Utc>,
    /// The output dataset's vocabulary.
    pub vocab: DatasetVocabulary,
    /// The transform the state was built by.
    pub prev_transform: Transform,
    /// The transform to continue with.
    pub next_transform: Transform,
    /// Inputs of the next transform, with their schemas (no new data:
    /// `offset_interval` is `None`).
    pub query_inputs: Vec<TransformRequestInput>,
    /// Offset of the first final output record.
    pub next_offset: u64,
    /// State left by the previous transform, if any.
    pub prev_checkpoint_path: Option<String>,
    /// Where to write the migrated state.
    pub new_checkpoint_path: String,
    /// Where to write final output, if any.
    pub new_data_path: String,
}

impl MigrateQueryRequest {
    fn from_fb(request: fb::MigrateQueryRequest<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "MigrateQueryRequest";
        Ok(Self {
            dataset_id: dataset_id(request.dataset_id(), TABLE, "dataset_id")?,
            dataset_alias: required_string(request.dataset_alias(), TABLE, "dataset_alias")?,
            system_time: timestamp(
                required(request.system_time(), TABLE, "system_time")?,
                TABLE,
                "system_time",
            )?,
            vocab: DatasetVocabulary::from_fb(request.vocab()),
            prev_transform: Transform::from_fb(
                request.prev_transform_type(),
                request.prev_transform_as_transform_sql(),
                TABLE,
                "prev_transform",
            )?,
            next_transform: Transform::from_fb(
                request.next_transform_type(),
                request.next_transform_as_transform_sql(),
                TABLE,
                "next_transform",
            )?,
            query_inputs: tables(request.query_inputs(), TransformRequestInput::from_fb)?,
            next_offset: request.next_offset(),
            prev_checkpoint_path: optional_string(request.prev_checkpoint_path()),
            new_checkpoint_path: required_string(
                request.new_checkpoint_path(),
                TABLE,
                "new_checkpoint_path",
            )?,
            new_data_path: required_string(request.new_data_path(), TABLE, "new_data_path")?,
        })
    }

    fn to_fb<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::MigrateQueryRequest<'b>> {
        let dataset_id = fbb.create_vector(&self.dataset_id.to_bytes());
        let dataset_alias = fbb.create_string(&self.dataset_alias);
        let system_time = to_fb(&self.system_time);
        let vocab = self.vocab.to_fb(fbb);
        let (prev_transform_type, prev_transform) = self.prev_transform.to_fb(fbb);
        let (next_transform_type, next_transform) = self.next_transform.to_fb(fbb);
        let inputs: Vec<_> = self.query_inputs.iter().map(|i| i.to_fb(fbb)).collect();
        let query_inputs = fbb.create_vector(&inputs);
        let prev_checkpoint_path = self
            .prev_checkpoint_path
            .as_deref()
            .map(|p| fbb.create_string(p));
        let new_checkpoint_path = fbb.create_string(&self.new_checkpoint_path);
        let new_data_path = fbb.create_string(&self.new_data_path);
        fb::MigrateQueryRequest::create(
            fbb,
            &fb::MigrateQueryRequestArgs {
                dataset_id: Some(dataset_id),
                dataset_alias: Some(dataset_alias),
                system_time: Some(&system_time),
                vocab: Some(vocab),
                prev_transform_type,
                prev_transform: Some(prev_transform),
                next_transform_type,
                next_transform: Some(next_transform),
                query_inputs: Some(query_inputs),
                next_offset: self.next_offset,
                prev_checkpoint_path,
                new_checkpoint_path: Some(new_checkpoint_path),
                new_data_path: Some(new_data_path),
            },
        )
    }
}

request_wire!(MigrateQueryRequest, MigrateQueryRequest);

/// A message of the MigrateQuery response stream.
pub type MigrateQueryResponse = EngineResponse<MigrateQuerySuccess>;

/// What a finished migration produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MigrateQuerySuccess {
    /// Whether a checkpoint was written to `new_checkpoint_path` (a
    /// stateless next transform needs none).
    pub new_checkpoint_written: bool,
    /// Offsets of the final output; `None` when there was none.
    pub new_offset_interval: Option<OffsetInterval>,
    /// Watermark after the final output, if it moved.
    pub new_watermark: Option<DateTime<Utc>>,
}

impl MigrateQuerySuccess {
    pub(crate) fn from_fb(
        success: fb::MigrateQueryResponseSuccess<'_>,
    ) -> Result<Self, DecodeError> {
        const TABLE: &str = "MigrateQueryResponseSuccess";
        Ok(Self {
            new_checkpoint_written: success.new_checkpoint_written(),
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
    ) -> WIPOffset<fb::MigrateQueryResponseSuccess<'b>> {
        let new_offset_interval = self.new_offset_interval.map(|i| i.to_fb(fbb));
        let new_watermark = self.new_watermark.as_ref().map(to_fb);
        fb::MigrateQueryResponseSuccess::create(
            fbb,
            &fb::MigrateQueryResponseSuccessArgs {
                new_checkpoint_written: self.new_checkpoint_written,
                new_offset_interval,
                new_watermark: new_watermark.as_ref(),
            },
        )
    }
}

response_wire! {
    success: MigrateQuerySuccess,
    root: MigrateQueryResponseRoot, MigrateQueryResponseRootArgs,
    union: MigrateQueryResponse,
    progress: MigrateQueryResponseProgress, MigrateQueryResponseProgressArgs,
        value_as_migrate_query_response_progress,
    success_table: MigrateQueryResponseSuccess, value_as_migrate_query_response_success,
    invalid_query(plain): MigrateQueryResponseInvalidQuery, MigrateQueryResponseInvalidQueryArgs,
        value_as_migrate_query_response_invalid_query,
    internal_error: MigrateQueryResponseInternalError, MigrateQueryResponseInternalErrorArgs,
        value_as_migrate_query_response_internal_error,
}
