//! Query results as text: a table for people, JSON rows or CSV for programs.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::error::SqlError;

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// A text table (Arrow's pretty printer), with a header even when there are no rows.
    #[default]
    Table,
    /// A JSON array of objects, one per row, every column in each (`null` for nulls).
    Json,
    /// CSV with a header line.
    Csv,
}

impl OutputFormat {
    /// The format's name, as a CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Table => "table",
            OutputFormat::Json => "json",
            OutputFormat::Csv => "csv",
        }
    }
}

/// Writes rows of `schema` in `format` to `out`.
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{Int64Array, RecordBatch, StringArray};
/// use arrow::datatypes::{DataType, Field, Schema};
/// use weir_sql::{OutputFormat, write_results};
///
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("id", DataType::Int64, false),
///     Field::new("name", DataType::Utf8, true),
/// ]));
/// let batch = RecordBatch::try_new(
///     schema.clone(),
///     vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(StringArray::from(vec![Some("a"), None]))],
/// )?;
/// let mut csv = Vec::new();
/// write_results(&mut csv, &schema, &[batch.clone()], OutputFormat::Csv)?;
/// assert_eq!(String::from_utf8(csv)?, "id,name\n1,a\n2,\n");
/// let mut json = Vec::new();
/// write_results(&mut json, &schema, &[batch], OutputFormat::Json)?;
/// assert_eq!(String::from_utf8(json)?, r#"[{"id":1,"name":"a"},{"id":2,"name":null}]"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_results(
    out: &mut impl Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: OutputFormat,
) -> Result<(), SqlError> {
    let err = |source| SqlError::Format {
        format: format.name(),
        source,
    };
    match format {
        OutputFormat::Table => {
            let table =
                arrow::util::pretty::pretty_format_batches_with_schema(schema.clone(), batches)
                    .map_err(err)?;
            write!(out, "{table}").map_err(|e| err(e.into()))
        }
        OutputFormat::Json => {
            let mut writer = arrow::json::WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, arrow::json::writer::JsonArray>(out);
            for batch in batches {
                writer.write(batch).map_err(err)?;
            }
            writer.finish().map_err(err)
        }
        OutputFormat::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(out);
            if batches.is_empty() {
                // The header alone.
                writer
                    .write(&RecordBatch::new_empty(schema.clone()))
                    .map_err(err)?;
            }
            for batch in batches {
                writer.write(batch).map_err(err)?;
            }
            Ok(())
        }
    }
}

/// [`write_results`] into a string.
pub fn format_results(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: OutputFormat,
) -> Result<String, SqlError> {
    let mut out = Vec::new();
    write_results(&mut out, schema, batches, format)?;
    String::from_utf8(out).map_err(|e| SqlError::Format {
        format: format.name(),
        source: arrow::error::ArrowError::ExternalError(Box::new(e)),
    })
}
