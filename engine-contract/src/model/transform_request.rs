//! [`TransformRequest`]: the ExecuteTransform request.

use chrono::{DateTime, Utc};
use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{
    DecodeError, dataset_id, optional_string, required, required_string, strings, tables, timestamp,
};
use super::offset_interval::{OffsetInterval, OffsetIntervalWire};
use super::response::request_wire;
use super::timestamp::to_fb;
use super::transform::{Transform, TransformWire};
use super::vocabulary::{DatasetVocabulary, VocabularyWire};
use super::watermark::{Watermark, WatermarkWire};
use crate::generated as fb;
use weir_odf::DatasetId;

/// Run one step of a derivative dataset's transformation.
///
/// The engine reads each input's `data_paths`, keeping only records with
/// offsets in its `offset_interval`, runs the transform, writes the output
/// to `new_data_path` (even with zero rows) with offsets from `next_offset`
/// and `system_time` stamped, and writes its state to
/// `new_checkpoint_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformRequest {
    /// The output dataset.
    pub dataset_id: DatasetId,
    /// The output dataset's alias.
    pub dataset_alias: String,
    /// System time to stamp on output records.
    pub system_time: DateTime<Utc>,
    /// The output dataset's vocabulary.
    pub vocab: DatasetVocabulary,
    /// What to compute.
    pub transform: Transform,
    /// The inputs, in the order of the transform's inputs.
    pub query_inputs: Vec<TransformRequestInput>,
    /// Offset of the first output record.
    pub next_offset: u64,
    /// State left by the previous step, if any.
    pub prev_checkpoint_path: Option<String>,
    /// Where to write the new state.
    pub new_checkpoint_path: String,
    /// Where to write the output data (a Parquet file).
    pub new_data_path: String,
}

/// One input of a [`TransformRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformRequestInput {
    /// The input dataset.
    pub dataset_id: DatasetId,
    /// The input dataset's alias.
    pub dataset_alias: String,
    /// Name of the input in the query.
    pub query_alias: String,
    /// The input dataset's vocabulary.
    pub vocab: DatasetVocabulary,
    /// New records to process; `None` means no new data from this input.
    pub offset_interval: Option<OffsetInterval>,
    /// Data files; they may hold records outside `offset_interval`.
    pub data_paths: Vec<String>,
    /// An empty Parquet file with the input's schema.
    pub schema_file: String,
    /// Explicit watermarks the input carries.
    pub explicit_watermarks: Vec<Watermark>,
}

impl TransformRequestInput {
    pub(crate) fn from_fb(input: fb::TransformRequestInput<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "TransformRequestInput";
        Ok(Self {
            dataset_id: dataset_id(input.dataset_id(), TABLE, "dataset_id")?,
            dataset_alias: required_string(input.dataset_alias(), TABLE, "dataset_alias")?,
            query_alias: required_string(input.query_alias(), TABLE, "query_alias")?,
            vocab: DatasetVocabulary::from_fb(input.vocab()),
            offset_interval: input
                .offset_interval()
                .map(|interval| OffsetInterval::from_fb(interval, TABLE))
                .transpose()?,
            data_paths: strings(input.data_paths()),
            schema_file: required_string(input.schema_file(), TABLE, "schema_file")?,
            explicit_watermarks: tables(input.explicit_watermarks(), Watermark::from_fb)?,
        })
    }

    pub(crate) fn to_fb<'b>(
        &self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::TransformRequestInput<'b>> {
        let dataset_id = fbb.create_vector(&self.dataset_id.to_bytes());
        let dataset_alias = fbb.create_string(&self.dataset_alias);
        let query_alias = fbb.create_string(&self.query_alias);
        let vocab = self.vocab.to_fb(fbb);
        let offset_interval = self.offset_interval.map(|interval| interval.to_fb(fbb));
        let paths: Vec<_> = self
            .data_paths
            .iter()
            .map(|p| fbb.create_string(p))
            .collect();
        let data_paths = fbb.create_vector(&paths);
        let schema_file = fbb.create_string(&self.schema_file);
        let watermarks: Vec<_> = self
            .explicit_watermarks
            .iter()
            .map(|w| w.to_fb(fbb))
            .collect();
        let explicit_watermarks = fbb.create_vector(&watermarks);
        fb::TransformRequestInput::create(
            fbb,
            &fb::TransformRequestInputArgs {
                dataset_id: Some(dataset_id),
                dataset_alias: Some(dataset_alias),
                query_alias: Some(query_alias),
                vocab: Some(vocab),
                offset_interval,
                data_paths: Some(data_paths),
                schema_file: Some(schema_file),
                explicit_watermarks: Some(explicit_watermarks),
            },
        )
    }
}

impl TransformRequest {
    fn from_fb(request: fb::TransformRequest<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "TransformRequest";
        Ok(Self {
            dataset_id: dataset_id(request.dataset_id(), TABLE, "dataset_id")?,
            dataset_alias: required_string(request.dataset_alias(), TABLE, "dataset_alias")?,
            system_time: timestamp(
                required(request.system_time(), TABLE, "system_time")?,
                TABLE,
                "system_time",
            )?,
            vocab: DatasetVocabulary::from_fb(request.vocab()),
            transform: Transform::from_fb(
                request.transform_type(),
                request.transform_as_transform_sql(),
                TABLE,
                "transform",
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

    fn to_fb<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::TransformRequest<'b>> {
        let dataset_id = fbb.create_vector(&self.dataset_id.to_bytes());
        let dataset_alias = fbb.create_string(&self.dataset_alias);
        let system_time = to_fb(&self.system_time);
        let vocab = self.vocab.to_fb(fbb);
        let (transform_type, transform) = self.transform.to_fb(fbb);
        let inputs: Vec<_> = self.query_inputs.iter().map(|i| i.to_fb(fbb)).collect();
        let query_inputs = fbb.create_vector(&inputs);
        let prev_checkpoint_path = self
            .prev_checkpoint_path
            .as_deref()
            .map(|p| fbb.create_string(p));
        let new_checkpoint_path = fbb.create_string(&self.new_checkpoint_path);
        let new_data_path = fbb.create_string(&self.new_data_path);
        fb::TransformRequest::create(
            fbb,
            &fb::TransformRequestArgs {
                dataset_id: Some(dataset_id),
                dataset_alias: Some(dataset_alias),
                system_time: Some(&system_time),
                vocab: Some(vocab),
                transform_type,
                transform: Some(transform),
                query_inputs: Some(query_inputs),
                next_offset: self.next_offset,
                prev_checkpoint_path,
                new_checkpoint_path: Some(new_checkpoint_path),
                new_data_path: Some(new_data_path),
            },
        )
    }
}

request_wire!(TransformRequest, TransformRequest);
