//! The reference DataFusion engine, in this process.

use std::path::Path;

use std::convert::Infallible;

use reference_engine::{EngineError, ErrorKind, ReferenceEngine};

use crate::progress::Progress;

use super::EngineFailure;
use super::identity::EngineIdentity;
use super::job::{RawQueryJob, TransformJob, TransformReport};

/// The embedded engine.
#[derive(Debug, Clone, Default)]
pub struct Embedded {
    engine: ReferenceEngine,
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

fn failure(engine: &str, e: EngineError) -> EngineFailure {
    match e.kind() {
        ErrorKind::InvalidQuery => EngineFailure::InvalidQuery {
            engine: engine.to_string(),
            message: e.to_string(),
        },
        ErrorKind::Internal => EngineFailure::Internal {
            engine: engine.to_string(),
            message: e.to_string(),
        },
    }
}

impl Embedded {
    pub(super) async fn transform(
        &self,
        engine: &str,
        job: &TransformJob,
        progress: &Progress,
    ) -> Result<TransformReport, EngineFailure> {
        let Ok(request) = job.request(path);
        let total = Some(job.input_records());
        let sink = |p: reference_engine::Progress| {
            progress.engine(Some(p.phase.as_str()), p.rows_read, p.rows_written, total)
        };
        let outcome = self
            .engine
            .execute_transform(&request, &sink)
            .await
            .map_err(|e| failure(engine, e))?;
        Ok(TransformReport {
            new_offset_interval: outcome.new_offset_interval,
            new_watermark: outcome.new_watermark,
        })
    }

    pub(super) async fn raw_query(
        &self,
        engine: &str,
        job: &RawQueryJob,
        progress: &Progress,
    ) -> Result<u64, EngineFailure> {
        let Ok(request) = job.request(path);
        let sink = |p: reference_engine::Progress| {
            progress.engine(Some(p.phase.as_str()), p.rows_read, p.rows_written, None)
        };
        let outcome = self
            .engine
            .execute_raw_query(&request, &sink)
            .await
            .map_err(|e| failure(engine, e))?;
        Ok(outcome.num_records)
    }
}
