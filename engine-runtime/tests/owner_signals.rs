//! What becomes of a process's engines when the process is signalled: SIGTERM with
//! [`weir_engine_runtime::shutdown`] in the handler removes its container and kills its engine process
//! before it exits; after SIGKILL the container stays until the next start of a runtime removes it
//! as an orphan, and the engine process dies with its parent.
//!
//! The owning process is this test binary run again with only [`owner_process`] selected and
//! `WEIR_TEST_OWNER` set: it starts a container engine and a process engine through
//! engine-runtime, prints what it started, and waits for a signal.
use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::engine::{TEST_IMAGE, daemon_with_test_image, shared_tempdir, test_engine_binary};
use weir_engine_runtime::{
    ContainerEngine, ContainerRuntime, DaemonSocket, DockerDaemon, EngineRuntime, OperationFolders,
    OperationId, ProcessEngine, ProcessRuntime, RuntimeConfig, RuntimeError, StartRequest,
};

/// Set (to the folder it may write in) for the owning process.
const OWNER_ENV: &str = "WEIR_TEST_OWNER";
/// The test engine binary the owning process runs as its process engine.
const BINARY_ENV: &str = "WEIR_TEST_OWNER_ENGINE";

/// The tests of this file take turns: a starting runtime removes orphans, which would remove the
/// SIGKILL test's container before it was looked at.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .with_start_timeout(Duration::from_secs(30))
        .with_stop_grace(Duration::from_secs(2))
}

/// The owning process (a no-op unless `WEIR_TEST_OWNER` is set).
#[test]
fn owner_process() {
    let Some(dir) = std::env::var_os(OWNER_ENV).map(PathBuf::from) else {
        return;
    };
    let binary = PathBuf::from(std::env::var_os(BINARY_ENV).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
        let daemon = DockerDaemon::connect(&DaemonSocket::Auto).await.unwrap();
        let containers =
            ContainerRuntime::new(daemon, ContainerEngine::new("owner", TEST_IMAGE), config());
        let processes = ProcessRuntime::new(ProcessEngine::new("owner", binary), config());
        let start = || {
            StartRequest::new(
                OperationId::generate(),
                OperationFolders::new(dir.join(format!("out-{}", OperationId::generate()))),
            )
        };
        let container = containers.start(start()).await.unwrap();
        let process = processes.start(start()).await.unwrap();
        let weir_engine_contract::EngineAddress::Unix(socket) = process.client().address().clone()
        else {
            panic!("the process engine is not on a Unix socket")
        };
        println!("owner-container {}", container.container_name().unwrap());
        println!("owner-process-socket {}", socket.display());
        println!("owner-ready");
        std::io::stdout().flush().unwrap();

        terminate.recv().await;
        // What a coordinator's signal handler does.
        let report = weir_engine_runtime::shutdown().await;
        println!("owner-removed {}", report.removed_containers.join(","));
        println!("owner-killed {}", report.killed_processes);
        match containers.start(start()).await {
            Err(RuntimeError::ShuttingDown { .. }) => println!("owner-refused-new-start"),
            other => println!("owner-started-after-shutdown {:?}", other.map(|_| ())),
        }
        std::io::stdout().flush().unwrap();
        // Exit as a signalled coordinator does: no destructor runs, the handles are not dropped.
        std::process::exit(143);
    });
}

/// A running owning process and what it started.
struct Owner {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    container: String,
    process_socket: PathBuf,
    _dir: tempfile::TempDir,
}

fn start_owner() -> Owner {
    let dir = shared_tempdir();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "owner_signals::owner_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(OWNER_ENV, dir.path())
        .env(BINARY_ENV, test_engine_binary())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut container, mut process_socket) = (None, None);
    // libtest may print its "test owner_process ... " before the first line.
    let after = |line: &str, marker: &str| {
        line.find(marker)
            .map(|at| line[at + marker.len()..].to_owned())
    };
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(name) = after(&line, "owner-container ") {
            container = Some(name);
        } else if let Some(socket) = after(&line, "owner-process-socket ") {
            process_socket = Some(PathBuf::from(socket));
        } else if line.contains("owner-ready") {
            break;
        }
    }
    Owner {
        child,
        lines,
        container: container.expect("the owner started a container"),
        process_socket: process_socket.expect("the owner started a process engine"),
        _dir: dir,
    }
}

impl Drop for Owner {
    /// A failed test leaves no owner running (its container is then an orphan for the next start).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child, which has not been waited for.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

async fn container_exists(name: &str) -> bool {
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    match docker.inspect_container(name, None).await {
        Ok(_) => true,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => false,
        Err(error) => panic!("cannot inspect {name}: {error}"),
    }
}

async fn container_running(name: &str) -> bool {
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    docker
        .inspect_container(name, None)
        .await
        .unwrap()
        .state
        .and_then(|s| s.running)
        .unwrap_or(false)
}

/// Whether anything still serves on the socket.
async fn serves(socket: &Path) -> bool {
    tokio::net::UnixStream::connect(socket).await.is_ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_with_shutdown_in_the_handler_removes_the_container_and_kills_the_engine_process() {
    let _turn = ONE_AT_A_TIME.lock().await;
    if daemon_with_test_image().await.is_none() {
        return;
    }
    let mut owner = start_owner();
    assert!(container_running(&owner.container).await);
    assert!(serves(&owner.process_socket).await);

    signal(&owner.child, libc::SIGTERM);
    let said: Vec<String> = owner.lines.by_ref().map_while(Result::ok).collect();
    let status = owner.child.wait().unwrap();

    assert_eq!(status.code(), Some(143), "{said:?}");
    let said_line = |text: &str| said.iter().any(|line| line.contains(text));
    assert!(
        said_line(&format!("owner-removed {}", owner.container)),
        "{said:?}"
    );
    assert!(said_line("owner-killed 1"), "{said:?}");
    assert!(said_line("owner-refused-new-start"), "{said:?}");
    // Gone before the owner exited: nothing left to wait for.
    assert!(!container_exists(&owner.container).await);
    assert!(!serves(&owner.process_socket).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn after_sigkill_the_container_is_removed_by_the_next_runtime_start_and_the_engine_process_dies()
 {
    let _turn = ONE_AT_A_TIME.lock().await;
    if daemon_with_test_image().await.is_none() {
        return;
    }
    let mut owner = start_owner();
    signal(&owner.child, libc::SIGKILL);
    owner.child.wait().unwrap();

    // No handler ran: the container is still there ...
    assert!(container_exists(&owner.container).await);
    // ... until a runtime starts on this machine (the next coordinator run).
    let _next = DockerDaemon::connect(&DaemonSocket::Auto).await.unwrap();
    assert!(!container_exists(&owner.container).await);

    // The engine process got SIGKILL from the kernel when its parent died; it is gone once the
    // kernel has torn it down.
    let mut gone = false;
    for _ in 0..100 {
        if !serves(&owner.process_socket).await {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the engine process outlived its killed parent");
}
