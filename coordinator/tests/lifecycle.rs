//! The dataset lifecycle a data engineer goes through after the first pull, on the embedded engine: a query
//! changed (validated, migrated, refused, recomputed), a dataset renamed, reset and deleted, the lineage of
//! one dataset, and `verify --all`.
use crate::common;

use std::path::Path;

use common::*;

/// Runs weir expecting failure; returns (exit code, stderr).
fn fails(dir: &Path, args: &[&str]) -> (i32, String) {
    let out = weir(dir).args(args).output().unwrap();
    assert!(
        !out.status.success(),
        "weir {args:?} succeeded:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn edit(dir: &Path, dataset: &str, from: &str, to: &str) {
    let file = dir.join(format!("datasets/{dataset}.yaml"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(from), "{dataset}: `{from}` not in\n{text}");
    std::fs::write(&file, text.replace(from, to)).unwrap();
}

/// The line of `needle` in a dataset's manifest, 1-based.
fn line_of(dir: &Path, dataset: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(dir.join(format!("datasets/{dataset}.yaml"))).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

/// A day of readings: `day` (e.g. `2024-06-04`) with the third day's records moved to it.
fn add_day(dir: &Path, day: &str) {
    let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        dir.join(format!("data/readings/{day}.csv")),
        day3.replace("2024-06-03", day),
    )
    .unwrap();
}

fn records(dir: &Path, dataset: &str) -> u64 {
    head_and_records(dir, dataset).1
}

fn max_temperatures(dir: &Path, n: usize) -> Vec<f64> {
    let json: serde_json::Value = serde_json::from_str(&ok(
        dir,
        &[
            "--format",
            "json",
            "tail",
            "readings.daily",
            "-n",
            &n.to_string(),
        ],
    ))
    .unwrap();
    json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["max_temperature_c"].as_f64().unwrap())
        .collect()
}

#[test]
fn an_invalid_query_is_refused_at_its_line_and_nothing_is_recorded() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let before = list(ws.path());
    edit(
        ws.path(),
        "readings.clean",
        "WHERE temperature_c IS NOT NULL",
        "WHERE temp_celsius IS NOT NULL",
    );
    let line = line_of(ws.path(), "readings.clean", "query: |");
    let (code, stderr) = fails(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("temp_celsius"), "{stderr}");
    assert!(
        stderr.contains(&format!("readings.clean.yaml:{line}:")),
        "the query's line {line}: {stderr}"
    );
    assert_eq!(list(ws.path()), before, "nothing recorded");
    let log = ok(ws.path(), &["log", "readings.clean"]);
    assert!(!log.contains("temp_celsius"), "{log}");

    // `weir validate` finds it too, at the same place.
    let (code, stderr) = fails(ws.path(), &["validate"]);
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains(&format!("readings.clean.yaml:{line}:")),
        "{stderr}"
    );
}

#[test]
fn an_invalid_first_query_records_no_transform() {
    let ws = workspace();
    edit(
        ws.path(),
        "readings.clean",
        "FROM readings",
        "FROM readings JOIN nowhere USING (city)",
    );
    let (code, stderr) = fails(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("nowhere"), "{stderr}");
    let log = ok(ws.path(), &["log", "readings.clean"]);
    assert!(!log.contains("SetTransform"), "{log}");
    assert_eq!(records(ws.path(), "readings"), 432, "the root was pulled");
}

#[test]
fn changing_a_windowed_query_finalises_the_open_windows_and_continues_with_the_new_one() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(records(ws.path(), "readings.daily"), 12, "day 3 is open");

    edit(
        ws.path(),
        "readings.daily",
        "max(temperature_c) AS max_temperature_c",
        "max(temperature_c + 100.0) AS max_temperature_c",
    );
    let out = ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert!(out.contains("readings.daily"), "{out}");
    // The open day was finalised by the query that had it open: six more records, old values.
    assert_eq!(records(ws.path(), "readings.daily"), 18);
    assert!(max_temperatures(ws.path(), 18).iter().all(|t| *t < 100.0));

    let log = ok(ws.path(), &["log", "readings.daily"]);
    assert!(
        log.contains("max(temperature_c + 100.0)"),
        "the SQL is shown: {log}"
    );
    ok(ws.path(), &["validate"]);

    // The new query goes on from there: day 4 closes when day 5 arrives, computed by the new query.
    add_day(ws.path(), "2024-06-04");
    add_day(ws.path(), "2024-06-05");
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(records(ws.path(), "readings.daily"), 24);
    let last = max_temperatures(ws.path(), 6);
    assert!(last.iter().all(|t| *t > 100.0), "{last:?}");
    assert!(records(ws.path(), "readings.hot-days") > 0);
}

