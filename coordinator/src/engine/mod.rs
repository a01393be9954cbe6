//! Engines as the coordinator sees them: resolve an engine name to a pinned engine, run jobs on it with a
//! deadline, and hold it to the contract.

pub mod compat;
pub mod contract;
mod embedded;
pub mod identity;
pub mod job;
pub mod output;
mod runtime;

use std::time::Duration;

use crate::cli::EngineRuntimeKind;
use crate::manifest::workspace::EngineConfig;
pub use contract::ContractViolation;
use identity::EngineIdentity;
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
    Runtime(runtime::RuntimeEngine),
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
    /// The workspace folder (engine binaries are relative to it).
    pub root: std::path::PathBuf,
}

/// The engine name the embedded reference engine serves.
pub const EMBEDDED_ENGINE_NAME: &str = "datafusion";

impl EngineResolver {
    /// The engine that serves `name`.
    pub fn resolve(&self, name: &str) -> Result<EngineHandle, EngineFailure> {
        let cfg = self.config.get(name).cloned().unwrap_or_default();
        let missing = |runtime: &str, hint: &str| EngineFailure::NotConfigured {
            engine: name.to_string(),
            runtime: runtime.into(),
            hint: hint.into(),
        };
        match self.runtime {
            EngineRuntimeKind::Embedded => self.embedded(name),
            EngineRuntimeKind::Process => {
                let binary = cfg.binary.ok_or_else(|| {
                    missing(
                        "process",
                        &format!("set `engines.{name}.binary` in weir.yaml"),
                    )
                })?;
                self.process(name, &binary, cfg.port, &cfg.args)
            }
            EngineRuntimeKind::Docker | EngineRuntimeKind::Podman => {
                let podman = self.runtime == EngineRuntimeKind::Podman;
                let image = cfg.image.ok_or_else(|| {
                    missing(
                        if podman { "podman" } else { "docker" },
                        &format!("set `engines.{name}.image` in weir.yaml"),
                    )
                })?;
                self.container(name, podman, &image, cfg.port)
            }
        }
    }

    fn process(
        &self,
        name: &str,
        binary: &str,
        port: Option<u16>,
        args: &[String],
    ) -> Result<EngineHandle, EngineFailure> {
        let path = self.root.join(binary);
        let bytes = std::fs::read(&path).map_err(|e| EngineFailure::NotConfigured {
            engine: name.to_string(),
            runtime: "process".into(),
            hint: format!("engine binary {}: {e}", path.display()),
        })?;
        use sha2::Digest;
        let digest = hex(&sha2::Sha256::digest(&bytes));
        Ok(EngineHandle {
            identity: EngineIdentity {
                name: name.into(),
                runtime: "process".into(),
                reference: format!("sha256:{digest}"),
            },
            imp: Imp::Runtime(runtime::RuntimeEngine::process(
                name,
                &path,
                port,
                args,
                self.deadline,
            )),
            deadline: self.deadline,
        })
    }

    fn container(
        &self,
        name: &str,
        podman: bool,
        image: &str,
        port: Option<u16>,
    ) -> Result<EngineHandle, EngineFailure> {
        let runtime = if podman { "podman" } else { "docker" };
        if !image.contains("@sha256:") {
            return Err(EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: runtime.into(),
                hint: format!(
                    "image `{image}` must be pinned by digest (`repo@sha256:...`); an image built on this machine has no registry digest and is pinned by its id: `{runtime} image inspect --format '{{{{.Id}}}}' {image}` prints it"
                ),
            });
        }
        Ok(EngineHandle {
            identity: EngineIdentity {
                name: name.into(),
                runtime: runtime.into(),
                reference: image.to_string(),
            },
            imp: Imp::Runtime(runtime::RuntimeEngine::container(
                podman,
                image,
                port,
                self.deadline,
            )),
            deadline: self.deadline,
        })
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

