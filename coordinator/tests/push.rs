//! Push sources: `AddPushSource` in a manifest and `weir ingest DATASET [FILE|-]`, one transaction per call
//! with the checks, merge strategy and commit of a polled file.
use crate::common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use common::*;

/// kamu's `leaderboard` example's root: player scores pushed as NDJSON, a Ledger by match and player; and a
/// derivative reading it.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    std::fs::write(
        ws.path().join("datasets/player-scores.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: player-scores
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read:
        kind: NdJson
        schema:
          - \"match_time TIMESTAMP\"
          - \"match_id BIGINT\"
          - \"player_id STRING\"
          - \"score BIGINT\"
      merge:
        kind: Ledger
        primaryKey:
          - match_id
          - player_id
    - kind: SetVocab
      eventTimeColumn: match_time
",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("datasets/high-scores.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: high-scores
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{ datasetRef: player-scores }]
      transform:
        kind: Sql
        engine: datafusion
        query: SELECT match_time AS event_time, match_id, player_id, score FROM \"player-scores\" WHERE score >= 100
",
    )
    .unwrap();
    ws
}

const SCORES_1: &str = r#"{"match_time": "2000-01-01T00:00:00Z", "match_id": 1, "player_id": "Alice", "score": 100}
{"match_time": "2000-01-01T00:00:00Z", "match_id": 1, "player_id": "Bob", "score": 80}
"#;

const SCORES_2: &str = r#"{"match_time": "2000-01-02T00:00:00Z", "match_id": 2, "player_id": "Alice", "score": 70}
{"match_time": "2000-01-02T00:00:00Z", "match_id": 2, "player_id": "Charlie", "score": 90}
{"match_time": "2000-01-01T00:00:00Z", "match_id": 1, "player_id": "Bob", "score": 80}
"#;

