//! `weir sql` over the example workspace: one-shot statements, the shell on standard input, and the Flight
//! SQL server's start and stop (its protocol is tested with a real ADBC client in `sql/tests`).
#![allow(clippy::unwrap_used)]

mod common;

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
