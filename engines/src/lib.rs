#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! Engines as the coordinator sees them: resolve an engine name to a pinned engine, run jobs on it with a
//! deadline, and hold it to the contract.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod checked;
pub mod compat;
pub mod contract;
mod deadline;
mod embedded;
pub mod exchange;
pub mod job;
mod logged;
pub mod output;
mod runtime;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use contract::ContractViolation;
use job::{
    InputRecords, MigrateJob, MigrateReport, ProvenanceJob, RawQueryJob, TransformJob,
    TransformReport, ValidateJob, ValidateReport,
};
use weir_dataset::identity::EngineIdentity;
use weir_manifest::workspace::EngineConfig;

use weir_dataset::progress::Progress;
use weir_engine_contract::conformance::ConformanceReport;

/// What an engine operation returns.
pub type EngineFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, EngineFailure>> + Send + 'a>>;

/// One engine as the coordinator drives it, however it runs: the embedded engine, a process, a container.
/// A new runtime is one implementation of this trait; the deadline, the contract's checks of what an engine
/// wrote, and logging are layers around any of them (`deadline::Deadline`, `checked::Checked`,
/// `logged::Logged`).
pub trait Engine: Send + Sync + std::fmt::Debug {
    /// ExecuteTransform, handing the engine's Progress messages to `progress`.
    fn transform<'a>(
        &'a self,
        job: &'a TransformJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, TransformReport>;
    /// ExecuteRawQuery; the number of records written.
    fn raw_query<'a>(
        &'a self,
        job: &'a RawQueryJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, u64>;
    /// ValidateQuery.
    fn validate_query<'a>(&'a self, job: &'a ValidateJob) -> EngineFuture<'a, ValidateReport>;
    /// MigrateQuery.
    fn migrate_query<'a>(
        &'a self,
        job: &'a MigrateJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, MigrateReport>;
    /// DeriveProvenance.
    fn derive_provenance<'a>(
        &'a self,
        job: &'a ProvenanceJob,
    ) -> EngineFuture<'a, Vec<InputRecords>>;
    /// The engine-contract conformance kit against this engine, its data checks working in `dir`.
    fn conformance<'a>(&'a self, dir: &'a Path) -> EngineFuture<'a, ConformanceReport>;
}

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
    /// The engine does not implement the operation (an ODF engine has ExecuteTransform and
    /// ExecuteRawQuery only).
    #[error("engine `{engine}` does not implement {operation}")]
    NotSupported {
        /// Engine name.
        engine: String,
        /// The operation.
        operation: String,
    },
    /// The coordinator could not read or hash what the engine wrote (its own failure, not the engine's).
    #[error("could not check what engine `{engine}` wrote: {message}")]
    Output {
        /// Engine name.
        engine: String,
        /// What went wrong.
        message: String,
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
    engine: Arc<dyn Engine>,
    /// Whether transforms read and write the store themselves (`exchange: object-store`).
    exchange: exchange::DataExchange,
}

impl EngineHandle {
    /// An engine with the standard layers: logging outside, then the contract's checks of its data files,
    /// then the deadline `limit` around the engine itself (checking is the coordinator's time, not the
    /// engine's).
    fn layered(identity: EngineIdentity, engine: impl Engine + 'static, limit: Duration) -> Self {
        let seconds = limit.as_secs();
        let engine = logged::Logged::new(
            identity.clone(),
            checked::Checked::new(
                deadline::Deadline::new(engine, identity.name.clone(), limit, seconds),
                identity.name.clone(),
            ),
        );
        Self {
            identity,
            engine: Arc::new(engine),
            exchange: exchange::DataExchange::Local,
        }
    }

