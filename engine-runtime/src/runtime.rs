//! The one abstraction the coordinator uses: start an engine for an operation, get a handle.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use tracing::Instrument;
use weir_engine_contract::EngineClient;
use weir_engine_contract::model::{
    Progress, RawQueryRequest, RawQuerySuccess, TransformRequest, TransformSuccess,
};

use crate::config::RuntimeConfig;
use crate::container::ContainerInstance;
use crate::container::image::ImageDigest;
use crate::engine_log::EngineLog;
use crate::error::RuntimeError;
use crate::in_process::InProcessInstance;
use crate::operation::{OperationFolders, OperationId};
use crate::paths::PathMapping;
use crate::process::ProcessInstance;

/// Starts engines. Implemented by [`ContainerRuntime`](crate::ContainerRuntime),
/// [`ProcessRuntime`](crate::ProcessRuntime) and [`InProcessRuntime`](crate::InProcessRuntime); the
/// coordinator holds a `Box<dyn EngineRuntime>` and does not care which.
///
/// Every start gives a fresh engine for one operation; [`EngineHandle::stop`] (or dropping the
/// handle) ends it.
pub trait EngineRuntime: Send + Sync + fmt::Debug {
    /// Starts an engine for `request` and waits until it is ready (connected, gRPC handshake done)
    /// or the start timeout passes.
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<EngineHandle, RuntimeError>>;
}

/// What to start an engine for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// The operation.
    pub operation_id: OperationId,
    /// The files it reads and writes.
    pub folders: OperationFolders,
    /// Variables set in the engine's environment for this operation only (e.g. object-store
    /// credentials scoped to the operation's objects).
    pub environment: EngineEnvironment,
}

impl StartRequest {
    /// An engine for `operation_id` over `folders`.
    pub fn new(operation_id: OperationId, folders: OperationFolders) -> Self {
        Self {
            operation_id,
            folders,
            environment: EngineEnvironment::default(),
        }
    }

    /// Sets these variables in the engine's environment.
    #[must_use]
    pub fn with_environment(mut self, environment: EngineEnvironment) -> Self {
        self.environment = environment;
        self
    }
}

/// Environment variables for one engine operation. Their values may be secrets: `Debug` shows the
/// names only.
///
/// ```
/// use weir_engine_runtime::EngineEnvironment;
///
/// let env = EngineEnvironment::default().with("AWS_SECRET_ACCESS_KEY", "s3cr3t");
/// assert_eq!(env.vars()[0].1, "s3cr3t");
/// assert!(!format!("{env:?}").contains("s3cr3t"));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EngineEnvironment(Vec<(String, String)>);

impl EngineEnvironment {
    /// Adds (or replaces) `name`.
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.0.retain(|(n, _)| *n != name);
        self.0.push((name, value.into()));
        self
    }

    /// The variables, in the order they were set.
    pub fn vars(&self) -> &[(String, String)] {
        &self.0
    }

    /// Whether no variable is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for EngineEnvironment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| name))
            .finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for EngineEnvironment {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        iter.into_iter()
            .fold(Self::default(), |env, (k, v)| env.with(k, v))
    }
}

/// Exactly what ran, for the coordinator to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineIdentity {
    /// A container image, by id (and registry digests when known).
    Image(ImageDigest),
    /// A local binary, by the SHA-256 of its bytes.
    Binary {
        /// The binary.
        path: PathBuf,
        /// SHA-256 of the file, hex.
        sha256: String,
    },
    /// An engine object inside the coordinator, by the name and version it declares.
    InProcess {
        /// The engine's name.
        name: String,
        /// Its version.
        version: String,
    },
}

impl fmt::Display for EngineIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Image(digest) => write!(f, "{} ({})", digest.reference, digest.id),
            Self::Binary { path, sha256 } => write!(f, "{} (sha256:{sha256})", path.display()),
            Self::InProcess { name, version } => write!(f, "{name} {version} (in-process)"),
        }
    }
}

/// The running engine behind a handle.
#[derive(Debug)]
pub(crate) enum Instance {
    Container(Box<ContainerInstance>),
    Process(ProcessInstance),
    InProcess(InProcessInstance),
}

impl Instance {
    async fn exit_status(&self) -> Option<String> {
        match self {
            Self::Container(c) => c.exit_status().await,
            Self::Process(p) => p.exit_status().await,
            Self::InProcess(i) => i.exit_status(),
        }
    }
}

/// A ready engine for one operation: its client, its identity, where it sees files, and how to
/// stop it. Dropping the handle ends the engine too (a container is removed, a process killed).
#[derive(Debug)]
pub struct EngineHandle {
    engine: String,
    operation_id: OperationId,
    identity: EngineIdentity,
    client: EngineClient,
    paths: PathMapping,
    config: RuntimeConfig,
    log: EngineLog,
    instance: Instance,
}

