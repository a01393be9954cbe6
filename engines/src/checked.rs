//! The contract layer: what an engine says it wrote is held against the file it wrote. After an
//! ExecuteTransform or a MigrateQuery the data file is read once, as a stream ([`output::check`]): offsets
//! from the job's `next_offset` and inside the claimed interval, `op` values, the row count, the schema
//! against the dataset's earlier outputs, and ODF's logical hash. The report carries the checked file
//! ([`Written::Checked`]); a breach is [`EngineFailure::Contract`], and the transaction records nothing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use weir_engine_contract::conformance::ConformanceReport;
use weir_odf::{DatasetVocabulary, OffsetInterval};

use super::job::{
    InputRecords, MigrateJob, MigrateReport, ProvenanceJob, RawQueryJob, TransformJob,
    TransformReport, ValidateJob, ValidateReport, Written,
};
use super::output::{self, CopyInto, OutputError};
use super::{Engine, EngineFailure, EngineFuture};
use weir_dataset::progress::{Phase, Progress};

/// An engine whose data files are checked against the contract before anyone reads them.
#[derive(Debug)]
pub struct Checked<E> {
    inner: E,
    engine: String,
}

/// What one check needs to know about the file it reads.
struct Expected<'a> {
    path: &'a Path,
    next_offset: u64,
    claimed: Option<OffsetInterval>,
    schema: Option<&'a SchemaRef>,
    vocab: &'a DatasetVocabulary,
    copy_into: Option<CopyInto>,
}

impl<'a> Expected<'a> {
    /// What a job that writes `path` promised: records from `next_offset`, the `claimed` interval, the
    /// dataset's earlier `schema`.
    fn of(
        path: &'a Path,
        next_offset: u64,
        claimed: Option<OffsetInterval>,
        schema: Option<&'a SchemaRef>,
        vocab: &'a DatasetVocabulary,
    ) -> Self {
        Self {
            path,
            next_offset,
            claimed,
            schema,
            vocab,
            copy_into: None,
        }
    }

    /// The file is also copied into `into` while it is read (see [`output::check`]).
    fn copied_into(mut self, into: Option<&CopyInto>) -> Self {
        self.copy_into = into.cloned();
        self
    }
}

impl<E: Engine> Checked<E> {
    /// `inner`, its outputs checked; breaches name the engine `engine`.
    pub fn new(inner: E, engine: String) -> Self {
        Self { inner, engine }
    }

    /// Checks (and hashes) the file, on a blocking thread: it reads every record.
    async fn check(
        &self,
        expected: Expected<'_>,
        progress: &Progress,
    ) -> Result<Written, EngineFailure> {
        progress.phase(Phase::Check);
        let started = Instant::now();
        let path: PathBuf = expected.path.to_path_buf();
        let next_offset = expected.next_offset;
        let claimed = expected.claimed;
        let schema = expected.schema.cloned();
        let vocab = expected.vocab.clone();
        let copy_into = expected.copy_into;
        let progress = progress.clone();
        let checked = tokio::task::spawn_blocking(move || {
            output::check(
                &path,
                next_offset,
                claimed,
                schema.as_ref(),
                &vocab,
                copy_into,
                &progress,
            )
        })
        .await
        .map_err(|_| EngineFailure::Output {
            engine: self.engine.clone(),
            message: "checking the output panicked".into(),
        })?
        .map_err(|e| match e {
            OutputError::Contract(violation) => EngineFailure::Contract {
                engine: self.engine.clone(),
                violation,
            },
            OutputError::Data(source) => EngineFailure::Output {
                engine: self.engine.clone(),
                message: source.to_string(),
            },
        })?;
        Ok(Written::Checked {
            output: checked,
            took: started.elapsed(),
        })
    }
}

impl<E: Engine> Engine for Checked<E> {
    fn transform<'a>(
        &'a self,
        job: &'a TransformJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, TransformReport> {
        Box::pin(async move {
            let mut report = self.inner.transform(job, progress).await?;
            let claimed = report.new_offset_interval;
            report.written = self
                .check(
                    Expected::of(
                        &job.new_data_path,
                        job.next_offset,
                        claimed,
                        job.output_schema.as_ref(),
                        &job.vocab,
                    )
                    .copied_into(job.copy_output.as_ref()),
                    progress,
                )
                .await?;
            Ok(report)
        })
    }

    fn raw_query<'a>(
        &'a self,
        job: &'a RawQueryJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, u64> {
        // A raw query's result is the user's to read: no offsets, no chain.
        self.inner.raw_query(job, progress)
    }

    fn validate_query<'a>(&'a self, job: &'a ValidateJob) -> EngineFuture<'a, ValidateReport> {
        self.inner.validate_query(job)
    }

    fn migrate_query<'a>(
        &'a self,
        job: &'a MigrateJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, MigrateReport> {
        Box::pin(async move {
            let mut report = self.inner.migrate_query(job, progress).await?;
            let claimed = report.new_offset_interval;
            report.written = self
                .check(
                    Expected::of(
                        &job.new_data_path,
                        job.next_offset,
                        claimed,
                        job.output_schema.as_ref(),
                        &job.vocab,
                    ),
                    progress,
                )
                .await?;
            Ok(report)
        })
    }

    fn derive_provenance<'a>(
        &'a self,
        job: &'a ProvenanceJob,
    ) -> EngineFuture<'a, Vec<InputRecords>> {
        self.inner.derive_provenance(job)
    }

    fn conformance<'a>(&'a self, dir: &'a Path) -> EngineFuture<'a, ConformanceReport> {
        self.inner.conformance(dir)
    }
}
