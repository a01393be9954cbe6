//! Engines as local child processes, with the test engine binary.
use crate::support;

use std::time::Duration;

use sha2::{Digest, Sha256};
use support::engine::test_engine_binary;
use support::requests;
use weir_engine_runtime::{
    EngineEndpoint, EngineIdentity, EngineRuntime, OperationFolders, OperationId, ProcessEndpoint,
    ProcessEngine, ProcessRuntime, RuntimeConfig, RuntimeError, StartRequest,
};

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .with_start_timeout(Duration::from_secs(20))
        .with_operation_deadline(Duration::from_secs(20))
        .with_stop_grace(Duration::from_secs(2))
}

fn runtime(endpoint: impl Into<ProcessEndpoint>) -> ProcessRuntime {
    ProcessRuntime::new(
        ProcessEngine::new("test", test_engine_binary()).with_endpoint(endpoint),
        config(),
    )
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    let output = dir.path().join("out");
    (dir, input, output)
}

fn folders(input: &std::path::Path, output: &std::path::Path) -> OperationFolders {
    OperationFolders::new(output).with_input(input)
}

#[tokio::test(flavor = "multi_thread")]
async fn process_engine_on_a_unix_socket_runs_a_raw_query_and_is_pinned_by_binary_hash() {
    let (_dir, input, output) = workspace();
    let engine = runtime(EngineEndpoint::UnixSocket)
        .start(StartRequest::new(
            OperationId::generate(),
            folders(&input, &output),
        ))
        .await
        .unwrap();
    let expected: String = Sha256::digest(std::fs::read(test_engine_binary()).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        engine.identity(),
        &EngineIdentity::Binary {
            path: test_engine_binary(),
            sha256: expected
        }
    );
    assert!(matches!(
        engine.client().address(),
        weir_engine_contract::EngineAddress::Unix(_)
    ));
    // A process sees host paths as they are.
    assert_eq!(engine.engine_path(&input).unwrap(), input);
    let request = requests::raw_query(&engine, "copy", &[&input], &output.join("copy.txt"));
    let success = engine.execute_raw_query(&request, |_| {}).await.unwrap();
    assert_eq!(success.num_records, 3);
    engine.stop().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(output.join("copy.txt")).unwrap(),
        "a\nb\nc\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_tcp_process_engines_run_concurrently_on_distinct_free_ports() {
    let runtime = runtime(ProcessEndpoint::FreeTcpPort);
    let (_a_dir, a_input, a_output) = workspace();
    let (_b_dir, b_input, b_output) = workspace();
    let (a, b) = tokio::join!(
        runtime.start(StartRequest::new(
            OperationId::generate(),
            folders(&a_input, &a_output)
        )),
        runtime.start(StartRequest::new(
            OperationId::generate(),
            folders(&b_input, &b_output)
        )),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.client().address(), b.client().address());
    let a_request = requests::transform(&a, "progress 4", &a_input, &a_output, 0);
    let b_request = requests::transform(&b, "copy", &b_input, &b_output, 100);
    let mut a_progress = 0;
    let (a_result, b_result) = tokio::join!(
        a.execute_transform(&a_request, |_| a_progress += 1),
        b.execute_transform(&b_request, |_| {}),
    );
    assert_eq!(
        a_result
            .unwrap()
            .new_offset_interval
            .map(|i| (i.start, i.end)),
        Some((0, 2))
    );
    assert_eq!(
        b_result
            .unwrap()
            .new_offset_interval
            .map(|i| (i.start, i.end)),
        Some((100, 102))
    );
    assert_eq!(a_progress, 4);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn process_killed_mid_operation_is_reported_as_exited_with_its_last_output() {
    let (_dir, input, output) = workspace();
    let engine = runtime(EngineEndpoint::UnixSocket)
        .start(StartRequest::new(
            OperationId::generate(),
            folders(&input, &output),
        ))
        .await
        .unwrap();
    let request = requests::raw_query(&engine, "crash", &[&input], &output.join("o"));
    let error = engine
        .execute_raw_query(&request, |_| {})
        .await
        .unwrap_err();
    match &error {
        RuntimeError::EngineExited {
            status, log_tail, ..
        } => {
            assert_eq!(status, "signal 6", "abort() raises SIGABRT");
            assert!(log_tail.contains("aborting mid-operation"), "{log_tail}");
        }
        other => panic!("expected EngineExited, got {other:?}"),
    }
    engine.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn hung_process_hits_the_deadline_and_stop_kills_it() {
    let (_dir, input, output) = workspace();
    let runtime = ProcessRuntime::new(
        ProcessEngine::new("test", test_engine_binary()),
        config().with_operation_deadline(Duration::from_millis(800)),
    );
    let engine = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            folders(&input, &output),
        ))
        .await
        .unwrap();
    let request = requests::raw_query(&engine, "hang", &[&input], &output.join("o"));
    let error = engine
        .execute_raw_query(&request, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(error, RuntimeError::DeadlineExceeded { .. }),
        "{error:?}"
    );
    let stopping = std::time::Instant::now();
    engine.stop().await.unwrap();
    // The graceful shutdown waits for the hung call; the kill comes after the 2 s grace.
    assert!(stopping.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_that_exits_before_it_is_ready_is_reported_at_once() {
    let (_dir, input, output) = workspace();
    let runtime = ProcessRuntime::new(ProcessEngine::new("false", "/bin/false"), config());
    let started = std::time::Instant::now();
    let error = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            folders(&input, &output),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::EngineExited { status, .. } if status == "exit code 1"),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not the start timeout"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_engine_binary_is_named_in_the_error() {
    let (_dir, input, output) = workspace();
    let runtime = ProcessRuntime::new(
        ProcessEngine::new("ghost", "/nonexistent/weir-engine"),
        config(),
    );
    let error = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            folders(&input, &output),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::EngineBinaryNotFound { path, .. } if path.ends_with("weir-engine")),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_handle_kills_the_process() {
    let (_dir, input, output) = workspace();
    let engine = runtime(EngineEndpoint::UnixSocket)
        .start(StartRequest::new(
            OperationId::generate(),
            folders(&input, &output),
        ))
        .await
        .unwrap();
    let weir_engine_contract::EngineAddress::Unix(socket) = engine.client().address().clone()
    else {
        panic!("expected a Unix socket")
    };
    drop(engine);
    // The run folder with the socket is gone, and nothing answers.
    for _ in 0..50 {
        if !socket.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!socket.exists());
    assert!(tokio::net::UnixStream::connect(&socket).await.is_err());
}

/// A port free on 127.0.0.1 right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_request(input: &std::path::Path, output: &std::path::Path) -> StartRequest {
    StartRequest::new(OperationId::generate(), folders(input, output))
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_on_a_fixed_tcp_port_gets_only_its_own_arguments_and_no_unix_socket() {
    let (_dir, input, output) = workspace();
    let port = free_port();
    // The test engine prefers `--unix-socket` over `--port`: were it passed, nothing would listen
    // on the port.
    let runtime = ProcessRuntime::new(
        ProcessEngine::new("foreign", test_engine_binary())
            .with_endpoint(ProcessEndpoint::Tcp { port })
            .with_args(["--host", "127.0.0.1", "--port", &port.to_string()]),
        config(),
    );
    let engine = runtime.start(start_request(&input, &output)).await.unwrap();
    assert_eq!(
        engine.client().address(),
        &weir_engine_contract::EngineAddress::Tcp(([127, 0, 0, 1], port).into())
    );
    let request = requests::raw_query(&engine, "copy", &[&input], &output.join("copy.txt"));
    assert_eq!(
        engine
            .execute_raw_query(&request, |_| {})
            .await
            .unwrap()
            .num_records,
        3
    );
    engine.stop().await.unwrap();
}

#[test]
fn engine_endpoint_with_a_port_means_a_fixed_port_for_a_process() {
    let port = free_port();
    let engine = ProcessEngine::new("foreign", "/bin/engine")
        .with_endpoint(EngineEndpoint::Tcp { port })
        .with_arg("--serve");
    assert_eq!(engine.endpoint(), ProcessEndpoint::Tcp { port });
    assert_eq!(engine.args(), ["--serve"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_that_listens_on_another_port_is_reported_as_never_listened() {
    let (_dir, input, output) = workspace();
    let (expected, actual) = (free_port(), free_port());
    let runtime = ProcessRuntime::new(
        ProcessEngine::new("deaf", test_engine_binary())
            .with_endpoint(ProcessEndpoint::Tcp { port: expected })
            .with_args(["--host", "127.0.0.1", "--port", &actual.to_string()]),
        config().with_start_timeout(Duration::from_secs(2)),
    );
    let error = runtime
        .start(start_request(&input, &output))
        .await
        .unwrap_err();
    match &error {
        RuntimeError::EngineNeverListened {
            engine,
            address,
            waited,
            ..
        } => {
            assert_eq!(engine, "deaf");
            assert_eq!(address, &format!("127.0.0.1:{expected}"));
            assert_eq!(*waited, Duration::from_secs(2));
        }
        other => panic!("expected EngineNeverListened, got {other:?}"),
    }
    assert!(
        error.to_string().starts_with(&format!(
            "the engine never listened on 127.0.0.1:{expected}"
        )),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_that_ignores_its_unix_socket_is_reported_as_never_listened() {
    let (_dir, input, output) = workspace();
    // `sh -c SCRIPT` takes the socket arguments as $0 and $1 and ignores them.
    let runtime = ProcessRuntime::new(
        ProcessEngine::new("ignorant", "/bin/sh").with_args(["-c", "exec sleep 600"]),
        config().with_start_timeout(Duration::from_secs(2)),
    );
    let error = runtime
        .start(start_request(&input, &output))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::EngineNeverListened { address, .. } if address.contains("engine.sock") && address.contains("--unix-socket")),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("the engine never listened on"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_that_exits_before_listening_is_reported_with_its_status_and_stderr() {
    let (_dir, input, output) = workspace();
    let runtime = ProcessRuntime::new(
        ProcessEngine::new("picky", "/bin/sh")
            .with_args(["-c", "echo \"picky: unknown option $0\" >&2; exit 3"]),
        config(),
    );
    let error = runtime
        .start(start_request(&input, &output))
        .await
        .unwrap_err();
    match &error {
        RuntimeError::EngineExited {
            status, log_tail, ..
        } => {
            assert_eq!(status, "exit code 3");
            assert!(
                log_tail.contains("picky: unknown option --unix-socket"),
                "{log_tail}"
            );
        }
        other => panic!("expected EngineExited, got {other:?}"),
    }
    assert!(
        error.to_string().contains("exited with exit code 3"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fixed_port_held_by_another_program_is_refused_before_the_engine_starts() {
    let (_dir, input, output) = workspace();
    let stranger = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stranger.local_addr().unwrap().port();
    let runtime = ProcessRuntime::new(
        ProcessEngine::new("test", test_engine_binary())
            .with_endpoint(ProcessEndpoint::Tcp { port })
            .with_args(["--host", "127.0.0.1", "--port", &port.to_string()]),
        config(),
    );
    let error = runtime
        .start(start_request(&input, &output))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::PortInUse { port: p, .. } if *p == port),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_engines_on_one_fixed_port_take_turns() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let port = free_port();
    let runtime = Arc::new(ProcessRuntime::new(
        ProcessEngine::new("test", test_engine_binary())
            .with_endpoint(ProcessEndpoint::Tcp { port })
            .with_args(["--host", "127.0.0.1", "--port", &port.to_string()]),
        config(),
    ));
    let (_a_dir, a_input, a_output) = workspace();
    let (_b_dir, b_input, b_output) = workspace();
    let first = runtime
        .start(start_request(&a_input, &a_output))
        .await
        .unwrap();
    let first_stopped = Arc::new(AtomicBool::new(false));
    let second = tokio::spawn({
        let runtime = runtime.clone();
        let first_stopped = first_stopped.clone();
        async move {
            let engine = runtime
                .start(start_request(&b_input, &b_output))
                .await
                .unwrap();
            (engine, first_stopped.load(Ordering::SeqCst))
        }
    });
    let request = requests::raw_query(&first, "copy", &[&a_input], &a_output.join("o"));
    first.execute_raw_query(&request, |_| {}).await.unwrap();
    first_stopped.store(true, Ordering::SeqCst);
    first.stop().await.unwrap();
    let (second, started_after_the_first_stopped) = second.await.unwrap();
    assert!(started_after_the_first_stopped);
    second.stop().await.unwrap();
}
