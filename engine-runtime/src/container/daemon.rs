//! The connection to a Docker (or Podman, through its Docker-compatible API) daemon, and orphan
//! cleanup.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::Docker;
use bollard::models::ContainerSummary;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::labels::{LABEL_MANAGED, Owner, is_orphan};
use crate::error::RuntimeError;

/// The container states of the Docker API (the `status` filter's values).
const KNOWN_STATES: [&str; 7] = [
    "created",
    "restarting",
    "running",
    "removing",
    "paused",
    "exited",
    "dead",
];

/// Seconds a single daemon request may take.
const REQUEST_TIMEOUT_SECS: u64 = 120;

/// Where the daemon listens.
///
/// ```
/// use weir_engine_runtime::DaemonSocket;
///
/// assert_eq!(DaemonSocket::default(), DaemonSocket::Auto);
/// let podman = DaemonSocket::Unix("/run/podman/podman.sock".into());
/// assert!(matches!(podman, DaemonSocket::Unix(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DaemonSocket {
    /// `DOCKER_HOST` when set (`unix://PATH`, `tcp://HOST:PORT` or `http://HOST:PORT`), otherwise the
    /// first socket that exists among Docker's and Podman's standard paths
    /// ([`DaemonSocket::standard_paths`]).
    #[default]
    Auto,
    /// A Unix socket (Docker's `/var/run/docker.sock`, Podman's `/run/podman/podman.sock`, ...).
    Unix(PathBuf),
    /// A plain-HTTP endpoint, `tcp://HOST:PORT` or `http://HOST:PORT`.
    Http(String),
}

impl DaemonSocket {
    /// The standard socket paths `Auto` probes, in order: rootful Docker, the XDG runtime folder's
    /// Docker and Podman sockets, rootful Podman, Docker Desktop's per-user socket.
    pub fn standard_paths() -> Vec<PathBuf> {
        let mut paths = vec![
            PathBuf::from("/var/run/docker.sock"),
            PathBuf::from("/run/docker.sock"),
        ];
        if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR") {
            let xdg = PathBuf::from(xdg);
            paths.push(xdg.join("docker.sock"));
            paths.push(xdg.join("podman/podman.sock"));
        }
        paths.push(PathBuf::from("/run/podman/podman.sock"));
        if let Some(home) = std::env::var_os("HOME") {
            paths.push(PathBuf::from(home).join(".docker/run/docker.sock"));
        }
        paths
    }

    /// Resolves `Auto` into a concrete socket.
    fn resolve(&self) -> Result<Self, RuntimeError> {
        match self {
            Self::Auto => {
                if let Ok(host) = std::env::var("DOCKER_HOST") {
                    return Self::parse_host(&host);
                }
                let tried = Self::standard_paths();
                tried
                    .iter()
                    .find(|p| p.exists())
                    .map(|p| Self::Unix(p.clone()))
                    .ok_or(RuntimeError::NoDaemonSocket { tried })
            }
            other => Ok(other.clone()),
        }
    }

    fn parse_host(host: &str) -> Result<Self, RuntimeError> {
        if let Some(path) = host.strip_prefix("unix://") {
            Ok(Self::Unix(PathBuf::from(path)))
        } else if host.starts_with("tcp://") || host.starts_with("http://") {
            Ok(Self::Http(host.to_owned()))
        } else {
            Err(RuntimeError::UnsupportedDaemonHost {
                host: host.to_owned(),
            })
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Auto => "auto".to_owned(),
            Self::Unix(path) => format!("unix://{}", path.display()),
            Self::Http(url) => url.clone(),
        }
    }
}

/// A connected container daemon. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DockerDaemon {
    docker: Docker,
    socket: DaemonSocket,
    podman: bool,
    /// Resource limits every container gets explicitly (Podman only, see `container_rlimits`).
    rlimits: Vec<(&'static str, i64)>,
}

