//! ValidateQuery: the output schema for given input schemas, without reading any data.

use crate::error::EngineError;
use crate::inputs::InputSource;
use crate::output::writer::write_parquet_file;
use std::path::Path;

use crate::request::{OutputColumn, ValidateQueryRequest, ValidateQuerySuccess};

pub(crate) async fn validate_query(
    request: &ValidateQueryRequest,
) -> Result<ValidateQuerySuccess, EngineError> {
    let sources: Vec<InputSource> = request
        .query_inputs
        .iter()
        .map(|input| InputSource::schema_only(&input.query_alias, &input.vocab, &input.schema_file))
        .collect();
    let path = Path::new(&request.output_schema_path);
    // Chained steps' intermediate schemas are written beside the output schema, then removed.
    let scratch = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| std::path::PathBuf::from("."), Path::to_path_buf);
    let schema =
        crate::chain::output_schema(&request.transform, &sources, &request.vocab, &scratch).await?;
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