#[test]
fn a_query_that_changes_the_output_columns_is_refused_until_recomputed() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let before = list(ws.path());
    edit(
        ws.path(),
        "readings.hot-days",
        "SELECT event_time, city, max_temperature_c",
        "SELECT event_time, city, max_temperature_c, min_temperature_c",
    );
    let (code, stderr) = fails(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(code, 11, "{stderr}");
    assert!(stderr.contains("output columns change"), "{stderr}");
    assert!(stderr.contains("--recompute"), "{stderr}");
    assert_eq!(list(ws.path()), before, "nothing recorded");

    let old_records = records(ws.path(), "readings.hot-days");
    ok(ws.path(), &["pull", "--all", "--quiet", "--recompute"]);
    assert_eq!(records(ws.path(), "readings.hot-days"), old_records);
    let json: serde_json::Value = serde_json::from_str(&ok(
        ws.path(),
        &["--format", "json", "tail", "readings.hot-days", "-n", "1"],
    ))
    .unwrap();
    assert!(
        json["records"][0]["min_temperature_c"].is_number(),
        "{json}"
    );

    // A dataset others were computed from is not recomputed behind their back.
    edit(
        ws.path(),
        "readings.clean",
        "humidity_pct, wind_kmh",
        "humidity_pct",
    );
    let (code, stderr) = fails(ws.path(), &["pull", "--all", "--quiet", "--recompute"]);
    assert_eq!(code, 11, "{stderr}");
    assert!(stderr.contains("readings.daily"), "{stderr}");
    assert!(stderr.contains("--recursive"), "{stderr}");
}

#[test]
fn a_renamed_root_keeps_its_id_and_its_derivatives_go_on_where_they_were() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let (head, n) = head_and_records(ws.path(), "readings");
    let clean = records(ws.path(), "readings.clean");

    let out = ok(ws.path(), &["rename", "readings", "observations"]);
    assert!(out.contains("readings.clean"), "{out}");
    assert!(!ws.path().join("datasets/readings.yaml").exists());
    let manifest = std::fs::read_to_string(ws.path().join("datasets/readings.clean.yaml")).unwrap();
    assert!(manifest.contains("datasetRef: observations"), "{manifest}");
    assert!(manifest.contains("alias: \"readings\""), "{manifest}");
    assert!(
        manifest.contains("# Derivative: drop missing readings"),
        "comments kept"
    );
    assert_eq!(head_and_records(ws.path(), "observations"), (head, n));

    // Nothing to do after a rename, and a new day adds only its own records downstream.
    let before = list(ws.path());
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(list(ws.path()), before);
    add_day(ws.path(), "2024-06-04");
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(records(ws.path(), "observations"), n + 144);
    let day3 = std::fs::read_to_string(ws.path().join("data/readings/2024-06-03.csv")).unwrap();
    let missing = day3
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(3) == Some(""))
        .count() as u64;
    assert_eq!(
        records(ws.path(), "readings.clean"),
        clean + 144 - missing,
        "only the new day's records, none reprocessed"
    );
    ok(ws.path(), &["verify", "--all"]);

    let (code, stderr) = fails(ws.path(), &["rename", "observations", "readings.clean"]);
    assert_eq!(code, 11, "{stderr}");
    let (code, _) = fails(ws.path(), &["rename", "observations", "-bad"]);
    assert!(code == 11 || code == 2);
}

