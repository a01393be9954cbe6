//! `weir sql` over the example workspace: one-shot statements, the shell on standard input, and the Flight
//! SQL server's start and stop (its protocol is tested with a real ADBC client in `sql/tests`).
use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::*;

#[test]
fn one_shot_statements_read_the_datasets_as_tables() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let json: serde_json::Value = serde_json::from_str(&ok(
        ws.path(),
        &[
            "--format",
            "json",
            "sql",
            "-c",
            "SELECT count(*) AS n FROM \"readings.clean\"; SELECT city FROM stations WHERE station_id = 'OSL'",
        ],
    ))
    .unwrap();
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{json}");
    assert_eq!(results[0]["rows"][0]["n"], 432 - 7, "{json}");
    assert_eq!(results[1]["rows"][0]["city"], "Oslo", "{json}");

    let table = ok(
        ws.path(),
        &["sql", "-c", "SELECT count(*) AS n FROM readings.daily"],
    );
    assert!(table.contains("| 12 "), "{table}");

    let out = weir(ws.path())
        .args(["sql", "-c", "SELECT nope FROM readings"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    let out = weir(ws.path())
        .args(["sql", "-c", "DROP TABLE readings"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "read-only");

    // Nested past the engine's bound: an invalid query (exit 5, a JSON document under `--format json`),
    // never a stack overflow that aborts the process.
    let deep = format!("SELECT {} AS x", vec!["1"; 20_000].join(" + "));
    let out = weir(ws.path()).args(["sql", "-c", &deep]).output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("levels deep"));
    let out = weir(ws.path())
        .args(["--format", "json", "sql", "-c", &deep])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["exitCode"], 5, "{json}");
    assert!(
        json["error"].as_str().unwrap().contains("levels deep"),
        "{json}"
    );
}

#[test]
fn the_shell_runs_each_statement_and_goes_on_after_an_error() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let out = weir(ws.path())
        .args(["sql"])
        .write_stdin("SELECT nope FROM readings;\nSELECT count(*) AS n\n  FROM stations;\n\\q\n")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| 10 "), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[test]
fn the_flight_sql_server_prints_its_url_and_stops_on_sigterm() {
    let ws = workspace();
    ok(ws.path(), &["pull", "stations", "--quiet"]);
    let binary = assert_cmd::cargo::cargo_bin("weir");
    let mut child = std::process::Command::new(binary)
        .args(["--workspace"])
        .arg(ws.path())
        .args(["sql", "server", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim();
    assert!(url.starts_with("grpc://127.0.0.1:"), "{url}");
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status:?} {stderr}");
    let _ = std::io::stdout().flush();
}

fn add_day4(dir: &std::path::Path) {
    let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        dir.join("data/readings/2024-06-04.csv"),
        day3.replace("2024-06-03", "2024-06-04"),
    )
    .unwrap();
}

/// `weir sql server ARGS` started in `ws`; its URL (first stdout line) and the child.
fn start_server(ws: &std::path::Path, args: &[&str]) -> (String, std::process::Child) {
    let binary = assert_cmd::cargo::cargo_bin("weir");
    let mut child = std::process::Command::new(binary)
        .args(["--workspace"])
        .arg(ws)
        .args(["sql", "server", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (line.trim().to_owned(), child)
}

fn stop(child: &mut std::process::Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// Whether python3 has ADBC's Flight SQL driver; SKIPPED (or a failure under WEIR_REQUIRE_FLIGHT_SQL=1).
fn adbc_available() -> bool {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import adbc_driver_flightsql.dbapi, pyarrow, pandas"])
        .output();
    match probe {
        Ok(out) if out.status.success() => true,
        other => {
            let message = format!(
                "the live Flight SQL test needs python3 with adbc-driver-flightsql, pyarrow and pandas: {other:?}"
            );
            if std::env::var("WEIR_REQUIRE_FLIGHT_SQL").is_ok_and(|v| v == "1") {
                panic!("{message}");
            }
            println!("SKIPPED: {message}");
            false
        }
    }
}

#[test]
fn a_flight_sql_connection_sees_a_pull_made_between_two_statements() {
    if !adbc_available() {
        return;
    }
    let ws = workspace();
    ok(ws.path(), &["pull", "readings", "--quiet"]);
    let (url, mut server) = start_server(ws.path(), &[]);
    assert!(url.starts_with("grpc://127.0.0.1:"), "{url}");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sql/tests/flight_sql_clients.py"
    );
    let mut client = std::process::Command::new("python3")
        .args([script, "live", &url, "SELECT count(*) FROM readings"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_client = client.stdin.take().unwrap();
    let mut from_client = BufReader::new(client.stdout.take().unwrap());
    let mut ask = || -> serde_json::Value {
        to_client.write_all(b"count\n").unwrap();
        to_client.flush().unwrap();
        let mut line = String::new();
        from_client.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    assert_eq!(
        ask(),
        serde_json::json!({ "new": [[432]], "same": [[432]] })
    );
    add_day4(ws.path());
    ok(ws.path(), &["pull", "readings", "--quiet"]);
    // A new statement on the same connection, and the same prepared statement again, see the pull.
    assert_eq!(
        ask(),
        serde_json::json!({ "new": [[576]], "same": [[576]] })
    );
    drop(to_client);
    assert!(client.wait().unwrap().success());
    stop(&mut server);
}

#[test]
fn the_server_refuses_a_non_loopback_address_without_users_or_tokens() {
    let ws = workspace();
    for extra in [&[][..], &["--allow-anonymous"][..]] {
        let out = weir(ws.path())
            .args(["sql", "server", "--port", "0", "--address", "0.0.0.0"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not a loopback address"), "{stderr}");
        assert!(
            stderr.contains("--users-file") || stderr.contains("users or bearer tokens"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing listened");
    }
}

#[test]
fn unreadable_or_malformed_auth_and_tls_files_are_named() {
    let ws = workspace();
    let users = ws.path().join("users.txt");
    std::fs::write(&users, "alice\n").unwrap();
    let tokens = ws.path().join("tokens.txt");
    std::fs::write(&tokens, "ci short\n").unwrap();
    for (args, says) in [
        (
            vec!["--users-file", "missing.txt"],
            "missing.txt".to_owned(),
        ),
        (
            vec!["--users-file", users.to_str().unwrap()],
            format!("{}:1: expected `name:password`", users.display()),
        ),
        (
            vec!["--tokens-file", tokens.to_str().unwrap()],
            "at least 16".to_owned(),
        ),
        (
            vec![
                "--tls-cert",
                users.to_str().unwrap(),
                "--tls-key",
                users.to_str().unwrap(),
            ],
            "is not PEM".to_owned(),
        ),
    ] {
        let out = weir(ws.path())
            .args(["sql", "server", "--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&says), "{args:?}: {stderr}");
    }
    // A certificate without its key is a usage error.
    let out = weir(ws.path())
        .args(["sql", "server", "--tls-cert", "c.pem"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_server_with_a_token_file_prints_a_plain_url_and_stops_on_sigterm() {
    let ws = workspace();
    ok(ws.path(), &["pull", "stations", "--quiet"]);
    let tokens = ws.path().join("tokens.txt");
    std::fs::write(&tokens, "# CI\nci 0123456789abcdef0123\n").unwrap();
    let (url, mut server) = start_server(
        ws.path(),
        &[
            "--tokens-file",
            tokens.to_str().unwrap(),
            "--address",
            "127.0.0.1",
        ],
    );
    assert!(url.starts_with("grpc://127.0.0.1:"), "{url}");
    stop(&mut server);
}
