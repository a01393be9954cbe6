//! Records in Arrow and Parquet: reading and writing slices, the system columns, and the logical hash.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray,
};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::row::{RowConverter, SortField};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use sha3::{Digest, Sha3_256};

use odf::DatasetVocabulary;
use odf::Multihash;

/// Why records cannot be read, written or shaped.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// Arrow failed.
    #[error("{context}: {source}")]
    Arrow {
        /// What was being done.
        context: String,
        /// Arrow's error.
        #[source]
        source: arrow::error::ArrowError,
    },
    /// Parquet failed.
    #[error("{context}: {source}")]
    Parquet {
        /// What was being done.
        context: String,
        /// Parquet's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// A worker thread panicked (a bug, reported instead of crashing the coordinator).
    #[error("{context}: the worker thread panicked")]
    Panicked {
        /// What was being done.
        context: String,
    },
    /// A column is missing or has an unusable type.
    #[error("{message}")]
    Column {
        /// What is wrong.
        message: String,
    },
}

/// Result alias.
pub type Result<T, E = DataError> = std::result::Result<T, E>;

pub(crate) fn arrow_err(
    context: impl Into<String>,
) -> impl FnOnce(arrow::error::ArrowError) -> DataError {
    let context = context.into();
    move |source| DataError::Arrow { context, source }
}

pub(crate) fn parquet_err(
    context: impl Into<String>,
) -> impl FnOnce(parquet::errors::ParquetError) -> DataError {
    let context = context.into();
    move |source| DataError::Parquet { context, source }
}

/// The `Timestamp(ms, UTC)` type of system and event times.
pub fn utc_millis() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// Reads a whole Parquet file into one batch (possibly empty, always with the file's schema).
pub fn read_parquet(bytes: Bytes) -> Result<RecordBatch> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(parquet_err("reading Parquet"))?;
    let schema = builder.schema().clone();
    let reader = builder.build().map_err(parquet_err("reading Parquet"))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow_err("reading Parquet"))?;
    concat_batches(&schema, &batches).map_err(arrow_err("reading Parquet"))
}

/// Writes a batch as a Parquet file: Snappy-compressed, as engines write theirs (a third of the
/// uncompressed size on typical data, which is also less to hash and to store).
pub fn write_parquet(batch: &RecordBatch) -> Result<Bytes> {
    let mut buf = Vec::new();
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(properties))
        .map_err(parquet_err("writing Parquet"))?;
    w.write(batch).map_err(parquet_err("writing Parquet"))?;
    w.close().map_err(parquet_err("writing Parquet"))?;
    Ok(Bytes::from(buf))
}

