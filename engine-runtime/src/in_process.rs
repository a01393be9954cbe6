//! Engines inside the coordinator's process: the embedded default. The engine object is served on
//! a Unix socket in a private run folder, so calls go through exactly the same client, stream rules
//! and deadlines as a container engine's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Instrument;
use weir_engine_contract::{Engine, EngineAddress, EngineServer, ServeError};

use crate::config::RuntimeConfig;
use crate::connect::{ListenProbe, connect_ready};
use crate::engine_log::EngineLog;
use crate::error::RuntimeError;
use crate::ownership::coordinator_ids;
use crate::paths::PathMapping;
use crate::runtime::{EngineHandle, EngineIdentity, EngineRuntime, Instance, StartRequest};

/// Runs an engine object in this process, one server per operation.
///
/// ```no_run
/// # use weir_engine_contract::model::*;
/// # use weir_engine_contract::{Engine, EngineError, ProgressSink};
/// # struct MyEngine;
/// # impl Engine for MyEngine {
/// #   async fn execute_raw_query(&self, _: RawQueryRequest, _: ProgressSink) -> Result<RawQuerySuccess, EngineError> { Ok(RawQuerySuccess::default()) }
/// #   async fn execute_transform(&self, _: TransformRequest, _: ProgressSink) -> Result<TransformSuccess, EngineError> { Ok(TransformSuccess::default()) }
/// # }
/// # async fn example() -> Result<(), weir_engine_runtime::RuntimeError> {
/// use weir_engine_runtime::*;
///
/// let runtime = InProcessRuntime::new("my-engine", "1.0.0", MyEngine, RuntimeConfig::default());
/// let engine = runtime
///     .start(StartRequest::new(OperationId::generate(), OperationFolders::new("/tmp/out")))
///     .await?;
/// assert_eq!(engine.identity().to_string(), "my-engine 1.0.0 (in-process)");
/// engine.stop().await?;
/// # Ok(()) }
/// ```
pub struct InProcessRuntime<E> {
    name: String,
    version: String,
    engine: Arc<E>,
    config: RuntimeConfig,
    run_root: PathBuf,
}

impl<E> std::fmt::Debug for InProcessRuntime<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessRuntime")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> InProcessRuntime<E> {
    /// A runtime for `engine`, which declares its `name` and `version` (its identity).
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        engine: E,
        config: RuntimeConfig,
    ) -> Self {
        Self::from_arc(name, version, Arc::new(engine), config)
    }

    /// A runtime for a shared engine.
    pub fn from_arc(
        name: impl Into<String>,
        version: impl Into<String>,
        engine: Arc<E>,
        config: RuntimeConfig,
    ) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            engine,
            config,
            run_root: std::env::temp_dir(),
        }
    }

    async fn start_in_process(&self, request: StartRequest) -> Result<EngineHandle, RuntimeError> {
        // An engine in this process shares its environment: there is none of its own to set.
        let StartRequest {
            operation_id,
            folders,
            environment: _,
        } = request;
        std::fs::create_dir_all(folders.output()).map_err(|source| RuntimeError::Io {
            action: "create the output folder",
            path: folders.output().to_path_buf(),
            source,
        })?;
        let run_dir = crate::connect::run_dir(&self.run_root, coordinator_ids())?;
        let address = EngineAddress::Unix(run_dir.path().join("engine.sock"));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = EngineServer::from_arc(self.engine.clone())
            .address(address.clone())
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .bind()
            .await
            .map_err(|source| RuntimeError::Serve {
                engine: self.name.clone(),
                source,
            })?;
        let task = tokio::spawn(server.serve());
        let log = EngineLog::without_output(&self.name, operation_id.as_str());
        let instance = InProcessInstance {
            shutdown: Some(shutdown),
            task,
            _run_dir: run_dir,
            stop_grace: self.config.stop_grace(),
        };
        let expected = format!("its in-process socket {address}");
        let client = match connect_ready(
            &address,
            ListenProbe::Dial,
            expected,
            self.config.start_timeout(),
            std::future::pending(),
        )
        .await
        {
            Ok(client) => client,
            Err(failure) => {
                return Err(failure
                    .into_error(&self.name, &operation_id, &log, self.config.start_timeout())
                    .await);
            }
        };
        Ok(EngineHandle::new(
            self.name.clone(),
            operation_id,
            EngineIdentity::InProcess {
                name: self.name.clone(),
                version: self.version.clone(),
            },
            client,
            PathMapping::Identity,
            self.config,
            log,
            Instance::InProcess(instance),
        ))
    }
}

impl<E: Engine> EngineRuntime for InProcessRuntime<E> {
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<EngineHandle, RuntimeError>> {
        let span = tracing::info_span!("engine_start", engine = %self.name, operation_id = %request.operation_id, runtime = "in-process");
        self.start_in_process(request).instrument(span).boxed()
    }
}

/// An engine server running in this process.
#[derive(Debug)]
pub(crate) struct InProcessInstance {
    /// Dropping it (with the handle) shuts the server down gracefully.
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
    _run_dir: tempfile::TempDir,
    stop_grace: Duration,
}

impl InProcessInstance {
    /// How the server ended, or `None` while it serves.
    pub(crate) fn exit_status(&self) -> Option<String> {
        self.task
            .is_finished()
            .then(|| "the in-process server stopping".to_owned())
    }

    /// Shuts the server down, letting a running call finish for the grace period.
    pub(crate) async fn stop(mut self) -> Result<(), RuntimeError> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if tokio::time::timeout(self.stop_grace, &mut self.task)
            .await
            .is_err()
        {
            tracing::warn!("in-process engine still busy after the grace period: aborting it");
            self.task.abort();
        }
        Ok(())
    }
}

impl Drop for InProcessInstance {
    fn drop(&mut self) {
        // Without an orderly stop, don't leave a server task running.
        if self.shutdown.is_some() {
            self.task.abort();
        }
    }
}
