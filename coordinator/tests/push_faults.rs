//! Crash safety of `weir ingest`: the process killed at every step of a push leaves the previous head (until
//! the head moved), a valid chain, and the same command run again ends with the records of one
//! uninterrupted push. A push of exactly the bytes the source's last push sent is such a rerun: it is not
//! ingested twice unless `--again` says so.
use crate::common;

use std::path::Path;

use common::*;

/// Two push sources of player scores (kamu's `leaderboard` shape): `match-log` appends every record pushed,
/// `player-scores` is a Ledger by match and player.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    for (name, merge) in [
        ("match-log", "kind: Append"),
        (
            "player-scores",
            "kind: Ledger\n        primaryKey:\n          - match_id\n          - player_id",
        ),
    ] {
        std::fs::write(
            ws.path().join(format!("datasets/{name}.yaml")),
            format!(
                "kind: DatasetSnapshot
version: 1
content:
  name: {name}
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
        {merge}
    - kind: SetVocab
      eventTimeColumn: match_time
"
            ),
        )
        .unwrap();
    }
    ws
}

const DATASETS: [&str; 2] = ["match-log", "player-scores"];

const SCORES_1: &str = r#"{"match_time": "2000-01-01T00:00:00Z", "match_id": 1, "player_id": "Alice", "score": 100}
{"match_time": "2000-01-01T00:00:00Z", "match_id": 1, "player_id": "Bob", "score": 80}
"#;

const SCORES_2: &str = r#"{"match_time": "2000-01-02T00:00:00Z", "match_id": 2, "player_id": "Alice", "score": 70}
{"match_time": "2000-01-02T00:00:00Z", "match_id": 2, "player_id": "Charlie", "score": 90}
{"match_time": "2000-01-01T00:00:00Z", "match_id": 1, "player_id": "Bob", "score": 80}
"#;

/// How the data reaches `weir ingest`.
#[derive(Debug, Clone, Copy)]
enum Input {
    /// A file named on the command line.
    File,
    /// Standard input (`-`).
    Stdin,
}

