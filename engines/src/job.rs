//! What the coordinator asks of an engine, independent of how the engine runs.

use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use chrono::{DateTime, Utc};
use weir_engine_contract::model::{
    DeriveProvenanceRequest, MigrateQueryRequest, RawQueryRequest, Transform, TransformRequest,
    TransformRequestInput, ValidateQueryInput, ValidateQueryRequest,
};
use weir_odf::{DatasetId, DatasetVocabulary, OffsetInterval, TransformSql, Watermark};

use super::exchange::JobObjects;
use super::output::{CheckedOutput, CopyInto};
use weir_dataset::identity::without_engine;

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
    /// The schema of the dataset's earlier outputs (system columns normalised), which this output must
    /// keep; `None` for a first output. Engines are not told: the contract layer checks it.
    pub output_schema: Option<SchemaRef>,
    /// Where the contract layer copies the output while it checks it (the store's data folder, when the
    /// store is on this machine), so that the store takes the copy instead of reading the file again.
    /// Engines are not told.
    pub copy_output: Option<CopyInto>,
    /// With `exchange: object-store`: the objects the engine reads and writes itself, given to it as URLs
    /// instead of the paths above (then `data_paths` are empty and the local paths of the output and new
    /// checkpoint are where the coordinator fetches what the engine wrote, for the contract's checks).
    pub objects: Option<JobObjects>,
}

/// A Success of ExecuteTransform.
#[derive(Debug, Clone)]
pub struct TransformReport {
    /// Records written, if any.
    pub new_offset_interval: Option<OffsetInterval>,
    /// Output watermark.
    pub new_watermark: Option<DateTime<Utc>>,
    /// The data file as the contract layer found it.
    pub written: Written,
}

/// What the contract layer (`super::checked::Checked`) found in the data file an operation wrote.
/// An engine's own report is [`Written::Unchecked`]; every [`super::EngineHandle`] has the layer, so a
/// report from a handle is always checked.
#[derive(Debug, Clone, Default)]
pub enum Written {
    /// Not checked (an engine's own answer).
    #[default]
    Unchecked,
    /// Checked against the contract and hashed.
    Checked {
        /// The file; `None` when the engine wrote no records.
        output: Option<CheckedOutput>,
        /// How long the check took (the coordinator's time, not the engine's).
        took: std::time::Duration,
    },
}

impl Written {
    /// The checked file, and how long checking it took; an error for an unchecked report (an engine used
    /// without its handle's layers).
    pub fn checked(
        &self,
        engine: &str,
    ) -> Result<(Option<&CheckedOutput>, std::time::Duration), super::EngineFailure> {
        match self {
            Self::Checked { output, took } => Ok((output.as_ref(), *took)),
            Self::Unchecked => Err(super::EngineFailure::Output {
                engine: engine.to_owned(),
                message: "the output was not checked against the contract (an engine run without \
                          the contract layer)"
                    .into(),
            }),
        }
    }
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
                .enumerate()
                .map(|(n, i)| match &self.objects {
                    Some(objects) => Ok(object_input(i, objects, n)),
                    None => job_input(i, &path),
                })
                .collect::<Result<_, E>>()?,
            next_offset: self.next_offset,
            prev_checkpoint_path: match &self.objects {
                Some(objects) => objects.prev_checkpoint.as_ref().map(|k| objects.url(k)),
                None => self
                    .prev_checkpoint_path
                    .as_deref()
                    .map(&path)
                    .transpose()?,
            },
            new_checkpoint_path: match &self.objects {
                Some(objects) => objects.url(&objects.new_checkpoint()),
                None => path(&self.new_checkpoint_path)?,
            },
            new_data_path: match &self.objects {
                Some(objects) => objects.url(&objects.new_data()),
                None => path(&self.new_data_path)?,
            },
        })
    }
}

