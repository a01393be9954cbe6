//! The `weir-engine` binary: serving over a Unix socket with progress and terminal messages on the
//! wire, clean shutdown on SIGTERM, documented exit codes.
use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use weir_engine_contract::{ClientError, EngineAddress, EngineClient};

const BINARY: &str = env!("CARGO_BIN_EXE_weir-engine");

fn spawn(args: &[&str]) -> Child {
    Command::new(BINARY)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for_exit(child: &mut Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "weir-engine did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_a_unix_socket_and_stops_cleanly_on_sigterm() {
    let fx = Fixture::new();
    let socket = fx.path("engine.sock");
    let mut child = spawn(&["--unix-socket", socket.to_str().unwrap()]);
    let client = EngineClient::connect(EngineAddress::Unix(socket.clone()))
        .await
        .unwrap();

    let slice = fx.slice(&appends(0, &[("A", 1), ("B", 2)]), SystemTypes::Compatible);
    let request = fx.request(
        "SELECT event_time, city FROM foo",
        vec![fx.input("foo", vec![slice], Some((0, 1)))],
        4,
    );
    let mut call = client.execute_transform(&request).await.unwrap();
    let mut phases = Vec::new();
    while let Some(progress) = call.progress().await.unwrap() {
        phases.push(progress.phase.unwrap_or_default());
    }
    let success = call.finish().await.unwrap();
    assert_eq!(
        success.new_offset_interval.map(|i| (i.start, i.end)),
        Some((4, 5))
    );
    assert!(
        phases.contains(&"planning".to_owned()) && phases.contains(&"writing".to_owned()),
        "{phases:?}"
    );

    let bad = fx.request(
        "SELECT event_time, nope FROM foo",
        request.query_inputs.clone(),
        0,
    );
    match client.execute_transform(&bad).await.unwrap().finish().await {
        Err(ClientError::InvalidQuery { message, .. }) => {
            assert!(message.contains("No field named nope"), "{message}")
        }
        other => panic!("expected InvalidQuery, got {other:?}"),
    }
    let mut missing = request.clone();
    missing.query_inputs[0].data_paths = vec![fx.path("gone").display().to_string()];
    match client
        .execute_transform(&missing)
        .await
        .unwrap()
        .finish()
        .await
    {
        Err(ClientError::EngineInternalError { message, .. }) => {
            assert!(message.contains("does not exist"), "{message}")
        }
        other => panic!("expected InternalError, got {other:?}"),
    }

    signal(&child, "TERM");
    assert_eq!(wait_for_exit(&mut child), 0);
}

#[test]
fn a_socket_in_use_exits_with_code_3() {
    let fx = Fixture::new();
    let socket = fx.path("engine.sock");
    let mut first = spawn(&["--unix-socket", socket.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "first engine never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut second = spawn(&["--unix-socket", socket.to_str().unwrap()]);
    assert_eq!(wait_for_exit(&mut second), 3);
    signal(&first, "INT");
    assert_eq!(wait_for_exit(&mut first), 0);
}

#[test]
fn a_bad_command_line_exits_with_code_2() {
    let mut child = spawn(&["--host", "not-an-address"]);
    assert_eq!(wait_for_exit(&mut child), 2);
}
