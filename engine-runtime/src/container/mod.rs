//! Engines in sandboxed OCI containers, through the Docker API (Docker, or Podman's compatible
//! socket), pinned by image id.

pub(crate) mod daemon;
mod guard;
pub(crate) mod image;
pub(crate) mod labels;
mod logs;
pub(crate) mod sandbox;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use bollard::query_parameters::{CreateContainerOptionsBuilder, StopContainerOptionsBuilder};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tokio::task::JoinHandle;
use tracing::Instrument;

use self::daemon::DockerDaemon;
use self::guard::RemovalGuard;
use self::image::{ImageDigest, PullPolicy};
use self::labels::Owner;
use self::sandbox::{CONTAINER_SOCKET, ContainerPlan, SandboxPolicy};
use crate::config::RuntimeConfig;
use crate::connect::{ListenProbe, connect_ready};
use crate::endpoint::EngineEndpoint;
use crate::engine_log::EngineLog;
use crate::error::RuntimeError;
use crate::ownership::{check_readable, coordinator_ids, lend_folder, reclaim_folder};
use crate::paths::PathMapping;
use crate::runtime::{EngineHandle, EngineIdentity, EngineRuntime, Instance, StartRequest};
use weir_engine_contract::EngineAddress;

/// An engine image and how to run it.
///
/// ```
/// use weir_engine_runtime::{ContainerEngine, EngineEndpoint, SandboxPolicy};
///
/// // A Weir engine: Unix socket, default sandbox.
/// let weir = ContainerEngine::new("datafusion", "weir/reference-engine:dev");
/// assert_eq!(weir.endpoint(), EngineEndpoint::UnixSocket);
///
/// // An existing ODF engine image: TCP on 2884, published on 127.0.0.1 only, more memory.
/// let odf = ContainerEngine::new("spark", "ghcr.io/kamu-data/engine-spark:0.23.0")
///     .with_endpoint(EngineEndpoint::odf_tcp())
///     .with_sandbox(SandboxPolicy::default().with_memory_bytes(4 << 30));
/// assert_eq!(odf.endpoint(), EngineEndpoint::Tcp { port: 2884 });
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerEngine {
    name: String,
    image: String,
    endpoint: EngineEndpoint,
    command: Option<Vec<String>>,
    env: Vec<String>,
    sandbox: SandboxPolicy,
}

impl ContainerEngine {
    /// The engine `name` (as in `TransformSql.engine`, used in logs and container names) from the
    /// image `reference`, served on a Unix socket with the default sandbox.
    pub fn new(name: impl Into<String>, image: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            image: image.into(),
            endpoint: EngineEndpoint::UnixSocket,
            command: None,
            env: Vec::new(),
            sandbox: SandboxPolicy::default(),
        }
    }

    /// Where the engine serves gRPC inside the container.
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: EngineEndpoint) -> Self {
        self.endpoint = endpoint;
        self
    }

    /// The command (arguments to the image's entry point). By default a Unix socket engine gets
    /// `--unix-socket /run/weir/engine.sock` and a TCP engine keeps the image's own command.
    #[must_use]
    pub fn with_command(mut self, command: Vec<String>) -> Self {
        self.command = Some(command);
        self
    }

    /// Adds an environment variable (`NAME=value`).
    #[must_use]
    pub fn with_env(mut self, variable: impl Into<String>) -> Self {
        self.env.push(variable.into());
        self
    }

    /// Resource limits and user.
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: SandboxPolicy) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The engine's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The image reference.
    pub fn image(&self) -> &str {
        &self.image
    }

    /// The endpoint.
    pub fn endpoint(&self) -> EngineEndpoint {
        self.endpoint
    }

    /// The sandbox policy.
    pub fn sandbox(&self) -> &SandboxPolicy {
        &self.sandbox
    }
}

