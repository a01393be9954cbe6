//! The deadline layer: every operation of the engine inside ends within a limit, or fails as a contract
//! breach ([`ContractViolation::DeadlineExceeded`]) naming the deadline the user set.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use weir_engine_contract::conformance::ConformanceReport;

use super::job::{
    InputRecords, MigrateJob, MigrateReport, ProvenanceJob, RawQueryJob, TransformJob,
    TransformReport, ValidateJob, ValidateReport,
};
use super::{ContractViolation, Engine, EngineFailure, EngineFuture};
use weir_dataset::progress::Progress;

/// An engine whose operations each end within `limit`.
#[derive(Debug)]
pub struct Deadline<E> {
    inner: E,
    engine: String,
    limit: Duration,
    /// The deadline as the user gave it (the limit may add a runtime's start time to it).
    seconds: u64,
}

impl<E: Engine> Deadline<E> {
    /// `inner` held to `limit`; a breach reports the user's deadline of `seconds`.
    pub fn new(inner: E, engine: String, limit: Duration, seconds: u64) -> Self {
        Self {
            inner,
            engine,
            limit,
            seconds,
        }
    }

    fn within<'a, T: 'a>(
        &'a self,
        fut: impl Future<Output = Result<T, EngineFailure>> + Send + 'a,
    ) -> EngineFuture<'a, T> {
        Box::pin(async move {
            match tokio::time::timeout(self.limit, fut).await {
                Ok(r) => r,
                Err(_) => Err(EngineFailure::Contract {
                    engine: self.engine.clone(),
                    violation: ContractViolation::DeadlineExceeded {
                        seconds: self.seconds,
                    },
                }),
            }
        })
    }
}

impl<E: Engine> Engine for Deadline<E> {
    fn transform<'a>(
        &'a self,
        job: &'a TransformJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, TransformReport> {
        self.within(self.inner.transform(job, progress))
    }

    fn raw_query<'a>(
        &'a self,
        job: &'a RawQueryJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, u64> {
        self.within(self.inner.raw_query(job, progress))
    }

    fn validate_query<'a>(&'a self, job: &'a ValidateJob) -> EngineFuture<'a, ValidateReport> {
        self.within(self.inner.validate_query(job))
    }

    fn migrate_query<'a>(
        &'a self,
        job: &'a MigrateJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, MigrateReport> {
        self.within(self.inner.migrate_query(job, progress))
    }

    fn derive_provenance<'a>(
        &'a self,
        job: &'a ProvenanceJob,
    ) -> EngineFuture<'a, Vec<InputRecords>> {
        self.within(self.inner.derive_provenance(job))
    }

    fn conformance<'a>(&'a self, dir: &'a Path) -> EngineFuture<'a, ConformanceReport> {
        // The kit times each of its own checks.
        self.inner.conformance(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that never answers.
    #[derive(Debug)]
    struct Silent;

    fn never<'a, T: 'a>() -> EngineFuture<'a, T> {
        Box::pin(std::future::pending())
    }

    impl Engine for Silent {
        fn transform<'a>(
            &'a self,
            _: &'a TransformJob,
            _: &'a Progress,
        ) -> EngineFuture<'a, TransformReport> {
            never()
        }
        fn raw_query<'a>(&'a self, _: &'a RawQueryJob, _: &'a Progress) -> EngineFuture<'a, u64> {
            never()
        }
        fn validate_query<'a>(&'a self, _: &'a ValidateJob) -> EngineFuture<'a, ValidateReport> {
            never()
        }
        fn migrate_query<'a>(
            &'a self,
            _: &'a MigrateJob,
            _: &'a Progress,
        ) -> EngineFuture<'a, MigrateReport> {
            never()
        }
        fn derive_provenance<'a>(
            &'a self,
            _: &'a ProvenanceJob,
        ) -> EngineFuture<'a, Vec<InputRecords>> {
            never()
        }
        fn conformance<'a>(&'a self, _: &'a Path) -> EngineFuture<'a, ConformanceReport> {
            never()
        }
    }

    #[tokio::test]
    async fn an_engine_that_never_answers_is_reported_with_the_users_deadline() {
        let layer = Deadline::new(Silent, "slow".into(), Duration::from_millis(20), 30);
        let raw = RawQueryJob {
            input_data_paths: vec![],
            transform: weir_odf::TransformSql {
                engine: "slow".into(),
                version: None,
                query: Some("SELECT 1".into()),
                queries: None,
                temporal_tables: None,
            },
            output_data_path: "out".into(),
        };
        let err = layer
            .raw_query(&raw, &Progress::none())
            .await
            .expect_err("the deadline passes");
        assert!(
            matches!(&err, EngineFailure::Contract { engine, violation: ContractViolation::DeadlineExceeded { seconds: 30 } } if engine == "slow"),
            "{err:?}"
        );
    }
}
