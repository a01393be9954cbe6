//! The test engine, as an image (built once per test binary with `cargo xtask image --engine test`)
//! and as a host binary; and the container daemon, or a clear skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use weir_engine_runtime::{DaemonSocket, DockerDaemon};

/// The test engine's image tag.
pub const TEST_IMAGE: &str = "weir/test-engine:dev";

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

fn docker_required() -> bool {
    std::env::var("WEIR_REQUIRE_DOCKER").is_ok_and(|v| v == "1")
}

/// The daemon, or `None` after printing why the test is skipped. With `WEIR_REQUIRE_DOCKER=1` a
/// missing daemon fails the test instead.
pub async fn daemon() -> Option<DockerDaemon> {
    match DockerDaemon::connect(&DaemonSocket::Auto).await {
        Ok(daemon) => Some(daemon),
        Err(error) if docker_required() => {
            panic!("WEIR_REQUIRE_DOCKER=1 but no container daemon answers: {error}")
        }
        Err(error) => {
            eprintln!(
                "SKIPPED: container test needs a Docker daemon ({error}); set WEIR_REQUIRE_DOCKER=1 to fail instead"
            );
            None
        }
    }
}

/// The daemon and the freshly built test-engine image, or `None` (skip, see [`daemon`]).
pub async fn daemon_with_test_image() -> Option<DockerDaemon> {
    let daemon = daemon().await?;
    test_engine_image();
    Some(daemon)
}

/// Builds `weir/test-engine:dev` the way `cargo xtask image --engine test` does, once per test
/// binary (an up-to-date build takes a second or two).
pub fn test_engine_image() -> &'static str {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = cargo()
            .args(["xtask", "image", "--engine", "test"])
            .output()
            .map_err(|e| format!("cannot run cargo xtask: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`cargo xtask image --engine test` failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    if let Err(why) = built {
        panic!("{why}");
    }
    TEST_IMAGE
}

/// The test engine binary the test image holds (`cargo xtask engines`: the workspace build's own, so
/// nothing is built again after the test suite's build), once per test binary.
pub fn test_engine_binary() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = cargo()
            .args(["xtask", "engines"])
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "`cargo xtask engines` failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(PathBuf::from)
            .find(|p| p.file_name().is_some_and(|n| n == "weir-test-engine"))
            .ok_or_else(|| "`cargo xtask engines` built no `weir-test-engine`".to_owned())
    });
    match built {
        Ok(path) => path.clone(),
        Err(why) => panic!("{why}"),
    }
}

/// A temporary folder the sandboxed engine user can enter and read (tempfile makes 0700 folders).
pub fn shared_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}