/// `(match_id, player_id, score)` of every record of `player-scores`, sorted.
fn scores(ws: &Path) -> Vec<(i64, String, i64)> {
    let out = ok(
        ws,
        &["--format", "json", "tail", "player-scores", "-n", "100"],
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut rows: Vec<(i64, String, i64)> = json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["match_id"].as_i64().unwrap(),
                r["player_id"].as_str().unwrap().to_string(),
                r["score"].as_i64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn row(m: i64, p: &str, s: i64) -> (i64, String, i64) {
    (m, p.to_string(), s)
}

#[test]
fn files_pushed_with_weir_ingest_are_merged_by_the_sources_ledger_and_feed_derivatives() {
    let ws = workspace();
    // A pull records the push source; it has nothing to ingest.
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let log = ok(ws.path(), &["log", "player-scores"]);
    assert!(log.contains("AddPushSource"), "{log}");
    std::fs::write(ws.path().join("scores-1.ndjson"), SCORES_1).unwrap();
    let out = weir(ws.path())
        .current_dir(ws.path())
        .args(["ingest", "player-scores", "scores-1.ndjson"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("player-scores: 2 record(s) added"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The second file repeats (1, Bob): the Ledger keeps the first.
    std::fs::write(ws.path().join("scores-2.ndjson"), SCORES_2).unwrap();
    let out = ok(
        ws.path(),
        &[
            "--format",
            "json",
            "ingest",
            "player-scores",
            ws.path().join("scores-2.ndjson").to_str().unwrap(),
        ],
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["recordsAdded"], 2);
    assert_eq!(json["sourceName"], "default");
    assert_eq!(
        scores(ws.path()),
        vec![
            row(1, "Alice", 100),
            row(1, "Bob", 80),
            row(2, "Alice", 70),
            row(2, "Charlie", 90)
        ]
    );
    // Downstream, as from a polled root.
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(head_and_records(ws.path(), "high-scores").1, 1);
    // The chain is valid and its files match it.
    ok(ws.path(), &["validate"]);
    ok(ws.path(), &["verify", "--all"]);
}

#[test]
fn standard_input_and_other_formats_are_read_with_the_sources_schema() {
    let ws = workspace();
    // CSV from standard input, in place of the source's NDJSON.
    let out = weir(ws.path())
        .args(["ingest", "player-scores", "-", "--input-format", "csv"])
        .write_stdin("match_time,match_id,player_id,score\n2000-01-01T00:00:00Z,1,Alice,100\n")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Parquet from a file.
    let batch = RecordBatch::try_from_iter(vec![
        (
            "match_time",
            Arc::new(
                TimestampMillisecondArray::from(vec![Some(946_771_200_000)]).with_timezone("UTC"),
            ) as ArrayRef,
        ),
        ("match_id", Arc::new(Int64Array::from(vec![2]))),
        ("player_id", Arc::new(StringArray::from(vec!["Bob"]))),
        ("score", Arc::new(Int64Array::from(vec![120]))),
    ])
    .unwrap();
    let parquet = ws.path().join("scores.parquet");
    std::fs::write(&parquet, weir_dataset::data::write_parquet(&batch).unwrap()).unwrap();
    ok(
        ws.path(),
        &[
            "ingest",
            "player-scores",
            parquet.to_str().unwrap(),
            "--input-format",
            "parquet",
        ],
    );
    assert_eq!(
        scores(ws.path()),
        vec![row(1, "Alice", 100), row(2, "Bob", 120)]
    );
}

#[test]
fn pushed_bad_data_is_refused_with_its_line_and_nothing_is_committed() {
    let ws = workspace();
    std::fs::write(ws.path().join("ok.ndjson"), SCORES_1).unwrap();
    ok(
        ws.path(),
        &[
            "ingest",
            "player-scores",
            ws.path().join("ok.ndjson").to_str().unwrap(),
        ],
    );
    let before = head_and_records(ws.path(), "player-scores");
    std::fs::write(
        ws.path().join("bad.ndjson"),
        "{\"match_time\": \"2000-01-03T00:00:00Z\", \"match_id\": 3, \"player_id\": \"Dan\", \"score\": \"lots\"}\n",
    )
    .unwrap();
    let out = weir(ws.path())
        .args([
            "ingest",
            "player-scores",
            ws.path().join("bad.ndjson").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(10), "{err}");
    assert!(err.contains("bad.ndjson line 1"), "{err}");
    assert_eq!(head_and_records(ws.path(), "player-scores"), before);
    // A missing file, and a dataset without a push source.
    let out = weir(ws.path())
        .args(["ingest", "player-scores", "/nonexistent/scores.ndjson"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file"));
    let out = weir(ws.path())
        .args(["ingest", "high-scores", "-"])
        .write_stdin("")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("has no push source"), "{err}");
}

#[test]
fn a_push_holds_the_workspace_lock_and_a_file_changed_while_read_is_refused() {
    let ws = workspace();
    let file = ws.path().join("scores.ndjson");
    std::fs::write(&file, SCORES_1).unwrap();
    let go = ws.path().join("go");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("weir"))
        .arg("--workspace")
        .arg(ws.path())
        .args(["ingest", "player-scores"])
        .arg(&file)
        .env("WEIR_FAULT_AT", "after-read:player-scores")
        .env("WEIR_FAULT_PAUSE", &go)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("paused at") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "weir ended early");
    }
    // Another writer is refused while it runs.
    let out = weir(ws.path())
        .args(["ingest", "player-scores", "-"])
        .write_stdin(SCORES_2)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9));
    // The file changes before the push commits.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(SCORES_2.as_bytes())
        .unwrap();
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    let mut rest = String::new();
    while stderr.read_line(&mut rest).unwrap_or(0) > 0 {}
    assert_eq!(status.code(), Some(10), "{rest}");
    assert!(rest.contains("changed while it was read"), "{rest}");
    assert_eq!(head_and_records(ws.path(), "player-scores").1, 0);
}

#[test]
fn a_root_cannot_take_a_polling_source_and_a_push_source() {
    let ws = workspace();
    std::fs::write(
        ws.path().join("datasets/both.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: both
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: { kind: FilesGlob, path: data/*.csv }
      read: { kind: Csv, header: true }
      merge: { kind: Append }
    - kind: AddPushSource
      sourceName: default
      read: { kind: Csv, header: true }
      merge: { kind: Append }
",
    )
    .unwrap();
    let out = weir(ws.path()).args(["list"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("datasets/both.yaml") && err.contains("not both"),
        "{err}"
    );
}

#[test]
fn a_changed_push_source_is_recorded_as_disabled_then_added_again() {
    let ws = workspace();
    std::fs::write(ws.path().join("scores-1.ndjson"), SCORES_1).unwrap();
    ok(
        ws.path(),
        &[
            "ingest",
            "player-scores",
            ws.path().join("scores-1.ndjson").to_str().unwrap(),
        ],
    );
    let manifest = ws.path().join("datasets/player-scores.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(
            "        kind: Ledger\n        primaryKey:\n          - match_id\n          - player_id\n",
            "        kind: Append\n",
        ),
    )
    .unwrap();
    ok(ws.path(), &["pull", "player-scores", "--quiet"]);
    let log = ok(ws.path(), &["log", "player-scores"]);
    let newest: Vec<&str> = log
        .lines()
        .filter(|l| !l.starts_with("block "))
        .take(2)
        .collect();
    assert!(
        newest[0].contains("AddPushSource default read=NdJson merge=Append")
            && newest[1].contains("DisablePushSource default"),
        "{log}"
    );
    // The Append source keeps what the Ledger dropped.
    std::fs::write(ws.path().join("scores-2.ndjson"), SCORES_2).unwrap();
    ok(
        ws.path(),
        &[
            "ingest",
            "player-scores",
            ws.path().join("scores-2.ndjson").to_str().unwrap(),
        ],
    );
    assert_eq!(scores(ws.path()).len(), 5);
    ok(ws.path(), &["validate"]);
}
