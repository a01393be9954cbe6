//! Reading fetched bytes into records: CSV, NDJSON, Parquet, with an optional DDL schema.

use std::io::Cursor;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;

use crate::data::{self, DataError, arrow_err, utc_millis};
use odf::ReadStep;

/// Parses ODF's DDL column list (`["id BIGINT", "name STRING", "at TIMESTAMP"]`).
///
/// ```
/// use coordinator::ingest::read::parse_ddl;
/// let s = parse_ddl(&["id BIGINT".into(), "name STRING".into()]).unwrap();
/// assert_eq!(s.field(0).name(), "id");
/// ```
pub fn parse_ddl(columns: &[String]) -> Result<SchemaRef, DataError> {
    let fields = columns
        .iter()
        .map(|c| {
            let mut parts = c.split_whitespace();
            let (Some(name), Some(ty), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(DataError::Column { message: format!("DDL column `{c}` is not `name TYPE`") });
            };
            let dt = match ty.to_ascii_uppercase().as_str() {
                "STRING" | "VARCHAR" | "TEXT" => DataType::Utf8,
                "BIGINT" | "INT64" | "LONG" => DataType::Int64,
                "INT" | "INTEGER" | "INT32" => DataType::Int32,
                "DOUBLE" | "FLOAT64" => DataType::Float64,
                "FLOAT" | "FLOAT32" | "REAL" => DataType::Float32,
                "BOOLEAN" | "BOOL" => DataType::Boolean,
                "TIMESTAMP" => utc_millis(),
                "DATE" => DataType::Date32,
                other => {
                    return Err(DataError::Column {
                        message: format!(
                            "DDL type `{other}` of `{name}` is not supported (STRING, BIGINT, INT, DOUBLE, FLOAT, BOOLEAN, TIMESTAMP, DATE)"
                        ),
                    });
                }
            };
            Ok(Field::new(name, dt, true))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// Reads `bytes` according to the read step; `what` names the source in errors.
pub fn read(step: &ReadStep, bytes: Bytes, what: &str) -> Result<RecordBatch, DataError> {
    let ctx = |s: &str| format!("reading {what} as {s}");
    match step {
        ReadStep::Csv(csv) => {
            let schema = csv.schema.as_deref().unwrap_or_default();
            let header = csv.header.unwrap_or(false);
            let separator = &csv.separator;
            let delimiter = match separator.as_deref() {
                None | Some("") => b',',
                Some(s) if s.len() == 1 => s.as_bytes()[0],
                Some(s) => {
                    return Err(DataError::Column {
                        message: format!("CSV separator {s:?} is not one byte"),
                    });
                }
            };
            let schema = if schema.is_empty() {
                let format = arrow::csv::reader::Format::default()
                    .with_header(header)
                    .with_delimiter(delimiter);
                let (s, _) = format
                    .infer_schema(Cursor::new(&bytes), Some(1000))
                    .map_err(arrow_err(ctx("CSV")))?;
                Arc::new(s)
            } else {
                parse_ddl(schema)?
            };
            let reader = arrow::csv::ReaderBuilder::new(schema.clone())
                .with_header(header)
                .with_delimiter(delimiter)
                .build(Cursor::new(bytes))
                .map_err(arrow_err(ctx("CSV")))?;
            collect(schema, reader, &ctx("CSV"))
        }
        ReadStep::NdJson(json) => {
            let schema = json.schema.as_deref().unwrap_or_default();
            let schema = if schema.is_empty() {
                let (s, _) = arrow::json::reader::infer_json_schema_from_seekable(
                    Cursor::new(&bytes),
                    Some(1000),
                )
                .map_err(arrow_err(ctx("NDJSON")))?;
                Arc::new(s)
            } else {
                parse_ddl(schema)?
            };
            let reader = arrow::json::ReaderBuilder::new(schema.clone())
                .build(Cursor::new(bytes))
                .map_err(arrow_err(ctx("NDJSON")))?;
            collect(schema, reader, &ctx("NDJSON"))
        }
        ReadStep::Parquet(parquet) => {
            let schema = parquet.schema.as_deref().unwrap_or_default();
            let batch = data::read_parquet(bytes)?;
            if schema.is_empty() {
                return Ok(batch);
            }
            let target = parse_ddl(schema)?;
            let columns = target
                .fields()
                .iter()
                .map(|f| {
                    let c = batch
                        .column_by_name(f.name())
                        .ok_or_else(|| DataError::Column {
                            message: format!("{what} has no column `{}`", f.name()),
                        })?;
                    arrow::compute::cast(c, f.data_type()).map_err(arrow_err(ctx("Parquet")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            RecordBatch::try_new(target, columns).map_err(arrow_err(ctx("Parquet")))
        }
        other => Err(DataError::Column {
            message: format!(
                "read step `{}` is not supported by Weir",
                crate::manifest::support::read_kind(other)
            ),
        }),
    }
}

fn collect(
    schema: SchemaRef,
    reader: impl Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>>,
    ctx: &str,
) -> Result<RecordBatch, DataError> {
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(arrow_err(ctx))?;
    concat_batches(&schema, &batches).map_err(arrow_err(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_with_header_is_inferred() {
        let step = ReadStep::Csv(odf::ReadStepCsv {
            header: Some(true),
            ..Default::default()
        });
        let b = read(&step, Bytes::from("id,name\n1,a\n2,b\n"), "t.csv").unwrap();
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.schema().field(0).data_type(), &DataType::Int64);
    }

    #[test]
    fn csv_with_ddl_schema_parses_timestamps() {
        let step = ReadStep::Csv(odf::ReadStepCsv {
            schema: Some(vec!["at TIMESTAMP".into(), "v DOUBLE".into()]),
            separator: Some(";".into()),
            header: Some(false),
            ..Default::default()
        });
        let b = read(&step, Bytes::from("2024-01-01T00:00:00Z;1.5\n"), "t.csv").unwrap();
        assert_eq!(b.schema().field(0).data_type(), &utc_millis());
        assert_eq!(b.num_rows(), 1);
    }

    #[test]
    fn ndjson_is_inferred() {
        let step = ReadStep::NdJson(odf::ReadStepNdJson::default());
        let b = read(&step, Bytes::from("{\"a\": 1}\n{\"a\": 2}\n"), "t.json").unwrap();
        assert_eq!(b.num_rows(), 2);
    }

    #[test]
    fn an_unknown_ddl_type_is_named() {
        let err = parse_ddl(&["x BLOB".into()]).unwrap_err().to_string();
        assert!(err.contains("BLOB"), "{err}");
    }
}
