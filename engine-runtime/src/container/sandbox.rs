//! The sandbox a container engine runs in, and the pure translation of it into the daemon's
//! container-create request (no I/O here, so every default is unit-tested).

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{
    ContainerCreateBody, HostConfig, Mount as DockerMount, MountTmpfsOptions, MountType,
    PortBinding, ResourcesUlimits,
};

use crate::endpoint::EngineEndpoint;
use crate::paths::Mount;

/// Where a container's run folder (holding the engine's Unix socket) is mounted.
pub const CONTAINER_RUN_DIR: &str = "/run/weir";
/// The Unix socket a Weir engine serves on inside a container.
pub const CONTAINER_SOCKET: &str = "/run/weir/engine.sock";

/// The IPC message-queue file system a container gets by default, which the sandbox covers with an
/// empty read-only tmpfs.
pub const CONTAINER_MQUEUE_DIR: &str = "/dev/mqueue";

/// The paths of `/proc` the sandbox makes read-only: Docker's defaults plus `/proc/pressure`,
/// whose files anyone may open for writing (to register pressure-stall triggers). The list
/// replaces the daemon's default, so it repeats it.
pub(crate) const READ_ONLY_PROC_PATHS: [&str; 6] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/pressure",
];

/// The uid/gid the runtime uses for engines when the coordinator itself runs as root: `nobody`.
pub const NOBODY: (u32, u32) = (65534, 65534);

/// Which user the engine runs as inside its container. Never root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContainerUser {
    /// The coordinator's own uid/gid, so the engine's files belong to the coordinator's user; when
    /// the coordinator runs as root, `nobody` (65534:65534) instead, and the runtime hands the
    /// output files back to root afterwards.
    #[default]
    Auto,
    /// This uid/gid (must not be 0).
    Fixed {
        /// User id.
        uid: u32,
        /// Group id.
        gid: u32,
    },
}

impl ContainerUser {
    /// The uid/gid to run as, given the coordinator's effective uid/gid. Root (0) is never chosen:
    /// it falls back to [`NOBODY`].
    pub fn resolve(self, coordinator: (u32, u32)) -> (u32, u32) {
        let chosen = match self {
            Self::Auto => coordinator,
            Self::Fixed { uid, gid } => (uid, gid),
        };
        if chosen.0 == 0 { NOBODY } else { chosen }
    }
}

/// Resource limits and identity of a sandboxed engine, configurable per engine.
///
/// ```
/// use weir_engine_runtime::SandboxPolicy;
///
/// let policy = SandboxPolicy::default().with_memory_bytes(512 << 20).with_cpus(0.5).with_pids_limit(64);
/// assert_eq!(policy.memory_bytes(), 512 << 20);
/// assert_eq!(policy.nano_cpus(), 500_000_000);
/// assert_eq!(policy.pids_limit(), 64);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SandboxPolicy {
    memory_bytes: i64,
    nano_cpus: i64,
    pids_limit: i64,
    user: ContainerUser,
}

impl Default for SandboxPolicy {
    /// 2 GiB of memory (no swap), one CPU, 256 processes/threads, [`ContainerUser::Auto`].
    fn default() -> Self {
        Self {
            memory_bytes: 2 << 30,
            nano_cpus: 1_000_000_000,
            pids_limit: 256,
            user: ContainerUser::Auto,
        }
    }
}

impl SandboxPolicy {
    /// Memory limit in bytes (swap is not allowed beyond it).
    #[must_use]
    pub fn with_memory_bytes(mut self, bytes: i64) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// CPU limit in CPUs (fractions allowed).
    #[must_use]
    pub fn with_cpus(mut self, cpus: f64) -> Self {
        // Saturating float-to-int cast: a silly value gives a silly but safe limit.
        self.nano_cpus = (cpus * 1e9) as i64;
        self
    }

    /// Maximum number of processes and threads.
    #[must_use]
    pub fn with_pids_limit(mut self, pids: i64) -> Self {
        self.pids_limit = pids;
        self
    }

