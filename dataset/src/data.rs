//! Records in Arrow and Parquet: reading and writing slices, the system columns, and the logical hash.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray,
};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use weir_odf::DatasetVocabulary;
use weir_odf::Multihash;

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

/// Wraps an Arrow error with what was being done (`map_err(arrow_err("reading records"))`).
pub fn arrow_err(context: impl Into<String>) -> impl FnOnce(arrow::error::ArrowError) -> DataError {
    let context = context.into();
    move |source| DataError::Arrow { context, source }
}

/// Wraps a Parquet error with what was being done.
pub fn parquet_err(
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

/// A local Parquet file's reader builder, and the context its errors are told in (`reading PATH`).
fn open_local(
    path: &std::path::Path,
) -> Result<(ParquetRecordBatchReaderBuilder<std::fs::File>, String)> {
    let context = format!("reading {}", path.display());
    let file = std::fs::File::open(path).map_err(|e| DataError::Column {
        message: format!("{context}: {e}"),
    })?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err(context.clone()))?;
    Ok((builder, context))
}

/// The named columns of a Parquet file, a batch at a time (only their pages are read and decoded).
pub fn read_columns(
    path: &std::path::Path,
    columns: &[String],
) -> Result<impl Iterator<Item = Result<RecordBatch>> + use<>> {
    use parquet::arrow::ProjectionMask;
    let (builder, context) = open_local(path)?;
    let schema = builder.schema().clone();
    if let Some(missing) = columns.iter().find(|c| schema.index_of(c).is_err()) {
        return Err(DataError::Column {
            message: format!("{context}: the data has no column `{missing}`"),
        });
    }
    let mask =
        ProjectionMask::columns(builder.parquet_schema(), columns.iter().map(String::as_str));
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(parquet_err(context.clone()))?;
    Ok(reader.map(move |b| b.map_err(arrow_err(context.clone()))))
}

/// The records at `rows` (sorted, distinct, from 0) of a Parquet file, in that order: only the pages
/// holding them are decoded.
pub fn read_rows(path: &std::path::Path, rows: &[usize]) -> Result<RecordBatch> {
    use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
    let (builder, context) = open_local(path)?;
    let total = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
    if let Some(&beyond) = rows.iter().find(|&&r| r >= total) {
        return Err(DataError::Column {
            message: format!("{context}: no record {beyond} in a file of {total}"),
        });
    }
    let schema = builder.schema().clone();
    let mut selectors = Vec::new();
    let mut next = 0;
    for &r in rows {
        if r > next {
            selectors.push(RowSelector::skip(r - next));
        }
        selectors.push(RowSelector::select(1));
        next = r + 1;
    }
    let reader = builder
        .with_row_selection(RowSelection::from(selectors))
        .build()
        .map_err(parquet_err(context.clone()))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow_err(context.clone()))?;
    concat_batches(&schema, &batches).map_err(arrow_err(context))
}

/// The last `n` records of a Parquet file, reading only the row groups that hold them.
pub fn read_last_rows(path: &std::path::Path, n: usize) -> Result<Vec<RecordBatch>> {
    use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
    let (builder, context) = open_local(path)?;
    let total = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
    let skip = total.saturating_sub(n);
    let selection = RowSelection::from(vec![
        RowSelector::skip(skip),
        RowSelector::select(total - skip),
    ]);
    let reader = builder
        .with_row_selection(selection)
        .build()
        .map_err(parquet_err(context.clone()))?;
    reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow_err(context))
}

/// Writes a batch as a Parquet file: Snappy-compressed, as engines write theirs (a third of the
/// uncompressed size on typical data, which is also less to hash and to store).
pub fn write_parquet(batch: &RecordBatch) -> Result<Bytes> {
    let mut buf = Vec::new();
    let properties = writer_properties();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(properties))
        .map_err(parquet_err("writing Parquet"))?;
    w.write(batch).map_err(parquet_err("writing Parquet"))?;
    w.close().map_err(parquet_err("writing Parquet"))?;
    Ok(Bytes::from(buf))
}

