//! A root never ingests what it has not read whole and unchanged: files still being written wait for a later
//! pull, a file that changes while it is read is refused with nothing committed, and files the glob holds
//! that name order has passed (late files, files changed after they were ingested) are reported, never
//! ingested or ignored silently.
use crate::common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::*;

/// A workspace holding one Append root `t` that ingests `data/t/*.csv` with the event time `at`.
fn root() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    std::fs::create_dir_all(ws.path().join("data/t")).unwrap();
    std::fs::write(
        ws.path().join("datasets/t.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: t
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: { kind: FilesGlob, path: data/t/*.csv }
      read: { kind: Csv, header: true, schema: [\"at TIMESTAMP\", \"id BIGINT\", \"name STRING\"] }
      merge: { kind: Append }
    - kind: SetVocab
      eventTimeColumn: at
",
    )
    .unwrap();
    ws
}

fn file(ws: &Path, name: &str) -> PathBuf {
    ws.join("data/t").join(name)
}

/// CSV lines for ids `from..to`, without a header.
fn lines(from: u64, to: u64) -> String {
    (from..to)
        .map(|i| format!("2024-01-01T00:00:00Z,{i},name-{i}\n"))
        .collect()
}

const HEADER: &str = "at,id,name\n";

/// Head and records of `t`.
fn t(ws: &Path) -> (serde_json::Value, u64) {
    head_and_records(ws, "t")
}

/// The ids `t` holds, in order.
fn ids(ws: &Path) -> Vec<i64> {
    let out = ok(ws, &["--format", "json", "tail", "t", "-n", "1000000"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut ids: Vec<i64> = json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// `weir --format json pull` expecting success, as JSON: the summary of `t`.
fn pull_json(ws: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--format", "json", "pull", "t"];
    args.extend_from_slice(extra);
    let out: serde_json::Value = serde_json::from_str(&ok(ws, &args)).unwrap();
    out["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dataset"] == "t")
        .unwrap()
        .clone()
}

/// Spawns `weir pull t` stopped at the fault point `step` (until the file `go` exists), and returns once it
/// waits there, with a thread collecting the rest of its stderr.
fn paused_pull(
    ws: &Path,
    step: &str,
    go: &Path,
) -> (std::process::Child, std::thread::JoinHandle<String>) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(ws)
        .args(["pull", "t", "--quiet"])
        .env("WEIR_SETTLE_SECS", "0")
        .env("WEIR_FAULT_AT", format!("{step}:t"))
        .env("WEIR_FAULT_PAUSE", go)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "weir ended before it paused at {step}: {seen}"
        );
        seen.push_str(&line);
        if line.contains("paused at") {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut rest = seen;
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap_or(0) > 0 {
            rest.push_str(&line);
            line.clear();
        }
        rest
    });
    (child, rest)
}

#[test]
fn a_csv_written_in_two_halves_with_a_pull_between_is_ingested_whole_by_a_later_pull() {
    let ws = root();
    let path = file(ws.path(), "a.csv");
    std::fs::write(&path, format!("{HEADER}{}", lines(0, 500))).unwrap();
    // The writer is not done: within the settle time the file is left alone, with a message.
    let out = ok(ws.path(), &["pull", "t", "--quiet", "--settle-secs", "60"]);
    assert!(
        out.contains("waiting: data/t/a.csv changed")
            && out.contains("within the settle time of 60 s"),
        "{out}"
    );
    let summary = pull_json(ws.path(), &["--settle-secs", "60"]);
    assert_eq!(summary["sourceNotices"][0]["kind"], "unsettled");
    assert_eq!(summary["sourceNotices"][0]["file"], "data/t/a.csv");
    assert!(
        summary["sourceNotices"][0]["message"]
            .as_str()
            .unwrap()
            .contains("left for a later pull")
    );
    assert_eq!(t(ws.path()).1, 0, "nothing of the half-written file");
    // The settle time of weir.yaml applies when no flag or environment names one.
    std::fs::write(ws.path().join("weir.yaml"), "source_settle_secs: 60\n").unwrap();
    let out = weir(ws.path())
        .env_remove("WEIR_SETTLE_SECS")
        .args(["pull", "t", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("within the settle time of 60 s"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(t(ws.path()).1, 0);
    // The second half; once the file has settled, a pull takes all of it.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(lines(500, 1000).as_bytes())
        .unwrap();
    ok(ws.path(), &["pull", "t", "--quiet"]);
    assert_eq!(ids(ws.path()), (0..1000).collect::<Vec<_>>());
    let summary = pull_json(ws.path(), &[]);
    assert_eq!(summary["sourceNotices"], serde_json::json!([]));
}

#[test]
fn a_file_truncated_while_it_is_read_is_refused_and_nothing_is_committed() {
    let ws = root();
    let path = file(ws.path(), "a.csv");
    let whole = format!("{HEADER}{}", lines(0, 100_000));
    std::fs::write(&path, &whole).unwrap();
    let go = ws.path().join("go");
    // Paused after the first batch was read and checked; the rest is still to be read.
    let (mut child, stderr) = paused_pull(ws.path(), "during-read", &go);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    // In the middle of a line.
    f.set_len(whole.len() as u64 / 2 + 7).unwrap();
    drop(f);
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    let err = stderr.join().unwrap();
    assert_eq!(status.code(), Some(10), "{err}");
    assert!(
        err.contains("data/t/a.csv changed while it was read (its size went from"),
        "{err}"
    );
    assert!(err.contains("nothing of it was ingested"), "{err}");
    assert_eq!(
        t(ws.path()),
        (serde_json::Value::Null, 0),
        "nothing committed"
    );
    // The writer puts the whole file back: the next pull reads all of it, once.
    std::fs::write(&path, &whole).unwrap();
    ok(ws.path(), &["pull", "t", "--quiet"]);
    assert_eq!(ids(ws.path()), (0..100_000).collect::<Vec<_>>());
}

#[test]
fn a_file_rewritten_after_it_was_read_is_refused_and_its_new_content_ingested_next() {
    let ws = root();
    let path = file(ws.path(), "a.csv");
    std::fs::write(&path, format!("{HEADER}{}", lines(0, 10))).unwrap();
    let go = ws.path().join("go");
    // Paused with the whole file read and merged, before its slice is stored.
    let (mut child, stderr) = paused_pull(ws.path(), "after-read", &go);
    // The same size, other records.
    std::fs::write(&path, format!("{HEADER}{}", lines(10, 20))).unwrap();
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    let err = stderr.join().unwrap();
    assert_eq!(status.code(), Some(10), "{err}");
    assert!(
        err.contains("data/t/a.csv changed while it was read"),
        "{err}"
    );
    assert_eq!(t(ws.path()).1, 0, "nothing committed");
    ok(ws.path(), &["pull", "t", "--quiet"]);
    assert_eq!(ids(ws.path()), (10..20).collect::<Vec<_>>());
    // The chain records the file as it was read: its size and the hash of its content.
    let content = std::fs::read(&path).unwrap();
    let provenance = ok(ws.path(), &["provenance", "t", "--offset", "0"]);
    assert!(
        provenance.contains(&format!(
            "as read: {} bytes, modified {}",
            content.len(),
            weir_ingest::source_file::rfc3339(
                std::fs::metadata(&path).unwrap().modified().unwrap()
            )
        )) && provenance.contains(&weir_odf::Multihash::sha3_256(&content).to_string()),
        "{provenance}"
    );
}

#[test]
fn a_late_file_sorting_before_the_last_ingested_one_is_reported_until_it_is_renamed() {
    let ws = root();
    std::fs::write(file(ws.path(), "b.csv"), format!("{HEADER}{}", lines(0, 3))).unwrap();
    ok(ws.path(), &["pull", "t", "--quiet"]);
    let before = t(ws.path());
    std::fs::write(file(ws.path(), "a.csv"), format!("{HEADER}{}", lines(3, 6))).unwrap();
    let out = ok(ws.path(), &["pull", "t", "--quiet"]);
    assert!(
        out.contains(
            "not ingested (late): data/t/a.csv sorts before data/t/b.csv, the last file ingested"
        ) && out.contains("rename it to sort after data/t/b.csv"),
        "{out}"
    );
    let summary = pull_json(ws.path(), &[]);
    assert_eq!(summary["state"], "upToDate");
    let notice = &summary["sourceNotices"][0];
    assert_eq!(notice["kind"], "late");
    assert_eq!(notice["file"], "data/t/a.csv");
    assert_eq!(notice["last"], "data/t/b.csv");
    assert_eq!(t(ws.path()), before, "nothing ingested");
    // The documented way: a name that sorts after the last file ingested.
    std::fs::rename(file(ws.path(), "a.csv"), file(ws.path(), "c.csv")).unwrap();
    let summary = pull_json(ws.path(), &[]);
    assert_eq!(summary["recordsAdded"], 3);
    assert_eq!(summary["sourceNotices"], serde_json::json!([]));
    assert_eq!(ids(ws.path()), (0..6).collect::<Vec<_>>());
}

#[test]
fn rows_appended_to_an_ingested_file_are_reported_and_taken_in_from_a_new_file() {
    let ws = root();
    let path = file(ws.path(), "a.csv");
    let first = format!("{HEADER}{}", lines(0, 3));
    std::fs::write(&path, &first).unwrap();
    ok(ws.path(), &["pull", "t", "--quiet"]);
    let before = t(ws.path());
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(lines(3, 5).as_bytes())
        .unwrap();
    let out = ok(ws.path(), &["pull", "t", "--quiet"]);
    assert!(
        out.contains("not ingested (changed): data/t/a.csv changed after it was ingested (it had")
            && out.contains("move them to a new file that sorts after data/t/a.csv"),
        "{out}"
    );
    let summary = pull_json(ws.path(), &[]);
    assert_eq!(summary["sourceNotices"][0]["kind"], "changedAfterIngest");
    assert_eq!(summary["sourceNotices"][0]["file"], "data/t/a.csv");
    assert_eq!(t(ws.path()), before, "nothing ingested");
    // The documented way: the new rows in a new file, the ingested one as it was.
    std::fs::write(&path, &first).unwrap();
    std::fs::write(file(ws.path(), "b.csv"), format!("{HEADER}{}", lines(3, 5))).unwrap();
    let summary = pull_json(ws.path(), &[]);
    assert_eq!(summary["recordsAdded"], 2);
    assert_eq!(summary["sourceNotices"], serde_json::json!([]));
    assert_eq!(ids(ws.path()), (0..5).collect::<Vec<_>>());
}

#[test]
fn a_file_without_the_declared_event_time_column_is_bad_data() {
    let ws = root();
    std::fs::write(
        ws.path().join("datasets/t.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: t
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: { kind: FilesGlob, path: data/t/*.csv }
      read: { kind: Csv, header: true }
      merge: { kind: Append }
    - kind: SetVocab
      eventTimeColumn: observed_at
",
    )
    .unwrap();
    std::fs::write(file(ws.path(), "a.csv"), "id,name\n1,x\n").unwrap();
    let out = weir(ws.path())
        .args(["pull", "t", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(10), "{err}");
    assert!(
        err.contains("data/t/a.csv: the event time column \"observed_at\" is not in the data"),
        "{err}"
    );
    assert_eq!(t(ws.path()).1, 0);
}