impl DockerDaemon {
    /// Connects to the daemon, agrees on an API version, and removes the containers left behind by
    /// coordinators that are gone (see [`DockerDaemon::remove_orphans`]).
    pub async fn connect(socket: &DaemonSocket) -> Result<Self, RuntimeError> {
        let socket = socket.resolve()?;
        let docker = open(&socket, bollard::API_DEFAULT_VERSION)?
            .negotiate_version()
            .await
            .map_err(|source| RuntimeError::DaemonUnavailable {
                endpoint: socket.describe(),
                source,
            })?;
        docker
            .ping()
            .await
            .map_err(|source| RuntimeError::DaemonUnavailable {
                endpoint: socket.describe(),
                source,
            })?;
        let version = docker
            .version()
            .await
            .map_err(|source| RuntimeError::DaemonUnavailable {
                endpoint: socket.describe(),
                source,
            })?;
        let podman = version
            .components
            .unwrap_or_default()
            .iter()
            .any(|component| component.name.contains("Podman"));
        let rlimits = if podman {
            podman_rlimits(&socket).await
        } else {
            Vec::new()
        };
        let daemon = Self {
            docker,
            socket,
            podman,
            rlimits,
        };
        tracing::debug!(endpoint = %daemon.endpoint(), podman, "connected to the container daemon");
        let removed = daemon.remove_orphans().await?;
        if !removed.is_empty() {
            tracing::warn!(
                containers = ?removed,
                "removed engine containers orphaned by a coordinator that is gone"
            );
        }
        Ok(daemon)
    }

    /// Where the daemon listens, e.g. `unix:///var/run/docker.sock`.
    pub fn endpoint(&self) -> String {
        self.socket.describe()
    }

    /// Whether the daemon is Podman (through its Docker-compatible API) rather than Docker.
    pub fn is_podman(&self) -> bool {
        self.podman
    }

    /// The resource limits to set on every container explicitly. Docker hands its own limits down;
    /// rootful Podman asks for `nofile` 1048576 and `nproc` 4194304 whatever its own limits are,
    /// which fails to start any container ("error setting rlimit type 6: operation not
    /// permitted") where root may not raise them. For Podman the runtime asks for the service's own
    /// hard limits instead (read from `/proc/<pid>/limits` of the process at the other end of the
    /// socket; this process's own limits when that cannot be read).
    pub(crate) fn container_rlimits(&self) -> Vec<(&'static str, i64)> {
        self.rlimits.clone()
    }

    /// Removes every container labelled `io.weir.managed=true` whose owning coordinator process no
    /// longer runs on this machine (its pid, start time and boot id are in the `io.weir.owner`
    /// label), and returns their names. Containers of live coordinators are left alone, so several
    /// coordinators can share one daemon.
    pub async fn remove_orphans(&self) -> Result<Vec<String>, RuntimeError> {
        let containers = self.list_managed().await?;
        let mut removed = Vec::new();
        for container in containers {
            let labels = container.labels.unwrap_or_default();
            if !is_orphan(&labels, Owner::is_alive) {
                continue;
            }
            let Some(id) = container.id else { continue };
            let name = container
                .names
                .and_then(|n| n.into_iter().next())
                .map(|n| n.trim_start_matches('/').to_owned())
                .unwrap_or_else(|| id.clone());
            match self.force_remove(&id).await {
                Ok(()) => removed.push(name),
                Err(error) => {
                    tracing::warn!(container = %name, %error, "could not remove an orphaned container")
                }
            }
        }
        Ok(removed)
    }

    /// Every managed container. Podman reports states Docker's API does not know (`stopped`, for
    /// a container between its stop and its cleanup), which the typed listing cannot read: then the
    /// containers are listed state by state, and those in unknown states are left for a later
    /// start.
    async fn list_managed(&self) -> Result<Vec<ContainerSummary>, RuntimeError> {
        let list = |status: Option<&'static str>| {
            let mut filters = HashMap::from([("label", vec![format!("{LABEL_MANAGED}=true")])]);
            if let Some(status) = status {
                filters.insert("status", vec![status.to_owned()]);
            }
            let options = ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build();
            self.docker.list_containers(Some(options))
        };
        let failed = |source| RuntimeError::Daemon {
            action: "list managed containers",
            source,
        };
        match list(None).await {
            Ok(containers) => Ok(containers),
            Err(bollard::errors::Error::JsonDataError { message, .. }) => {
                tracing::warn!(%message, "the daemon reported a container state the Docker API does not know: listing state by state");
                let mut containers = Vec::new();
                for status in KNOWN_STATES {
                    containers.extend(list(Some(status)).await.map_err(failed)?);
                }
                Ok(containers)
            }
            Err(source) => Err(failed(source)),
        }
    }

    pub(crate) fn docker(&self) -> &Docker {
        &self.docker
    }

    /// Removes a container, killing it first if it runs; a container already gone is fine.
    pub(crate) async fn force_remove(&self, name: &str) -> Result<(), RuntimeError> {
        force_remove(&self.docker, name).await
    }

    /// A fresh connection on the same socket with the agreed API version, for use outside the
    /// current async runtime (the removal guard's thread).
    pub(crate) fn reopen(&self) -> Result<Docker, RuntimeError> {
        open(&self.socket, &self.docker.client_version())
    }
}

