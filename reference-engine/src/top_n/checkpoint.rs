//! The checkpoint file of a top-N: one Parquet file, format 4, kind `top_n`, in the parts layout of
//! `checkpoint_parts`: one part, `__weir_records`, the ranked input's live records with the input's own
//! columns. The JSON header `weir.checkpoint` ([`TopNHeader`]) holds the format, kind, query
//! fingerprint, the ranking function and bound, and the input's alias, system column names and latest
//! watermark.

use std::path::Path;

use datafusion::arrow::array::RecordBatch;
use serde::{Deserialize, Serialize};

use super::query::RankFunction;
use crate::checkpoint_parts::{read_parts, write_parts};
use crate::error::EngineError;
use crate::interval::checkpoint::SideHeader;

/// Format version of top-N checkpoints.
pub(crate) const FORMAT: u32 = 4;
/// Kind of top-N checkpoints.
pub(crate) const KIND: &str = "top_n";
const PART: &str = "__weir_records";

/// The checkpoint header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TopNHeader {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// [`KIND`].
    pub kind: String,
    /// Fingerprint of the query that wrote it.
    pub query_fingerprint: String,
    /// The ranking function.
    pub function: RankFunction,
    /// The largest rank kept.
    pub bound: i64,
    /// The ranked input.
    pub input: SideHeader,
}

/// Writes a checkpoint of the live records.
pub(crate) fn write(
    path: &Path,
    header: &TopNHeader,
    records: &RecordBatch,
) -> Result<(), EngineError> {
    let json = serde_json::to_string(header).map_err(|e| EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    write_parts(path, &json, &[PART.to_owned()], &[records])?;
    tracing::debug!(path = %path.display(), records = records.num_rows(), "top-N checkpoint written");
    Ok(())
}

/// Reads a checkpoint: its header and the live records.
pub(crate) fn read(path: &Path) -> Result<(TopNHeader, RecordBatch), EngineError> {
    let failed = |reason: String| EngineError::CheckpointRead {
        path: path.to_path_buf(),
        reason,
    };
    let (json, mut parts) = read_parts(path, |_| vec![PART.to_owned()])?;
    let header: TopNHeader = serde_json::from_str(&json).map_err(|e| failed(e.to_string()))?;
    if header.format != FORMAT || header.kind != KIND {
        return Err(failed(format!(
            "format {} of kind `{}` is not a top-N checkpoint (format {FORMAT} `{KIND}`)",
            header.format, header.kind
        )));
    }
    let records = parts
        .pop()
        .ok_or_else(|| failed("it has no records part".to_owned()))?;
    Ok((header, records))
}
