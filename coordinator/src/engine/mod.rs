//! Engines as the coordinator sees them: resolve an engine name to a pinned engine, run jobs on it with a
//! deadline, and hold it to the contract.

pub mod compat;
pub mod contract;
mod embedded;
pub mod job;

use std::time::Duration;

use crate::chain::event::EngineIdentity;
use crate::cli::EngineRuntimeKind;
use crate::manifest::workspace::EngineConfig;
pub use contract::ContractViolation;
use job::{RawQueryJob, TransformJob, TransformReport};

/// Why an engine operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineFailure {
    /// The engine rejected the query; `message` is the engine's SQL error.
    #[error("engine `{engine}` rejected the query: {message}")]
    InvalidQuery {
        /// Engine name.
        engine: String,
        /// The engine's message.
        message: String,
    },
    /// The engine failed.
    #[error("engine `{engine}` failed: {message}")]
    Internal {
        /// Engine name.
        engine: String,
        /// The engine's message.
        message: String,
    },
    /// The engine broke the contract.
    #[error("engine `{engine}` broke the engine contract: {violation}")]
    Contract {
        /// Engine name.
        engine: String,
        /// What it did.
        violation: ContractViolation,
    },
    /// No engine serves this name on this runtime.
    #[error("no engine serves `{engine}` with --engine {runtime}: {hint}")]
    NotConfigured {
        /// Engine name.
        engine: String,
        /// The runtime asked for.
        runtime: String,
        /// What to configure.
        hint: String,
    },
}

/// A resolved, pinned engine.
#[derive(Debug, Clone)]
pub struct EngineHandle {
    identity: EngineIdentity,
    imp: Imp,
    deadline: Duration,
}

#[derive(Debug, Clone)]
enum Imp {
    Embedded(embedded::Embedded),
}

/// Everything needed to resolve engine names.
#[derive(Debug, Clone)]
pub struct EngineResolver {
    /// The runtime chosen with `--engine`.
    pub runtime: EngineRuntimeKind,
    /// `weir.yaml` engines.
    pub config: std::collections::BTreeMap<String, EngineConfig>,
    /// Deadline per operation.
    pub deadline: Duration,
}

/// The engine name the embedded reference engine serves.
pub const EMBEDDED_ENGINE_NAME: &str = "datafusion";

impl EngineResolver {
    /// The engine that serves `name`.
    pub fn resolve(&self, name: &str) -> Result<EngineHandle, EngineFailure> {
        match self.runtime {
            EngineRuntimeKind::Embedded => self.embedded(name),
            other => Err(EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: format!("{other:?}").to_ascii_lowercase(),
                hint: "this build serves engines in-process only; use --engine embedded".into(),
            }),
        }
    }

    /// The embedded reference engine for `name`.
    pub fn embedded(&self, name: &str) -> Result<EngineHandle, EngineFailure> {
        if name != EMBEDDED_ENGINE_NAME {
            return Err(EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: "embedded".into(),
                hint: format!("the embedded engine serves `{EMBEDDED_ENGINE_NAME}` only"),
            });
        }
        Ok(EngineHandle {
            identity: embedded::identity(name),
            imp: Imp::Embedded(embedded::Embedded::default()),
            deadline: self.deadline,
        })
    }

    /// An engine given by reference (`embedded`, `process:PATH`, `docker:IMAGE`...), for `engine deprecate`.
    pub fn by_reference(&self, name: &str, reference: &str) -> Result<EngineHandle, EngineFailure> {
        match reference {
            "embedded" => self.embedded(name),
            other => Err(EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: other.split(':').next().unwrap_or(other).to_string(),
                hint: "this build replays with the embedded engine only (`--to embedded`)".into(),
            }),
        }
    }
}

impl EngineHandle {
    /// What gets recorded in `ExecuteTransform`.
    pub fn identity(&self) -> &EngineIdentity {
        &self.identity
    }

    /// Runs ExecuteTransform within the deadline.
    pub async fn transform(&self, job: &TransformJob) -> Result<TransformReport, EngineFailure> {
        let fut = async {
            match &self.imp {
                Imp::Embedded(e) => e.transform(&self.identity.name, job).await,
            }
        };
        self.with_deadline(fut).await
    }

    /// Runs ExecuteRawQuery within the deadline; returns the number of records.
    pub async fn raw_query(&self, job: &RawQueryJob) -> Result<u64, EngineFailure> {
        let fut = async {
            match &self.imp {
                Imp::Embedded(e) => e.raw_query(&self.identity.name, job).await,
            }
        };
        self.with_deadline(fut).await
    }

    async fn with_deadline<T>(
        &self,
        fut: impl Future<Output = Result<T, EngineFailure>>,
    ) -> Result<T, EngineFailure> {
        match tokio::time::timeout(self.deadline, fut).await {
            Ok(r) => r,
            Err(_) => Err(EngineFailure::Contract {
                engine: self.identity.name.clone(),
                violation: ContractViolation::DeadlineExceeded {
                    seconds: self.deadline.as_secs(),
                },
            }),
        }
    }
}
