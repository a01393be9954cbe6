//! [`ParquetFixtures`]: the conformance kit's [`DataFixtures`] on real Parquet files, with arrow and
//! parquet alone.
//!
//! The kit in `engine-contract` has no Parquet dependency; this is how it writes its inputs (as kamu
//! writes data slices: Parquet 1.0 pages, Snappy) and reads engine outputs, for any engine (an engine
//! image under test reads the same files).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::{WriterProperties, WriterVersion};
use weir_engine_contract::conformance::{
    Column, ColumnType, DataFixtures, FixtureError, Table, Value,
};

/// Writes and reads the conformance kit's tables as Parquet.
///
/// ```
/// use weir_engine_contract::conformance::{Column, ColumnType, DataFixtures, Table, Value};
/// use weir_engine_conformance::ParquetFixtures;
///
/// let table = Table {
///     columns: vec![Column { name: "offset".into(), data_type: ColumnType::Int64, nullable: false }],
///     rows: vec![vec![Value::Int(7)]],
/// };
/// let path = std::env::temp_dir().join(format!("weir-fixture-{}.parquet", std::process::id()));
/// ParquetFixtures.write_parquet(&path, &table).unwrap();
/// assert_eq!(ParquetFixtures.read_parquet(&path).unwrap(), table);
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ParquetFixtures;

fn failed(message: impl std::fmt::Display) -> FixtureError {
    FixtureError {
        message: message.to_string(),
    }
}

fn arrow_type(column: &Column) -> Result<DataType, FixtureError> {
    Ok(match &column.data_type {
        ColumnType::Int64 => DataType::Int64,
        ColumnType::Int32 => DataType::Int32,
        ColumnType::Utf8 => DataType::Utf8,
        ColumnType::TimestampMillisUtc => {
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
        }
        ColumnType::Other(name) => {
            return Err(failed(format!(
                "column `{}`: cannot write type {name}",
                column.name
            )));
        }
    })
}

/// The kit's name for a type read back. The string types are one (kamu compares `Utf8`, `LargeUtf8`
/// and `Utf8View` as the same logical type, and its DataFusion engine writes strings that read back
/// as `Utf8View`).
fn column_type(data_type: &DataType) -> ColumnType {
    match data_type {
        DataType::Int64 => ColumnType::Int64,
        DataType::Int32 => ColumnType::Int32,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::Utf8,
        DataType::Timestamp(TimeUnit::Millisecond, Some(tz)) if tz.as_ref() == "UTC" => {
            ColumnType::TimestampMillisUtc
        }
        other => ColumnType::Other(other.to_string()),
    }
}

fn build_array(
    index: usize,
    column: &Column,
    rows: &[Vec<Value>],
) -> Result<ArrayRef, FixtureError> {
    let cell = |row: &Vec<Value>| row.get(index).cloned().unwrap_or(Value::Null);
    let int = |value: Value| match value {
        Value::Int(i) | Value::TimestampMillis(i) => Ok(Some(i)),
        Value::Null => Ok(None),
        other => Err(failed(format!(
            "column `{}`: {other:?} is not an integer",
            column.name
        ))),
    };
    Ok(match arrow_type(column)? {
        DataType::Int64 => Arc::new(
            rows.iter()
                .map(|r| int(cell(r)))
                .collect::<Result<Int64Array, _>>()?,
        ),
        DataType::Int32 => Arc::new(
            rows.iter()
                .map(|r| {
                    int(cell(r))?
                        .map(|i| {
                            i32::try_from(i).map_err(|_| failed(format!("{i} does not fit Int32")))
                        })
                        .transpose()
                })
                .collect::<Result<Int32Array, _>>()?,
        ),
        DataType::Utf8 => Arc::new(
            rows.iter()
                .map(|r| match cell(r) {
                    Value::Utf8(s) => Ok(Some(s)),
                    Value::Null => Ok(None),
                    other => Err(failed(format!(
                        "column `{}`: {other:?} is not a string",
                        column.name
                    ))),
                })
                .collect::<Result<StringArray, _>>()?,
        ),
        _ => Arc::new(
            rows.iter()
                .map(|r| int(cell(r)))
                .collect::<Result<TimestampMillisecondArray, _>>()?
                .with_timezone("UTC"),
        ),
    })
}

fn cell_value(array: &ArrayRef, row: usize) -> Result<Value, FixtureError> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    let value = match array.data_type() {
        t if t.is_integer() => {
            let ints = cast(&array.slice(row, 1), &DataType::Int64).map_err(failed)?;
            Value::Int(downcast::<Int64Array>(&ints)?.value(0))
        }
        DataType::Timestamp(..) => {
            let target = DataType::Timestamp(TimeUnit::Millisecond, None);
            let millis = cast(
                &cast(&array.slice(row, 1), &target).map_err(failed)?,
                &DataType::Int64,
            )
            .map_err(failed)?;
            Value::TimestampMillis(downcast::<Int64Array>(&millis)?.value(0))
        }
        _ => {
            let text = cast(&array.slice(row, 1), &DataType::Utf8).map_err(failed)?;
            Value::Utf8(downcast::<StringArray>(&text)?.value(0).to_owned())
        }
    };
    Ok(value)
}

fn downcast<T: 'static>(array: &ArrayRef) -> Result<&T, FixtureError> {
    array
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| failed(format!("unexpected array type {}", array.data_type())))
}

impl DataFixtures for ParquetFixtures {
    fn write_parquet(&self, path: &Path, table: &Table) -> Result<(), FixtureError> {
        let fields = table
            .columns
            .iter()
            .map(|c| Ok(Field::new(&c.name, arrow_type(c)?, c.nullable)))
            .collect::<Result<Vec<_>, FixtureError>>()?;
        let schema = Arc::new(Schema::new(fields));
        let arrays = table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| build_array(i, c, &table.rows))
            .collect::<Result<Vec<_>, _>>()?;
        let batch = RecordBatch::try_new(Arc::clone(&schema), arrays).map_err(failed)?;
        let file = File::create(path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
        let properties = WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_1_0)
            .set_compression(Compression::SNAPPY)
            .build();
        let mut writer = ArrowWriter::try_new(file, schema, Some(properties)).map_err(failed)?;
        writer.write(&batch).map_err(failed)?;
        writer.close().map_err(failed)?;
        Ok(())
    }

    fn read_parquet(&self, path: &Path) -> Result<Table, FixtureError> {
        let file = File::open(path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(failed)?;
        let schema = Arc::clone(builder.schema());
        let columns = schema
            .fields()
            .iter()
            .map(|f| Column {
                name: f.name().clone(),
                data_type: column_type(f.data_type()),
                nullable: f.is_nullable(),
            })
            .collect();
        let mut rows = Vec::new();
        for batch in builder.build().map_err(failed)? {
            let batch = batch.map_err(failed)?;
            for row in 0..batch.num_rows() {
                rows.push(
                    batch
                        .columns()
                        .iter()
                        .map(|array| cell_value(array, row))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
        }
        Ok(Table { columns, rows })
    }
}