/// `weir ingest DATASET` of `data`, with `extra` arguments and environment, and its output.
fn ingest(
    ws: &Path,
    dataset: &str,
    data: &str,
    input: Input,
    extra: &[&str],
    env: &[(&str, String)],
) -> std::process::Output {
    let mut cmd = weir(ws);
    cmd.args(["ingest", dataset]);
    match input {
        Input::File => {
            // The same content at the same path on every call, as a user would rerun the command.
            let file = ws.join(format!("{dataset}.ndjson"));
            std::fs::write(&file, data).unwrap();
            cmd.arg(&file);
        }
        Input::Stdin => {
            cmd.arg("-").write_stdin(data);
        }
    }
    cmd.args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// `weir ingest` expected to succeed; its stdout.
fn ingest_ok(ws: &Path, dataset: &str, data: &str, input: Input, extra: &[&str]) -> String {
    let out = ingest(ws, dataset, data, input, extra, &[]);
    assert!(
        out.status.success(),
        "weir ingest {dataset} {input:?} {extra:?}: {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The records of `dataset` in offset order, without `system_time` (the time of the push).
fn records(ws: &Path, dataset: &str) -> Vec<serde_json::Value> {
    let tail = ok(ws, &["--format", "json", "tail", dataset, "-n", "100"]);
    let json: serde_json::Value = serde_json::from_str(&tail).unwrap();
    json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("system_time");
            r
        })
        .collect()
}

fn head(ws: &Path, dataset: &str) -> serde_json::Value {
    head_and_records(ws, dataset).0
}

#[test]
fn a_push_killed_at_any_step_keeps_the_previous_head_and_the_same_command_again_completes_it() {
    // The reference: both pushes, uninterrupted.
    let reference = workspace();
    let mut expected = std::collections::BTreeMap::new();
    for dataset in DATASETS {
        ingest_ok(reference.path(), dataset, SCORES_1, Input::File, &[]);
        ingest_ok(reference.path(), dataset, SCORES_2, Input::File, &[]);
        expected.insert(dataset, records(reference.path(), dataset));
    }
    assert_eq!(expected["match-log"].len(), 5);
    assert_eq!(expected["player-scores"].len(), 4);

    for step in weir_dataset::fault::STEPS {
        for dataset in DATASETS {
            for input in [Input::File, Input::Stdin] {
                // The killed push is the dataset's first (its metadata and data in one commit) or a later
                // one.
                for first in [true, false] {
                    let case = format!("{step}:{dataset} {input:?} first={first}");
                    let ws = workspace();
                    if !first {
                        ingest_ok(ws.path(), dataset, SCORES_1, input, &[]);
                    }
                    let data = if first { SCORES_1 } else { SCORES_2 };
                    let (head_before, records_before) = head_and_records(ws.path(), dataset);

                    let fault = [("WEIR_FAULT_AT", format!("{step}:{dataset}"))];
                    let crashed = ingest(ws.path(), dataset, data, input, &["--quiet"], &fault);
                    let stderr = String::from_utf8_lossy(&crashed.stderr);
                    assert!(!crashed.status.success(), "{case}: should have aborted");
                    assert!(stderr.contains("aborting at"), "{case}: {stderr}");
                    let (head_after, records_after) = head_and_records(ws.path(), dataset);
                    if *step == "after-head" {
                        assert_ne!(head_after, head_before, "{case}: the head moved");
                    } else {
                        assert_eq!(head_after, head_before, "{case}: the head must not move");
                        assert_eq!(records_after, records_before, "{case}");
                    }
                    ok(ws.path(), &["validate"]);

                    // The user runs the same command again.
                    let rerun = ingest_ok(ws.path(), dataset, data, input, &[]);
                    if *step == "after-head" {
                        assert!(
                            rerun.contains("nothing ingested")
                                && rerun.contains("already in block"),
                            "{case}: {rerun}"
                        );
                    } else {
                        assert!(rerun.contains("record(s) added"), "{case}: {rerun}");
                    }
                    if first {
                        ingest_ok(ws.path(), dataset, SCORES_2, input, &[]);
                    }
                    ok(ws.path(), &["validate"]);
                    assert_eq!(
                        records(ws.path(), dataset),
                        expected[dataset],
                        "{case}: the records differ from an uninterrupted push's"
                    );
                }
            }
        }
    }
}

#[test]
fn the_rerun_of_a_push_killed_after_its_commit_names_the_block_that_holds_it() {
    let ws = workspace();
    ingest_ok(ws.path(), "match-log", SCORES_1, Input::File, &[]);
    let fault = [("WEIR_FAULT_AT", "after-head:match-log".to_string())];
    let crashed = ingest(
        ws.path(),
        "match-log",
        SCORES_2,
        Input::File,
        &["--quiet"],
        &fault,
    );
    assert!(!crashed.status.success());
    let (committed, records) = head_and_records(ws.path(), "match-log");
    assert_eq!(records, 5);
    let committed = committed.as_str().unwrap().to_string();

    // Text: which block, and how to ingest them all the same.
    let out = ingest_ok(ws.path(), "match-log", SCORES_2, Input::File, &[]);
    assert!(
        out.contains("match-log: nothing ingested")
            && out.contains("already in block #")
            && out.contains(&committed)
            && out.contains("--again"),
        "{out}"
    );
    // JSON: the same, structured.
    let out = ingest_ok(
        ws.path(),
        "match-log",
        SCORES_2,
        Input::File,
        &["--format", "json"],
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["dataset"], "match-log");
    assert_eq!(json["sourceName"], "default");
    assert_eq!(json["recordsAdded"], 0);
    assert_eq!(json["oldHead"], committed.as_str());
    assert_eq!(json["newHead"], committed.as_str());
    let already = &json["alreadyIngested"];
    assert_eq!(already["block"], committed.as_str());
    assert_eq!(already["records"], 3);
    assert_eq!(already["size"], SCORES_2.len());
    assert_eq!(
        already["sha3-256"],
        weir_odf::Multihash::sha3_256(SCORES_2.as_bytes()).to_string()
    );
    assert!(already["sequenceNumber"].as_u64().unwrap() > 0, "{json}");
    assert!(already["systemTime"].as_str().is_some(), "{json}");
    // One copy, and nothing committed by the reruns.
    assert_eq!(
        head_and_records(ws.path(), "match-log"),
        (serde_json::Value::from(committed), 5)
    );
    ok(ws.path(), &["validate"]);
}

#[test]
fn again_ingests_a_repeated_push_once_more() {
    let ws = workspace();
    ingest_ok(ws.path(), "match-log", SCORES_1, Input::Stdin, &[]);
    let out = ingest_ok(ws.path(), "match-log", SCORES_1, Input::Stdin, &[]);
    assert!(out.contains("nothing ingested"), "{out}");
    assert_eq!(head_and_records(ws.path(), "match-log").1, 2);

    let out = ingest_ok(ws.path(), "match-log", SCORES_1, Input::Stdin, &["--again"]);
    assert!(out.contains("2 record(s) added"), "{out}");
    assert_eq!(head_and_records(ws.path(), "match-log").1, 4);
    // The same records twice, at offsets 0-1 and 2-3.
    let twice: Vec<serde_json::Value> = records(ws.path(), "match-log")
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("offset");
            r
        })
        .collect();
    assert_eq!(twice[..2], twice[2..]);

    // The `--again` push is now the last one: the same bytes again name its block.
    let again_head = head(ws.path(), "match-log");
    let out = ingest_ok(
        ws.path(),
        "match-log",
        SCORES_1,
        Input::Stdin,
        &["--format", "json"],
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["alreadyIngested"]["block"], again_head);
    assert_eq!(head_and_records(ws.path(), "match-log").1, 4);
    ok(ws.path(), &["validate"]);
}