/// Runs one engine image in sandboxed containers, one container per operation.
///
/// The image reference is resolved to its id before every start and the container is created from
/// the id; the handle reports the [`ImageDigest`] for the coordinator to record.
///
/// ```no_run
/// # async fn example() -> Result<(), weir_engine_runtime::RuntimeError> {
/// use weir_engine_runtime::*;
///
/// let daemon = DockerDaemon::connect(&DaemonSocket::Auto).await?; // also removes orphans
/// let runtime = ContainerRuntime::new(
///     daemon,
///     ContainerEngine::new("datafusion", "weir/reference-engine:dev"),
///     RuntimeConfig::default(),
/// );
/// let folders = OperationFolders::new("/data/out").with_input("/data/in/slice.parquet");
/// let engine = runtime.start(StartRequest::new(OperationId::generate(), folders)).await?;
/// println!("running {:?}", engine.identity());
/// engine.stop().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ContainerRuntime {
    daemon: DockerDaemon,
    engine: ContainerEngine,
    config: RuntimeConfig,
    pull: PullPolicy,
    run_root: PathBuf,
}

impl ContainerRuntime {
    /// A runtime for `engine` on `daemon`. Images are never pulled unless
    /// [`ContainerRuntime::with_pull_policy`] says so.
    pub fn new(daemon: DockerDaemon, engine: ContainerEngine, config: RuntimeConfig) -> Self {
        Self {
            daemon,
            engine,
            config,
            pull: PullPolicy::Never,
            run_root: std::env::temp_dir(),
        }
    }

    /// Whether absent images may be pulled.
    #[must_use]
    pub fn with_pull_policy(mut self, pull: PullPolicy) -> Self {
        self.pull = pull;
        self
    }

    /// Where per-operation run folders (holding the engine's Unix socket) are created; the daemon
    /// must be able to bind-mount it. Defaults to the system's temporary folder.
    #[must_use]
    pub fn with_run_root(mut self, run_root: impl Into<PathBuf>) -> Self {
        self.run_root = run_root.into();
        self
    }

    /// The engine this runtime starts.
    pub fn engine(&self) -> &ContainerEngine {
        &self.engine
    }

    /// Resolves the engine's image reference to its immutable id (pulling if allowed).
    pub async fn resolve_image(&self) -> Result<ImageDigest, RuntimeError> {
        image::resolve(self.daemon.docker(), &self.engine.image, self.pull).await
    }

