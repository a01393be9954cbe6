//! The `weir sql` shell in a pseudo-terminal, as a person uses it: prompts, multi-line statements, meta
//! commands, history recalled with the Up arrow (and kept in a file), Ctrl-C cancelling the statement being
//! typed or running without leaving the shell, and statements that see pulls made while the shell is open.
use crate::common;

use std::path::Path;

use common::*;
use rexpect::session::PtySession;

const UP: &str = "\x1b[A";

/// `weir sql` on a terminal in `ws`, keeping its history in `history`.
fn shell(ws: &Path, history: &Path) -> PtySession {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"));
    command
        .arg("--workspace")
        .arg(ws)
        .arg("sql")
        .env("TERM", "xterm")
        .env("WEIR_SQL_HISTORY", history)
        .env_remove("WEIR_LOG");
    let mut p = rexpect::session::spawn_command(command, Some(60_000)).unwrap();
    p.exp_string("\\q quits").unwrap();
    p.exp_string("weir> ").unwrap();
    p
}

fn quit(mut p: PtySession) {
    p.send_line("\\q").unwrap();
    p.exp_eof().unwrap();
    let status = p.process.wait().unwrap();
    assert!(
        matches!(status, rexpect::process::wait::WaitStatus::Exited(_, 0)),
        "{status:?}"
    );
}

#[test]
fn meta_commands_list_and_describe_tables_and_statements_span_lines() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let history = ws.path().join("history");
    let mut p = shell(ws.path(), &history);

    p.send_line("\\dt").unwrap();
    p.exp_string("readings.clean").unwrap();
    p.exp_string("stations").unwrap();
    p.exp_string("weir> ").unwrap();

    p.send_line("\\d stations").unwrap();
    p.exp_string("station_id").unwrap();
    p.exp_string("elevation_m").unwrap();
    p.exp_string("weir> ").unwrap();

    p.send_line("\\d nope").unwrap();
    p.exp_string("no table `nope`").unwrap();
    p.exp_string("weir> ").unwrap();

    p.send_line("\\x").unwrap();
    p.exp_string("unknown command").unwrap();
    p.exp_string("weir> ").unwrap();

    p.send_line("\\?").unwrap();
    p.exp_string("DESCRIBE").unwrap();
    p.exp_string("weir> ").unwrap();

    // A statement over two lines: the continuation prompt, then its rows.
    p.send_line("SELECT count(*) AS n").unwrap();
    p.exp_string("...> ").unwrap();
    p.send_line("  FROM stations;").unwrap();
    p.exp_string("| 10 ").unwrap();
    p.exp_string("(1 row)").unwrap();
    p.exp_string("weir> ").unwrap();

    // SQL's own catalog statements.
    p.send_line("SHOW TABLES;").unwrap();
    p.exp_string("readings.daily").unwrap();
    p.exp_string("weir> ").unwrap();

    // An error is printed and the shell goes on.
    p.send_line("SELECT nope FROM stations;").unwrap();
    p.exp_string("error:").unwrap();
    p.exp_string("weir> ").unwrap();
    quit(p);
}

#[test]
fn ctrl_c_drops_the_statement_being_typed_and_cancels_a_running_one() {
    let ws = workspace();
    ok(ws.path(), &["pull", "stations", "--quiet"]);
    let history = ws.path().join("history");
    let mut p = shell(ws.path(), &history);

    // Typed but not ended: Ctrl-C drops it, as in psql.
    p.send_line("SELECT broken").unwrap();
    p.exp_string("...> ").unwrap();
    p.send_control('c').unwrap();
    p.exp_string("weir> ").unwrap();
    p.send_line("SELECT 40 + 2 AS answer;").unwrap();
    p.exp_string("| 42 ").unwrap();
    p.exp_string("weir> ").unwrap();

    // Running: a statement that would take minutes is cancelled and the shell stays.
    p.send_line(
        "SELECT count(*) FROM stations a, stations b, stations c, stations d, stations e, \
         stations f, stations g, stations h, stations i, stations j WHERE a.city <> j.city;",
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    p.send_control('c').unwrap();
    p.exp_string("cancelled").unwrap();
    p.exp_string("weir> ").unwrap();
    p.send_line("SELECT 'still here' AS s;").unwrap();
    p.exp_string("still here").unwrap();
    p.exp_string("weir> ").unwrap();
    quit(p);
}

#[test]
fn up_recalls_earlier_statements_also_from_an_earlier_shell() {
    let ws = workspace();
    ok(ws.path(), &["pull", "stations", "--quiet"]);
    let history = ws.path().join("history");
    let mut p = shell(ws.path(), &history);
    p.send_line("SELECT 6 * 7 AS answer;").unwrap();
    p.exp_string("| 42 ").unwrap();
    p.exp_string("weir> ").unwrap();
    // Up, then Enter: the same statement again.
    p.send(UP).unwrap();
    p.send("\r").unwrap();
    p.flush().unwrap();
    p.exp_string("| 42 ").unwrap();
    p.exp_string("weir> ").unwrap();
    quit(p);
    let kept = std::fs::read_to_string(&history).unwrap();
    assert!(kept.contains("SELECT 6 * 7 AS answer;"), "{kept}");

    // Up recalls `\q` first (meta commands are kept too), then the statement.
    let mut p = shell(ws.path(), &history);
    p.send(UP).unwrap();
    p.send(UP).unwrap();
    p.send("\r").unwrap();
    p.flush().unwrap();
    p.exp_string("| 42 ").unwrap();
    p.exp_string("weir> ").unwrap();
    quit(p);
}

#[test]
fn a_statement_sees_a_pull_made_while_the_shell_is_open() {
    let ws = workspace();
    ok(ws.path(), &["pull", "readings", "--quiet"]);
    let history = ws.path().join("history");
    let mut p = shell(ws.path(), &history);
    p.send_line("SELECT count(*) AS n FROM readings;").unwrap();
    p.exp_string("| 432 ").unwrap();
    p.exp_string("weir> ").unwrap();

    let day3 = std::fs::read_to_string(ws.path().join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        ws.path().join("data/readings/2024-06-04.csv"),
        day3.replace("2024-06-03", "2024-06-04"),
    )
    .unwrap();
    ok(ws.path(), &["pull", "readings", "--quiet"]);

    p.send_line("SELECT count(*) AS n FROM readings;").unwrap();
    p.exp_string("| 576 ").unwrap();
    p.exp_string("weir> ").unwrap();
    quit(p);
}