#[test]
fn only_the_same_bytes_as_the_sources_last_push_are_a_repeat() {
    let ws = workspace();
    ingest_ok(ws.path(), "match-log", SCORES_1, Input::File, &[]);
    // Other bytes: ingested.
    let out = ingest_ok(
        ws.path(),
        "match-log",
        SCORES_2,
        Input::File,
        &["--format", "json"],
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["recordsAdded"], 3);
    assert_eq!(json["alreadyIngested"], serde_json::Value::Null);
    assert_eq!(json["newHead"], head(ws.path(), "match-log"));
    // The first file again: not the last push, ingested (only the last push is compared).
    let out = ingest_ok(ws.path(), "match-log", SCORES_1, Input::File, &[]);
    assert!(out.contains("2 record(s) added"), "{out}");
    // The last push's bytes from standard input, or from a file of another name: a repeat.
    let out = ingest_ok(ws.path(), "match-log", SCORES_1, Input::Stdin, &[]);
    assert!(out.contains("nothing ingested"), "{out}");
    let renamed = ws.path().join("renamed.ndjson");
    std::fs::write(&renamed, SCORES_1).unwrap();
    let out = ok(
        ws.path(),
        &["ingest", "match-log", renamed.to_str().unwrap()],
    );
    assert!(out.contains("nothing ingested"), "{out}");
    // One byte more: ingested.
    let out = ingest_ok(
        ws.path(),
        "match-log",
        &format!("{SCORES_1}\n"),
        Input::Stdin,
        &[],
    );
    assert!(out.contains("2 record(s) added"), "{out}");
    // Another dataset's source: its own last push.
    let out = ingest_ok(ws.path(), "player-scores", SCORES_1, Input::Stdin, &[]);
    assert!(out.contains("2 record(s) added"), "{out}");
    assert_eq!(head_and_records(ws.path(), "match-log").1, 9);
    ok(ws.path(), &["validate"]);
}

#[test]
fn a_ledgers_repeated_push_says_the_same_and_commits_nothing() {
    let ws = workspace();
    ingest_ok(ws.path(), "player-scores", SCORES_1, Input::File, &[]);
    let before = head(ws.path(), "player-scores");
    let out = ingest_ok(ws.path(), "player-scores", SCORES_1, Input::File, &[]);
    assert!(
        out.contains("player-scores: nothing ingested") && out.contains(before.as_str().unwrap()),
        "{out}"
    );
    assert_eq!(head(ws.path(), "player-scores"), before);
    // Asked for, the Ledger keeps what it holds: nothing added.
    let out = ingest_ok(
        ws.path(),
        "player-scores",
        SCORES_1,
        Input::File,
        &["--again"],
    );
    assert!(out.contains("0 record(s) added"), "{out}");
    assert_eq!(head_and_records(ws.path(), "player-scores").1, 2);
    ok(ws.path(), &["validate"]);
}

#[test]
fn a_push_source_declared_anew_has_no_last_push() {
    let ws = workspace();
    ingest_ok(ws.path(), "match-log", SCORES_1, Input::File, &[]);
    // The source's merge changes: the next push records it again (DisablePushSource, AddPushSource).
    let manifest = ws.path().join("datasets/match-log.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(
            "kind: Append",
            "kind: Ledger\n        primaryKey:\n          - match_id\n          - player_id",
        ),
    )
    .unwrap();
    // The same bytes go through the new declaration (whose Ledger holds them already).
    let out = ingest_ok(ws.path(), "match-log", SCORES_1, Input::File, &[]);
    assert!(out.contains("0 record(s) added"), "{out}");
    let log = ok(ws.path(), &["log", "match-log"]);
    assert!(log.contains("DisablePushSource default"), "{log}");
    ok(ws.path(), &["validate"]);
}