impl EngineHandle {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        engine: String,
        operation_id: OperationId,
        identity: EngineIdentity,
        client: EngineClient,
        paths: PathMapping,
        config: RuntimeConfig,
        log: EngineLog,
        instance: Instance,
    ) -> Self {
        Self {
            engine,
            operation_id,
            identity,
            client: client.with_deadline(config.operation_deadline()),
            paths,
            config,
            log,
            instance,
        }
    }

    /// The engine's name.
    pub fn engine(&self) -> &str {
        &self.engine
    }

    /// The operation this engine was started for.
    pub fn operation_id(&self) -> &OperationId {
        &self.operation_id
    }

    /// Exactly what runs: image id, binary hash, or in-process name and version.
    pub fn identity(&self) -> &EngineIdentity {
        &self.identity
    }

    /// The gRPC client, connected and ready. Prefer [`EngineHandle::call`], which adds the
    /// operation deadline and explains failures.
    pub fn client(&self) -> &EngineClient {
        &self.client
    }

    /// The per-operation deadline [`EngineHandle::call`] applies.
    pub fn operation_deadline(&self) -> Duration {
        self.config.operation_deadline()
    }

    /// The path the engine sees for a host path inside the operation's inputs or output folder:
    /// put these paths in requests.
    pub fn engine_path(&self, host: &Path) -> Result<PathBuf, RuntimeError> {
        self.paths.engine_path(host)
    }

    /// The name of the engine's container, for container engines.
    pub fn container_name(&self) -> Option<&str> {
        match &self.instance {
            Instance::Container(c) => Some(c.name()),
            _ => None,
        }
    }

    /// Runs one call on the client under the operation deadline. When the call fails, the error
    /// says why in the caller's terms: [`RuntimeError::DeadlineExceeded`] when the deadline passed,
    /// [`RuntimeError::EngineExited`] (with the engine's last output) when the engine died,
    /// [`RuntimeError::Engine`] otherwise.
    pub async fn call<'a, T, F>(
        &'a self,
        call: impl FnOnce(&'a EngineClient) -> F,
    ) -> Result<T, RuntimeError>
    where
        F: Future<Output = Result<T, weir_engine_contract::ClientError>>,
    {
        let deadline = self.config.operation_deadline();
        match tokio::time::timeout(deadline, call(&self.client)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.explain(error).await),
            Err(_elapsed) => Err(self.deadline_exceeded()),
        }
    }

    /// ExecuteRawQuery under the operation deadline, handing each Progress message to
    /// `on_progress`. See [`EngineHandle::call`] for the errors.
    pub async fn execute_raw_query(
        &self,
        request: &RawQueryRequest,
        on_progress: impl FnMut(Progress),
    ) -> Result<RawQuerySuccess, RuntimeError> {
        self.call(|client| async move {
            client
                .execute_raw_query(request)
                .await?
                .finish_with(on_progress)
                .await
        })
        .await
    }

    /// ExecuteTransform under the operation deadline, handing each Progress message to
    /// `on_progress`. See [`EngineHandle::call`] for the errors.
    pub async fn execute_transform(
        &self,
        request: &TransformRequest,
        on_progress: impl FnMut(Progress),
    ) -> Result<TransformSuccess, RuntimeError> {
        self.call(|client| async move {
            client
                .execute_transform(request)
                .await?
                .finish_with(on_progress)
                .await
        })
        .await
    }

    fn deadline_exceeded(&self) -> RuntimeError {
        tracing::warn!(engine = %self.engine, operation_id = %self.operation_id, "engine operation hit its deadline");
        RuntimeError::DeadlineExceeded {
            engine: self.engine.clone(),
            operation_id: self.operation_id.to_string(),
            deadline: self.config.operation_deadline(),
        }
    }

    async fn explain(&self, error: weir_engine_contract::ClientError) -> RuntimeError {
        if crate::connect::is_deadline(&error) {
            return self.deadline_exceeded();
        }
        // A broken stream usually means the engine died: give the process a moment to be reaped
        // or the container to be marked exited, then say so.
        for _ in 0..75 {
            if let Some(status) = self.instance.exit_status().await {
                self.log.settle(crate::connect::LOG_SETTLE).await;
                return RuntimeError::EngineExited {
                    engine: self.engine.clone(),
                    operation_id: self.operation_id.to_string(),
                    status,
                    log_tail: self.log.tail(),
                };
            }
            if !crate::connect::is_transport(&error) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        RuntimeError::Engine {
            engine: self.engine.clone(),
            operation_id: self.operation_id.to_string(),
            source: Box::new(error),
        }
    }

    /// Stops the engine (polite signal, then kill after the grace period), removes its container,
    /// and hands the files it wrote back to the coordinator's user.
    pub async fn stop(self) -> Result<(), RuntimeError> {
        let span = tracing::info_span!("engine_stop", engine = %self.engine, operation_id = %self.operation_id);
        drop(self.client);
        let stopped = async move {
            match self.instance {
                Instance::Container(c) => c.stop().await,
                Instance::Process(p) => p.stop().await,
                Instance::InProcess(i) => i.stop().await,
            }
        };
        stopped.instrument(span).await
    }
}