    async fn start_container(&self, request: StartRequest) -> Result<EngineHandle, RuntimeError> {
        let StartRequest {
            operation_id,
            folders,
            environment,
        } = request;
        let digest = self.resolve_image().await?;
        let mapping = PathMapping::container(&folders)?;
        let user = self.engine.sandbox.user().resolve(coordinator_ids());
        for input in folders.inputs() {
            check_readable(input, user)?;
        }
        std::fs::create_dir_all(folders.output()).map_err(|source| RuntimeError::Io {
            action: "create the output folder",
            path: folders.output().to_path_buf(),
            source,
        })?;

        let listening = match self.engine.endpoint {
            EngineEndpoint::UnixSocket => {
                let dir = crate::connect::run_dir(&self.run_root, user)?;
                let socket = dir.path().join(socket_file_name());
                Listening::Socket(dir, socket)
            }
            EngineEndpoint::Tcp { port } => {
                tracing::warn!(
                    engine = %self.engine.name,
                    "engine speaks TCP only: its container gets a network namespace with its port published on 127.0.0.1, a weaker isolation than a Unix socket engine's `network_mode: none`"
                );
                Listening::Tcp(port)
            }
        };
        let name = labels::container_name(&self.engine.name, &operation_id);
        let env: Vec<String> = self
            .engine
            .env
            .iter()
            .cloned()
            .chain(environment.vars().iter().map(|(k, v)| format!("{k}={v}")))
            .collect();
        let body = sandbox::create_body(ContainerPlan {
            image_id: &digest.id,
            endpoint: self.engine.endpoint,
            command: self.engine.command.clone(),
            env: &env,
            policy: &self.engine.sandbox,
            user,
            mounts: mapping.mounts(),
            run_dir: match &listening {
                Listening::Socket(dir, _) => Some(dir.path()),
                Listening::Tcp(_) => None,
            },
            labels: labels::labels(&self.engine.name, &operation_id, Owner::current().as_ref()),
            rlimits: self.daemon.container_rlimits(),
            covered_tmpfs: if self.daemon.is_podman() {
                sandbox::PODMAN_WRITABLE_TMPFS
            } else {
                &[]
            },
            extra_security_opt: if self.daemon.is_podman() {
                sandbox::PODMAN_SECURITY_OPT
            } else {
                &[]
            },
        });
        let docker = self.daemon.docker();
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        lend_folder(folders.output(), user)?;
        // The guard registers the container before it exists, so that a shutdown (or a cancelled
        // start) in the middle of the create request still removes it.
        let mut guard = match RemovalGuard::new(
            self.daemon.clone(),
            &self.engine.name,
            name.clone(),
            folders.output().to_path_buf(),
        ) {
            Ok(guard) => guard,
            Err(error) => {
                reclaim_folder(folders.output())?;
                return Err(error);
            }
        };
        if let Err(source) = docker.create_container(Some(options), body).await {
            // The daemon answered: no container was created.
            if matches!(
                source,
                bollard::errors::Error::DockerResponseServerError { .. }
            ) {
                guard.disarm();
                reclaim_folder(folders.output())?;
            }
            return Err(RuntimeError::Daemon {
                action: "create the engine container",
                source,
            });
        }
        // A shutdown that came while the daemon created it: the guard removes it.
        crate::shutdown::check_not_shutting_down(&self.engine.name)?;
        docker
            .start_container(&name, None)
            .await
            .map_err(|source| RuntimeError::Daemon {
                action: "start the engine container",
                source,
            })?;
        let log = EngineLog::new(&self.engine.name, operation_id.as_str());
        let log_task = logs::follow(&self.daemon, &name, log.clone());
        tracing::info!(container = %name, image = %digest.reference, image_id = %digest.id, "engine container started");

        let (address, probe, expected, run_dir) = match listening {
            Listening::Socket(dir, socket) => {
                let expected = format!(
                    "{CONTAINER_SOCKET} in container {name} ({})",
                    socket.display()
                );
                (
                    EngineAddress::Unix(socket),
                    ListenProbe::Dial,
                    expected,
                    Some(dir),
                )
            }
            Listening::Tcp(port) => {
                let (host, pid) = self.published_port(&name, port).await?;
                let probe = match pid {
                    Some(pid) => ListenProbe::ContainerPort { pid, port },
                    None => ListenProbe::Dial,
                };
                let expected = format!("port {port} in container {name} (published on {host})");
                (EngineAddress::Tcp(host), probe, expected, None)
            }
        };
        let instance = ContainerInstance {
            daemon: self.daemon.clone(),
            name,
            log_task,
            guard,
            _run_dir: run_dir,
            output: folders.output().to_path_buf(),
            stop_grace: self.config.stop_grace(),
        };
        let exited = instance.wait_exit();
        let client = match connect_ready(
            &address,
            probe,
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
            EngineIdentity::Image(digest),
            client,
            mapping,
            self.config,
            log,
            Instance::Container(Box::new(instance)),
        ))
    }

    /// The host address the daemon published the engine's TCP `port` on, and the container's init
    /// process as the host sees it (to read its socket table; `None` when the daemon does not say).
    async fn published_port(
        &self,
        container: &str,
        port: u16,
    ) -> Result<(SocketAddr, Option<u32>), RuntimeError> {
        let inspected = self
            .daemon
            .docker()
            .inspect_container(container, None)
            .await
            .map_err(|source| RuntimeError::Daemon {
                action: "inspect the engine container",
                source,
            })?;
        let pid = inspected
            .state
            .as_ref()
            .and_then(|state| state.pid)
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|pid| *pid > 0);
        let host = inspected
            .network_settings
            .and_then(|n| n.ports)
            .and_then(|mut ports| ports.remove(&format!("{port}/tcp")))
            .flatten()
            .into_iter()
            .flatten()
            .find_map(|binding| binding.host_port?.parse::<u16>().ok())
            .map(|host_port| SocketAddr::from((Ipv4Addr::LOCALHOST, host_port)))
            .ok_or(RuntimeError::PortNotPublished {
                container: container.to_owned(),
                port,
            })?;
        Ok((host, pid))
    }
}

