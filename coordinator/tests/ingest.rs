//! What ingest refuses: every refusal exits 10, names the file, the line (or row) and the column, and leaves
//! the dataset at its previous head with its previous records.
use crate::common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use common::*;

/// A workspace holding one root dataset `name` that ingests `data/<name>/*.<ext>`.
fn root(
    name: &str,
    ext: &str,
    read: &str,
    merge: &str,
    event_time: Option<&str>,
) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    std::fs::create_dir_all(ws.path().join("data").join(name)).unwrap();
    let vocab = event_time
        .map(|c| format!("    - kind: SetVocab\n      eventTimeColumn: {c}\n"))
        .unwrap_or_default();
    let manifest = format!(
        "kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{ kind: FilesGlob, path: data/{name}/*.{ext} }}
      read: {read}
      merge: {merge}
{vocab}"
    );
    std::fs::write(ws.path().join(format!("datasets/{name}.yaml")), manifest).unwrap();
    ws
}

fn put(ws: &Path, dataset: &str, file: &str, bytes: impl AsRef<[u8]>) {
    std::fs::write(ws.join("data").join(dataset).join(file), bytes).unwrap();
}

/// What `list` and `tail` show of a dataset.
fn state(ws: &Path, dataset: &str) -> (serde_json::Value, String) {
    (
        list(ws),
        ok(ws, &["--format", "json", "tail", dataset, "-n", "100"]),
    )
}

