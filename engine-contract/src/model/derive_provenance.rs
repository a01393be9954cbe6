//! DeriveProvenance (Weir): which input records an output record came from.

use chrono::{DateTime, Utc};
use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{
    DecodeError, dataset_id, optional_string, required, required_string, tables, timestamp,
};
use super::offset_interval::{OffsetInterval, OffsetIntervalWire};
use super::response::{EngineResponse, request_wire, response_wire};
use super::timestamp::to_fb;
use super::transform::{Transform, TransformWire};
use super::transform_request::TransformRequestInput;
use super::vocabulary::{DatasetVocabulary, VocabularyWire};
use crate::generated as fb;
use weir_odf::DatasetId;

/// Explain output records by the input records that contributed to them.
///
/// The request restates the transform step that produced the outputs (same
/// inputs, previous checkpoint and `next_offset`); the engine re-derives it
/// with lineage and answers, per input, the offsets that contributed to any
/// of `output_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeriveProvenanceRequest {
    /// The output dataset.
    pub dataset_id: DatasetId,
    /// The output dataset's alias.
    pub dataset_alias: String,
    /// System time of the step that produced the outputs.
    pub system_time: DateTime<Utc>,
    /// The output dataset's vocabulary.
    pub vocab: DatasetVocabulary,
    /// The transform of that step.
    pub transform: Transform,
    /// The inputs of that step.
    pub query_inputs: Vec<TransformRequestInput>,
    /// `next_offset` of that step.
    pub next_offset: u64,
    /// Checkpoint that step started from, if any.
    pub prev_checkpoint_path: Option<String>,
    /// The output records to explain.
    pub output_offsets: Vec<u64>,
}

impl DeriveProvenanceRequest {
    fn from_fb(request: fb::DeriveProvenanceRequest<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "DeriveProvenanceRequest";
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
            output_offsets: request
                .output_offsets()
                .map(|offsets| offsets.iter().collect())
                .unwrap_or_default(),
        })
    }

    fn to_fb<'b>(
        &self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::DeriveProvenanceRequest<'b>> {
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
        let output_offsets = fbb.create_vector(&self.output_offsets);
        fb::DeriveProvenanceRequest::create(
            fbb,
            &fb::DeriveProvenanceRequestArgs {
                dataset_id: Some(dataset_id),
                dataset_alias: Some(dataset_alias),
                system_time: Some(&system_time),
                vocab: Some(vocab),
                transform_type,
                transform: Some(transform),
                query_inputs: Some(query_inputs),
                next_offset: self.next_offset,
                prev_checkpoint_path,
                output_offsets: Some(output_offsets),
            },
        )
    }
}

request_wire!(DeriveProvenanceRequest, DeriveProvenanceRequest);

/// A message of the DeriveProvenance response stream.
pub type DeriveProvenanceResponse = EngineResponse<DeriveProvenanceSuccess>;

/// The contributing input records, per input.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DeriveProvenanceSuccess {
    /// One entry per input that contributed.
    pub inputs: Vec<InputProvenance>,
}

/// The records of one input that contributed to the requested outputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InputProvenance {
    /// The input dataset.
    pub dataset_id: DatasetId,
    /// Name of the input in the query.
    pub query_alias: String,
    /// Sorted, non-overlapping intervals of contributing input offsets.
    pub offset_intervals: Vec<OffsetInterval>,
}

impl DeriveProvenanceSuccess {
    pub(crate) fn from_fb(
        success: fb::DeriveProvenanceResponseSuccess<'_>,
    ) -> Result<Self, DecodeError> {
        const TABLE: &str = "InputProvenance";
        Ok(Self {
            inputs: tables(success.inputs(), |input| {
                Ok(InputProvenance {
                    dataset_id: dataset_id(input.dataset_id(), TABLE, "dataset_id")?,
                    query_alias: required_string(input.query_alias(), TABLE, "query_alias")?,
                    offset_intervals: tables(input.offset_intervals(), |interval| {
                        OffsetInterval::from_fb(interval, TABLE)
                    })?,
                })
            })?,
        })
    }

    pub(crate) fn to_fb<'b>(
        &self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::DeriveProvenanceResponseSuccess<'b>> {
        let inputs: Vec<_> = self
            .inputs
            .iter()
            .map(|input| {
                let dataset_id = fbb.create_vector(&input.dataset_id.to_bytes());
                let query_alias = fbb.create_string(&input.query_alias);
                let intervals: Vec<_> = input
                    .offset_intervals
                    .iter()
                    .map(|i| i.to_fb(fbb))
                    .collect();
                let offset_intervals = fbb.create_vector(&intervals);
                fb::InputProvenance::create(
                    fbb,
                    &fb::InputProvenanceArgs {
                        dataset_id: Some(dataset_id),
                        query_alias: Some(query_alias),
                        offset_intervals: Some(offset_intervals),
                    },
                )
            })
            .collect();
        let inputs = fbb.create_vector(&inputs);
        fb::DeriveProvenanceResponseSuccess::create(
            fbb,
            &fb::DeriveProvenanceResponseSuccessArgs {
                inputs: Some(inputs),
            },
        )
    }
}

response_wire! {
    success: DeriveProvenanceSuccess,
    root: DeriveProvenanceResponseRoot, DeriveProvenanceResponseRootArgs,
    union: DeriveProvenanceResponse,
    progress: DeriveProvenanceResponseProgress, DeriveProvenanceResponseProgressArgs,
        value_as_derive_provenance_response_progress,
    success_table: DeriveProvenanceResponseSuccess, value_as_derive_provenance_response_success,
    invalid_query(plain): DeriveProvenanceResponseInvalidQuery,
        DeriveProvenanceResponseInvalidQueryArgs,
        value_as_derive_provenance_response_invalid_query,
    internal_error: DeriveProvenanceResponseInternalError,
        DeriveProvenanceResponseInternalErrorArgs,
        value_as_derive_provenance_response_internal_error,
}