/// How the coordinator will reach the engine.
enum Listening {
    /// A Unix socket at this host path, in this run folder (mounted at `/run/weir`).
    Socket(tempfile::TempDir, PathBuf),
    /// This TCP port inside the container, published on 127.0.0.1.
    Tcp(u16),
}

/// The socket's file name inside the run folder (the folder is mounted at `/run/weir`).
fn socket_file_name() -> &'static str {
    Path::new(CONTAINER_SOCKET)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("engine.sock")
}

impl EngineRuntime for ContainerRuntime {
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<EngineHandle, RuntimeError>> {
        let span = tracing::info_span!("engine_start", engine = %self.engine.name, operation_id = %request.operation_id, runtime = "container");
        self.start_container(request).instrument(span).boxed()
    }
}

/// A running engine container.
#[derive(Debug)]
pub(crate) struct ContainerInstance {
    daemon: DockerDaemon,
    name: String,
    log_task: JoinHandle<()>,
    guard: RemovalGuard,
    /// Deleted after the container is gone.
    _run_dir: Option<tempfile::TempDir>,
    output: PathBuf,
    stop_grace: std::time::Duration,
}

impl ContainerInstance {
    /// The container's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Resolves with a description of how the container ended, once it has.
    pub(crate) fn wait_exit(&self) -> BoxFuture<'static, String> {
        let docker = self.daemon.docker().clone();
        let name = self.name.clone();
        async move {
            let mut wait = docker.wait_container(&name, None);
            match wait.next().await {
                Some(Ok(response)) => format!("exit code {}", response.status_code),
                Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => {
                    format!("exit code {code}")
                }
                Some(Err(error)) => format!("an unknown status ({error})"),
                None => "an unknown status".to_owned(),
            }
        }
        .boxed()
    }

    /// How the container ended, or `None` while it runs.
    pub(crate) async fn exit_status(&self) -> Option<String> {
        let state = self
            .daemon
            .docker()
            .inspect_container(&self.name, None)
            .await
            .ok()?
            .state?;
        if state.running == Some(true) {
            return None;
        }
        let code = state.exit_code.unwrap_or_default();
        Some(if state.oom_killed == Some(true) {
            format!("exit code {code} (killed: out of memory)")
        } else {
            format!("exit code {code}")
        })
    }

    /// Stops the container (SIGTERM, then SIGKILL after the grace period), removes it, and hands
    /// the output files back to the coordinator's user.
    pub(crate) async fn stop(mut self) -> Result<(), RuntimeError> {
        let grace = i32::try_from(self.stop_grace.as_secs()).unwrap_or(i32::MAX);
        let options = StopContainerOptionsBuilder::default().t(grace).build();
        match self
            .daemon
            .docker()
            .stop_container(&self.name, Some(options))
            .await
        {
            Ok(()) => {}
            // 304: already stopped; 404: already gone.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304 | 404,
                ..
            }) => {}
            Err(source) => {
                return Err(RuntimeError::Daemon {
                    action: "stop the engine container",
                    source,
                });
            }
        }
        self.daemon.force_remove(&self.name).await?;
        self.guard.disarm();
        // The log stream ends with the container; don't let a slow daemon hold the stop up.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), &mut self.log_task).await;
        self.log_task.abort();
        tracing::info!(container = %self.name, "engine container removed");
        reclaim_folder(&self.output)
    }
}
