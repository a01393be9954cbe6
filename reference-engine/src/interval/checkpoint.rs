//! The checkpoint file of an interval join: one Parquet file, format 3, kind `interval_join`, in the
//! parts layout of `checkpoint_parts`: part 0 `__weir_preserved` holds the preserved (left) side's kept
//! records, part 1 `__weir_other` the other side's, each with the input's own columns and
//! `__weir_matched` (Boolean: the record has matched). The JSON header `weir.checkpoint` ([`IntervalHeader`])
//! holds the format, kind, query fingerprint, the join's kind and time bound, and per side its alias,
//! system column names and latest watermark.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch};
use serde::{Deserialize, Serialize};

use super::query::IntervalJoinKind;
use super::state::MATCHED_COLUMN;
use crate::checkpoint_parts::{read_parts, write_parts};
use crate::error::EngineError;
use crate::temporal::checkpoint::Vocabulary;

/// Format version of interval join checkpoints.
pub(crate) const FORMAT: u32 = 3;
/// Kind of interval join checkpoints.
pub(crate) const KIND: &str = "interval_join";
const PARTS: [&str; 2] = ["__weir_preserved", "__weir_other"];

/// One side's part of the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SideHeader {
    /// The input's query alias.
    pub alias: String,
    /// Its system columns.
    pub vocab: Vocabulary,
    /// Its latest explicit watermark so far.
    pub watermark_ms: Option<i64>,
}

/// The checkpoint header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IntervalHeader {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// [`KIND`].
    pub kind: String,
    /// Fingerprint of the query that wrote it.
    pub query_fingerprint: String,
    /// Inner, or outer on the preserved side.
    pub join: IntervalJoinKind,
    /// The bound on the other side's event time minus the preserved side's, in milliseconds.
    pub lower_ms: i64,
    /// See `lower_ms`.
    pub upper_ms: i64,
    /// The preserved (left) side.
    pub preserved: SideHeader,
    /// The other side.
    pub other: SideHeader,
}

/// One side's kept records and their matched flags.
#[derive(Debug, Clone)]
pub(crate) struct KeptSide {
    pub records: RecordBatch,
    pub matched: Vec<bool>,
}

/// Writes a checkpoint; each part is a side's records with [`MATCHED_COLUMN`] last.
pub(crate) fn write(
    path: &Path,
    header: &IntervalHeader,
    preserved: &RecordBatch,
    other: &RecordBatch,
) -> Result<(), EngineError> {
    let json = serde_json::to_string(header).map_err(|e| EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let names: Vec<String> = PARTS.iter().map(|p| (*p).to_owned()).collect();
    write_parts(path, &json, &names, &[preserved, other])?;
    tracing::debug!(
        path = %path.display(),
        preserved = preserved.num_rows(),
        other = other.num_rows(),
        "interval join checkpoint written"
    );
    Ok(())
}

/// Reads a checkpoint: its header and both sides' kept records.
pub(crate) fn read(path: &Path) -> Result<(IntervalHeader, KeptSide, KeptSide), EngineError> {
    let failed = |reason: String| EngineError::CheckpointRead {
        path: path.to_path_buf(),
        reason,
    };
    let (json, parts) = read_parts(path, |_| PARTS.iter().map(|p| (*p).to_owned()).collect())?;
    let header: IntervalHeader = serde_json::from_str(&json).map_err(|e| failed(e.to_string()))?;
    if header.format != FORMAT || header.kind != KIND {
        return Err(failed(format!(
            "format {} of kind `{}` is not an interval join checkpoint (format {FORMAT} `{KIND}`)",
            header.format, header.kind
        )));
    }
    let mut sides = Vec::new();
    for part in parts {
        let last = part
            .num_columns()
            .checked_sub(1)
            .filter(|&i| part.schema().field(i).name() == MATCHED_COLUMN)
            .ok_or_else(|| failed(format!("a part has no `{MATCHED_COLUMN}` column")))?;
        let matched = part
            .column(last)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| failed(format!("`{MATCHED_COLUMN}` is not Boolean")))?
            .iter()
            .map(|m| m.unwrap_or(false))
            .collect();
        let records = part.project(&(0..last).collect::<Vec<_>>())?;
        sides.push(KeptSide {
            records: RecordBatch::try_new(
                Arc::clone(&records.schema()),
                records.columns().to_vec(),
            )?,
            matched,
        });
    }
    let other = sides
        .pop()
        .ok_or_else(|| failed("it has no sides".to_owned()))?;
    let preserved = sides
        .pop()
        .ok_or_else(|| failed("it has one side".to_owned()))?;
    Ok((header, preserved, other))
}
