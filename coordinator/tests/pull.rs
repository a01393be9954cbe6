//! `weir pull` and `weir tail` on the example workspace with the embedded engine.
use crate::common;

use common::*;

#[test]
fn pulling_the_example_ingests_every_file_and_runs_the_chain_of_derivatives() {
    let ws = workspace();
    let out = ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert!(out.contains("readings.hot-days: up to date"), "{out}");

    // 3 daily files of 144 readings (no duplicates) and the cleaned stream without the missing readings.
    assert_eq!(head_and_records(ws.path(), "readings").1, 432);
    let clean = head_and_records(ws.path(), "readings.clean").1;
    assert_eq!(clean, 432 - 7, "seven readings have no temperature");
    // Two closed days of six cities; the third day is still open (the watermark is at its last hour).
    assert_eq!(head_and_records(ws.path(), "readings.daily").1, 12);

    let tail = ok(ws.path(), &["tail", "readings.daily", "-n", "3"]);
    assert!(tail.contains("avg_temperature_c"), "{tail}");
    assert!(tail.contains("2024-06-02"), "{tail}");

    // Station register: 6 appends, then ATH corrected (2 records), ARN retracted, OSL appended.
    assert_eq!(head_and_records(ws.path(), "stations").1, 6 + 4);
    let json: serde_json::Value = serde_json::from_str(&ok(
        ws.path(),
        &["--format", "json", "tail", "stations", "-n", "4"],
    ))
    .unwrap();
    let ops: Vec<i64> = json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["op"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ops,
        [2, 3, 0, 1],
        "correct-from, correct-to, append, retract"
    );
}

#[test]
fn a_second_pull_is_a_no_op_and_a_new_file_only_adds_its_records() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let before = list(ws.path());
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(
        list(ws.path()),
        before,
        "nothing changes when nothing is new"
    );

    // A fourth day arrives: the third day's window closes.
    let day3 = std::fs::read_to_string(ws.path().join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        ws.path().join("data/readings/2024-06-04.csv"),
        day3.replace("2024-06-03", "2024-06-04"),
    )
    .unwrap();
    ok(ws.path(), &["pull", "-r", "readings.daily", "--quiet"]);
    assert_eq!(head_and_records(ws.path(), "readings").1, 576);
    assert_eq!(head_and_records(ws.path(), "readings.daily").1, 18);
    // hot-days was not asked for: it stays where it was.
    assert_eq!(head_and_records(ws.path(), "readings.hot-days"), {
        let d = before["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == "readings.hot-days")
            .unwrap();
        (d["head"].clone(), d["records"].as_u64().unwrap())
    });
}

#[test]
fn log_lineage_validate_and_provenance_describe_the_pulled_workspace() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let log = ok(ws.path(), &["log", "readings.daily"]);
    assert!(log.contains("ExecuteTransform"), "{log}");
    assert!(
        log.contains("engine=datafusion (embedded reference-engine@"),
        "{log}"
    );
    assert!(log.contains("Seed Derivative"), "{log}");

    let dot = ok(ws.path(), &["--format", "dot", "lineage"]);
    assert!(
        dot.contains("\"readings.clean\" -> \"readings.daily\""),
        "{dot}"
    );
    let text = ok(ws.path(), &["lineage"]);
    assert!(text.contains("readings (Root)"), "{text}");

    let v = ok(ws.path(), &["validate"]);
    assert!(v.contains("readings.daily:"), "{v}");

    let p = ok(
        ws.path(),
        &["provenance", "readings.clean", "--offset", "5"],
    );
    // A map/filter step: the exact input record, by DeriveProvenance.
    assert!(
        p.contains("input `readings` (as readings) offsets 5"),
        "{p}"
    );
    let out = weir(ws.path())
        .args(["provenance", "readings.clean", "--offset", "99999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn the_pull_summary_says_what_each_dataset_gained_and_its_old_and_new_head() {
    let ws = workspace();
    let first: serde_json::Value = serde_json::from_str(&ok(
        ws.path(),
        &["--format", "json", "pull", "--all", "--quiet"],
    ))
    .unwrap();
    let entry = |summary: &serde_json::Value, name: &str| {
        summary["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["dataset"] == name)
            .unwrap_or_else(|| panic!("{name} in {summary}"))
            .clone()
    };
    let readings = entry(&first, "readings");
    let (head, records) = head_and_records(ws.path(), "readings");
    assert_eq!(readings["recordsAdded"].as_u64(), Some(records));
    assert_eq!(
        readings["oldHead"],
        serde_json::Value::Null,
        "a new dataset"
    );
    assert_eq!(readings["newHead"], head);
    // Its time by phase: every phase named, together no more than the transactions' wall time.
    let phases = readings["phaseMillis"].as_object().unwrap();
    let names: Vec<&str> = phases.keys().map(String::as_str).collect();
    for p in ["fetch", "ingest", "stage", "engine", "check", "commit"] {
        assert!(names.contains(&p), "{p} in {phases:?}");
    }
    let spent: u64 = phases.values().map(|v| v.as_u64().unwrap()).sum();
    assert!(spent <= readings["millis"].as_u64().unwrap(), "{readings}");

    // A fourth day: the root gains that day's records, from the head it had to a new one.
    let day3 = std::fs::read_to_string(ws.path().join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        ws.path().join("data/readings/2024-06-04.csv"),
        day3.replace("2024-06-03", "2024-06-04"),
    )
    .unwrap();
    let second: serde_json::Value =
        serde_json::from_str(&ok(ws.path(), &["--format", "json", "pull", "readings"])).unwrap();
    let readings = entry(&second, "readings");
    let (new_head, now) = head_and_records(ws.path(), "readings");
    assert_eq!(readings["recordsAdded"].as_u64(), Some(now - records));
    assert_eq!(readings["oldHead"], head);
    assert_eq!(readings["newHead"], new_head);
    assert_ne!(head, new_head);

    // The text summary says the same.
    let text = ok(ws.path(), &["pull", "readings", "--quiet"]);
    assert!(text.contains("readings: up to date"), "{text}");
    assert!(
        !text.contains("record(s) added"),
        "nothing new, nothing added: {text}"
    );
}