/// The limits to give Podman's containers: the hard `nofile` and `nproc` limits of the Podman
/// service (the peer of its Unix socket), else of this process.
async fn podman_rlimits(socket: &DaemonSocket) -> Vec<(&'static str, i64)> {
    let service = match socket {
        DaemonSocket::Unix(path) => tokio::net::UnixStream::connect(path)
            .await
            .ok()
            .and_then(|stream| stream.peer_cred().ok())
            .and_then(|credentials| credentials.pid())
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()),
        _ => None,
    };
    [
        ("nofile", "Max open files", libc::RLIMIT_NOFILE),
        ("nproc", "Max processes", libc::RLIMIT_NPROC),
    ]
    .into_iter()
    .filter_map(|(name, label, resource)| {
        let limit = match &service {
            Some(limits) => hard_limit_in(limits, label),
            None => hard_rlimit(resource),
        };
        Some((name, limit?))
    })
    .collect()
}

/// The hard limit on the line starting with `label` of a `/proc/<pid>/limits` text, if finite.
fn hard_limit_in(limits: &str, label: &str) -> Option<i64> {
    let line = limits.lines().find(|line| line.starts_with(label))?;
    line[label.len()..].split_whitespace().nth(1)?.parse().ok()
}

/// This process's hard limit of `resource`, if finite.
fn hard_rlimit(resource: libc::__rlimit_resource_t) -> Option<i64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own and pass by pointer.
    let read = unsafe { libc::getrlimit(resource, &mut limit) };
    (read == 0 && limit.rlim_max != libc::RLIM_INFINITY)
        .then(|| i64::try_from(limit.rlim_max).ok())
        .flatten()
}

pub(crate) async fn force_remove(docker: &Docker, name: &str) -> Result<(), RuntimeError> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        // 409: removal already in progress (e.g. the daemon's own cleanup).
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => Ok(()),
        Err(source) => Err(RuntimeError::Daemon {
            action: "remove a container",
            source,
        }),
    }
}

fn open(socket: &DaemonSocket, version: &bollard::ClientVersion) -> Result<Docker, RuntimeError> {
    let connected = match socket {
        DaemonSocket::Unix(path) => {
            if !Path::new(path).exists() {
                return Err(RuntimeError::NoDaemonSocket {
                    tried: vec![path.clone()],
                });
            }
            Docker::connect_with_unix(&path.to_string_lossy(), REQUEST_TIMEOUT_SECS, version)
        }
        DaemonSocket::Http(url) => Docker::connect_with_http(url, REQUEST_TIMEOUT_SECS, version),
        DaemonSocket::Auto => return open(&socket.resolve()?, version),
    };
    connected
        .map(|d| d.with_timeout(Duration::from_secs(REQUEST_TIMEOUT_SECS)))
        .map_err(|source| RuntimeError::DaemonUnavailable {
            endpoint: socket.describe(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_limits_are_read_from_a_proc_limits_text() {
        let limits = "\
Limit                     Soft Limit           Hard Limit           Units
Max processes             32768                32768                processes
Max open files            1024                 20000                files
Max locked memory         unlimited            unlimited            bytes
";
        assert_eq!(hard_limit_in(limits, "Max processes"), Some(32768));
        assert_eq!(hard_limit_in(limits, "Max open files"), Some(20000));
        assert_eq!(hard_limit_in(limits, "Max locked memory"), None);
        assert_eq!(hard_limit_in(limits, "Max pending signals"), None);
    }
}
