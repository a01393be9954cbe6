//! The checkpoint file of a temporal join: one Parquet file, format 2, kind `temporal_join`.
//!
//! Its records are of several kinds, told apart by `__weir_part` (Int32): 0 for the stream records still
//! waiting for the tables' watermark, `1 + i` for the records table `i` keeps (the latest entry at or
//! before its watermark per key, and every entry after). Each kind's columns are one struct column,
//! `__weir_stream` or `__weir_table_<i>` (the input's own columns, nullable), null in the other rows.
//! Its key-value metadata `weir.checkpoint` holds the JSON header ([`TemporalHeader`]): format, kind,
//! query fingerprint, and per input its alias, system column names and watermark — so MigrateQuery can
//! finalise the state without the inputs that wrote it. Window checkpoints (format 1) are unchanged.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int32Array, RecordBatch, StructArray, new_null_array,
};
use datafusion::arrow::compute::{concat, concat_batches, filter};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::file::metadata::KeyValue;
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::output::writer::write_parquet_file;
use crate::request::DatasetVocabulary;
use crate::window::checkpoint::{HEADER_KEY, metadata_value};

/// Format version of temporal join checkpoints.
pub(crate) const FORMAT: u32 = 2;
/// Kind of temporal join checkpoints.
pub(crate) const KIND: &str = "temporal_join";
const PART_COLUMN: &str = "__weir_part";
const STREAM_COLUMN: &str = "__weir_stream";

/// The system column names of an input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Vocabulary {
    pub offset_column: String,
    pub operation_type_column: String,
    pub system_time_column: String,
    pub event_time_column: String,
}

impl From<&DatasetVocabulary> for Vocabulary {
    fn from(v: &DatasetVocabulary) -> Self {
        Self {
            offset_column: v.offset_column.clone(),
            operation_type_column: v.operation_type_column.clone(),
            system_time_column: v.system_time_column.clone(),
            event_time_column: v.event_time_column.clone(),
        }
    }
}

impl From<&Vocabulary> for DatasetVocabulary {
    fn from(v: &Vocabulary) -> Self {
        DatasetVocabulary {
            offset_column: v.offset_column.clone(),
            operation_type_column: v.operation_type_column.clone(),
            system_time_column: v.system_time_column.clone(),
            event_time_column: v.event_time_column.clone(),
        }
    }
}

/// The stream's part of the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StreamHeader {
    /// The stream input's query alias.
    pub alias: String,
    /// Its system columns.
    pub vocab: Vocabulary,
    /// Its latest explicit watermark so far.
    pub watermark_ms: Option<i64>,
}

/// A table's part of the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TableHeader {
    /// The table input's query alias.
    pub alias: String,
    /// Its declared primary key.
    pub primary_key: Vec<String>,
    /// Its system columns.
    pub vocab: Vocabulary,
    /// Its latest explicit watermark so far.
    pub watermark_ms: Option<i64>,
}

/// The checkpoint header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TemporalHeader {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// [`KIND`].
    pub kind: String,
    /// Fingerprint of the query that wrote it.
    pub query_fingerprint: String,
    /// The stream.
    pub stream: StreamHeader,
    /// The tables, in the order of their parts.
    pub tables: Vec<TableHeader>,
}

/// The records of a checkpoint: the waiting stream records, and each table's kept records.
#[derive(Debug, Clone)]
pub(crate) struct TemporalRecords {
    pub stream: RecordBatch,
    pub tables: Vec<RecordBatch>,
}

fn part_column(i: usize) -> String {
    if i == 0 {
        STREAM_COLUMN.to_owned()
    } else {
        format!("__weir_table_{}", i - 1)
    }
}

fn nullable(schema: &Schema) -> Fields {
    schema
        .fields()
        .iter()
        .map(|f| Arc::new(f.as_ref().clone().with_nullable(true)))
        .collect()
}

