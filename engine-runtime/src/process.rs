//! Engines as local child processes: for development, and for engines installed on the machine.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tracing::Instrument;

use crate::config::RuntimeConfig;
use crate::connect::{connect_ready, free_loopback_port};
use crate::endpoint::EngineEndpoint;
use crate::engine_log::{EngineLog, OutputStream};
use crate::error::RuntimeError;
use crate::ownership::coordinator_ids;
use crate::paths::PathMapping;
use crate::runtime::{EngineHandle, EngineIdentity, EngineRuntime, Instance, StartRequest};
use engine_contract::EngineAddress;

/// A local engine binary and how to run it.
///
/// ```
/// use engine_runtime::{EngineEndpoint, ProcessEngine};
///
/// let engine = ProcessEngine::new("datafusion", "target/debug/weir-engine")
///     .with_endpoint(EngineEndpoint::weir_tcp())
///     .with_arg("--log-format=json");
/// assert_eq!(engine.name(), "datafusion");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEngine {
    name: String,
    binary: PathBuf,
    endpoint: EngineEndpoint,
    args: Vec<String>,
}

impl ProcessEngine {
    /// The engine `name` run from `binary`, on a Unix socket (`--unix-socket PATH`).
    pub fn new(name: impl Into<String>, binary: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            binary: binary.into(),
            endpoint: EngineEndpoint::UnixSocket,
            args: Vec::new(),
        }
    }

    /// Unix socket (`--unix-socket PATH`) or TCP (`--host 127.0.0.1 --port N` with a free port N;
    /// the port in [`EngineEndpoint::Tcp`] is ignored so that operations never clash).
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: EngineEndpoint) -> Self {
        self.endpoint = endpoint;
        self
    }

    /// An extra argument, passed before the endpoint arguments.
    #[must_use]
    pub fn with_arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// The engine's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The binary.
    pub fn binary(&self) -> &Path {
        &self.binary
    }
}

/// Runs one engine binary as a child process per operation. The process is killed when its handle
/// is dropped; [`EngineHandle::stop`] asks it to stop (SIGTERM) first.
///
/// The handle's identity is the SHA-256 of the binary, so what ran is pinned as exactly as an image
/// id pins a container.
#[derive(Debug, Clone)]
pub struct ProcessRuntime {
    engine: ProcessEngine,
    config: RuntimeConfig,
    run_root: PathBuf,
    /// (length, modification time, sha256) of the binary when last hashed.
    hashed: Arc<Mutex<Option<(u64, SystemTime, String)>>>,
}

impl ProcessRuntime {
    /// A runtime for `engine`.
    pub fn new(engine: ProcessEngine, config: RuntimeConfig) -> Self {
        Self {
            engine,
            config,
            run_root: std::env::temp_dir(),
            hashed: Arc::new(Mutex::new(None)),
        }
    }

    /// Where per-operation run folders (holding the Unix socket) are created.
    #[must_use]
    pub fn with_run_root(mut self, run_root: impl Into<PathBuf>) -> Self {
        self.run_root = run_root.into();
        self
    }