/// The stored type of a system column (offset Int64, op Int32), `None` for other columns.
fn normalized_type(name: &str, vocab: &DatasetVocabulary) -> Option<DataType> {
    if name == vocab.offset_column {
        Some(DataType::Int64)
    } else if name == vocab.operation_type_column {
        Some(DataType::Int32)
    } else {
        None
    }
}

/// The schema [`normalize_system_columns`] gives batches of `schema`.
pub fn normalized_schema(schema: &SchemaRef, vocab: &DatasetVocabulary) -> SchemaRef {
    if schema
        .fields()
        .iter()
        .all(|f| normalized_type(f.name(), vocab).is_none_or(|t| &t == f.data_type()))
    {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match normalized_type(f.name(), vocab) {
            Some(t) => Field::new(f.name(), t, f.is_nullable()),
            None => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The writer settings of every Parquet file Weir writes: Snappy, as engines write theirs.
pub fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build()
}

/// The writer settings of a data slice: [`writer_properties`], with the system columns (offset, operation
/// type, system time) PLAIN and without a dictionary, as the reference engine writes them. They are
/// consecutive or constant integers: a dictionary would intern every value only to fall back to PLAIN
/// (offsets) or to store one entry (the others), and Snappy shrinks the constant runs anyway. PLAIN is the
/// encoding every ODF engine reads (kamu's Flink engine cannot read DELTA_BINARY_PACKED).
pub fn slice_writer_properties(vocab: &DatasetVocabulary) -> WriterProperties {
    let mut builder = WriterProperties::builder().set_compression(Compression::SNAPPY);
    for column in [
        &vocab.offset_column,
        &vocab.operation_type_column,
        &vocab.system_time_column,
    ] {
        let path = parquet::schema::types::ColumnPath::from(column.as_str());
        builder = builder
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, parquet::basic::Encoding::PLAIN);
    }
    builder.build()
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
        match normalized_type(f.name(), vocab) {
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

/// The batch size kamu reads Parquet slices with when it computes their logical hash (the hash does not
/// depend on batch boundaries; this only bounds memory).
pub const LOGICAL_HASH_BATCH_ROWS: usize = 10_000;

/// ODF's logical hash of records ([`weir_odf::logical_hash`]: arrow-digest's `RecordDigestV0` with SHA3-256,
/// multicodec `arrow0-sha3-256`), what kamu computes and `kamu verify` compares. Independent of the
/// Parquet encoding, compression, batch boundaries and string encodings (`Utf8` / `Utf8View`).
pub fn logical_hash(batches: &[RecordBatch]) -> Result<Multihash> {
    let Some(first) = batches.first() else {
        return Err(DataError::Column {
            message: "no records to hash".into(),
        });
    };
    weir_odf::logical_hash::of_batches(first.schema_ref(), batches).map_err(|e| DataError::Column {
        message: e.to_string(),
    })
}

/// The logical hash of a stored Parquet slice and its records' schema (its footer's), over the record
/// batches the Parquet reader yields (batches of [`LOGICAL_HASH_BATCH_ROWS`], as kamu reads them), read as a
/// stream: the batches are decoded here and hashed on the logical hash's own threads, a few at a time,
/// whatever the size of the slice. Blocking: call it from a blocking thread.
pub fn logical_hash_of_parquet<R: parquet::file::reader::ChunkReader + 'static>(
    slice: R,
) -> Result<(SchemaRef, Multihash)> {
    let context = "hashing a Parquet slice";
    let builder = ParquetRecordBatchReaderBuilder::try_new(slice).map_err(parquet_err(context))?;
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(LOGICAL_HASH_BATCH_ROWS)
        .build()
        .map_err(parquet_err(context))?;
    let hash_err = |e: weir_odf::logical_hash::LogicalHashError| DataError::Column {
        message: e.to_string(),
    };
    let mut hasher = weir_odf::logical_hash::LogicalHasher::new(&schema)
        .and_then(|h| h.spawn(LOGICAL_HASH_QUEUE))
        .map_err(hash_err)?;
    for batch in reader {
        let batch = batch.map_err(arrow_err(context))?;
        hasher.update(batch).map_err(hash_err)?;
    }
    Ok((schema, hasher.finish().map_err(hash_err)?))
}

/// The number of records the Parquet file at `path` holds, from its footer alone.
pub fn rows_in_file(path: &std::path::Path) -> Result<u64> {
    let file = std::fs::File::open(path).map_err(|e| DataError::Column {
        message: format!("reading {}: {e}", path.display()),
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err(format!(
        "reading the footer of {}",
        path.display()
    )))?;
    u64::try_from(builder.metadata().file_metadata().num_rows()).map_err(|_| DataError::Column {
        message: format!(
            "{}: its footer gives a negative number of rows",
            path.display()
        ),
    })
}

/// [`logical_hash_of_parquet`] of the Parquet file at `path`, on a blocking thread.
pub async fn logical_hash_of_file(path: &std::path::Path) -> Result<(SchemaRef, Multihash)> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path).map_err(|e| DataError::Column {
            message: format!("reading {}: {e}", path.display()),
        })?;
        logical_hash_of_parquet(file)
    })
    .await
    .map_err(|e| DataError::Column {
        message: format!("hashing a data slice: {e}"),
    })?
}

