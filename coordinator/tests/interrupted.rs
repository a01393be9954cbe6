//! `rename`, `delete` and `reset` killed at every step they take (`WEIR_FAULT_AT=intent-recorded` and
//! `intent-step-N` abort the process there, as a crash would): the next command completes the operation
//! before anything else, the workspace validates, and the next pull neither loses nor duplicates a record.
//! And commands queued behind one of them (`--wait-lock`) read the workspace as it left it.
use crate::common;

use std::path::Path;
use std::process::Stdio;

use common::*;

/// A day of readings: `day` (e.g. `2024-06-04`) with the third day's records moved to it.
fn add_day(dir: &Path, day: &str) {
    let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        dir.join(format!("data/readings/{day}.csv")),
        day3.replace("2024-06-03", day),
    )
    .unwrap();
}

/// Every dataset's name, id and record count, sorted by name.
fn datasets(dir: &Path) -> Vec<(String, String, u64)> {
    let mut out: Vec<(String, String, u64)> = list(dir)["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_owned(),
                d["id"].as_str().unwrap_or_default().to_owned(),
                d["records"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    out.sort();
    out
}

/// Runs `weir` with `WEIR_FAULT_AT=step`; `true` when it was killed there, `false` when the command never
/// reached the step (and completed).
fn killed_at(dir: &Path, step: &str, args: &[&str]) -> bool {
    let out = weir(dir)
        .env("WEIR_FAULT_AT", step)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        assert!(!stderr.contains("aborting"), "{stderr}");
        return false;
    }
    assert!(
        stderr.contains(&format!("aborting at {step}")),
        "weir {args:?} at {step} failed otherwise: {stderr}"
    );
    true
}

/// The steps of an operation, in order, until the first the command does not reach.
fn each_step(mut run: impl FnMut(&str) -> bool) -> usize {
    let mut reached = 0;
    for step in std::iter::once("intent-recorded".to_owned())
        .chain((1..100).map(|n| format!("intent-step-{n}")))
    {
        if !run(&step) {
            break;
        }
        reached += 1;
    }
    reached
}

#[test]
fn a_rename_killed_at_any_step_is_completed_by_the_next_command_and_nothing_is_duplicated() {
    // What an uninterrupted rename and a new day give.
    let reference = workspace();
    ok(reference.path(), &["pull", "--all", "--quiet"]);
    ok(reference.path(), &["rename", "readings", "observations"]);
    add_day(reference.path(), "2024-06-04");
    ok(reference.path(), &["pull", "--all", "--quiet"]);
    let expected: Vec<(String, u64)> = datasets(reference.path())
        .into_iter()
        .map(|(n, _, r)| (n, r))
        .collect();

    let steps = each_step(|step| {
        let ws = workspace();
        ok(ws.path(), &["pull", "--all", "--quiet"]);
        let ids: Vec<(String, String)> = datasets(ws.path())
            .into_iter()
            .map(|(n, id, _)| {
                (
                    if n == "readings" {
                        "observations".to_owned()
                    } else {
                        n
                    },
                    id,
                )
            })
            .collect();
        if !killed_at(ws.path(), step, &["rename", "readings", "observations"]) {
            return false;
        }
        // A reader comes next: it completes the rename first, and says so.
        let out = weir(ws.path())
            .args(["--format", "json", "list"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{step}: {stderr}");
        assert!(
            stderr.contains("completed the interrupted `weir rename readings observations`"),
            "{step}: {stderr}"
        );
        assert!(!ws.path().join("datasets/readings.yaml").exists(), "{step}");
        assert!(
            ws.path().join("datasets/observations.yaml").exists(),
            "{step}"
        );
        assert!(
            !ws.path().join(".weir/datasets/readings").exists(),
            "{step}"
        );
        // Every dataset keeps its id.
        let after: Vec<(String, String)> = datasets(ws.path())
            .into_iter()
            .map(|(n, id, _)| (n, id))
            .collect();
        let mut ids = ids;
        ids.sort();
        assert_eq!(after, ids, "{step}: ids");
        ok(ws.path(), &["validate"]);
        add_day(ws.path(), "2024-06-04");
        ok(ws.path(), &["pull", "--all", "--quiet"]);
        let got: Vec<(String, u64)> = datasets(ws.path())
            .into_iter()
            .map(|(n, _, r)| (n, r))
            .collect();
        assert_eq!(got, expected, "{step}: records lost or duplicated");
        ok(ws.path(), &["verify", "--all"]);
        true
    });
    // The intent, the storage folder, its own manifest, the three manifests that read it (clean reads
    // readings; daily and hot-days do not), the old manifest file.
    assert!(steps >= 4, "only {steps} steps were killed");
}

#[test]
fn a_delete_killed_at_any_step_is_completed_by_the_next_writer() {
    let steps = each_step(|step| {
        let ws = workspace();
        ok(ws.path(), &["pull", "--all", "--quiet"]);
        let before = datasets(ws.path());
        if !killed_at(
            ws.path(),
            step,
            &["delete", "readings.daily", "--recursive", "--yes"],
        ) {
            return false;
        }
        // A writer comes next: it completes the delete under its lock before it pulls.
        let out = weir(ws.path())
            .args(["pull", "--all", "--quiet"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{step}: {stderr}");
        assert!(
            stderr.contains("completed the interrupted `weir delete`"),
            "{step}: {stderr}"
        );
        for gone in ["readings.daily", "readings.hot-days"] {
            assert!(
                !ws.path().join(format!("datasets/{gone}.yaml")).exists(),
                "{step}"
            );
            assert!(
                !ws.path().join(format!(".weir/datasets/{gone}")).exists(),
                "{step}"
            );
        }
        let kept: Vec<_> = before
            .into_iter()
            .filter(|(n, _, _)| n != "readings.daily" && n != "readings.hot-days")
            .collect();
        assert_eq!(
            datasets(ws.path()),
            kept,
            "{step}: the other datasets are untouched"
        );
        ok(ws.path(), &["validate"]);
        true
    });
    // The intent, then a manifest and a folder per dataset.
    assert!(steps >= 5, "only {steps} steps were killed");
}

#[test]
fn a_reset_killed_at_any_step_is_completed_by_the_next_command() {
    let steps = each_step(|step| {
        let ws = workspace();
        ok(ws.path(), &["pull", "--all", "--quiet"]);
        if !killed_at(ws.path(), step, &["reset", "readings.clean", "--recursive"]) {
            return false;
        }
        let out = weir(ws.path())
            .args(["--format", "json", "list"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{step}");
        for reset in ["readings.clean", "readings.daily", "readings.hot-days"] {
            assert_eq!(head_and_records(ws.path(), reset).1, 0, "{step}: {reset}");
        }
        ok(ws.path(), &["validate"]);
        true
    });
    assert!(steps >= 3, "only {steps} steps were killed");
}

#[test]
fn a_pull_queued_behind_a_rename_reads_the_manifests_the_rename_left() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let before = datasets(ws.path());
    add_day(ws.path(), "2024-06-04");
    let go = ws.path().join("go");
    // The rename holds the lock, paused after it moved the storage folder.
    let mut rename = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(ws.path())
        .args(["rename", "readings", "observations"])
        .env("WEIR_FAULT_AT", "intent-step-1")
        .env("WEIR_FAULT_PAUSE", &go)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(|| ws.path().join(".weir/datasets/observations").exists());
    let (mut pull, stderr) = queued(ws.path(), &["pull", "--all", "--quiet", "--wait-lock"]);
    std::fs::write(&go, b"").unwrap();
    assert!(rename.wait().unwrap().success());
    let status = pull.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "{stderr}");
    // The pull ran under the new name: no dataset `readings` seeded again, one new day everywhere.
    let after = datasets(ws.path());
    assert!(after.iter().all(|(n, _, _)| n != "readings"), "{after:?}");
    let (_, id_before, n_before) = before.iter().find(|(n, _, _)| n == "readings").unwrap();
    let (_, id_after, n_after) = after.iter().find(|(n, _, _)| n == "observations").unwrap();
    assert_eq!(id_after, id_before);
    assert_eq!(*n_after, n_before + 144);
    assert!(!ws.path().join(".weir/datasets/readings").exists());
    ok(ws.path(), &["validate"]);
    ok(ws.path(), &["verify", "--all"]);
}

#[test]
fn a_pull_queued_behind_a_delete_does_not_write_the_deleted_dataset_back() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    add_day(ws.path(), "2024-06-04");
    let go = ws.path().join("go");
    let mut delete = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(ws.path())
        .args(["delete", "readings.hot-days", "--yes"])
        .env("WEIR_FAULT_AT", "intent-recorded")
        .env("WEIR_FAULT_PAUSE", &go)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(|| ws.path().join(".weir/weir.intent").exists());
    let (mut pull, stderr) = queued(ws.path(), &["pull", "--all", "--quiet", "--wait-lock"]);
    std::fs::write(&go, b"").unwrap();
    assert!(delete.wait().unwrap().success());
    let status = pull.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "{stderr}");
    assert!(!ws.path().join(".weir/datasets/readings.hot-days").exists());
    assert!(
        datasets(ws.path())
            .iter()
            .all(|(n, _, _)| n != "readings.hot-days")
    );
    ok(ws.path(), &["validate"]);
}

/// Spawns `weir --workspace DIR ARGS` and returns it once it is waiting for the workspace lock (its stderr
/// says so), with the rest of its stderr collected by a thread.
fn queued(dir: &Path, args: &[&str]) -> (std::process::Child, std::thread::JoinHandle<String>) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(dir)
        .args(args)
        .env_remove("WEIR_FAULT_AT")
        .env("WEIR_SETTLE_SECS", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("waiting for the workspace lock") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the queued command waits for the lock");
    (child, reader)
}

/// Waits until `ready` holds (the other process has reached its pause), at most a minute.
fn wait_for(ready: impl Fn() -> bool) {
    for _ in 0..3000 {
        if ready() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the paused command never reached its step");
}