/// Casts a system column to its compatible form (offset Int64, op Int32), whatever an engine wrote.
pub fn normalize_system_columns(
    batch: &RecordBatch,
    vocab: &DatasetVocabulary,
) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        let target = if f.name() == &vocab.offset_column {
            Some(DataType::Int64)
        } else if f.name() == &vocab.operation_type_column {
            Some(DataType::Int32)
        } else {
            None
        };
        match target {
            Some(t) if c.data_type() != &t => {
                columns.push(cast(c, &t).map_err(arrow_err(format!("casting `{}`", f.name())))?);
                fields.push(Field::new(f.name(), t, f.is_nullable()));
            }
            _ => {
                columns.push(c.clone());
                fields.push(f.as_ref().clone());
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(arrow_err("normalising system columns"))
}

/// [`write_parquet`] and [`logical_hash`] of the same batch, on two threads: both read every value,
/// neither depends on the other, and on large slices each takes seconds.
pub fn write_parquet_and_hash(
    batch: &RecordBatch,
    vocab: &DatasetVocabulary,
) -> Result<(Bytes, Multihash)> {
    std::thread::scope(|scope| {
        let hashing = scope.spawn(|| logical_hash(batch, vocab));
        let bytes = write_parquet(batch);
        let hash = hashing.join().map_err(|_| DataError::Panicked {
            context: "hashing records".to_owned(),
        })?;
        Ok((bytes?, hash?))
    })
}

/// Weir's logical hash of records: SHA3-256 over the column names and types, then every row in Arrow's
/// row format. Independent of the Parquet encoding, compression and batch boundaries; system columns are
/// normalised first (offset Int64, op Int32) so engines that write the spec's unsigned forms hash the same.
pub fn logical_hash(batch: &RecordBatch, vocab: &DatasetVocabulary) -> Result<Multihash> {
    let batch = normalize_system_columns(batch, vocab)?;
    let mut h = Sha3_256::new();
    for f in batch.schema().fields() {
        h.update(f.name().as_bytes());
        h.update([0]);
        h.update(f.data_type().to_string().as_bytes());
        h.update([0]);
    }
    if batch.num_columns() > 0 {
        let conv = RowConverter::new(
            batch
                .schema()
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )
        .map_err(arrow_err("hashing records"))?;
        let rows = conv
            .convert_columns(batch.columns())
            .map_err(arrow_err("hashing records"))?;
        for row in rows.iter() {
            let bytes = row.as_ref();
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
    }
    Ok(Multihash::from_sha3_256_digest(h.finalize().into()))
}

/// Adds `offset`, `op` and `system_time` in front of the data columns (which must hold the event time).
pub fn with_system_columns(
    data: &RecordBatch,
    ops: &[i32],
    first_offset: u64,
    system_time: DateTime<Utc>,
    vocab: &DatasetVocabulary,
) -> Result<RecordBatch> {
    let n = data.num_rows();
    let offsets: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..n as i64).map(|i| first_offset as i64 + i),
    ));
    let ops: ArrayRef = Arc::new(Int32Array::from(ops.to_vec()));
    let st: ArrayRef = Arc::new(
        TimestampMillisecondArray::from(vec![system_time.timestamp_millis(); n])
            .with_timezone("UTC"),
    );
    let mut fields = vec![
        Field::new(&vocab.offset_column, DataType::Int64, false),
        Field::new(&vocab.operation_type_column, DataType::Int32, false),
        Field::new(&vocab.system_time_column, utc_millis(), false),
    ];
    let mut columns = vec![offsets, ops, st];
    // Event time first, then the rest in their order.
    let schema = data.schema();
    let et = schema
        .index_of(&vocab.event_time_column)
        .map_err(|_| DataError::Column {
            message: format!("no `{}` column", vocab.event_time_column),
        })?;
    fields.push(schema.field(et).clone());
    columns.push(data.column(et).clone());
    for (i, f) in schema.fields().iter().enumerate() {
        if i != et {
            fields.push(f.as_ref().clone());
            columns.push(data.column(i).clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(arrow_err("adding system columns"))
}

/// The data columns of a stored batch: everything but offset, op and system_time.
pub fn data_columns(batch: &RecordBatch, vocab: &DatasetVocabulary) -> Result<RecordBatch> {
    let schema = batch.schema();
    let keep: Vec<usize> = schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            ![
                &vocab.offset_column,
                &vocab.operation_type_column,
                &vocab.system_time_column,
            ]
            .contains(&f.name())
        })
        .map(|(i, _)| i)
        .collect();
    batch
        .project(&keep)
        .map_err(arrow_err("projecting data columns"))
}

/// The `op` column of a stored batch as i32 values.
pub fn op_values(batch: &RecordBatch, vocab: &DatasetVocabulary) -> Result<Vec<i32>> {
    let col = batch
        .column_by_name(&vocab.operation_type_column)
        .ok_or_else(|| DataError::Column {
            message: format!("no `{}` column", vocab.operation_type_column),
        })?;
    let col = cast(col, &DataType::Int32).map_err(arrow_err("reading op"))?;
    let arr = col
        .as_any()
        .downcast_ref::<Int32Array>()
        .ok_or_else(|| DataError::Column {
            message: "op is not an integer".into(),
        })?;
    Ok(arr.iter().map(|v| v.unwrap_or(0)).collect())
}

