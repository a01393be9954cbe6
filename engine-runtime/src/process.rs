//! Engines as local child processes: for development, and for engines installed on the machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::config::RuntimeConfig;
use crate::connect::{ListenProbe, connect_ready, free_loopback_port};
use crate::endpoint::EngineEndpoint;
use crate::engine_log::{EngineLog, OutputStream};
use crate::error::RuntimeError;
use crate::ownership::coordinator_ids;
use crate::paths::PathMapping;
use crate::runtime::{EngineHandle, EngineIdentity, EngineRuntime, Instance, StartRequest};
use crate::shutdown::ProcessEntry;
use weir_engine_contract::EngineAddress;

/// Where a process engine listens, and how it is told.
///
/// ```
/// use weir_engine_runtime::{EngineEndpoint, ProcessEndpoint};
///
/// assert_eq!(ProcessEndpoint::default(), ProcessEndpoint::UnixSocket);
/// // An engine endpoint with a port is a fixed port the engine listens on by itself.
/// assert_eq!(ProcessEndpoint::from(EngineEndpoint::odf_tcp()), ProcessEndpoint::Tcp { port: 2884 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcessEndpoint {
    /// A Unix socket in a fresh run folder, passed as `--unix-socket PATH` (Weir engines).
    #[default]
    UnixSocket,
    /// A free loopback port picked per operation, passed as `--host 127.0.0.1 --port N` (Weir
    /// engines over TCP), so that concurrent operations never clash.
    FreeTcpPort,
    /// A port the engine listens on by itself, or as its own arguments
    /// ([`ProcessEngine::with_arg`]) say: the runtime passes no endpoint argument at all and dials
    /// 127.0.0.1 on this port. For foreign engine binaries that know nothing of `--unix-socket`.
    /// One engine of this process runs on the port at a time (later starts wait for it), and a
    /// port another program holds is refused ([`RuntimeError::PortInUse`]).
    Tcp {
        /// The port the engine listens on.
        port: u16,
    },
}

impl From<EngineEndpoint> for ProcessEndpoint {
    /// A Unix socket stays one; a TCP port is a fixed port the engine listens on by itself.
    fn from(endpoint: EngineEndpoint) -> Self {
        match endpoint {
            EngineEndpoint::UnixSocket => Self::UnixSocket,
            EngineEndpoint::Tcp { port } => Self::Tcp { port },
        }
    }
}

/// A local engine binary and how to run it.
///
/// ```
/// use weir_engine_runtime::{ProcessEndpoint, ProcessEngine};
///
/// // A Weir engine: told its Unix socket.
/// let weir = ProcessEngine::new("datafusion", "target/debug/weir-engine").with_arg("--log-format=json");
/// assert_eq!(weir.endpoint(), ProcessEndpoint::UnixSocket);
///
/// // A foreign engine that listens on 2884 by itself: no endpoint arguments are passed.
/// let foreign = ProcessEngine::new("spark", "/opt/engine/bin/engine")
///     .with_endpoint(ProcessEndpoint::Tcp { port: 2884 })
///     .with_args(["--config", "/etc/engine.toml"]);
/// assert_eq!(foreign.args(), ["--config", "/etc/engine.toml"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEngine {
    name: String,
    binary: PathBuf,
    endpoint: ProcessEndpoint,
    args: Vec<String>,
}

impl ProcessEngine {
    /// The engine `name` run from `binary`, on a Unix socket (`--unix-socket PATH`).
    pub fn new(name: impl Into<String>, binary: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            binary: binary.into(),
            endpoint: ProcessEndpoint::UnixSocket,
            args: Vec::new(),
        }
    }

    /// Where the engine listens and how it is told (see [`ProcessEndpoint`]). An
    /// [`EngineEndpoint`] converts: `UnixSocket` stays one, `Tcp { port }` is a fixed port the
    /// engine listens on by itself, with no endpoint arguments passed.
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: impl Into<ProcessEndpoint>) -> Self {
        self.endpoint = endpoint.into();
        self
    }

    /// An extra argument, passed before the endpoint arguments (if any).
    #[must_use]
    pub fn with_arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Extra arguments, passed in order before the endpoint arguments (if any).
    #[must_use]
    pub fn with_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
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

    /// Where the engine listens.
    pub fn endpoint(&self) -> ProcessEndpoint {
        self.endpoint
    }

    /// The extra arguments.
    pub fn args(&self) -> &[String] {
        &self.args
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
}

impl ProcessRuntime {
    /// A runtime for `engine`.
    pub fn new(engine: ProcessEngine, config: RuntimeConfig) -> Self {
        Self {
            engine,
            config,
            run_root: std::env::temp_dir(),
        }
    }

    /// Where per-operation run folders (holding the Unix socket) are created.
    #[must_use]
    pub fn with_run_root(mut self, run_root: impl Into<PathBuf>) -> Self {
        self.run_root = run_root.into();
        self
    }