/// Batches of [`LOGICAL_HASH_BATCH_ROWS`] a slice's reader runs ahead of the logical hash.
const LOGICAL_HASH_QUEUE: usize = 8;

/// Whether two schemas have the same columns by ODF's logical types (`Utf8`, `LargeUtf8` and `Utf8View`
/// are one type, see [`weir_odf::arrow_schema::same_type`]), ignoring nullability and metadata: what "the output
/// schema changed" means.
pub fn same_logical_columns(a: &SchemaRef, b: &SchemaRef) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields().iter().zip(b.fields()).all(|(x, y)| {
            x.name() == y.name() && weir_odf::arrow_schema::same_type(x.data_type(), y.data_type())
        })
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
    // ODF's offset column is Int64: the last offset must fit, or the records cannot be written.
    let first = i64::try_from(first_offset)
        .ok()
        .filter(|f| i64::try_from(n).is_ok_and(|n| f.checked_add(n).is_some()))
        .ok_or_else(|| DataError::Column {
            message: format!(
                "offsets from {first_offset} for {n} records go beyond the largest a record can have ({})",
                i64::MAX
            ),
        })?;
    let offsets: ArrayRef = Arc::new(Int64Array::from_iter_values(first..first + n as i64));
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
    arr.values()
        .iter()
        .map(|v| {
            u64::try_from(*v).map_err(|_| DataError::Column {
                message: format!("offset {v} is negative"),
            })
        })
        .collect()
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
        let bytes = write_parquet(&b).unwrap();
        let h = logical_hash(std::slice::from_ref(&b)).unwrap();
        assert_eq!(h.codec(), weir_odf::Multicodec::Arrow0_Sha3_256);
        let (schema, hashed) = logical_hash_of_parquet(bytes).unwrap();
        assert_eq!((schema, hashed), (b.schema(), h));
        let other =
            with_system_columns(&batch(&["a", "c"]), &[0, 0], 5, Utc::now(), &vocab).unwrap();
        assert_ne!(logical_hash(&[other]).unwrap(), h);
    }

    #[test]
    fn slices_are_snappy_compressed() {
        let vocab = DatasetVocabulary::default();
        let b = with_system_columns(&batch(&["a", "b"]), &[0, 0], 5, Utc::now(), &vocab).unwrap();
        let metadata = ParquetRecordBatchReaderBuilder::try_new(write_parquet(&b).unwrap())
            .unwrap()
            .metadata()
            .clone();
        assert_eq!(
            metadata.row_group(0).column(0).compression(),
            Compression::SNAPPY
        );
    }

    #[test]
    fn strings_as_views_have_the_logical_type_and_hash_of_strings() {
        let utf8 = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let view = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8View, true)]));
        assert!(same_logical_columns(&utf8, &view));
        let a = RecordBatch::try_new(utf8, vec![Arc::new(StringArray::from(vec!["x"]))]).unwrap();
        let b = RecordBatch::try_new(view, vec![cast(a.column(0), &DataType::Utf8View).unwrap()])
            .unwrap();
        assert_eq!(logical_hash(&[a]).unwrap(), logical_hash(&[b]).unwrap());
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
