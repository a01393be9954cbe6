//! What the coordinator asks of an engine, independent of how the engine runs.

use std::path::PathBuf;

use chrono::{DateTime, Utc};

use odf::{DatasetId, DatasetVocabulary, OffsetInterval, TransformSql};

/// One input of a transform job.
#[derive(Debug, Clone)]
pub struct TransformJobInput {
    /// Input dataset id.
    pub dataset_id: DatasetId,
    /// Input dataset name.
    pub dataset_alias: String,
    /// Table name in SQL.
    pub query_alias: String,
    /// Input vocabulary.
    pub vocab: DatasetVocabulary,
    /// New records to read; `None` when the input has nothing new.
    pub offset_interval: Option<OffsetInterval>,
    /// Files that hold those records (they may hold more).
    pub data_paths: Vec<PathBuf>,
    /// A Parquet file with the input's schema.
    pub schema_file: PathBuf,
    /// (system time, event time) watermarks of the input in this interval.
    pub explicit_watermarks: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

/// One ExecuteTransform.
#[derive(Debug, Clone)]
pub struct TransformJob {
    /// Output dataset id.
    pub dataset_id: DatasetId,
    /// Output dataset name.
    pub dataset_alias: String,
    /// The transaction's system time.
    pub system_time: DateTime<Utc>,
    /// Output vocabulary.
    pub vocab: DatasetVocabulary,
    /// The SQL.
    pub transform: TransformSql,
    /// Inputs in `SetTransform` order.
    pub inputs: Vec<TransformJobInput>,
    /// First offset of the output.
    pub next_offset: u64,
    /// Checkpoint to resume from.
    pub prev_checkpoint_path: Option<PathBuf>,
    /// Where the engine writes its new checkpoint.
    pub new_checkpoint_path: PathBuf,
    /// Where the engine writes the output data.
    pub new_data_path: PathBuf,
}

/// A Success of ExecuteTransform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformReport {
    /// Records written, if any.
    pub new_offset_interval: Option<OffsetInterval>,
    /// Output watermark.
    pub new_watermark: Option<DateTime<Utc>>,
}

/// One ExecuteRawQuery: SQL over Parquet files seen as the table `input`.
#[derive(Debug, Clone)]
pub struct RawQueryJob {
    /// Input files.
    pub input_data_paths: Vec<PathBuf>,
    /// The SQL.
    pub transform: TransformSql,
    /// Output file.
    pub output_data_path: PathBuf,
}
