//! Engines in containers, against the real Docker daemon, with the test-engine image. Skipped
//! without a daemon unless `WEIR_REQUIRE_DOCKER=1`.
use crate::support;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptionsBuilder, ListContainersOptionsBuilder};
use support::engine::{TEST_IMAGE, daemon_with_test_image, shared_tempdir};
use support::requests;
use weir_engine_contract::ClientError;
use weir_engine_runtime::{
    ContainerEngine, ContainerRuntime, DockerDaemon, EngineEndpoint, EngineIdentity, EngineRuntime,
    LABEL_MANAGED, LABEL_OPERATION, LABEL_OWNER, OperationFolders, OperationId, RuntimeConfig,
    RuntimeError, StartRequest,
};

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .with_start_timeout(Duration::from_secs(30))
        .with_operation_deadline(Duration::from_secs(30))
        .with_stop_grace(Duration::from_secs(2))
}

fn runtime(daemon: &DockerDaemon) -> ContainerRuntime {
    ContainerRuntime::new(
        daemon.clone(),
        ContainerEngine::new("test", TEST_IMAGE),
        config(),
    )
}

/// A folder with `input.txt` (3 lines, world-readable) and an empty output folder.
fn workspace() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = shared_tempdir();
    let input = dir.path().join("input.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    let output = dir.path().join("out");
    (dir, input, output)
}

async fn containers_of(operation: &OperationId) -> Vec<String> {
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    let filters = HashMap::from([("label", vec![format!("{LABEL_OPERATION}={operation}")])]);
    docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap()
        .into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .collect()
}