    /// Which user the engine runs as.
    #[must_use]
    pub fn with_user(mut self, user: ContainerUser) -> Self {
        self.user = user;
        self
    }

    /// Memory limit in bytes.
    pub fn memory_bytes(&self) -> i64 {
        self.memory_bytes
    }

    /// CPU limit in billionths of a CPU.
    pub fn nano_cpus(&self) -> i64 {
        self.nano_cpus
    }

    /// Process/thread limit.
    pub fn pids_limit(&self) -> i64 {
        self.pids_limit
    }

    /// Which user the engine runs as.
    pub fn user(&self) -> ContainerUser {
        self.user
    }
}

/// Everything the create request depends on, resolved beforehand.
#[derive(Debug)]
pub(crate) struct ContainerPlan<'a> {
    /// Image id (`sha256:...`): containers are always created from the immutable id.
    pub(crate) image_id: &'a str,
    pub(crate) endpoint: EngineEndpoint,
    pub(crate) command: Option<Vec<String>>,
    pub(crate) env: &'a [String],
    pub(crate) policy: &'a SandboxPolicy,
    pub(crate) user: (u32, u32),
    pub(crate) mounts: &'a [Mount],
    /// Host folder mounted at [`CONTAINER_RUN_DIR`] (Unix socket engines).
    pub(crate) run_dir: Option<&'a Path>,
    pub(crate) labels: HashMap<String, String>,
    /// Resource limits (`setrlimit`) to set explicitly: name (`nofile`, `nproc`) and value, soft =
    /// hard. Empty for Docker, which hands down its own.
    pub(crate) rlimits: Vec<(&'static str, i64)>,
    /// Folders the daemon mounts a writable tmpfs on by itself, to cover with an empty read-only
    /// one ([`PODMAN_WRITABLE_TMPFS`] for Podman, none for Docker).
    pub(crate) covered_tmpfs: &'static [&'static str],
    /// Daemon-specific security options ([`PODMAN_SECURITY_OPT`] for Podman, none for Docker).
    pub(crate) extra_security_opt: &'static [&'static str],
}

/// Podman ignores `ReadonlyPaths`; it masks `/proc/pressure` (see [`READ_ONLY_PROC_PATHS`]) when
/// asked with its own security option.
pub(crate) const PODMAN_SECURITY_OPT: &[&str] = &["mask=/proc/pressure"];

/// Where Podman mounts writable tmpfs folders in a read-only container.
pub(crate) const PODMAN_WRITABLE_TMPFS: &[&str] = &["/run", "/tmp", "/var/tmp"];

