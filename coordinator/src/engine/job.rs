//! What the coordinator asks of an engine, independent of how the engine runs.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use engine_contract::model::{RawQueryRequest, Transform, TransformRequest, TransformRequestInput};
use odf::{DatasetId, DatasetVocabulary, OffsetInterval, TransformSql, Watermark};

use super::identity::without_engine;

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
    /// Watermarks of the input in this interval.
    pub explicit_watermarks: Vec<Watermark>,
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

/// What the engine is given to run: the queries alone, in the form ODF stores. `version` holds the engine
/// identity Weir records, not something the engine is asked to be.
fn engine_transform(sql: &TransformSql) -> Transform {
    Transform::Sql(without_engine(sql).normalize())
}

impl TransformJob {
    /// The input records the engine reads (for the engine's progress).
    pub fn input_records(&self) -> u64 {
        self.inputs
            .iter()
            .map(|i| i.offset_interval.map_or(0, |iv| iv.len()))
            .sum()
    }

    /// The request for this job, with every file path as `path` says the engine sees it.
    pub fn request<E>(
        &self,
        path: impl Fn(&Path) -> Result<String, E>,
    ) -> Result<TransformRequest, E> {
        Ok(TransformRequest {
            dataset_id: self.dataset_id,
            dataset_alias: self.dataset_alias.clone(),
            system_time: self.system_time,
            vocab: self.vocab.clone(),
            transform: engine_transform(&self.transform),
            query_inputs: self
                .inputs
                .iter()
                .map(|i| {
                    Ok(TransformRequestInput {
                        dataset_id: i.dataset_id,
                        dataset_alias: i.dataset_alias.clone(),
                        query_alias: i.query_alias.clone(),
                        vocab: i.vocab.clone(),
                        offset_interval: i.offset_interval,
                        data_paths: i
                            .data_paths
                            .iter()
                            .map(|p| path(p))
                            .collect::<Result<_, _>>()?,
                        schema_file: path(&i.schema_file)?,
                        explicit_watermarks: i.explicit_watermarks.clone(),
                    })
                })
                .collect::<Result<_, E>>()?,
            next_offset: self.next_offset,
            prev_checkpoint_path: self
                .prev_checkpoint_path
                .as_deref()
                .map(&path)
                .transpose()?,
            new_checkpoint_path: path(&self.new_checkpoint_path)?,
            new_data_path: path(&self.new_data_path)?,
        })
    }
}

impl RawQueryJob {
    /// The request for this job, with every file path as `path` says the engine sees it.
    pub fn request<E>(
        &self,
        path: impl Fn(&Path) -> Result<String, E>,
    ) -> Result<RawQueryRequest, E> {
        Ok(RawQueryRequest {
            input_data_paths: self
                .input_data_paths
                .iter()
                .map(|p| path(p))
                .collect::<Result<_, _>>()?,
            transform: engine_transform(&self.transform),
            output_data_path: path(&self.output_data_path)?,
        })
    }
}
