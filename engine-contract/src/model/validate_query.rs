//! ValidateQuery (Weir): check a query against its inputs' schemas without
//! running it; the output schema or the validation errors come back.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::decode::{DecodeError, dataset_id, required_string, tables};
use super::response::{EngineResponse, request_wire, response_wire};
use super::transform::{Transform, TransformWire};
use super::vocabulary::{DatasetVocabulary, VocabularyWire};
use crate::generated as fb;
use weir_odf::DatasetId;

/// Validate a transform against its inputs' schemas.
///
/// The engine plans the query (reading only the schema files), writes an
/// empty Parquet file with the output schema to `output_schema_path` and
/// answers Success with the output columns, or InvalidQuery with the
/// problems found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidateQueryRequest {
    /// The output dataset.
    pub dataset_id: DatasetId,
    /// The output dataset's alias.
    pub dataset_alias: String,
    /// The output dataset's vocabulary.
    pub vocab: DatasetVocabulary,
    /// The transform to validate.
    pub transform: Transform,
    /// The inputs and their schemas.
    pub query_inputs: Vec<ValidateQueryInput>,
    /// Where to write an empty Parquet file with the output schema.
    pub output_schema_path: String,
}

/// One input of a [`ValidateQueryRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidateQueryInput {
    /// The input dataset.
    pub dataset_id: DatasetId,
    /// The input dataset's alias.
    pub dataset_alias: String,
    /// Name of the input in the query.
    pub query_alias: String,
    /// The input dataset's vocabulary.
    pub vocab: DatasetVocabulary,
    /// An empty Parquet file with the input's schema.
    pub schema_file: String,
}

impl ValidateQueryInput {
    fn from_fb(input: fb::ValidateQueryInput<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "ValidateQueryInput";
        Ok(Self {
            dataset_id: dataset_id(input.dataset_id(), TABLE, "dataset_id")?,
            dataset_alias: required_string(input.dataset_alias(), TABLE, "dataset_alias")?,
            query_alias: required_string(input.query_alias(), TABLE, "query_alias")?,
            vocab: DatasetVocabulary::from_fb(input.vocab()),
            schema_file: required_string(input.schema_file(), TABLE, "schema_file")?,
        })
    }

    fn to_fb<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::ValidateQueryInput<'b>> {
        let dataset_id = fbb.create_vector(&self.dataset_id.to_bytes());
        let dataset_alias = fbb.create_string(&self.dataset_alias);
        let query_alias = fbb.create_string(&self.query_alias);
        let vocab = self.vocab.to_fb(fbb);
        let schema_file = fbb.create_string(&self.schema_file);
        fb::ValidateQueryInput::create(
            fbb,
            &fb::ValidateQueryInputArgs {
                dataset_id: Some(dataset_id),
                dataset_alias: Some(dataset_alias),
                query_alias: Some(query_alias),
                vocab: Some(vocab),
                schema_file: Some(schema_file),
            },
        )
    }
}

impl ValidateQueryRequest {
    fn from_fb(request: fb::ValidateQueryRequest<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "ValidateQueryRequest";
        Ok(Self {
            dataset_id: dataset_id(request.dataset_id(), TABLE, "dataset_id")?,
            dataset_alias: required_string(request.dataset_alias(), TABLE, "dataset_alias")?,
            vocab: DatasetVocabulary::from_fb(request.vocab()),
            transform: Transform::from_fb(
                request.transform_type(),
                request.transform_as_transform_sql(),
                TABLE,
                "transform",
            )?,
            query_inputs: tables(request.query_inputs(), ValidateQueryInput::from_fb)?,
            output_schema_path: required_string(
                request.output_schema_path(),
                TABLE,
                "output_schema_path",
            )?,
        })
    }

    fn to_fb<'b>(
        &self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::ValidateQueryRequest<'b>> {
        let dataset_id = fbb.create_vector(&self.dataset_id.to_bytes());
        let dataset_alias = fbb.create_string(&self.dataset_alias);
        let vocab = self.vocab.to_fb(fbb);
        let (transform_type, transform) = self.transform.to_fb(fbb);
        let inputs: Vec<_> = self.query_inputs.iter().map(|i| i.to_fb(fbb)).collect();
        let query_inputs = fbb.create_vector(&inputs);
        let output_schema_path = fbb.create_string(&self.output_schema_path);
        fb::ValidateQueryRequest::create(
            fbb,
            &fb::ValidateQueryRequestArgs {
                dataset_id: Some(dataset_id),
                dataset_alias: Some(dataset_alias),
                vocab: Some(vocab),
                transform_type,
                transform: Some(transform),
                query_inputs: Some(query_inputs),
                output_schema_path: Some(output_schema_path),
            },
        )
    }
}

request_wire!(ValidateQueryRequest, ValidateQueryRequest);

/// A message of the ValidateQuery response stream. Its InvalidQuery carries
/// structured [`ValidationError`](crate::model::ValidationError)s.
pub type ValidateQueryResponse = EngineResponse<ValidateQuerySuccess>;

/// A valid query's output schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ValidateQuerySuccess {
    /// The output columns, in order (also written to `output_schema_path`).
    pub output_columns: Vec<OutputColumn>,
}

/// One output column as the engine's planner describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutputColumn {
    /// Column name.
    pub name: String,
    /// The engine's own type name (informative; the Parquet file is
    /// normative).
    pub data_type: String,
    /// Whether the column may hold nulls.
    pub nullable: bool,
}

impl ValidateQuerySuccess {
    pub(crate) fn from_fb(
        success: fb::ValidateQueryResponseSuccess<'_>,
    ) -> Result<Self, DecodeError> {
        const TABLE: &str = "OutputColumn";
        Ok(Self {
            output_columns: tables(success.output_columns(), |column| {
                Ok(OutputColumn {
                    name: required_string(column.name(), TABLE, "name")?,
                    data_type: required_string(column.data_type(), TABLE, "data_type")?,
                    nullable: column.nullable(),
                })
            })?,
        })
    }

    pub(crate) fn to_fb<'b>(
        &self,
        fbb: &mut FlatBufferBuilder<'b>,
    ) -> WIPOffset<fb::ValidateQueryResponseSuccess<'b>> {
        let columns: Vec<_> = self
            .output_columns
            .iter()
            .map(|column| {
                let name = fbb.create_string(&column.name);
                let data_type = fbb.create_string(&column.data_type);
                fb::OutputColumn::create(
                    fbb,
                    &fb::OutputColumnArgs {
                        name: Some(name),
                        data_type: Some(data_type),
                        nullable: column.nullable,
                    },
                )
            })
            .collect();
        let output_columns = fbb.create_vector(&columns);
        fb::ValidateQueryResponseSuccess::create(
            fbb,
            &fb::ValidateQueryResponseSuccessArgs {
                output_columns: Some(output_columns),
            },
        )
    }
}

response_wire! {
    success: ValidateQuerySuccess,
    root: ValidateQueryResponseRoot, ValidateQueryResponseRootArgs,
    union: ValidateQueryResponse,
    progress: ValidateQueryResponseProgress, ValidateQueryResponseProgressArgs,
        value_as_validate_query_response_progress,
    success_table: ValidateQueryResponseSuccess, value_as_validate_query_response_success,
    invalid_query(with_errors): ValidateQueryResponseInvalidQuery,
        ValidateQueryResponseInvalidQueryArgs, value_as_validate_query_response_invalid_query,
    internal_error: ValidateQueryResponseInternalError, ValidateQueryResponseInternalErrorArgs,
        value_as_validate_query_response_internal_error,
}
