//! A process engine's binary is hashed once per run (it pins the engine in the chain), not once per
//! operation, and a SIGTERM while it is being hashed stops `weir` at once.
use crate::common;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// Points the engine name `datafusion` of the workspace at `binary` for `--engine process`.
fn use_binary(ws: &Path, binary: &Path) {
    std::fs::write(
        ws.join("weir.yaml"),
        format!(
            "storage: .weir\nengines:\n  datafusion:\n    binary: {}\n",
            binary.display()
        ),
    )
    .unwrap();
}

fn hashings(stderr: &str) -> usize {
    stderr.matches("hashing engine binary").count()
}

#[test]
fn a_process_engine_binary_is_hashed_once_for_every_operation_of_a_pull() {
    let ws = workspace();
    // An engine that exits at once: every operation that needs it resolves it and tries to start it.
    let engine = ws.path().join("engine");
    std::fs::copy("/bin/false", &engine).unwrap();
    use_binary(ws.path(), &engine);
    let out = weir(ws.path())
        .args([
            "--engine",
            "process",
            "--log",
            "weir_engine_runtime=info",
            "pull",
            "--all",
            "--quiet",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // `stations` (a preprocess query) and `readings.clean` (a transform) each needed the engine.
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("2 dataset(s) failed: readings.clean, stations"),
        "two datasets needed the engine: {stderr}"
    );
    assert_eq!(hashings(&stderr), 1, "{stderr}");
    // A binary replaced under its name is hashed again (by the next run, which hashes it once).
    std::fs::remove_file(&engine).unwrap();
    std::fs::copy("/bin/true", &engine).unwrap();
    let out = weir(ws.path())
        .args([
            "--engine",
            "process",
            "--log",
            "weir_engine_runtime=info",
            "pull",
            "stations",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert_eq!(
        hashings(&String::from_utf8_lossy(&out.stderr)),
        1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sigterm_while_an_engine_binary_is_hashed_stops_weir_at_once() {
    // In a pull the binary is hashed by a transaction's worker; `conformance` hashes it on the command's
    // own thread.
    for command in [
        &["pull", "stations", "--quiet"][..],
        &["conformance", "datafusion"][..],
    ] {
        sigterm_while_hashing(command);
    }
}

fn sigterm_while_hashing(command: &[&str]) {
    let ws = workspace();
    // A binary far too large to hash before the test gives up (sparse: it takes no disk).
    let engine = ws.path().join("engine");
    std::fs::File::create(&engine)
        .unwrap()
        .set_len(256 << 30)
        .unwrap();
    use_binary(ws.path(), &engine);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(ws.path())
        .args(["--engine", "process", "--log", "weir_engine_runtime=info"])
        .args(command)
        .env("WEIR_SETTLE_SECS", "0")
        .env_remove("WEIR_FAULT_AT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while hashings(&seen) == 0 {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "{command:?}: weir ended before it hashed the engine: {seen}"
        );
        seen.push_str(&line);
    }
    // SAFETY: sending a signal to the child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    // Hashing 256 GiB takes minutes; weir stops long before.
    let limit = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > limit {
            let _ = child.kill();
            panic!("{command:?}: weir did not stop within a minute of SIGTERM while hashing");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    while stderr.read_line(&mut rest).unwrap_or(0) > 0 {}
    assert_eq!(status.code(), Some(143), "{command:?}: {seen}{rest}");
    assert!(rest.contains("stopped by SIGTERM"), "{command:?}: {rest}");
    assert_eq!(
        head_and_records(ws.path(), "stations"),
        (serde_json::Value::Null, 0)
    );
}
