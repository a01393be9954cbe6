//! The logging layer: one `tracing` span per engine operation (`--log weir::engine=debug`), with the engine's
//! name and pinned reference, and one event when it ends: how long it took, and how it failed.

use std::future::Future;
use std::path::Path;
use std::time::Instant;

use tracing::Instrument as _;
use weir_engine_contract::conformance::ConformanceReport;

use super::job::{
    InputRecords, MigrateJob, MigrateReport, ProvenanceJob, RawQueryJob, TransformJob,
    TransformReport, ValidateJob, ValidateReport,
};
use super::{Engine, EngineFailure, EngineFuture};
use weir_dataset::identity::EngineIdentity;
use weir_dataset::progress::Progress;

/// An engine whose operations are logged.
#[derive(Debug)]
pub struct Logged<E> {
    identity: EngineIdentity,
    inner: E,
}

impl<E: Engine> Logged<E> {
    /// `inner`, logged as `identity`.
    pub fn new(identity: EngineIdentity, inner: E) -> Self {
        Self { identity, inner }
    }

    fn logged<'a, T: 'a>(
        &'a self,
        operation: &'static str,
        dataset: &str,
        fut: impl Future<Output = Result<T, EngineFailure>> + Send + 'a,
    ) -> EngineFuture<'a, T> {
        let span = tracing::info_span!(

            "engine",
            operation,
            engine = %self.identity.name,
            reference = %self.identity.reference,
            dataset = %dataset,
        );
        Box::pin(
            async move {
                let started = Instant::now();
                let result = fut.await;
                let millis = started.elapsed().as_millis() as u64;
                match &result {
                    Ok(_) => tracing::debug!(millis, "engine operation succeeded"),
                    Err(e) => tracing::debug!(millis, error = %e, "engine operation failed"),
                }
                result
            }
            .instrument(span),
        )
    }
}

impl<E: Engine> Engine for Logged<E> {
    fn transform<'a>(
        &'a self,
        job: &'a TransformJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, TransformReport> {
        self.logged(
            "ExecuteTransform",
            &job.dataset_alias,
            self.inner.transform(job, progress),
        )
    }

    fn raw_query<'a>(
        &'a self,
        job: &'a RawQueryJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, u64> {
        self.logged("ExecuteRawQuery", "", self.inner.raw_query(job, progress))
    }

    fn validate_query<'a>(&'a self, job: &'a ValidateJob) -> EngineFuture<'a, ValidateReport> {
        self.logged(
            "ValidateQuery",
            &job.dataset_alias,
            self.inner.validate_query(job),
        )
    }

    fn migrate_query<'a>(
        &'a self,
        job: &'a MigrateJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, MigrateReport> {
        self.logged(
            "MigrateQuery",
            &job.dataset_alias,
            self.inner.migrate_query(job, progress),
        )
    }

    fn derive_provenance<'a>(
        &'a self,
        job: &'a ProvenanceJob,
    ) -> EngineFuture<'a, Vec<InputRecords>> {
        self.logged(
            "DeriveProvenance",
            &job.step.dataset_alias,
            self.inner.derive_provenance(job),
        )
    }

    fn conformance<'a>(&'a self, dir: &'a Path) -> EngineFuture<'a, ConformanceReport> {
        self.logged("conformance", "", self.inner.conformance(dir))
    }
}
