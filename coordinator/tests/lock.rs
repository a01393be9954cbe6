//! One writer per workspace: commands that write take the workspace lock (`weir.lock` in the storage
//! root), a second writer fails at once with exit 9 or waits with `--wait-lock`, and readers never take it.
//! The test holds the lock itself, as another `weir` process would.
use crate::common;

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

use common::*;

/// Takes the workspace lock the way a `weir` process does and records this process's pid in it.
fn hold_lock(dir: &Path) -> File {
    std::fs::create_dir_all(dir.join(".weir")).unwrap();
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(".weir/weir.lock"))
        .unwrap();
    f.try_lock().unwrap();
    f.set_len(0).unwrap();
    writeln!(f, "{}", std::process::id()).unwrap();
    f
}

#[test]
fn a_second_writer_fails_at_once_with_exit_9_naming_the_holder_and_readers_do_not_wait() {
    let ws = workspace();
    let dir = ws.path();
    ok(dir, &["pull", "--all", "--quiet"]);
    let before = list(dir);
    let lock = hold_lock(dir);

    for args in [
        &["pull", "--all", "--quiet"][..],
        &["engine", "deprecate", "datafusion", "--to", "embedded"][..],
    ] {
        let out = weir(dir).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(9), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "workspace is locked by another weir process (pid {})",
                std::process::id()
            )),
            "{err}"
        );
        assert!(err.contains("weir.lock"), "{err}");
        assert!(err.contains("--wait-lock"), "{err}");
        assert!(
            !err.contains("Some(") && !err.contains(" { "),
            "no Debug text: {err}"
        );
    }
    let out = weir(dir)
        .args(["--format", "json", "pull", "--all"])
        .output()
        .unwrap();
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["exitCode"], 9);

    // Readers do not take the lock; nothing was written.
    assert_eq!(list(dir), before);
    ok(dir, &["tail", "readings.daily"]);
    ok(dir, &["log", "readings"]);
    ok(dir, &["verify", "readings.clean"]);
    drop(lock);
    ok(dir, &["pull", "--all", "--quiet"]);
}

#[test]
fn with_wait_lock_a_second_writer_waits_for_the_first_then_runs() {
    let ws = workspace();
    let dir = ws.path();
    let lock = hold_lock(dir);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(dir)
        .args(["--wait-lock", "pull", "--all", "--quiet"])
        .env("WEIR_SETTLE_SECS", "0")
        .env_remove("WEIR_FAULT_AT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it says it waits (it blocks on the lock, so it cannot finish first).
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "weir ended without waiting"
        );
        if line.contains("waiting for the workspace lock") {
            break;
        }
    }
    assert!(line.contains(&std::process::id().to_string()), "{line}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "it waits while the lock is held"
    );
    drop(lock);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(head_and_records(dir, "readings").1, 432);
}