/// Pulls `dataset` expecting ingest to refuse the next file; checks that nothing changed and returns the
/// error text.
fn refused(ws: &Path, dataset: &str) -> String {
    let before = state(ws, dataset);
    let out = weir(ws)
        .args(["pull", dataset, "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(10), "{err}");
    assert!(
        !err.contains("Error {") && !err.contains("Some("),
        "no Debug text: {err}"
    );
    assert_eq!(
        state(ws, dataset),
        before,
        "the dataset kept its head and records"
    );
    err
}

fn parquet(columns: Vec<(&str, ArrayRef)>) -> Vec<u8> {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    weir_dataset::data::write_parquet(&batch).unwrap().to_vec()
}

fn millis(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from(v).with_timezone("UTC"))
}

/// A CSV read with inferred types (kamu's default, without `inferSchema`, reads every column as a string).
const CSV: &str = "{ kind: Csv, header: true, inferSchema: true }";

#[test]
fn an_append_root_refuses_a_file_with_an_extra_column() {
    let ws = root("towns", "csv", CSV, "{ kind: Append }", None);
    put(ws.path(), "towns", "1.csv", "town,population\nA,10\n");
    ok(ws.path(), &["pull", "towns", "--quiet"]);
    put(
        ws.path(),
        "towns",
        "2.csv",
        "town,population,mayor\nB,20,X\n",
    );
    let err = refused(ws.path(), "towns");
    assert!(
        err.contains("2.csv: the columns differ from the dataset's (extra: \"mayor\")"),
        "{err}"
    );
}

#[test]
fn a_ledger_root_refuses_a_file_whose_column_changed_type_or_went_missing() {
    let ws = root(
        "towns",
        "csv",
        CSV,
        "{ kind: Ledger, primaryKey: [town] }",
        None,
    );
    put(
        ws.path(),
        "towns",
        "1.csv",
        "town,population,area\nA,10,1.5\n",
    );
    ok(ws.path(), &["pull", "towns", "--quiet"]);
    put(ws.path(), "towns", "2.csv", "town,population\nB,many\n");
    let err = refused(ws.path(), "towns");
    assert!(
        err.contains(
            "2.csv: the columns differ from the dataset's (missing: \"area\"; changed type: \"population\" BIGINT -> STRING)"
        ),
        "{err}"
    );
}

#[test]
fn a_value_that_is_not_a_bigint_is_refused_with_its_line_and_column() {
    let read = r#"{ kind: Csv, header: true, schema: ["town STRING", "population BIGINT"] }"#;
    let ws = root("population", "csv", read, "{ kind: Append }", None);
    put(ws.path(), "population", "1.csv", "town,population\nA,10\n");
    ok(ws.path(), &["pull", "population", "--quiet"]);
    put(
        ws.path(),
        "population",
        "2.csv",
        "town,population\nB,1\nC,2\nD,3\nE,4\nF,\nG,12x\n",
    );
    let err = refused(ws.path(), "population");
    assert!(
        err.contains(
            "data/population/2.csv line 7, column \"population\": \"12x\" is not a BIGINT"
        ),
        "{err}"
    );
    assert!(err.contains("hint: fix the file"), "{err}");
}

#[test]
fn an_ndjson_value_that_is_not_a_bigint_is_refused_with_its_line() {
    let read = r#"{ kind: NdJson, schema: ["town STRING", "population BIGINT"] }"#;
    let ws = root("population", "json", read, "{ kind: Append }", None);
    put(
        ws.path(),
        "population",
        "1.json",
        "{\"town\": \"A\", \"population\": 10}\n",
    );
    ok(ws.path(), &["pull", "population", "--quiet"]);
    put(
        ws.path(),
        "population",
        "2.json",
        "{\"town\": \"B\", \"population\": 1}\n{\"town\": \"C\", \"population\": 2.5}\n",
    );
    let err = refused(ws.path(), "population");
    assert!(
        err.contains("2.json line 2, column \"population\": \"2.5\" is not a BIGINT"),
        "{err}"
    );
}

#[test]
fn a_csv_event_time_that_does_not_parse_is_refused_with_its_line() {
    let read = r#"{ kind: Csv, header: true, schema: ["at TIMESTAMP", "v DOUBLE"] }"#;
    let ws = root("obs", "csv", read, "{ kind: Append }", Some("at"));
    put(ws.path(), "obs", "1.csv", "at,v\n2024-06-01T00:00:00Z,1\n");
    ok(ws.path(), &["pull", "obs", "--quiet"]);
    put(
        ws.path(),
        "obs",
        "2.csv",
        "at,v\n2024-06-02T00:00:00Z,1\n02/06/2024 01:00,2\n",
    );
    let err = refused(ws.path(), "obs");
    assert!(
        err.contains("2.csv line 3, column \"at\": \"02/06/2024 01:00\" is not a TIMESTAMP"),
        "{err}"
    );
}

#[test]
fn an_empty_csv_event_time_is_refused_with_its_line() {
    let ws = root("obs", "csv", CSV, "{ kind: Append }", Some("at"));
    put(ws.path(), "obs", "1.csv", "at,v\n2024-06-01T00:00:00Z,1\n");
    ok(ws.path(), &["pull", "obs", "--quiet"]);
    put(
        ws.path(),
        "obs",
        "2.csv",
        "at,v\n2024-06-02T00:00:00Z,1\n,2\n",
    );
    let err = refused(ws.path(), "obs");
    assert!(
        err.contains("2.csv line 3, column \"at\": the event time is empty"),
        "{err}"
    );
}

#[test]
fn a_parquet_event_time_of_strings_or_integers_is_refused_with_its_type() {
    let ws = root(
        "obs",
        "parquet",
        "{ kind: Parquet }",
        "{ kind: Append }",
        Some("at"),
    );
    let good = parquet(vec![
        ("at", millis(vec![Some(1_717_200_000_000)])),
        ("v", Arc::new(Int64Array::from(vec![1]))),
    ]);
    put(ws.path(), "obs", "1.parquet", good);
    ok(ws.path(), &["pull", "obs", "--quiet"]);

    let strings = parquet(vec![
        (
            "at",
            Arc::new(StringArray::from(vec!["2024-06-02T00:00:00Z"])),
        ),
        ("v", Arc::new(Int64Array::from(vec![2]))),
    ]);
    put(ws.path(), "obs", "2.parquet", strings);
    let err = refused(ws.path(), "obs");
    assert!(
        err.contains(
            "2.parquet, column \"at\": the event time must be a TIMESTAMP or a DATE, found STRING"
        ),
        "{err}"
    );

    let integers = parquet(vec![
        ("at", Arc::new(Int64Array::from(vec![1_717_286_400_000]))),
        ("v", Arc::new(Int64Array::from(vec![2]))),
    ]);
    put(ws.path(), "obs", "2.parquet", integers);
    let err = refused(ws.path(), "obs");
    assert!(err.contains("found BIGINT"), "{err}");
}

#[test]
fn a_null_parquet_event_time_is_refused_with_its_row() {
    let ws = root(
        "obs",
        "parquet",
        "{ kind: Parquet }",
        "{ kind: Append }",
        Some("at"),
    );
    let good = parquet(vec![("at", millis(vec![Some(1_717_200_000_000)]))]);
    put(ws.path(), "obs", "1.parquet", good);
    ok(ws.path(), &["pull", "obs", "--quiet"]);
    let nulls = parquet(vec![(
        "at",
        millis(vec![Some(1_717_286_400_000), Some(1_717_286_400_001), None]),
    )]);
    put(ws.path(), "obs", "2.parquet", nulls);
    let err = refused(ws.path(), "obs");
    assert!(
        err.contains("2.parquet row 3, column \"at\": the event time is empty"),
        "{err}"
    );
}

#[test]
fn a_parquet_value_that_is_not_its_read_schema_type_is_refused_with_its_row() {
    let read = r#"{ kind: Parquet, schema: ["town STRING", "population BIGINT"] }"#;
    let ws = root("population", "parquet", read, "{ kind: Append }", None);
    let file = |towns: Vec<&str>, populations: Vec<&str>| {
        parquet(vec![
            ("town", Arc::new(StringArray::from(towns)) as ArrayRef),
            ("population", Arc::new(StringArray::from(populations))),
        ])
    };
    put(
        ws.path(),
        "population",
        "1.parquet",
        file(vec!["A"], vec!["10"]),
    );
    ok(ws.path(), &["pull", "population", "--quiet"]);
    put(
        ws.path(),
        "population",
        "2.parquet",
        file(vec!["B", "C"], vec!["20", "abc"]),
    );
    let err = refused(ws.path(), "population");
    assert!(
        err.contains("2.parquet row 2, column \"population\": \"abc\" is not a BIGINT"),
        "{err}"
    );
}

#[test]
fn a_snapshot_with_a_primary_key_twice_is_refused_naming_both_lines() {
    let ws = root(
        "stations",
        "csv",
        CSV,
        "{ kind: Snapshot, primaryKey: [id] }",
        None,
    );
    put(ws.path(), "stations", "1.csv", "id,city\nLHR,London\n");
    ok(ws.path(), &["pull", "stations", "--quiet"]);
    put(
        ws.path(),
        "stations",
        "2.csv",
        "id,city\nLHR,London\nCDG,Paris\nLHR,Londres\n",
    );
    let err = refused(ws.path(), "stations");
    assert!(
        err.contains("2.csv line 4: primary key (id) = (\"LHR\") is already at line 2"),
        "{err}"
    );
}

#[test]
fn a_ledger_refuses_a_key_twice_in_one_file_but_drops_keys_already_in_the_history() {
    let merge = "{ kind: Ledger, primaryKey: [station, at] }";
    let ws = root("readings", "csv", CSV, merge, Some("at"));
    put(
        ws.path(),
        "readings",
        "1.csv",
        "at,station,t\n2024-06-01T00:00:00Z,LHR,11.8\n",
    );
    ok(ws.path(), &["pull", "readings", "--quiet"]);
    // A key of the history again: dropped by design, the new key appended.
    put(
        ws.path(),
        "readings",
        "2.csv",
        "at,station,t\n2024-06-01T00:00:00Z,LHR,11.8\n2024-06-01T01:00:00Z,LHR,11.5\n",
    );
    ok(ws.path(), &["pull", "readings", "--quiet"]);
    assert_eq!(head_and_records(ws.path(), "readings").1, 2);
    put(
        ws.path(),
        "readings",
        "3.csv",
        "at,station,t\n2024-06-01T02:00:00Z,LHR,11.1\n2024-06-01T02:00:00Z,LHR,11.2\n",
    );
    let err = refused(ws.path(), "readings");
    assert!(
        err.contains(
            "3.csv line 3: primary key (station, at) = (\"LHR\", 2024-06-01T02:00:00Z) is already at line 2"
        ),
        "{err}"
    );
}

#[test]
fn a_csv_header_with_a_column_twice_is_refused() {
    let ws = root("towns", "csv", CSV, "{ kind: Append }", None);
    put(ws.path(), "towns", "1.csv", "town,population\nA,10\n");
    ok(ws.path(), &["pull", "towns", "--quiet"]);
    put(
        ws.path(),
        "towns",
        "2.csv",
        "town,population,town\nB,20,C\n",
    );
    let err = refused(ws.path(), "towns");
    assert!(
        err.contains("2.csv: column \"town\" appears twice"),
        "{err}"
    );
}

#[test]
fn a_refused_first_file_commits_nothing_and_the_json_error_carries_exit_code_10() {
    let ws = root("towns", "csv", CSV, "{ kind: Append }", None);
    put(
        ws.path(),
        "towns",
        "1.csv",
        "town,population,town\nA,10,B\n",
    );
    let out = weir(ws.path())
        .args(["--format", "json", "pull", "towns", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["exitCode"], 10, "{doc}");
    assert!(head_and_records(ws.path(), "towns").0.is_null());
}

#[test]
fn the_help_lists_exit_code_10() {
    let out = weir(Path::new(".")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("10  input data refused: the message names the file, line and column"),
        "{help}"
    );
}

/// `(op, id, city)` of every record of a dataset, in offset order.
fn changelog(ws: &Path, dataset: &str) -> Vec<(i64, String, String)> {
    let tail: serde_json::Value = serde_json::from_str(&ok(
        ws,
        &["--format", "json", "tail", dataset, "-n", "1000"],
    ))
    .unwrap();
    tail["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["op"].as_i64().unwrap(),
                r["id"].as_str().unwrap().to_string(),
                r["city"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn snapshots_become_appends_corrections_and_retractions_across_pulls_and_a_key_is_retracted_once() {
    let ws = root(
        "stations",
        "csv",
        CSV,
        "{ kind: Snapshot, primaryKey: [id] }",
        None,
    );
    let pull = |file: &str, text: &str| {
        put(ws.path(), "stations", file, text);
        ok(ws.path(), &["pull", "stations", "--quiet"]);
    };
    pull("1.csv", "id,city\nLHR,London\nCDG,Paris\nFRA,Frankfurt\n");
    // CDG corrected, AMS new, FRA gone, LHR unchanged.
    pull(
        "2.csv",
        "id,city\nLHR,London\nCDG,Paris-Nord\nAMS,Amsterdam\n",
    );
    // FRA back; LHR gone.
    pull(
        "3.csv",
        "id,city\nCDG,Paris-Nord\nAMS,Amsterdam\nFRA,Frankfurt\n",
    );
    // CDG, corrected once before, gone: retracted once, with its latest value.
    pull("4.csv", "id,city\nAMS,Amsterdam\nFRA,Frankfurt\n");
    let s = |op: i64, id: &str, city: &str| (op, id.to_string(), city.to_string());
    assert_eq!(
        changelog(ws.path(), "stations"),
        [
            s(0, "LHR", "London"),
            s(0, "CDG", "Paris"),
            s(0, "FRA", "Frankfurt"),
            s(2, "CDG", "Paris"),
            s(3, "CDG", "Paris-Nord"),
            s(0, "AMS", "Amsterdam"),
            s(1, "FRA", "Frankfurt"),
            s(0, "FRA", "Frankfurt"),
            s(1, "LHR", "London"),
            s(1, "CDG", "Paris-Nord"),
        ]
    );
    // The same snapshot again changes nothing.
    let before = list(ws.path());
    pull("5.csv", "id,city\nFRA,Frankfurt\nAMS,Amsterdam\n");
    assert_eq!(changelog(ws.path(), "stations").len(), 10);
    assert_eq!(
        list(ws.path())["datasets"][0]["records"],
        before["datasets"][0]["records"]
    );
}