    /// How the engine gets its data.
    pub fn exchange(&self) -> exchange::DataExchange {
        self.exchange
    }
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

/// What would serve an engine name the embedded engine does not: a `use:` mapping to Weir's engine, or the
/// engine's own image.
pub fn not_served_hint(name: &str) -> String {
    format!(
        "the embedded engine serves `{EMBEDDED_ENGINE_NAME}` only; if the query is also valid DataFusion SQL, map the name to it in weir.yaml (`engines: {{{name}: {{use: {EMBEDDED_ENGINE_NAME}}}}}`), or run an ODF engine image for `{name}` with `--engine docker` (`engines.{name}.image: <repo>@sha256:<digest>` and `port: 2884`)"
    )
}

impl EngineResolver {
    /// The engine `weir.yaml` maps `name` to (`engines.<name>.use`), if any.
    fn mapped(&self, name: &str) -> Result<Option<String>, EngineFailure> {
        let Some(target) = self.config.get(name).and_then(|c| c.use_engine.clone()) else {
            return Ok(None);
        };
        let chained = self
            .config
            .get(&target)
            .is_some_and(|c| c.use_engine.is_some());
        if target == name || chained {
            return Err(EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: self.runtime_name().into(),
                hint: format!(
                    "`engines.{name}.use: {target}` must name an engine that is not mapped itself (e.g. `use: {EMBEDDED_ENGINE_NAME}`)"
                ),
            });
        }
        Ok(Some(target))
    }

