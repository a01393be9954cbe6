//! The checkpoint file of an interval join: one Parquet file, format 6, kind `interval_join`, in the
//! parts layout of `checkpoint_parts`: part 0 `__weir_preserved` holds the preserved (left) side's kept
//! records, part 1 `__weir_other` the other side's, each with the input's own columns and
//! `__weir_matches` (UInt64: how many matches the record has). Format 3 (the same with
//! `__weir_matched`, Boolean) is read too: a record it marks matched counts as matched however many
//! of its matches are retracted later ([`UNKNOWN_MATCHES`]). The JSON header `weir.checkpoint` ([`IntervalHeader`])
//! holds the format, kind, query fingerprint, the join's kind and time bound, and per side its alias,
//! system column names and latest watermark.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch, UInt64Array};
use serde::{Deserialize, Serialize};

use super::query::IntervalJoinKind;
use super::state::{MATCHED_COLUMN, MATCHES_COLUMN, UNKNOWN_MATCHES};
use crate::checkpoint_parts::{read_parts, write_parts};
use crate::error::EngineError;
use crate::temporal::checkpoint::Vocabulary;

/// Format version of the interval join checkpoints this engine writes.
pub(crate) const FORMAT: u32 = 6;
/// The earlier format it still reads (matched flags instead of numbers of matches).
pub(crate) const FORMAT_MATCHED_FLAGS: u32 = 3;
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

/// One side's kept records and their numbers of matches.
#[derive(Debug, Clone)]
pub(crate) struct KeptSide {
    pub records: RecordBatch,
    pub matches: Vec<u64>,
}

/// Writes a checkpoint; each part is a side's records with [`MATCHES_COLUMN`] last.
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
    if ![FORMAT, FORMAT_MATCHED_FLAGS].contains(&header.format) || header.kind != KIND {
        return Err(failed(format!(
            "format {} of kind `{}` is not an interval join checkpoint (formats {FORMAT_MATCHED_FLAGS} \
             and {FORMAT} `{KIND}`)",
            header.format, header.kind
        )));
    }
    let column = if header.format == FORMAT {
        MATCHES_COLUMN
    } else {
        MATCHED_COLUMN
    };
    let mut sides = Vec::new();
    for part in parts {
        let last = part
            .num_columns()
            .checked_sub(1)
            .filter(|&i| part.schema().field(i).name() == column)
            .ok_or_else(|| failed(format!("a part has no `{column}` column")))?;
        let values = part.column(last);
        let matches: Vec<u64> = if header.format == FORMAT {
            values
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| failed(format!("`{column}` is not UInt64")))?
                .iter()
                .map(|m| m.unwrap_or(0))
                .collect()
        } else {
            values
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| failed(format!("`{column}` is not Boolean")))?
                .iter()
                .map(|m| {
                    if m.unwrap_or(false) {
                        UNKNOWN_MATCHES
                    } else {
                        0
                    }
                })
                .collect()
        };
        let records = part.project(&(0..last).collect::<Vec<_>>())?;
        sides.push(KeptSide {
            records: RecordBatch::try_new(
                Arc::clone(&records.schema()),
                records.columns().to_vec(),
            )?,
            matches,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::DatasetVocabulary;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn part(flags: Vec<bool>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new(MATCHED_COLUMN, DataType::Boolean, false),
        ]));
        let offsets = Int64Array::from_iter_values(0..flags.len() as i64);
        RecordBatch::try_new(
            schema,
            vec![Arc::new(offsets), Arc::new(BooleanArray::from(flags))],
        )
        .unwrap()
    }

    #[test]
    fn a_format_3_checkpoint_reads_with_matched_records_counting_as_matched_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let side = SideHeader {
            alias: "orders".into(),
            vocab: crate::temporal::checkpoint::Vocabulary::from(&DatasetVocabulary::default()),
            watermark_ms: Some(5),
        };
        let header = IntervalHeader {
            format: FORMAT_MATCHED_FLAGS,
            kind: KIND.to_owned(),
            query_fingerprint: "f".into(),
            join: IntervalJoinKind::Outer,
            lower_ms: 0,
            upper_ms: 10,
            preserved: side.clone(),
            other: side,
        };
        let json = serde_json::to_string(&header).unwrap();
        let names: Vec<String> = PARTS.iter().map(|p| (*p).to_owned()).collect();
        write_parts(
            &path,
            &json,
            &names,
            &[&part(vec![true, false]), &part(vec![false])],
        )
        .unwrap();
        let (read_header, preserved, other) = read(&path).unwrap();
        assert_eq!(read_header.format, FORMAT_MATCHED_FLAGS);
        assert_eq!(preserved.matches, [UNKNOWN_MATCHES, 0]);
        assert_eq!(other.matches, [0]);
        assert_eq!(preserved.records.num_columns(), 1);
    }
}