/// The `offset` column of a batch as u64 values (both Int64 and UInt64 forms).
pub fn offset_values(batch: &RecordBatch, vocab: &DatasetVocabulary) -> Result<Vec<u64>> {
    let col = batch
        .column_by_name(&vocab.offset_column)
        .ok_or_else(|| DataError::Column {
            message: format!("no `{}` column", vocab.offset_column),
        })?;
    let col = cast(col, &DataType::Int64).map_err(arrow_err("reading offsets"))?;
    let arr = col
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| DataError::Column {
            message: "offset is not an integer".into(),
        })?;
    if arr.null_count() > 0 {
        return Err(DataError::Column {
            message: "offset has nulls".into(),
        });
    }
    Ok(arr.values().iter().map(|v| *v as u64).collect())
}

/// The maximum of a timestamp column, in UTC.
pub fn max_time(batch: &RecordBatch, column: &str) -> Result<Option<DateTime<Utc>>> {
    let Some(col) = batch.column_by_name(column) else {
        return Ok(None);
    };
    let col = cast(col, &utc_millis()).map_err(arrow_err(format!("reading `{column}`")))?;
    let arr = col
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .ok_or_else(|| DataError::Column {
            message: format!("`{column}` is not a timestamp"),
        })?;
    Ok(arr
        .iter()
        .flatten()
        .max()
        .and_then(DateTime::from_timestamp_millis))
}

/// A short text form of a schema for messages.
pub fn schema_text(s: &SchemaRef) -> String {
    s.fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;

    fn batch(names: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("event_time", utc_millis(), false),
            Field::new("name", DataType::Utf8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(
                    TimestampMillisecondArray::from(vec![1000; names.len()]).with_timezone("UTC"),
                ),
                Arc::new(StringArray::from(names.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn logical_hash_ignores_parquet_encoding_but_not_content() {
        let vocab = DatasetVocabulary::default();
        let b = with_system_columns(&batch(&["a", "b"]), &[0, 0], 5, Utc::now(), &vocab).unwrap();
        let round = read_parquet(write_parquet(&b).unwrap()).unwrap();
        assert_eq!(
            logical_hash(&b, &vocab).unwrap(),
            logical_hash(&round, &vocab).unwrap()
        );
        let other =
            with_system_columns(&batch(&["a", "c"]), &[0, 0], 5, Utc::now(), &vocab).unwrap();
        assert_ne!(
            logical_hash(&b, &vocab).unwrap(),
            logical_hash(&other, &vocab).unwrap()
        );
    }

    #[test]
    fn writing_and_hashing_together_gives_what_each_gives_alone() {
        let vocab = DatasetVocabulary::default();
        let b = with_system_columns(&batch(&["a", "b"]), &[0, 0], 5, Utc::now(), &vocab).unwrap();
        let (bytes, hash) = write_parquet_and_hash(&b, &vocab).unwrap();
        assert_eq!(hash, logical_hash(&b, &vocab).unwrap());
        assert_eq!(bytes, write_parquet(&b).unwrap());
        assert_eq!(read_parquet(bytes).unwrap(), b);
        let metadata = ParquetRecordBatchReaderBuilder::try_new(write_parquet(&b).unwrap())
            .unwrap()
            .metadata()
            .clone();
        let column = metadata.row_group(0).column(0);
        assert_eq!(column.compression(), Compression::SNAPPY);
    }

    #[test]
    fn system_columns_come_first_with_contiguous_offsets() {
        let vocab = DatasetVocabulary::default();
        let b = with_system_columns(&batch(&["a", "b", "c"]), &[0, 1, 0], 10, Utc::now(), &vocab)
            .unwrap();
        let names: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["offset", "op", "system_time", "event_time", "name"]);
        assert_eq!(offset_values(&b, &vocab).unwrap(), vec![10, 11, 12]);
        assert_eq!(op_values(&b, &vocab).unwrap(), vec![0, 1, 0]);
    }
}