#[test]
fn reset_is_refused_while_others_depend_on_the_blocks_and_recursive_resets_them_too() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let before = list(ws.path());
    let (code, stderr) = fails(ws.path(), &["reset", "readings.clean"]);
    assert_eq!(code, 11, "{stderr}");
    assert!(stderr.contains("readings.daily"), "{stderr}");
    assert_eq!(list(ws.path()), before, "nothing changed");

    let out = ok(ws.path(), &["reset", "readings.clean", "--recursive"]);
    assert!(out.contains("readings.hot-days"), "{out}");
    assert_eq!(records(ws.path(), "readings.clean"), 0);
    assert_eq!(records(ws.path(), "readings.daily"), 0);
    assert_eq!(
        records(ws.path(), "readings"),
        432,
        "inputs are not touched"
    );

    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(records(ws.path(), "readings.clean"), 432 - 7);
    assert_eq!(records(ws.path(), "readings.daily"), 12);
    ok(ws.path(), &["verify", "--all"]);

    // To a given block: the root back to its first file.
    let log: serde_json::Value =
        serde_json::from_str(&ok(ws.path(), &["--format", "json", "log", "stations"])).unwrap();
    let blocks = log["blocks"].as_array().unwrap();
    let first_data = blocks
        .iter()
        .rev()
        .find(|b| b["block"]["event"]["kind"] == "AddData")
        .unwrap();
    let seq = first_data["block"]["sequenceNumber"].as_u64().unwrap();
    ok(
        ws.path(),
        &["reset", "stations", "--to", &format!("#{seq}")],
    );
    assert_eq!(records(ws.path(), "stations"), 6);
    ok(ws.path(), &["pull", "stations", "--quiet"]);
    assert_eq!(records(ws.path(), "stations"), 10);
}

#[test]
fn delete_is_refused_while_others_read_the_dataset() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let (code, stderr) = fails(ws.path(), &["delete", "readings.daily", "--yes"]);
    assert_eq!(code, 11, "{stderr}");
    assert!(stderr.contains("readings.hot-days"), "{stderr}");

    let out = ok(
        ws.path(),
        &["delete", "readings.daily", "--recursive", "--yes"],
    );
    assert!(out.contains("readings.hot-days"), "{out}");
    assert!(!ws.path().join("datasets/readings.daily.yaml").exists());
    let names: Vec<String> = list(ws.path())["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["readings", "readings.clean", "stations"]);
    assert!(!ws.path().join(".weir/datasets/readings.daily").exists());
    ok(ws.path(), &["validate"]);
}

#[test]
fn lineage_of_one_dataset_shows_what_it_comes_from_and_feeds() {
    let ws = workspace();
    let out = ok(ws.path(), &["lineage", "readings.daily"]);
    for name in [
        "readings",
        "readings.clean",
        "readings.daily",
        "readings.hot-days",
    ] {
        assert!(out.contains(name), "{name}: {out}");
    }
    assert!(!out.contains("stations"), "{out}");
    let dot = ok(ws.path(), &["--format", "dot", "lineage", "stations"]);
    assert!(dot.contains("\"stations\""), "{dot}");
    assert!(!dot.contains("readings"), "{dot}");
}

#[test]
fn provenance_names_the_exact_input_record_of_a_map_filter_step() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let json: serde_json::Value = serde_json::from_str(&ok(
        ws.path(),
        &[
            "--format",
            "json",
            "provenance",
            "readings.clean",
            "--offset",
            "200",
        ],
    ))
    .unwrap();
    assert_eq!(json["recordLevel"], true, "{json}");
    let inputs = json["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 1, "{json}");
    assert_eq!(inputs[0]["dataset"], "readings");
    let offsets = inputs[0]["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 1, "one record: {json}");
    let (start, end) = (
        offsets[0][0].as_u64().unwrap(),
        offsets[0][1].as_u64().unwrap(),
    );
    assert_eq!(start, end);
    // The filter only drops records: record 200 of the clean stream is at or after record 200 of its input.
    assert!((200..=207).contains(&start), "{json}");

    // A window's record summarises its window: the step's input ranges, said so.
    let text = ok(
        ws.path(),
        &["provenance", "readings.daily", "--offset", "0"],
    );
    assert!(text.contains("window"), "{text}");
    assert!(text.contains("from input `readings.clean`"), "{text}");
}