/// Writes a checkpoint.
pub(crate) fn write(
    path: &Path,
    header: &TemporalHeader,
    records: &TemporalRecords,
) -> Result<(), EngineError> {
    let failed = |reason: String| EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason,
    };
    let parts: Vec<&RecordBatch> = std::iter::once(&records.stream)
        .chain(&records.tables)
        .collect();
    let total: usize = parts.iter().map(|b| b.num_rows()).sum();
    let mut fields = vec![Field::new(PART_COLUMN, DataType::Int32, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int32Array::from_iter_values(
        parts
            .iter()
            .enumerate()
            .flat_map(|(i, b)| std::iter::repeat_n(i as i32, b.num_rows())),
    ))];
    let mut before = 0;
    for (i, part) in parts.iter().enumerate() {
        let children = nullable(&part.schema());
        let struct_type = DataType::Struct(children.clone());
        let values = StructArray::try_new(children, part.columns().to_vec(), None)?;
        let rows = part.num_rows();
        let pieces: Vec<ArrayRef> = vec![
            new_null_array(&struct_type, before),
            Arc::new(values),
            new_null_array(&struct_type, total - before - rows),
        ];
        let refs: Vec<&dyn Array> = pieces.iter().map(|a| a.as_ref()).collect();
        columns.push(concat(&refs)?);
        fields.push(Field::new(part_column(i), struct_type, true));
        before += rows;
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    let header = serde_json::to_string(header).map_err(|e| failed(e.to_string()))?;
    write_parquet_file(
        path,
        schema,
        &[batch],
        vec![KeyValue::new(HEADER_KEY.to_owned(), header)],
    )
    .map_err(failed)?;
    tracing::debug!(
        path = %path.display(),
        waiting = records.stream.num_rows(),
        table_records = total - records.stream.num_rows(),
        "temporal join checkpoint written"
    );
    Ok(())
}

/// Reads a checkpoint: its header and records (each part with the input's column types, nullable).
pub(crate) fn read(path: &Path) -> Result<(TemporalHeader, TemporalRecords), EngineError> {
    let failed = |reason: String| EngineError::CheckpointRead {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|e| failed(e.to_string()))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| failed(e.to_string()))?;
    let header: TemporalHeader =
        serde_json::from_str(&metadata_value(&builder, HEADER_KEY).map_err(failed)?)
            .map_err(|e| failed(e.to_string()))?;
    if header.format != FORMAT || header.kind != KIND {
        return Err(failed(format!(
            "format {} of kind `{}` is not a temporal join checkpoint (format {FORMAT} `{KIND}`)",
            header.format, header.kind
        )));
    }
    let schema: SchemaRef = Arc::clone(builder.schema());
    let reader = builder.build().map_err(|e| failed(e.to_string()))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.to_string()))?;
    let all = concat_batches(&schema, &batches)?;
    let parts = all
        .column_by_name(PART_COLUMN)
        .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
        .ok_or_else(|| failed(format!("it has no `{PART_COLUMN}` column")))?
        .clone();
    let part = |i: usize| -> Result<RecordBatch, EngineError> {
        let name = part_column(i);
        let column = all
            .column_by_name(&name)
            .ok_or_else(|| failed(format!("it has no `{name}` column")))?;
        let keep: BooleanArray = parts.iter().map(|p| Some(p == Some(i as i32))).collect();
        let kept = filter(column.as_ref(), &keep)?;
        let values = kept
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| failed(format!("`{name}` is not a struct column")))?;
        Ok(RecordBatch::from(values))
    };
    let stream = part(0)?;
    let tables = (0..header.tables.len())
        .map(|i| part(i + 1))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((header, TemporalRecords { stream, tables }))
}

/// `batch` with the types and nullability of `schema`, when its columns have the same names and types.
pub(crate) fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Option<RecordBatch> {
    if !super::state::same_types(&batch.schema(), schema) {
        return None;
    }
    RecordBatch::try_new_with_options(
        Arc::clone(schema),
        batch.columns().to_vec(),
        &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .ok()
}
