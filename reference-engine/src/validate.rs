//! ValidateQuery: the output schema for given input schemas, without reading any data.

use crate::error::EngineError;
use crate::inputs::{InputSource, register_inputs};
use crate::output::writer::write_parquet_file;
use crate::prepare::prepare;
use std::path::Path;

use crate::request::{OutputColumn, ValidateQueryRequest, ValidateQuerySuccess};
use crate::session::new_session;

pub(crate) async fn validate_query(
    request: &ValidateQueryRequest,
) -> Result<ValidateQuerySuccess, EngineError> {
    let ctx = new_session();
    let sources: Vec<InputSource> = request
        .query_inputs
        .iter()
        .map(|input| InputSource::schema_only(&input.query_alias, &input.vocab, &input.schema_file))
        .collect();
    let inputs = register_inputs(&ctx, &sources).await?;
    let prepared = prepare(&ctx, &request.transform, &inputs, &request.vocab).await?;
    let schema = prepared.layout.schema();
    let path = Path::new(&request.output_schema_path);
    write_parquet_file(path, schema.clone(), &[], Vec::new()).map_err(|reason| {
        EngineError::OutputWrite {
            path: path.to_path_buf(),
            reason,
        }
    })?;
    Ok(ValidateQuerySuccess {
        output_columns: schema
            .fields()
            .iter()
            .map(|field| OutputColumn {
                name: field.name().clone(),
                data_type: field.data_type().to_string(),
                nullable: field.is_nullable(),
            })
            .collect(),
    })
}