    /// The SHA-256 of the binary (hex), recomputed only when its size or modification time changed.
    pub async fn binary_sha256(&self) -> Result<String, RuntimeError> {
        let binary = self.engine.binary.clone();
        let not_found = |source| RuntimeError::EngineBinaryNotFound {
            path: binary.clone(),
            source,
        };
        let meta = tokio::fs::metadata(&binary).await.map_err(not_found)?;
        let key = (meta.len(), meta.modified().map_err(not_found)?);
        if let Ok(cached) = self.hashed.lock()
            && let Some((len, modified, hash)) = cached.as_ref()
            && (*len, *modified) == key
        {
            return Ok(hash.clone());
        }
        let mut file = tokio::fs::File::open(&binary).await.map_err(not_found)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let read = file.read(&mut buffer).await.map_err(not_found)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
        }
        let hash: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if let Ok(mut cached) = self.hashed.lock() {
            *cached = Some((key.0, key.1, hash.clone()));
        }
        Ok(hash)
    }

    async fn start_process(&self, request: StartRequest) -> Result<EngineHandle, RuntimeError> {
        let StartRequest {
            operation_id,
            folders,
        } = request;
        let sha256 = self.binary_sha256().await?;
        std::fs::create_dir_all(folders.output()).map_err(|source| RuntimeError::Io {
            action: "create the output folder",
            path: folders.output().to_path_buf(),
            source,
        })?;
        let run_dir = crate::connect::run_dir(&self.run_root, coordinator_ids())?;
        let mut command = Command::new(&self.engine.binary);
        command
            .args(&self.engine.args)
            .current_dir(run_dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let address = match self.engine.endpoint {
            EngineEndpoint::UnixSocket => {
                let socket = run_dir.path().join("engine.sock");
                command.arg("--unix-socket").arg(&socket);
                EngineAddress::Unix(socket)
            }
            EngineEndpoint::Tcp { .. } => {
                let port = free_loopback_port()?;
                command
                    .args(["--host", "127.0.0.1", "--port"])
                    .arg(port.to_string());
                EngineAddress::Tcp(([127, 0, 0, 1], port).into())
            }
        };
        let mut child = command
            .spawn()
            .map_err(|source| RuntimeError::SpawnFailed {
                engine: self.engine.name.clone(),
                binary: self.engine.binary.clone(),
                source,
            })?;
        let log = EngineLog::new(&self.engine.name, operation_id.as_str());
        forward(child.stdout.take(), log.lines(OutputStream::Stdout));
        forward(child.stderr.take(), log.lines(OutputStream::Stderr));
        tracing::info!(binary = %self.engine.binary.display(), pid = child.id(), "engine process started");

        let child = Arc::new(tokio::sync::Mutex::new(child));
        let exited = wait_exit(child.clone());
        let client = match connect_ready(&address, self.config.start_timeout(), exited).await {
            Ok(client) => client,
            Err(failure) => {
                return Err(failure
                    .into_error(
                        &self.engine.name,
                        &operation_id,
                        &log,
                        self.config.start_timeout(),
                    )
                    .await);
            }
        };
        Ok(EngineHandle::new(
            self.engine.name.clone(),
            operation_id,
            EngineIdentity::Binary {
                path: self.engine.binary.clone(),
                sha256,
            },
            client,
            PathMapping::Identity,
            self.config,
            log,
            Instance::Process(ProcessInstance {
                child,
                _run_dir: run_dir,
                stop_grace: self.config.stop_grace(),
            }),
        ))
    }
}

impl EngineRuntime for ProcessRuntime {
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<EngineHandle, RuntimeError>> {
        let span = tracing::info_span!("engine_start", engine = %self.engine.name, operation_id = %request.operation_id, runtime = "process");
        self.start_process(request).instrument(span).boxed()
    }
}

fn forward(
    stream: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>,
    mut lines: crate::engine_log::LineSplitter,
) {
    let Some(mut stream) = stream else { return };
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 8192];
        while let Ok(read) = stream.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            lines.push(&buffer[..read]);
        }
        lines.finish();
    });
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => status.to_string(),
    }
}

fn wait_exit(child: Arc<tokio::sync::Mutex<Child>>) -> BoxFuture<'static, String> {
    async move {
        loop {
            {
                let mut child = child.lock().await;
                match child.try_wait() {
                    Ok(Some(status)) => return describe(status),
                    Ok(None) => {}
                    Err(error) => return format!("an unknown status ({error})"),
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    .boxed()
}

/// A running engine process.
#[derive(Debug)]
pub(crate) struct ProcessInstance {
    child: Arc<tokio::sync::Mutex<Child>>,
    _run_dir: tempfile::TempDir,
    stop_grace: Duration,
}

impl ProcessInstance {
    /// How the process ended, or `None` while it runs.
    pub(crate) async fn exit_status(&self) -> Option<String> {
        let mut child = self.child.lock().await;
        match child.try_wait() {
            Ok(Some(status)) => Some(describe(status)),
            Ok(None) => None,
            Err(error) => Some(format!("an unknown status ({error})")),
        }
    }

    /// SIGTERM, then SIGKILL after the grace period.
    pub(crate) async fn stop(self) -> Result<(), RuntimeError> {
        let mut child = self.child.lock().await;
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) with a pid of our own child that has not been reaped (tokio reaps it
            // only through `wait`, which we hold the lock for) and a valid signal number.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(self.stop_grace, child.wait())
            .await
            .is_err()
        {
            tracing::warn!("engine process ignored SIGTERM for the grace period: killing it");
            let _ = child.kill().await;
        }
        Ok(())
    }
}