    /// The SHA-256 of the binary (hex), hashed once per process and file identity
    /// ([`crate::binary_sha256`]).
    pub async fn binary_sha256(&self) -> Result<String, RuntimeError> {
        crate::binary_sha256(&self.engine.binary).map_err(|e| match e {
            crate::BinaryHashError::Io { path, source } => {
                RuntimeError::EngineBinaryNotFound { path, source }
            }
            interrupted @ crate::BinaryHashError::Interrupted { .. } => {
                RuntimeError::EngineBinaryNotFound {
                    path: self.engine.binary.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::Interrupted, interrupted),
                }
            }
        })
    }

    async fn start_process(&self, request: StartRequest) -> Result<EngineHandle, RuntimeError> {
        let StartRequest {
            operation_id,
            folders,
            environment,
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
            .envs(environment.vars().iter().map(|(k, v)| (k, v)))
            .kill_on_drop(true);
        die_with_parent(&mut command);
        let mut port_permit = None;
        let (address, expected) = match self.engine.endpoint {
            ProcessEndpoint::UnixSocket => {
                let socket = run_dir.path().join("engine.sock");
                command.arg("--unix-socket").arg(&socket);
                let expected = format!("the Unix socket {} (--unix-socket)", socket.display());
                (EngineAddress::Unix(socket), expected)
            }
            ProcessEndpoint::FreeTcpPort => {
                let port = free_loopback_port()?;
                command
                    .args(["--host", "127.0.0.1", "--port"])
                    .arg(port.to_string());
                let expected = format!("127.0.0.1:{port} (--host 127.0.0.1 --port {port})");
                (EngineAddress::Tcp(([127, 0, 0, 1], port).into()), expected)
            }
            ProcessEndpoint::Tcp { port } => {
                port_permit = Some(fixed_port(port).await);
                if !port_is_free(port) {
                    return Err(RuntimeError::PortInUse {
                        engine: self.engine.name.clone(),
                        port,
                    });
                }
                (
                    EngineAddress::Tcp(([127, 0, 0, 1], port).into()),
                    format!("127.0.0.1:{port}"),
                )
            }
        };
        crate::shutdown::check_not_shutting_down(&self.engine.name)?;
        let child = command
            .spawn()
            .map_err(|source| RuntimeError::SpawnFailed {
                engine: self.engine.name.clone(),
                binary: self.engine.binary.clone(),
                source,
            })?;
        let child = Arc::new(tokio::sync::Mutex::new(child));
        let entry = ProcessEntry::register(&self.engine.name, Arc::downgrade(&child))?;
        let log = EngineLog::new(&self.engine.name, operation_id.as_str());
        {
            let mut child = child.lock().await;
            forward(child.stdout.take(), log.lines(OutputStream::Stdout));
            forward(child.stderr.take(), log.lines(OutputStream::Stderr));
            tracing::info!(binary = %self.engine.binary.display(), pid = child.id(), %address, "engine process started");
        }

        let exited = wait_exit(child.clone());
        let client = match connect_ready(
            &address,
            ListenProbe::Dial,
            expected,
            self.config.start_timeout(),
            exited,
        )
        .await
        {
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
                _entry: entry,
                port: port_permit,
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

/// Makes the kernel kill the engine (SIGKILL) when the thread that started it ends — with the
/// whole process when it is killed outright, where no destructor runs. Engines are started from
/// the async runtime's worker threads, which live as long as the runtime.
fn die_with_parent(command: &mut Command) {
    // SAFETY: getpid before the fork; in the child only async-signal-safe calls (prctl, getppid,
    // raise) on plain integers.
    let parent = unsafe { libc::getpid() };
    // SAFETY: as above: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions, allocating nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between the fork and the prctl.
            if libc::getppid() != parent {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
}

/// Waits until no other engine of this process uses the fixed TCP `port`; the permit holds it.
async fn fixed_port(port: u16) -> OwnedSemaphorePermit {
    static PORTS: Mutex<BTreeMap<u16, Arc<Semaphore>>> = Mutex::new(BTreeMap::new());
    let semaphore = {
        let mut ports = PORTS.lock().unwrap_or_else(PoisonError::into_inner);
        ports
            .entry(port)
            .or_insert_with(|| Arc::new(Semaphore::new(1)))
            .clone()
    };
    loop {
        // The semaphore is never closed; should it be, try again.
        if let Ok(permit) = semaphore.clone().acquire_owned().await {
            return permit;
        }
    }
}

/// Whether nothing listens on 127.0.0.1:`port` (a listener on any address would take the bind).
fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A running engine process.
#[derive(Debug)]
pub(crate) struct ProcessInstance {
    child: Arc<tokio::sync::Mutex<Child>>,
    _entry: ProcessEntry,
    /// A fixed TCP port, held until the engine is gone (see the `Drop`).
    port: Option<OwnedSemaphorePermit>,
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

impl Drop for ProcessInstance {
    /// A dropped child is killed but may hold its port a moment longer: the fixed port is given
    /// up only once the process is reaped, so the next engine on it finds it free.
    fn drop(&mut self) {
        let Some(permit) = self.port.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let child = self.child.clone();
        runtime.spawn(async move {
            let mut child = child.lock().await;
            let _ = child.start_kill();
            let _ = child.wait().await;
            drop(permit);
        });
    }
}