/// Polls until no container of `operation` is left (removal may run on a thread of its own).
async fn assert_no_container_left(operation: &OperationId) {
    for _ in 0..100 {
        if containers_of(operation).await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "containers left behind: {:?}",
        containers_of(operation).await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn container_engine_runs_a_transform_pinned_by_image_id_and_hands_files_back() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let engine = runtime(&daemon)
        .start(StartRequest::new(
            operation.clone(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap();

    let EngineIdentity::Image(digest) = engine.identity().clone() else {
        panic!("not an image identity: {:?}", engine.identity())
    };
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    let inspected = docker.inspect_image(TEST_IMAGE).await.unwrap();
    assert_eq!(Some(digest.id.clone()), inspected.id);
    assert!(digest.id.starts_with("sha256:"));
    let container = docker
        .inspect_container(engine.container_name().unwrap(), None)
        .await
        .unwrap();
    assert_eq!(
        container.image,
        Some(digest.id.clone()),
        "run by id, not by tag"
    );
    assert!(
        engine
            .container_name()
            .unwrap()
            .contains(operation.as_str())
    );

    let request = requests::transform(&engine, "select * from source", &input, &output, 10);
    assert_eq!(request.new_data_path, "/opt/engine/out/data");
    let mut progress = 0;
    let success = engine
        .execute_transform(&request, |_| progress += 1)
        .await
        .unwrap();
    assert_eq!(
        success.new_offset_interval.map(|i| (i.start, i.end)),
        Some((10, 12))
    );
    engine.stop().await.unwrap();

    assert_eq!(
        std::fs::read_to_string(output.join("data")).unwrap(),
        "a\nb\nc\n"
    );
    // Our uid: the owner of a file we just created.
    let probe = output.join("probe");
    std::fs::write(&probe, b"").unwrap();
    let my_uid = std::fs::metadata(&probe).unwrap().uid();
    for file in ["data", "checkpoint"] {
        let meta = std::fs::metadata(output.join(file)).unwrap();
        assert_eq!(
            meta.uid(),
            my_uid,
            "{file} belongs to the coordinator's user"
        );
    }
    assert_eq!(std::fs::metadata(&output).unwrap().uid(), my_uid);
    std::fs::remove_dir_all(&output).unwrap();
    assert_no_container_left(&operation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_has_only_loopback_no_route_no_root_and_writes_only_the_output_folder() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let engine = runtime(&daemon)
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
    assert_ne!(report["gid"], 0, "{report:#}");
    let writes: HashMap<String, bool> = report["writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["path"].as_str().unwrap().to_owned(),
                w["succeeded"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("/weir-probe", false),
        ("/tmp/weir-probe", false),
        ("/opt/engine/in/input.txt", false),
        ("/opt/engine/in/weir-probe", false),
        ("/opt/engine/weir-probe", false),
        ("/opt/engine/out/weir-probe", true),
    ];
    for (path, succeeded) in expected {
        assert_eq!(
            writes.get(path),
            Some(&succeeded),
            "write to {path}: {report:#}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&input).unwrap(),
        "a\nb\nc\n",
        "input untouched"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_killed_mid_operation_gives_a_clear_error_and_leaves_no_container() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let engine = runtime(&daemon)
        .start(StartRequest::new(
            operation.clone(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap();
    let request = requests::raw_query(&engine, "crash", &[&input], &output.join("o"));
    let mut progress = Vec::new();
    let error = engine
        .execute_raw_query(&request, |p| progress.push(p))
        .await
        .unwrap_err();
    match &error {
        RuntimeError::EngineExited {
            engine: name,
            operation_id,
            status,
            log_tail,
        } => {
            assert_eq!(name, "test");
            assert_eq!(operation_id, operation.as_str());
            assert!(status.starts_with("exit code"), "{status}");
            assert!(log_tail.contains("aborting mid-operation"), "{log_tail}");
        }
        other => panic!("expected EngineExited, got {other:?}"),
    }
    assert!(error.to_string().contains("exited"), "{error}");
    assert_eq!(
        progress.len(),
        1,
        "the crash came mid-operation, after progress"
    );
    // No orderly stop: dropping the handle must still remove the container.
    drop(engine);
    assert_no_container_left(&operation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hung_engine_hits_the_operation_deadline_and_is_stopped() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let runtime = ContainerRuntime::new(
        daemon.clone(),
        ContainerEngine::new("test", TEST_IMAGE),
        config().with_operation_deadline(Duration::from_secs(2)),
    );
    let engine = runtime
        .start(StartRequest::new(
            operation.clone(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap();
    let request = requests::raw_query(&engine, "hang", &[&input], &output.join("o"));
    let started = std::time::Instant::now();
    let error = engine
        .execute_raw_query(&request, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::DeadlineExceeded { deadline, .. } if *deadline == Duration::from_secs(2)),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    engine.stop().await.unwrap();
    assert_no_container_left(&operation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_image_is_a_clear_error_naming_the_image() {
    let Some(daemon) = support::engine::daemon().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let runtime = ContainerRuntime::new(
        daemon,
        ContainerEngine::new("ghost", "weir/no-such-engine:absent"),
        config(),
    );
    let error = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::ImageNotFound { image } if image == "weir/no-such-engine:absent"),
        "{error:?}"
    );
    assert!(error.to_string().contains("weir/no-such-engine:absent"));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_tcp_engines_run_concurrently_on_distinct_loopback_ports() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let tcp = ContainerRuntime::new(
        daemon.clone(),
        ContainerEngine::new("test-tcp", TEST_IMAGE)
            .with_endpoint(EngineEndpoint::weir_tcp())
            .with_command(vec!["--port".into(), "5544".into()]),
        config(),
    );
    let (_a_dir, a_input, a_output) = workspace();
    let (_b_dir, b_input, b_output) = workspace();
    let (a, b) = tokio::join!(
        tcp.start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&a_output).with_input(&a_input),
        )),
        tcp.start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&b_output).with_input(&b_input),
        )),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let (a_address, b_address) = (a.client().address().clone(), b.client().address().clone());
    assert_ne!(a_address, b_address);
    for address in [&a_address, &b_address] {
        let weir_engine_contract::EngineAddress::Tcp(socket) = address else {
            panic!("TCP engine dialled at {address}")
        };
        assert!(socket.ip().is_loopback(), "{address}");
    }
    let a_request = requests::raw_query(&a, "copy", &[&a_input], &a_output.join("o"));
    let b_request = requests::raw_query(&b, "copy", &[&b_input], &b_output.join("o"));
    let (a_result, b_result) = tokio::join!(
        a.execute_raw_query(&a_request, |_| {}),
        b.execute_raw_query(&b_request, |_| {}),
    );
    assert_eq!(a_result.unwrap().num_records, 3);
    assert_eq!(b_result.unwrap().num_records, 3);
    let (a_stop, b_stop) = tokio::join!(a.stop(), b.stop());
    a_stop.unwrap();
    b_stop.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_socket_engines_run_concurrently_and_progress_streams_through() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let runtime = runtime(&daemon);
    let (_a_dir, a_input, a_output) = workspace();
    let (_b_dir, b_input, b_output) = workspace();
    let (a, b) = tokio::join!(
        runtime.start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&a_output).with_input(&a_input),
        )),
        runtime.start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&b_output).with_input(&b_input),
        )),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.container_name(), b.container_name());
    let a_request = requests::raw_query(&a, "progress 5", &[&a_input], &a_output.join("o"));
    let b_request = requests::raw_query(&b, "progress 3", &[&b_input], &b_output.join("o"));
    let (mut a_progress, mut b_progress) = (0, 0);
    let (a_result, b_result) = tokio::join!(
        a.execute_raw_query(&a_request, |_| a_progress += 1),
        b.execute_raw_query(&b_request, |_| b_progress += 1),
    );
    assert_eq!(a_result.unwrap().num_records, 3);
    assert_eq!(b_result.unwrap().num_records, 3);
    assert_eq!((a_progress, b_progress), (5, 3));
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_query_is_reported_as_the_engines_answer_not_a_crash() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let engine = runtime(&daemon)
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap();
    let request = requests::raw_query(&engine, "invalid", &[&input], &output.join("o"));
    let error = engine
        .execute_raw_query(&request, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(error.client_error(), Some(ClientError::InvalidQuery { .. })),
        "{error:?}"
    );
    engine.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_input_is_refused_before_the_engine_starts() {
    use std::os::unix::fs::PermissionsExt;
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o600)).unwrap();
    let coordinator_is_root = std::fs::metadata(&input).unwrap().uid() == 0;
    let result = runtime(&daemon)
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await;
    if coordinator_is_root {
        // The engine runs as nobody, which cannot read a 0600 file of root's.
        let error = result.unwrap_err();
        assert!(
            matches!(&error, RuntimeError::InputNotReadable { path, uid: 65534 } if path == &input),
            "{error:?}"
        );
    } else {
        // The engine runs as the coordinator's own user, who can.
        result.unwrap().stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn containers_orphaned_by_a_dead_coordinator_are_removed_on_the_next_connect() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    // A coordinator that is gone: a child that has exited (its pid may be reused later, but never
    // with the same start time).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let orphan_op = OperationId::generate();
    let live_op = OperationId::generate();
    let my_stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let my_start: u64 = my_stat[my_stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    for (operation, owner) in [
        (&orphan_op, format!("{}/{dead_pid}/1", boot_id.trim())),
        (
            &live_op,
            format!("{}/{}/{my_start}", boot_id.trim(), std::process::id()),
        ),
    ] {
        let labels = HashMap::from([
            (LABEL_MANAGED.to_owned(), "true".to_owned()),
            (LABEL_OPERATION.to_owned(), operation.to_string()),
            (LABEL_OWNER.to_owned(), owner),
        ]);
        docker
            .create_container(
                Some(
                    CreateContainerOptionsBuilder::default()
                        .name(&format!("weir-test-{operation}"))
                        .build(),
                ),
                ContainerCreateBody {
                    image: Some(TEST_IMAGE.to_owned()),
                    labels: Some(labels),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    // (Creating succeeded, so the orphan existed; another test's connect may already have removed
    // it, which is the rule at work too.)

    // The next start of a coordinator (a new connection) cleans up.
    let _next = DockerDaemon::connect(&weir_engine_runtime::DaemonSocket::Auto)
        .await
        .unwrap();
    let orphans_left = containers_of(&orphan_op).await;
    let live_left = containers_of(&live_op).await;
    let removed_again = daemon.remove_orphans().await.unwrap();
    docker
        .remove_container(&format!("weir-test-{live_op}"), None)
        .await
        .unwrap();
    assert!(orphans_left.is_empty(), "orphan removed: {orphans_left:?}");
    assert_eq!(
        live_left.len(),
        1,
        "a live coordinator's container is left alone"
    );
    assert!(
        !removed_again.contains(&format!("weir-test-{live_op}")),
        "{removed_again:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_output_is_logged_with_engine_and_operation() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let logs = support::logs::capture();
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let engine = runtime(&daemon)
        .start(StartRequest::new(
            operation.clone(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap();
    let request = requests::raw_query(&engine, "crash", &[&input], &output.join("o"));
    let _ = engine.execute_raw_query(&request, |_| {}).await;
    engine.stop().await.unwrap();
    let lines = logs.lines_with(operation.as_str());
    assert!(
        lines.iter().any(|l| l.contains("weir::engine")
            && l.contains("engine=test")
            && l.contains("aborting mid-operation")),
        "{lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_start_cancelled_while_waiting_for_readiness_leaves_no_container() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    // The engine listens on 6000 but the runtime waits for 5544: it never becomes ready.
    let runtime = ContainerRuntime::new(
        daemon.clone(),
        ContainerEngine::new("test-deaf", TEST_IMAGE)
            .with_endpoint(EngineEndpoint::weir_tcp())
            .with_command(vec!["--port".into(), "6000".into()]),
        config(),
    );
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let start = runtime.start(StartRequest::new(
        operation.clone(),
        OperationFolders::new(&output).with_input(&input),
    ));
    let watch = async {
        // Cancel only once the container exists.
        while containers_of(&operation).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        result = start => panic!("the deaf engine cannot be ready: {:?}", result.map(|_| ())),
        () = watch => {}
    }
    // `start` was dropped mid-readiness: the guard removes the container.
    assert_no_container_left(&operation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_that_panics_leaves_no_container() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let operation = OperationId::generate();
    let task = {
        let operation = operation.clone();
        tokio::spawn(async move {
            let (_dir, input, output) = workspace();
            let _engine = runtime(&daemon)
                .start(StartRequest::new(
                    operation,
                    OperationFolders::new(&output).with_input(&input),
                ))
                .await
                .unwrap();
            panic!("the caller panics while the engine runs");
        })
    };
    assert!(task.await.unwrap_err().is_panic());
    assert_no_container_left(&operation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_in_the_container_is_writable_but_the_output_and_socket_folders() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let (_dir, input, output) = workspace();
    let engine = runtime(&daemon)
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
    let walk = &report["walk"];
    let paths = |key: &str| -> Vec<String> {
        walk[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_owned())
            .collect()
    };
    eprintln!("{walk:#}");
    // The walk saw the whole tree, /dev/shm and /dev/mqueue included.
    assert!(walk["dirs_probed"].as_u64().unwrap() > 100, "{walk:#}");
    assert_eq!(
        paths("writable_dirs"),
        vec!["/opt/engine/out".to_owned(), "/run/weir".to_owned()],
        "{walk:#}"
    );
    // Files: only the engine's own process attributes (`/proc/<pid>/comm`, `oom_score_adj`, ...),
    // which every process may set and which store nothing.
    let files = paths("writable_files");
    let own_process_attribute = |path: &str| {
        path.strip_prefix("/proc/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(pid, _)| pid.parse::<u32>().is_ok())
    };
    let others: Vec<&String> = files.iter().filter(|f| !own_process_attribute(f)).collect();
    assert!(others.is_empty(), "writable files {others:?}: {walk:#}");
    assert!(
        files.iter().any(|f| f.ends_with("/comm")),
        "the walk reached /proc: {walk:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn container_engine_that_listens_on_another_port_is_reported_as_never_listened() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    // The runtime waits for 5544; the engine listens on 6000.
    let runtime = ContainerRuntime::new(
        daemon.clone(),
        ContainerEngine::new("test-deaf", TEST_IMAGE)
            .with_endpoint(EngineEndpoint::weir_tcp())
            .with_command(vec!["--port".into(), "6000".into()]),
        config().with_start_timeout(Duration::from_secs(3)),
    );
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let error = runtime
        .start(StartRequest::new(
            operation.clone(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap_err();
    match &error {
        RuntimeError::EngineNeverListened {
            address, log_tail, ..
        } => {
            assert!(
                address.starts_with("port 5544 in container weir-test-deaf-"),
                "{address}"
            );
            assert!(log_tail.contains("listening"), "{log_tail}");
        }
        other => panic!("expected EngineNeverListened, got {other:?}"),
    }
    assert!(
        error
            .to_string()
            .starts_with("the engine never listened on port 5544 in container"),
        "{error}"
    );
    assert_no_container_left(&operation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn container_engine_that_ignores_its_socket_is_reported_as_never_listened() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    // The engine is told to listen on a TCP port instead of the socket (in a container without a
    // network).
    let runtime = ContainerRuntime::new(
        daemon.clone(),
        ContainerEngine::new("test-deaf", TEST_IMAGE)
            .with_command(vec!["--port".into(), "6000".into()]),
        config().with_start_timeout(Duration::from_secs(3)),
    );
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let error = runtime
        .start(StartRequest::new(
            operation.clone(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::EngineNeverListened { address, .. } if address.starts_with("/run/weir/engine.sock in container")),
        "{error:?}"
    );
    assert_no_container_left(&operation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn container_engine_that_exits_before_listening_is_reported_with_its_status_and_output() {
    let Some(daemon) = daemon_with_test_image().await else {
        return;
    };
    let runtime = ContainerRuntime::new(
        daemon.clone(),
        ContainerEngine::new("test-picky", TEST_IMAGE)
            .with_command(vec!["--no-such-option".into()]),
        config(),
    );
    let (_dir, input, output) = workspace();
    let operation = OperationId::generate();
    let error = runtime
        .start(StartRequest::new(
            operation.clone(),
            OperationFolders::new(&output).with_input(&input),
        ))
        .await
        .unwrap_err();
    match &error {
        RuntimeError::EngineExited {
            status, log_tail, ..
        } => {
            assert_eq!(status, "exit code 2");
            assert!(
                log_tail.contains("unknown argument --no-such-option"),
                "{log_tail}"
            );
        }
        other => panic!("expected EngineExited, got {other:?}"),
    }
    assert_no_container_left(&operation).await;
}
