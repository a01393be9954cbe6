//! The checkpoint file of a temporal join: one Parquet file, format 2, kind `temporal_join`.
//!
//! Its records are of several kinds, told apart by `__weir_part` (Int32): 0 for the stream records still
//! waiting for the tables' watermark, `1 + i` for the records table `i` keeps (the latest entry at or
//! before its watermark per key, and every entry after). Each kind's columns are one struct column,
//! `__weir_stream` or `__weir_table_<i>` (the input's own columns, nullable), null in the other rows.
//! Its key-value metadata `weir.checkpoint` holds the JSON header ([`TemporalHeader`]): format, kind,
//! query fingerprint, and per input its alias, system column names and watermark — so MigrateQuery can
//! finalise the state without the inputs that wrote it. Window checkpoints (format 1) are unchanged.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use serde::{Deserialize, Serialize};

use crate::checkpoint_parts::{read_parts, write_parts};
use crate::error::EngineError;
use crate::request::DatasetVocabulary;

/// Format version of temporal join checkpoints.
pub(crate) const FORMAT: u32 = 2;
/// Kind of temporal join checkpoints.
pub(crate) const KIND: &str = "temporal_join";
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

/// Writes a checkpoint.
pub(crate) fn write(
    path: &Path,
    header: &TemporalHeader,
    records: &TemporalRecords,
) -> Result<(), EngineError> {
    let parts: Vec<&RecordBatch> = std::iter::once(&records.stream)
        .chain(&records.tables)
        .collect();
    let names: Vec<String> = (0..parts.len()).map(part_column).collect();
    let json = serde_json::to_string(header).map_err(|e| EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    write_parts(path, &json, &names, &parts)?;
    let total: usize = parts.iter().map(|b| b.num_rows()).sum();
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
    let (json, mut parts) = read_parts(path, |json| {
        let tables = serde_json::from_str::<TemporalHeader>(json).map_or(0, |h| h.tables.len());
        (0..=tables).map(part_column).collect()
    })?;
    let header: TemporalHeader = serde_json::from_str(&json).map_err(|e| failed(e.to_string()))?;
    if header.format != FORMAT || header.kind != KIND {
        return Err(failed(format!(
            "format {} of kind `{}` is not a temporal join checkpoint (format {FORMAT} `{KIND}`)",
            header.format, header.kind
        )));
    }
    let tables = parts.split_off(1);
    let stream = parts
        .pop()
        .ok_or_else(|| failed("it has no stream part".to_owned()))?;
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