    /// An engine given by reference (`embedded`, `process:PATH`, `docker:IMAGE`, `podman:IMAGE`), for
    /// `engine deprecate` and for replaying steps recorded with another engine.
    pub fn by_reference(&self, name: &str, reference: &str) -> Result<EngineHandle, EngineFailure> {
        match reference.split_once(':') {
            None if reference == "embedded" => self.embedded(name),
            Some(("process", path)) => {
                let cfg = self.config.get(name).cloned().unwrap_or_default();
                self.process(name, path, cfg.port, &cfg.args)
            }
            Some(("docker", image)) => self.container(
                name,
                false,
                image,
                self.config.get(name).and_then(|c| c.port),
            ),
            Some(("podman", image)) => self.container(
                name,
                true,
                image,
                self.config.get(name).and_then(|c| c.port),
            ),
            _ => Err(EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: reference.to_string(),
                hint:
                    "use embedded, process:PATH, docker:IMAGE@sha256:... or podman:IMAGE@sha256:..."
                        .into(),
            }),
        }
    }
}

impl EngineHandle {
    /// What gets recorded in `ExecuteTransform`.
    pub fn identity(&self) -> &EngineIdentity {
        &self.identity
    }

    /// Runs the engine-contract conformance kit against this engine (the embedded engine is served on a
    /// Unix socket in `dir` for the duration), with the data checks working in `dir`.
    pub async fn conformance(
        &self,
        dir: &std::path::Path,
    ) -> Result<engine_contract::conformance::ConformanceReport, EngineFailure> {
        match &self.imp {
            Imp::Runtime(r) => r.conformance(&self.identity.name, dir).await,
            Imp::Embedded(_) => {
                let socket = dir.join("engine.sock");
                let address = engine_contract::EngineAddress::Unix(socket);
                let server = tokio::spawn(engine_contract::serve(
                    reference_engine::ReferenceEngine::new(),
                    address.clone(),
                ));
                let options = engine_contract::conformance::ConformanceOptions::new(
                    self.identity.name.as_str(),
                )
                .with_data(engine_contract::conformance::DataSetup {
                    fixtures: std::sync::Arc::new(engine_conformance::ParquetFixtures),
                    host_dir: dir.to_path_buf(),
                    engine_dir: dir.to_path_buf(),
                });
                let report = engine_contract::conformance::run(&address, &options).await;
                server.abort();
                report.map_err(|e| EngineFailure::Internal {
                    engine: self.identity.name.clone(),
                    message: e.to_string(),
                })
            }
        }
    }

    /// Runs ExecuteTransform within the deadline, handing the engine's Progress messages to `progress`.
    pub async fn transform(
        &self,
        job: &TransformJob,
        progress: &crate::progress::Progress,
    ) -> Result<TransformReport, EngineFailure> {
        let fut = async {
            match &self.imp {
                Imp::Embedded(e) => e.transform(&self.identity.name, job, progress).await,
                Imp::Runtime(r) => r.transform(&self.identity.name, job, progress).await,
            }
        };
        self.with_deadline(fut).await
    }

    /// Runs ExecuteRawQuery within the deadline, handing the engine's Progress messages to `progress`;
    /// returns the number of records.
    pub async fn raw_query(
        &self,
        job: &RawQueryJob,
        progress: &crate::progress::Progress,
    ) -> Result<u64, EngineFailure> {
        let fut = async {
            match &self.imp {
                Imp::Embedded(e) => e.raw_query(&self.identity.name, job, progress).await,
                Imp::Runtime(r) => r.raw_query(&self.identity.name, job, progress).await,
            }
        };
        self.with_deadline(fut).await
    }

    async fn with_deadline<T>(
        &self,
        fut: impl Future<Output = Result<T, EngineFailure>>,
    ) -> Result<T, EngineFailure> {
        // A runtime engine's start and operation are timed by the runtime itself (so an engine that never
        // listens is reported as that); this outer limit only catches what it would not.
        let limit = match &self.imp {
            Imp::Embedded(_) => self.deadline,
            Imp::Runtime(_) => {
                self.deadline + runtime::START_TIMEOUT + std::time::Duration::from_secs(30)
            }
        };
        match tokio::time::timeout(limit, fut).await {
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

/// Lower-case hex of some bytes.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