/// The container-create request for `plan`: no network (or loopback-published TCP), read-only root
/// file system, inputs read-only, only the output (and socket) folders writable — no `/dev/shm`
/// (a private IPC namespace without one) and a read-only `/dev/mqueue` — non-root user,
/// no-new-privileges, every capability dropped, memory/CPU/pids limits, an init process that
/// forwards signals.
pub(crate) fn create_body(plan: ContainerPlan<'_>) -> ContainerCreateBody {
    let mut mounts: Vec<DockerMount> = plan
        .mounts
        .iter()
        .map(|m| bind(&m.host, &m.engine, !m.writable))
        .collect();
    if let Some(run_dir) = plan.run_dir {
        mounts.push(bind(run_dir, Path::new(CONTAINER_RUN_DIR), false));
    }
    // The daemon mounts a writable message-queue file system at /dev/mqueue in every container,
    // even one with a private IPC namespace; a user mount at the same place replaces it. Podman
    // also mounts writable tmpfs folders at /run, /tmp and /var/tmp of a read-only container
    // (its `read_only_tmpfs`), which the Docker API cannot turn off: they are covered the same way.
    let covered = std::iter::once(CONTAINER_MQUEUE_DIR).chain(plan.covered_tmpfs.iter().copied());
    mounts.extend(covered.map(|target| DockerMount {
        target: Some(target.to_owned()),
        typ: Some(MountType::TMPFS),
        read_only: Some(true),
        tmpfs_options: Some(MountTmpfsOptions {
            size_bytes: Some(4096),
            mode: Some(0o555),
            ..Default::default()
        }),
        ..Default::default()
    }));
    let (network_mode, port_bindings, exposed_ports) = match plan.endpoint {
        EngineEndpoint::UnixSocket => ("none".to_owned(), None, None),
        EngineEndpoint::Tcp { port } => {
            let key = format!("{port}/tcp");
            let binding = PortBinding {
                host_ip: Some("127.0.0.1".to_owned()),
                // Empty: the daemon picks a free host port, so operations never clash.
                host_port: Some(String::new()),
            };
            (
                "bridge".to_owned(),
                Some(HashMap::from([(key.clone(), Some(vec![binding]))])),
                Some(vec![key]),
            )
        }
    };
    let command = plan.command.or_else(|| match plan.endpoint {
        EngineEndpoint::UnixSocket => Some(vec![
            "--unix-socket".to_owned(),
            CONTAINER_SOCKET.to_owned(),
        ]),
        EngineEndpoint::Tcp { .. } => None,
    });
    let host_config = HostConfig {
        network_mode: Some(network_mode),
        port_bindings,
        readonly_rootfs: Some(true),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(
            std::iter::once("no-new-privileges:true".to_owned())
                .chain(plan.extra_security_opt.iter().map(|o| (*o).to_owned()))
                .collect(),
        ),
        memory: Some(plan.policy.memory_bytes),
        memory_swap: Some(plan.policy.memory_bytes),
        nano_cpus: Some(plan.policy.nano_cpus),
        pids_limit: Some(plan.policy.pids_limit),
        init: Some(true),
        mounts: Some(mounts),
        privileged: Some(false),
        // A private IPC namespace with no /dev/shm at all (`shareable`, the default, mounts a
        // writable 64 MiB tmpfs there).
        ipc_mode: Some("none".to_owned()),
        readonly_paths: Some(READ_ONLY_PROC_PATHS.map(str::to_owned).to_vec()),
        ulimits: (!plan.rlimits.is_empty()).then(|| {
            plan.rlimits
                .iter()
                .map(|(name, value)| ResourcesUlimits {
                    name: Some((*name).to_owned()),
                    soft: Some(*value),
                    hard: Some(*value),
                })
                .collect()
        }),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(plan.image_id.to_owned()),
        cmd: command,
        env: Some(plan.env.to_vec()),
        user: Some(format!("{}:{}", plan.user.0, plan.user.1)),
        labels: Some(plan.labels),
        exposed_ports,
        network_disabled: Some(matches!(plan.endpoint, EngineEndpoint::UnixSocket)),
        attach_stdin: Some(false),
        tty: Some(false),
        host_config: Some(host_config),
        ..Default::default()
    }
}