    fn runtime_name(&self) -> &'static str {
        match self.runtime {
            EngineRuntimeKind::Embedded => "embedded",
            EngineRuntimeKind::Process => "process",
            EngineRuntimeKind::Docker => "docker",
            EngineRuntimeKind::Podman => "podman",
        }
    }

    /// Whether `weir.yaml` and the runtime give `name` an engine at all, without starting or hashing it (for
    /// `weir validate` and before a pull): an error names what would serve it.
    pub fn check_served(&self, name: &str) -> Result<(), EngineFailure> {
        let name = match self.mapped(name)? {
            Some(target) => target,
            None => name.to_string(),
        };
        let cfg = self.config.get(&name).cloned().unwrap_or_default();
        let missing = |hint: String| EngineFailure::NotConfigured {
            engine: name.clone(),
            runtime: self.runtime_name().into(),
            hint,
        };
        match self.runtime {
            EngineRuntimeKind::Embedded if name != EMBEDDED_ENGINE_NAME => {
                Err(missing(not_served_hint(&name)))
            }
            EngineRuntimeKind::Process if cfg.binary.is_none() => Err(missing(format!(
                "set `engines.{name}.binary` in weir.yaml, or map the name to another engine (`engines.{name}.use`)"
            ))),
            EngineRuntimeKind::Docker | EngineRuntimeKind::Podman if cfg.image.is_none() => {
                Err(missing(format!(
                    "set `engines.{name}.image` (pinned by digest) in weir.yaml, or map the name to another engine (`engines.{name}.use`)"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether some runtime can serve `name`: the embedded engine (directly or through `use:`), or a
    /// binary or image `weir.yaml` configures for it. `weir validate` checks this (a step whose engine
    /// another runtime serves is valid); `pull` checks [`EngineResolver::check_served`].
    pub fn check_served_by_any_runtime(&self, name: &str) -> Result<(), EngineFailure> {
        let target = self.mapped(name)?.unwrap_or_else(|| name.to_string());
        let cfg = self.config.get(&target).cloned().unwrap_or_default();
        if target == EMBEDDED_ENGINE_NAME || cfg.binary.is_some() || cfg.image.is_some() {
            return Ok(());
        }
        Err(EngineFailure::NotConfigured {
            engine: name.to_string(),
            runtime: self.runtime_name().into(),
            hint: not_served_hint(name),
        })
    }

    /// The engine that serves `name` (through its `use:` mapping, if `weir.yaml` gives one).
    pub fn resolve(&self, name: &str) -> Result<EngineHandle, EngineFailure> {
        if let Some(target) = self.mapped(name)? {
            let mut handle = self.resolve(&target)?;
            handle.identity.name = name.to_string();
            return Ok(handle);
        }
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
                if cfg.exchange == exchange::DataExchange::ObjectStore {
                    return Err(missing(
                        if podman { "podman" } else { "docker" },
                        &format!(
                            "`engines.{name}.exchange: object-store` needs an engine that reaches the object store; Weir's engine containers have no network (use --engine process, or `exchange: local`)"
                        ),
                    ));
                }
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
        // Hashed once per run and binary (keyed by the file's identity), not per operation.
        let digest = weir_engine_runtime::binary_sha256(&path).map_err(|e| {
            EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: "process".into(),
                hint: e.to_string(),
            }
        })?;
        let identity = EngineIdentity {
            name: name.into(),
            runtime: "process".into(),
            reference: format!("sha256:{digest}"),
        };
        let mut engine = runtime::RuntimeEngine::process(name, &path, port, args, self.deadline);
        let cfg = self.config.get(name).cloned().unwrap_or_default();
        if cfg.exchange == exchange::DataExchange::ObjectStore {
            engine = engine.with_exchange(exchange::ObjectExchange {
                assume_role: cfg.assume_role.clone(),
            });
        }
        let mut handle =
            EngineHandle::layered(identity, engine, runtime::outer_limit(self.deadline));
        handle.exchange = cfg.exchange;
        Ok(handle)
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
        let identity = EngineIdentity {
            name: name.into(),
            runtime: runtime.into(),
            reference: image.to_string(),
        };
        let engine = runtime::RuntimeEngine::container(name, podman, image, port, self.deadline);
        Ok(EngineHandle::layered(
            identity,
            engine,
            runtime::outer_limit(self.deadline),
        ))
    }

    /// The embedded reference engine for `name`.
    pub fn embedded(&self, name: &str) -> Result<EngineHandle, EngineFailure> {
        if name != EMBEDDED_ENGINE_NAME {
            if self.mapped(name)?.as_deref() == Some(EMBEDDED_ENGINE_NAME) {
                let mut handle = self.embedded(EMBEDDED_ENGINE_NAME)?;
                handle.identity.name = name.to_string();
                return Ok(handle);
            }
            return Err(EngineFailure::NotConfigured {
                engine: name.to_string(),
                runtime: "embedded".into(),
                hint: not_served_hint(name),
            });
        }
        Ok(EngineHandle::layered(
            embedded::identity(name),
            embedded::Embedded::new(name),
            self.deadline,
        ))
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
    pub async fn conformance(&self, dir: &Path) -> Result<ConformanceReport, EngineFailure> {
        self.engine.conformance(dir).await
    }

    /// Runs ExecuteTransform within the deadline, handing the engine's Progress messages to `progress`.
    pub async fn transform(
        &self,
        job: &TransformJob,
        progress: &Progress,
    ) -> Result<TransformReport, EngineFailure> {
        self.engine.transform(job, progress).await
    }

    /// Runs ExecuteRawQuery within the deadline, handing the engine's Progress messages to `progress`;
    /// returns the number of records.
    pub async fn raw_query(
        &self,
        job: &RawQueryJob,
        progress: &Progress,
    ) -> Result<u64, EngineFailure> {
        self.engine.raw_query(job, progress).await
    }

    /// Runs ValidateQuery within the deadline.
    pub async fn validate_query(&self, job: &ValidateJob) -> Result<ValidateReport, EngineFailure> {
        self.engine.validate_query(job).await
    }

    /// Runs MigrateQuery within the deadline.
    pub async fn migrate_query(
        &self,
        job: &MigrateJob,
        progress: &Progress,
    ) -> Result<MigrateReport, EngineFailure> {
        self.engine.migrate_query(job, progress).await
    }

    /// Runs DeriveProvenance within the deadline.
    pub async fn derive_provenance(
        &self,
        job: &ProvenanceJob,
    ) -> Result<Vec<InputRecords>, EngineFailure> {
        self.engine.derive_provenance(job).await
    }
}

/// How engines run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineRuntimeKind {
    /// The reference DataFusion engine inside this process.
    Embedded,
    /// A local engine binary (`engines.<name>.binary` in `weir.yaml`).
    Process,
    /// A Docker container pinned by digest (`engines.<name>.image`).
    Docker,
    /// A Podman container pinned by digest.
    Podman,
}