/// An input as an engine that reads the store itself is given it: object URLs.
fn object_input(i: &TransformJobInput, objects: &JobObjects, n: usize) -> TransformRequestInput {
    let own = objects.inputs.get(n);
    TransformRequestInput {
        dataset_id: i.dataset_id,
        dataset_alias: i.dataset_alias.clone(),
        query_alias: i.query_alias.clone(),
        vocab: i.vocab.clone(),
        offset_interval: i.offset_interval,
        data_paths: own
            .map(|o| o.data.iter().map(|k| objects.url(k)).collect())
            .unwrap_or_default(),
        schema_file: own.map(|o| objects.url(&o.schema)).unwrap_or_default(),
        explicit_watermarks: i.explicit_watermarks.clone(),
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

/// One ValidateQuery: plan `transform` against its inputs' schemas, read no data.
#[derive(Debug, Clone)]
pub struct ValidateJob {
    /// Output dataset id.
    pub dataset_id: DatasetId,
    /// Output dataset name.
    pub dataset_alias: String,
    /// Output vocabulary.
    pub vocab: DatasetVocabulary,
    /// The SQL to validate.
    pub transform: TransformSql,
    /// Inputs in `SetTransform` order (only their schema files are read).
    pub inputs: Vec<TransformJobInput>,
    /// Where the engine writes an empty Parquet file with the output schema.
    pub output_schema_path: PathBuf,
}

/// A Success of ValidateQuery: the output columns as the engine plans them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidateReport {
    /// `name type` of each output column, in order (the engine's own type names, informative).
    pub columns: Vec<(String, String, bool)>,
}

/// One MigrateQuery: finalise the state `prev_transform` left in `prev_checkpoint_path` and start
/// `next_transform` from it, reading no input data.
#[derive(Debug, Clone)]
pub struct MigrateJob {
    /// Output dataset id.
    pub dataset_id: DatasetId,
    /// Output dataset name.
    pub dataset_alias: String,
    /// The transaction's system time (stamped on any final output).
    pub system_time: DateTime<Utc>,
    /// Output vocabulary.
    pub vocab: DatasetVocabulary,
    /// The query the state was built by.
    pub prev_transform: TransformSql,
    /// The query to continue with.
    pub next_transform: TransformSql,
    /// The next query's inputs, with their schema files and no new records.
    pub inputs: Vec<TransformJobInput>,
    /// First offset of any final output.
    pub next_offset: u64,
    /// State the previous query left.
    pub prev_checkpoint_path: Option<PathBuf>,
    /// Where the engine writes the migrated state.
    pub new_checkpoint_path: PathBuf,
    /// Where the engine writes the final output, if any.
    pub new_data_path: PathBuf,
    /// The schema of the dataset's earlier outputs, which any final output must keep.
    pub output_schema: Option<SchemaRef>,
}

/// A Success of MigrateQuery.
#[derive(Debug, Clone)]
pub struct MigrateReport {
    /// Whether a checkpoint was written.
    pub new_checkpoint_written: bool,
    /// Final output records, if any.
    pub new_offset_interval: Option<OffsetInterval>,
    /// Output watermark after the final output, if it moved.
    pub new_watermark: Option<DateTime<Utc>>,
    /// The final output's data file as the contract layer found it.
    pub written: Written,
}

/// One DeriveProvenance: which input records the given output records of one recorded step came from.
#[derive(Debug, Clone)]
pub struct ProvenanceJob {
    /// The step, restated as its ExecuteTransform job (inputs with their data files).
    pub step: TransformJob,
    /// Output offsets to explain.
    pub output_offsets: Vec<u64>,
}

/// The input records of one input behind the asked outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRecords {
    /// The input dataset.
    pub dataset_id: DatasetId,
    /// Its name in the query.
    pub query_alias: String,
    /// Sorted, non-overlapping intervals of input offsets.
    pub offset_intervals: Vec<OffsetInterval>,
}

fn job_input<E>(
    i: &TransformJobInput,
    path: &impl Fn(&Path) -> Result<String, E>,
) -> Result<TransformRequestInput, E> {
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
}

impl ValidateJob {
    /// The request for this job, with every file path as `path` says the engine sees it.
    pub fn request<E>(
        &self,
        path: impl Fn(&Path) -> Result<String, E>,
    ) -> Result<ValidateQueryRequest, E> {
        Ok(ValidateQueryRequest {
            dataset_id: self.dataset_id,
            dataset_alias: self.dataset_alias.clone(),
            vocab: self.vocab.clone(),
            transform: engine_transform(&self.transform),
            query_inputs: self
                .inputs
                .iter()
                .map(|i| {
                    Ok(ValidateQueryInput {
                        dataset_id: i.dataset_id,
                        dataset_alias: i.dataset_alias.clone(),
                        query_alias: i.query_alias.clone(),
                        vocab: i.vocab.clone(),
                        schema_file: path(&i.schema_file)?,
                    })
                })
                .collect::<Result<_, E>>()?,
            output_schema_path: path(&self.output_schema_path)?,
        })
    }