fn bind(host: &Path, engine: &Path, read_only: bool) -> DockerMount {
    DockerMount {
        source: Some(host.to_string_lossy().into_owned()),
        target: Some(engine.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn mounts() -> Vec<Mount> {
        vec![
            Mount {
                host: PathBuf::from("/h/in.parquet"),
                engine: PathBuf::from("/opt/engine/in/in.parquet"),
                writable: false,
            },
            Mount {
                host: PathBuf::from("/h/out"),
                engine: PathBuf::from("/opt/engine/out"),
                writable: true,
            },
        ]
    }

    fn body(endpoint: EngineEndpoint, run_dir: Option<&Path>) -> ContainerCreateBody {
        let mounts = mounts();
        create_body(ContainerPlan {
            image_id: "sha256:abc",
            endpoint,
            command: None,
            env: &[],
            policy: &SandboxPolicy::default(),
            user: (1000, 1000),
            mounts: &mounts,
            run_dir,
            labels: HashMap::from([("io.weir.managed".to_owned(), "true".to_owned())]),
            rlimits: Vec::new(),
            covered_tmpfs: &[],
            extra_security_opt: &[],
        })
    }

    #[test]
    fn unix_socket_engine_gets_no_network_and_the_socket_argument() {
        let body = body(EngineEndpoint::UnixSocket, Some(Path::new("/h/run")));
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.port_bindings, None);
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(
            body.cmd,
            Some(vec![
                "--unix-socket".to_owned(),
                CONTAINER_SOCKET.to_owned()
            ])
        );
        let run = host
            .mounts
            .unwrap()
            .into_iter()
            .find(|m| m.target.as_deref() == Some(CONTAINER_RUN_DIR))
            .unwrap();
        assert_eq!(run.source.as_deref(), Some("/h/run"));
        assert_eq!(run.read_only, Some(false));
    }

    #[test]
    fn tcp_engine_port_is_published_on_loopback_only_with_a_free_host_port() {
        let body = body(EngineEndpoint::odf_tcp(), None);
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("bridge"));
        let bindings = host.port_bindings.unwrap();
        let binding = &bindings["2884/tcp"].as_ref().unwrap()[0];
        assert_eq!(binding.host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(binding.host_port.as_deref(), Some(""));
        assert_eq!(body.exposed_ports, Some(vec!["2884/tcp".to_owned()]));
        assert_eq!(body.cmd, None, "the image's own command is kept");
    }

    #[test]
    fn sandbox_defaults_lock_the_container_down() {
        let body = body(EngineEndpoint::UnixSocket, Some(Path::new("/h/run")));
        assert_eq!(body.image.as_deref(), Some("sha256:abc"));
        assert_eq!(body.user.as_deref(), Some("1000:1000"));
        let host = body.host_config.unwrap();
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges:true".to_owned()])
        );
        assert_eq!(host.privileged, Some(false));
        assert_eq!(host.memory, Some(2 << 30));
        assert_eq!(host.memory_swap, Some(2 << 30));
        assert_eq!(host.nano_cpus, Some(1_000_000_000));
        assert_eq!(host.pids_limit, Some(256));
        let mounts = host.mounts.unwrap();
        let input = mounts
            .iter()
            .find(|m| m.target.as_deref() == Some("/opt/engine/in/in.parquet"))
            .unwrap();
        assert_eq!(input.read_only, Some(true));
        let output = mounts
            .iter()
            .find(|m| m.target.as_deref() == Some("/opt/engine/out"))
            .unwrap();
        assert_eq!(output.read_only, Some(false));
        let writable: Vec<_> = mounts
            .iter()
            .filter(|m| m.read_only == Some(false))
            .filter_map(|m| m.target.clone())
            .collect();
        assert_eq!(writable, vec!["/opt/engine/out", CONTAINER_RUN_DIR]);
        assert_eq!(host.ipc_mode.as_deref(), Some("none"), "no /dev/shm");
        let mqueue = mounts
            .iter()
            .find(|m| m.target.as_deref() == Some(CONTAINER_MQUEUE_DIR))
            .unwrap();
        assert_eq!(mqueue.typ, Some(MountType::TMPFS));
        assert_eq!(mqueue.read_only, Some(true));
        assert_eq!(host.ulimits, None, "Docker hands down its own limits");
        let read_only = host.readonly_paths.unwrap();
        assert!(read_only.iter().any(|p| p == "/proc/sys"), "{read_only:?}");
        assert!(
            read_only.iter().any(|p| p == "/proc/pressure"),
            "{read_only:?}"
        );
    }

    #[test]
    fn root_is_never_chosen_as_the_engine_user() {
        assert_eq!(ContainerUser::Auto.resolve((0, 0)), NOBODY);
        assert_eq!(ContainerUser::Auto.resolve((1000, 100)), (1000, 100));
        assert_eq!(
            ContainerUser::Fixed { uid: 0, gid: 0 }.resolve((1000, 100)),
            NOBODY
        );
        assert_eq!(
            ContainerUser::Fixed { uid: 42, gid: 43 }.resolve((0, 0)),
            (42, 43)
        );
    }
}
