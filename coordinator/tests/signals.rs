//! SIGTERM and SIGINT stop `weir` cleanly: the transaction in flight is abandoned (its dataset keeps its
//! head), its engine stopped and every scratch folder removed; and scratch folders left by a process that
//! was killed outright are removed by the next `weir` to start. Each test points `TMPDIR` at a folder it
//! owns, so it can see every scratch folder `weir` makes.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A workspace with a root `fast` and a root `slow` whose preprocess query (a four-way cross join on the
/// embedded engine) runs for far longer than any test waits.
fn slow_workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let dir = ws.path();
    std::fs::create_dir_all(dir.join("datasets")).unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let csv: String = (0..100)
        .map(|i| format!("2024-06-01T{:02}:{:02}:00Z,{i}\n", i / 60, i % 60))
        .collect();
    std::fs::write(dir.join("data/numbers.csv"), format!("event_time,n\n{csv}")).unwrap();
    let root = |name: &str, preprocess: &str| {
        format!(
            "kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{ kind: FilesGlob, path: data/*.csv }}
      read: {{ kind: Csv, header: true, schema: [\"event_time TIMESTAMP\", \"n BIGINT\"] }}
{preprocess}      merge: {{ kind: Append }}
"
        )
    };
    std::fs::write(dir.join("datasets/fast.yaml"), root("fast", "")).unwrap();
    std::fs::write(
        dir.join("datasets/slow.yaml"),
        root(
            "slow",
            "      preprocess: { kind: Sql, engine: datafusion, query: \"SELECT a.* FROM input a, input b, input c, input d\" }\n",
        ),
    )
    .unwrap();
    ws
}

/// Every entry under `dir`, recursively.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(e.path());
        if e.path().is_dir() {
            out.extend(entries(&e.path()));
        }
    }
    out
}

/// Waits until `weir` made the scratch folder of a transaction of `slow` (its engine is then running).
fn wait_for_transaction_scratch(tmp: &Path, child: &mut Child) {
    let limit = Instant::now() + Duration::from_secs(120);
    loop {
        let found = entries(tmp).iter().any(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("weir-slow-"))
        });
        if found {
            return;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "weir ended before its transaction started"
        );
        assert!(Instant::now() < limit, "no transaction started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_and_sigint_abandon_the_transaction_stop_the_engine_and_leave_no_scratch_folder() {
    let ws = slow_workspace();
    let dir = ws.path();
    ok(dir, &["pull", "fast", "--quiet"]);
    let fast = head_and_records(dir, "fast");
    for (signal, code, name) in [
        (libc::SIGTERM, 143, "SIGTERM"),
        (libc::SIGINT, 130, "SIGINT"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
            .arg("--workspace")
            .arg(dir)
            .args(["pull", "--all", "--quiet"])
            .env("WEIR_SETTLE_SECS", "0")
            .env("TMPDIR", tmp.path())
            .env_remove("WEIR_FAULT_AT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_transaction_scratch(tmp.path(), &mut child);
        // SAFETY: sending a signal to the child we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {stderr}");
        assert!(stderr.contains(&format!("stopped by {name}")), "{stderr}");
        assert_eq!(
            entries(tmp.path()),
            Vec::<PathBuf>::new(),
            "{name}: scratch left behind"
        );
        // The transaction was abandoned: no head for `slow`, `fast` untouched, the lock released.
        assert_eq!(head_and_records(dir, "slow"), (serde_json::Value::Null, 0));
        assert_eq!(head_and_records(dir, "fast"), fast);
        ok(dir, &["validate"]);
    }
}

#[test]
fn under_format_json_a_signal_is_one_json_document_on_stdout() {
    let ws = slow_workspace();
    let dir = ws.path();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(dir)
        .args(["--format", "json", "pull", "--all"])
        .env("TMPDIR", tmp.path())
        // The source file was written a moment ago: read it at once, not after the settle time.
        .env("WEIR_SETTLE_SECS", "0")
        .env_remove("WEIR_FAULT_AT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_transaction_scratch(tmp.path(), &mut child);
    // SAFETY: sending a signal to the child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(doc["exitCode"], 143, "{doc}");
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("stopped by SIGTERM"),
        "{doc}"
    );
}

#[test]
fn scratch_folders_of_processes_that_are_gone_are_removed_at_the_next_start() {
    let ws = workspace();
    let tmp = tempfile::tempdir().unwrap();
    // A folder left by a weir killed outright (its pid no longer runs, nobody holds its lock) ...
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = tmp.path().join(format!("weir-proc-{dead}-AbCdEf"));
    std::fs::create_dir_all(stale.join("weir-readings.clean-XyZ")).unwrap();
    std::fs::write(stale.join("weir-readings.clean-XyZ/input.parquet"), b"x").unwrap();
    std::fs::write(stale.join("lock"), b"").unwrap();
    // ... and one of a process that runs (this test) and holds its lock.
    let live = tmp
        .path()
        .join(format!("weir-proc-{}-GhIjKl", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    let lock = std::fs::File::create(live.join("lock")).unwrap();
    lock.try_lock().unwrap();

    let out = weir(ws.path())
        .arg("list")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!stale.exists(), "the stale scratch folder is removed");
    assert!(live.exists(), "a live process's folder is kept");
    assert_eq!(
        entries(tmp.path()).len(),
        2,
        "only the live folder and its lock"
    );
}