    /// Files the engine reads.
    pub fn input_files(&self) -> Vec<PathBuf> {
        self.inputs.iter().map(|i| i.schema_file.clone()).collect()
    }
}

impl MigrateJob {
    /// The request for this job, with every file path as `path` says the engine sees it.
    pub fn request<E>(
        &self,
        path: impl Fn(&Path) -> Result<String, E>,
    ) -> Result<MigrateQueryRequest, E> {
        Ok(MigrateQueryRequest {
            dataset_id: self.dataset_id,
            dataset_alias: self.dataset_alias.clone(),
            system_time: self.system_time,
            vocab: self.vocab.clone(),
            prev_transform: engine_transform(&self.prev_transform),
            next_transform: engine_transform(&self.next_transform),
            query_inputs: self
                .inputs
                .iter()
                .map(|i| job_input(i, &path))
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

    /// Files the engine reads.
    pub fn input_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self.inputs.iter().map(|i| i.schema_file.clone()).collect();
        files.extend(self.prev_checkpoint_path.iter().cloned());
        files
    }
}

impl ProvenanceJob {
    /// The request for this job, with every file path as `path` says the engine sees it.
    pub fn request<E>(
        &self,
        path: impl Fn(&Path) -> Result<String, E>,
    ) -> Result<DeriveProvenanceRequest, E> {
        let step = &self.step;
        Ok(DeriveProvenanceRequest {
            dataset_id: step.dataset_id,
            dataset_alias: step.dataset_alias.clone(),
            system_time: step.system_time,
            vocab: step.vocab.clone(),
            transform: engine_transform(&step.transform),
            query_inputs: step
                .inputs
                .iter()
                .map(|i| job_input(i, &path))
                .collect::<Result<_, E>>()?,
            next_offset: step.next_offset,
            prev_checkpoint_path: step
                .prev_checkpoint_path
                .as_deref()
                .map(&path)
                .transpose()?,
            output_offsets: self.output_offsets.clone(),
        })
    }
}

impl TransformJob {
    /// Files the engine reads (none when it reads the store itself).
    pub fn input_files(&self) -> Vec<PathBuf> {
        if self.objects.is_some() {
            return Vec::new();
        }
        let mut files: Vec<PathBuf> = self
            .inputs
            .iter()
            .flat_map(|i| i.data_paths.iter().cloned())
            .collect();
        files.extend(self.inputs.iter().map(|i| i.schema_file.clone()));
        files.extend(self.prev_checkpoint_path.iter().cloned());
        files
    }

    /// The folder the engine writes to.
    pub fn output_dir(&self) -> PathBuf {
        output_dir(&self.new_data_path)
    }
}

/// The folder that holds an output file: the only folder an engine may write.
pub fn output_dir(file: &Path) -> PathBuf {
    file.parent().unwrap_or(Path::new(".")).to_path_buf()
}

impl From<weir_engine_contract::model::TransformSuccess> for TransformReport {
    fn from(s: weir_engine_contract::model::TransformSuccess) -> Self {
        Self {
            new_offset_interval: s.new_offset_interval,
            new_watermark: s.new_watermark,
            written: Written::Unchecked,
        }
    }
}

impl From<weir_engine_contract::model::ValidateQuerySuccess> for ValidateReport {
    fn from(s: weir_engine_contract::model::ValidateQuerySuccess) -> Self {
        Self {
            columns: s
                .output_columns
                .into_iter()
                .map(|c| (c.name, c.data_type, c.nullable))
                .collect(),
        }
    }
}

impl From<weir_engine_contract::model::MigrateQuerySuccess> for MigrateReport {
    fn from(s: weir_engine_contract::model::MigrateQuerySuccess) -> Self {
        Self {
            new_checkpoint_written: s.new_checkpoint_written,
            new_offset_interval: s.new_offset_interval,
            new_watermark: s.new_watermark,
            written: Written::Unchecked,
        }
    }
}

/// The input records of a DeriveProvenance Success.
pub fn input_records(s: weir_engine_contract::model::DeriveProvenanceSuccess) -> Vec<InputRecords> {
    s.inputs
        .into_iter()
        .map(|i| InputRecords {
            dataset_id: i.dataset_id,
            query_alias: i.query_alias,
            offset_intervals: i.offset_intervals,
        })
        .collect()
}
