//! The checkpoint file of chained stateful steps: one Parquet file, format 5, kind `chain`. Its records
//! are the stages' own checkpoints: `__weir_stage` (Int32: 0 the head, 1 the tail) and
//! `__weir_checkpoint` (Binary: the bytes of the checkpoint file the stage wrote, in its own format;
//! null when the stage keeps no state). The JSON header `weir.checkpoint` ([`ChainHeader`]) holds the
//! format, kind, query fingerprint, and the intermediate stream between the stages: its alias, the
//! offset its next record gets and its latest watermark.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Array, BinaryArray, Int32Array, RecordBatch};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::file::metadata::KeyValue;
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::output::writer::write_parquet_file;
use crate::window::checkpoint::{HEADER_KEY, metadata_value};

/// Format version of chain checkpoints.
pub(crate) const FORMAT: u32 = 5;
/// Kind of chain checkpoints.
pub(crate) const KIND: &str = "chain";
const STAGE_COLUMN: &str = "__weir_stage";
const CHECKPOINT_COLUMN: &str = "__weir_checkpoint";

/// The stream between the two stages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IntermediateHeader {
    /// The query step whose output it is (the tail reads it under this name).
    pub alias: String,
    /// The offset its next record gets.
    pub next_offset: u64,
    /// Its latest watermark.
    pub watermark_ms: Option<i64>,
}

/// The checkpoint header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ChainHeader {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// [`KIND`].
    pub kind: String,
    /// Fingerprint of the whole transform.
    pub query_fingerprint: String,
    /// The stream between the head and the tail.
    pub intermediate: IntermediateHeader,
}

/// The stages' checkpoint files' bytes (head, tail), each when the stage wrote one.
pub(crate) type StageCheckpoints = [Option<Vec<u8>>; 2];

/// Writes a chain checkpoint.
pub(crate) fn write(
    path: &Path,
    header: &ChainHeader,
    stages: &StageCheckpoints,
) -> Result<(), EngineError> {
    let failed = |reason: String| EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason,
    };
    let json = serde_json::to_string(header).map_err(|e| failed(e.to_string()))?;
    let schema = Arc::new(Schema::new(vec![
        Field::new(STAGE_COLUMN, DataType::Int32, false),
        Field::new(CHECKPOINT_COLUMN, DataType::Binary, true),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int32Array::from(vec![0, 1])),
            Arc::new(BinaryArray::from_iter(stages.iter().map(|s| s.as_deref()))),
        ],
    )?;
    write_parquet_file(
        path,
        schema,
        &[batch],
        vec![KeyValue::new(HEADER_KEY.to_owned(), json)],
    )
    .map_err(failed)
}

/// Reads a chain checkpoint: its header and the stages' checkpoints.
pub(crate) fn read(path: &Path) -> Result<(ChainHeader, StageCheckpoints), EngineError> {
    let failed = |reason: String| EngineError::CheckpointRead {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|e| failed(e.to_string()))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| failed(e.to_string()))?;
    let json = metadata_value(&builder, HEADER_KEY).map_err(failed)?;
    let header: ChainHeader = serde_json::from_str(&json).map_err(|e| failed(e.to_string()))?;
    if header.format != FORMAT || header.kind != KIND {
        return Err(failed(format!(
            "format {} of kind `{}` is not a chain checkpoint (format {FORMAT} `{KIND}`)",
            header.format, header.kind
        )));
    }
    let schema = Arc::clone(builder.schema());
    let reader = builder.build().map_err(|e| failed(e.to_string()))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.to_string()))?;
    let all = concat_batches(&schema, &batches)?;
    let stages = all
        .column_by_name(STAGE_COLUMN)
        .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
        .ok_or_else(|| failed(format!("it has no Int32 `{STAGE_COLUMN}` column")))?;
    let bytes = all
        .column_by_name(CHECKPOINT_COLUMN)
        .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
        .ok_or_else(|| failed(format!("it has no Binary `{CHECKPOINT_COLUMN}` column")))?;
    let mut out: StageCheckpoints = [None, None];
    for i in 0..all.num_rows() {
        let stage = usize::try_from(stages.value(i))
            .ok()
            .filter(|&s| s < 2)
            .ok_or_else(|| failed(format!("it names stage {}", stages.value(i))))?;
        if bytes.is_valid(i) {
            out[stage] = Some(bytes.value(i).to_vec());
        }
    }
    Ok((header, out))
}
