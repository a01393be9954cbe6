//! The reference DataFusion engine, in this process.

use std::convert::Infallible;
use std::path::Path;

use weir_engine_contract::conformance::ConformanceReport;
use weir_reference_engine::{EngineError, ErrorKind, ReferenceEngine};

use super::job::{
    InputRecords, MigrateJob, MigrateReport, ProvenanceJob, RawQueryJob, TransformJob,
    TransformReport, ValidateJob, ValidateReport,
};
use super::{Engine, EngineFailure, EngineFuture};
use weir_dataset::identity::EngineIdentity;
use weir_dataset::progress::Progress;

/// The embedded engine.
#[derive(Debug, Clone)]
pub struct Embedded {
    name: String,
    engine: ReferenceEngine,
}

impl Embedded {
    /// The embedded engine, serving the engine name `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            engine: ReferenceEngine::new(),
        }
    }

    fn failure(&self, e: EngineError) -> EngineFailure {
        let engine = self.name.clone();
        match e.kind() {
            ErrorKind::InvalidQuery => EngineFailure::InvalidQuery {
                engine,
                message: e.to_string(),
            },
            ErrorKind::Internal => EngineFailure::Internal {
                engine,
                message: e.to_string(),
            },
        }
    }
}

/// The identity recorded for the embedded engine: the reference engine's exact crate version.
pub fn identity(name: &str) -> EngineIdentity {
    EngineIdentity {
        name: name.to_string(),
        runtime: "embedded".into(),
        reference: format!("reference-engine@{}", env!("CARGO_PKG_VERSION")),
    }
}

/// The engine runs in this process: it sees the coordinator's own paths.
fn path(p: &Path) -> Result<String, Infallible> {
    Ok(p.to_string_lossy().into_owned())
}

/// The engine's Progress messages as the coordinator's, with the records the operation reads (if known).
fn sink(progress: &Progress, total: Option<u64>) -> impl Fn(weir_reference_engine::Progress) + '_ {
    move |p: weir_reference_engine::Progress| {
        progress.engine(Some(p.phase.as_str()), p.rows_read, p.rows_written, total)
    }
}

impl Engine for Embedded {
    fn transform<'a>(
        &'a self,
        job: &'a TransformJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, TransformReport> {
        Box::pin(async move {
            let Ok(request) = job.request(path);
            let sink = sink(progress, Some(job.input_records()));
            let outcome = self
                .engine
                .execute_transform(&request, &sink)
                .await
                .map_err(|e| self.failure(e))?;
            Ok(outcome.into())
        })
    }

    fn raw_query<'a>(
        &'a self,
        job: &'a RawQueryJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, u64> {
        Box::pin(async move {
            let Ok(request) = job.request(path);
            let sink = sink(progress, None);
            let outcome = self
                .engine
                .execute_raw_query(&request, &sink)
                .await
                .map_err(|e| self.failure(e))?;
            Ok(outcome.num_records)
        })
    }

    fn validate_query<'a>(&'a self, job: &'a ValidateJob) -> EngineFuture<'a, ValidateReport> {
        Box::pin(async move {
            let Ok(request) = job.request(path);
            let outcome = self
                .engine
                .validate_query(&request)
                .await
                .map_err(|e| self.failure(e))?;
            Ok(outcome.into())
        })
    }

    fn migrate_query<'a>(
        &'a self,
        job: &'a MigrateJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, MigrateReport> {
        Box::pin(async move {
            let Ok(request) = job.request(path);
            let sink = sink(progress, None);
            let outcome = self
                .engine
                .migrate_query(&request, &sink)
                .await
                .map_err(|e| self.failure(e))?;
            Ok(outcome.into())
        })
    }

    fn derive_provenance<'a>(
        &'a self,
        job: &'a ProvenanceJob,
    ) -> EngineFuture<'a, Vec<InputRecords>> {
        Box::pin(async move {
            let Ok(request) = job.request(path);
            let outcome = self
                .engine
                .derive_provenance(&request, &weir_reference_engine::NoProgress)
                .await
                .map_err(|e| self.failure(e))?;
            Ok(super::job::input_records(outcome))
        })
    }

    /// The embedded engine is served on a Unix socket in `dir` for the duration of the kit.
    fn conformance<'a>(&'a self, dir: &'a Path) -> EngineFuture<'a, ConformanceReport> {
        Box::pin(async move {
            let socket = dir.join("engine.sock");
            let address = weir_engine_contract::EngineAddress::Unix(socket);
            let server = tokio::spawn(weir_engine_contract::serve(self.engine, address.clone()));
            let options =
                weir_engine_contract::conformance::ConformanceOptions::new(self.name.as_str())
                    .with_data(weir_engine_contract::conformance::DataSetup {
                        fixtures: std::sync::Arc::new(weir_engine_conformance::ParquetFixtures),
                        host_dir: dir.to_path_buf(),
                        engine_dir: dir.to_path_buf(),
                    });
            let report = weir_engine_contract::conformance::run(&address, &options).await;
            server.abort();
            report.map_err(|e| EngineFailure::Internal {
                engine: self.name.clone(),
                message: e.to_string(),
            })
        })
    }
}
