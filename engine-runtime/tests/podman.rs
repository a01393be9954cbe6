//! Engines in containers on Podman, through its Docker-compatible API: the test starts a rootful
//! `podman system service` on a socket of its own (it exits by itself when idle) and copies the
//! test-engine image into it from Docker. Skipped without `podman` (or without Docker to copy the
//! image from) unless `WEIR_REQUIRE_PODMAN=1`.
use crate::support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use support::engine::{TEST_IMAGE, daemon_with_test_image, shared_tempdir};
use support::requests;
use weir_engine_runtime::{
    ContainerEngine, ContainerRuntime, DaemonSocket, DockerDaemon, EngineIdentity, EngineRuntime,
    OperationFolders, OperationId, RuntimeConfig, RuntimeError, StartRequest,
};

fn required() -> bool {
    std::env::var("WEIR_REQUIRE_PODMAN").is_ok_and(|v| v == "1")
}

fn skip(why: &str) -> Option<DockerDaemon> {
    if required() {
        panic!("WEIR_REQUIRE_PODMAN=1 but {why}");
    }
    eprintln!("SKIPPED: Podman test: {why}; install podman (and catatonit) to run it");
    None
}

/// The socket of a Podman service started for this test binary.
fn podman_socket() -> Result<PathBuf, String> {
    static SOCKET: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    SOCKET
        .get_or_init(|| {
            // A fixed folder: the service outlives nothing but its idle time.
            let dir = std::env::temp_dir().join(format!("weir-podman-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {dir:?}: {e}"))?;
            let socket = dir.join("podman.sock");
            Command::new("podman")
                .args(["system", "service", "--time=20"])
                .arg(format!("unix://{}", socket.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run podman: {e}"))?;
            for _ in 0..200 {
                if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                    return Ok(socket);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(format!(
                "podman system service did not listen on {socket:?}"
            ))
        })
        .clone()
}

/// Podman with the test-engine image (copied from Docker once per test binary), or a skip.
async fn podman_with_test_image() -> Option<DockerDaemon> {
    if Command::new("podman")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        return skip("podman is not installed");
    }
    daemon_with_test_image().await?;
    let socket = match podman_socket() {
        Ok(socket) => socket,
        Err(why) => return skip(&why),
    };
    let podman = DockerDaemon::connect(&DaemonSocket::Unix(socket.clone()))
        .await
        .unwrap();
    assert!(podman.is_podman(), "{socket:?} is not Podman");
    static COPIED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    COPIED
        .get_or_init(|| async {
            let docker = bollard::Docker::connect_with_local_defaults().unwrap();
            let archive: Vec<u8> = docker
                .export_image(TEST_IMAGE)
                .map(|chunk| chunk.unwrap().to_vec())
                .concat()
                .await;
            let podman_api = bollard::Docker::connect_with_unix(
                &socket.to_string_lossy(),
                120,
                bollard::API_DEFAULT_VERSION,
            )
            .unwrap();
            let mut loading = podman_api.import_image(
                bollard::query_parameters::ImportImageOptions::default(),
                bollard::body_full(archive.into()),
                None,
            );
            while let Some(step) = loading.next().await {
                step.unwrap();
            }
        })
        .await;
    Some(podman)
}

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .with_start_timeout(Duration::from_secs(60))
        .with_operation_deadline(Duration::from_secs(60))
        .with_stop_grace(Duration::from_secs(2))
}

fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = shared_tempdir();
    let input = dir.path().join("input.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    let output = dir.path().join("out");
    (dir, input, output)
}

#[tokio::test(flavor = "multi_thread")]
async fn podman_runs_a_transform_pinned_by_image_id_and_removes_the_container() {
    let Some(podman) = podman_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let runtime = ContainerRuntime::new(
        podman.clone(),
        ContainerEngine::new("test", TEST_IMAGE),
        config(),
    );
    let engine = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap();
    let EngineIdentity::Image(digest) = engine.identity().clone() else {
        panic!("not an image identity: {:?}", engine.identity())
    };
    assert!(digest.id.starts_with("sha256:"), "{digest:?}");
    let name = engine.container_name().unwrap().to_owned();
    let request = requests::transform(&engine, "select * from source", &input, &output, 10);
    let success = engine.execute_transform(&request, |_| {}).await.unwrap();
    assert_eq!(
        success.new_offset_interval.map(|i| (i.start, i.end)),
        Some((10, 12))
    );
    engine.stop().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(output.join("data")).unwrap(),
        "a\nb\nc\n"
    );
    let podman_api = bollard::Docker::connect_with_unix(
        &podman_socket().unwrap().to_string_lossy(),
        120,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap();
    assert!(
        matches!(
            podman_api.inspect_container(&name, None).await,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })
        ),
        "{name} removed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn podman_sandbox_has_no_network_and_nothing_writable_but_the_output_and_socket_folders() {
    let Some(podman) = podman_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let runtime = ContainerRuntime::new(podman, ContainerEngine::new("test", TEST_IMAGE), config());
    let engine = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap();
    let report_path = output.join("report.json");
    let request = requests::raw_query(&engine, "sandbox-report", &[&input], &report_path);
    engine.execute_raw_query(&request, |_| {}).await.unwrap();
    engine.stop().await.unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    assert_eq!(
        report["interfaces"],
        serde_json::json!(["lo"]),
        "{report:#}"
    );
    assert_eq!(report["default_route"], false, "{report:#}");
    assert_ne!(report["uid"], 0, "{report:#}");
    let walk = &report["walk"];
    assert!(walk["dirs_probed"].as_u64().unwrap() > 100, "{walk:#}");
    assert_eq!(
        walk["writable_dirs"],
        serde_json::json!(["/opt/engine/out", "/run/weir"]),
        "{walk:#}"
    );
    let others: Vec<&str> = walk["writable_files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .filter(|f| {
            let own_process_attribute = f
                .strip_prefix("/proc/")
                .and_then(|rest| rest.split_once('/'))
                .is_some_and(|(pid, _)| pid.parse::<u32>().is_ok());
            !own_process_attribute
        })
        .collect();
    assert!(others.is_empty(), "writable files {others:?}: {walk:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn podman_engine_that_never_listens_is_reported_as_never_listened() {
    let Some(podman) = podman_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let runtime = ContainerRuntime::new(
        podman,
        ContainerEngine::new("test-deaf", TEST_IMAGE)
            .with_command(vec!["--port".into(), "6000".into()]),
        config().with_start_timeout(Duration::from_secs(3)),
    );
    let error = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::EngineNeverListened { .. }),
        "{error:?}"
    );
    // The failed start's container is removed on a thread of its own: let it finish before the
    // test binary exits.
    assert!(weir_engine_runtime::wait_for_removals(Duration::from_secs(
        60
    )));
}
