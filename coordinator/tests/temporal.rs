//! A temporal table join through the coordinator (embedded engine): readings enriched with the station names
//! valid at each reading's time, from a Snapshot root whose corrections and retractions change the names.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;

const STATIONS: [&str; 6] = ["LHR", "CDG", "MAD", "FCO", "ARN", "ATH"];

fn names_file(dir: &Path, file: &str, rows: &[(&str, &str, &str)]) {
    let mut text = String::from("valid_from,station_id,name\n");
    for (from, id, name) in rows {
        text.push_str(&format!("{from},{id},{name}\n"));
    }
    std::fs::create_dir_all(dir.join("data/station-names")).unwrap();
    std::fs::write(dir.join("data/station-names").join(file), text).unwrap();
}

fn manifests(dir: &Path) {
    std::fs::write(
        dir.join("datasets/station-names.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: station-names
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/station-names/*.csv
      read:
        kind: Csv
        header: true
        schema:
          - valid_from TIMESTAMP
          - station_id STRING
          - name STRING
      merge:
        kind: Snapshot
        primaryKey: [station_id]
    - kind: SetVocab
      eventTimeColumn: valid_from
",
    )
    .unwrap();
    std::fs::write(
        dir.join("datasets/readings.named.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: readings.named
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: readings.clean
          alias: clean
        - datasetRef: station-names
          alias: names
      transform:
        kind: Sql
        engine: datafusion
        temporalTables:
          - name: names
            primaryKey: [station_id]
        query: |
          SELECT c.event_time, c.station_id, n.name, c.temperature_c
          FROM clean AS c
          JOIN names FOR SYSTEM_TIME AS OF c.event_time AS n ON c.station_id = n.station_id
",
    )
    .unwrap();
}

/// Every record of `dataset`: (event time as `YYYY-MM-DDTHH:MM:SS`, station, name).
fn rows(dir: &Path, dataset: &str) -> Vec<(String, String, Option<String>)> {
    let json: serde_json::Value = serde_json::from_str(&ok(
        dir,
        &["--format", "json", "tail", dataset, "-n", "100000"],
    ))
    .unwrap();
    json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let time = r["event_time"].as_str().unwrap().replace(' ', "T");
            (
                time.get(..19).unwrap().to_string(),
                r["station_id"].as_str().unwrap().to_string(),
                r["name"].as_str().map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn readings_are_joined_with_the_names_valid_at_their_time_once_the_table_has_caught_up() {
    let ws = workspace();
    manifests(ws.path());
    let first: Vec<(&str, &str, String)> = STATIONS
        .iter()
        .map(|s| ("2024-05-01T00:00:00Z", *s, format!("{s}-1")))
        .collect();
    let first: Vec<(&str, &str, &str)> =
        first.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
    names_file(ws.path(), "1.csv", &first);
    // LHR is renamed from noon on 2 June: a correction at that time; the table's watermark moves there.
    let mut second = first.clone();
    second[0] = ("2024-06-02T12:00:00Z", "LHR", "LHR-2");
    names_file(ws.path(), "2.csv", &second);
    ok(ws.path(), &["pull", "--all", "--quiet"]);

    let clean = rows(ws.path(), "readings.clean");
    let named = rows(ws.path(), "readings.named");
    let released: Vec<_> = clean
        .iter()
        .filter(|(t, _, _)| t.as_str() <= "2024-06-02T12:00:00")
        .collect();
    assert_eq!(
        named.len(),
        released.len(),
        "only readings up to the table's watermark are joined"
    );
    for (time, station, name) in &named {
        let expected = if station == "LHR" && time.as_str() >= "2024-06-02T12:00:00" {
            "LHR-2".to_string()
        } else {
            format!("{station}-1")
        };
        assert_eq!(name.as_deref(), Some(expected.as_str()), "{time} {station}");
    }

    // ARN leaves the register (a retraction, carrying its row's own time) and CDG is renamed from 4 June:
    // the watermark passes every reading; ARN's readings still waiting find no row any more.
    let third: Vec<(&str, &str, &str)> = second
        .iter()
        .filter(|(_, s, _)| *s != "ARN")
        .map(|r| {
            if r.1 == "CDG" {
                ("2024-06-04T00:00:00Z", "CDG", "CDG-3")
            } else {
                *r
            }
        })
        .collect();
    names_file(ws.path(), "3.csv", &third);
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let named = rows(ws.path(), "readings.named");
    let waiting_arn = clean
        .iter()
        .filter(|(t, s, _)| s == "ARN" && t.as_str() > "2024-06-02T12:00:00")
        .count();
    assert!(waiting_arn > 0);
    assert_eq!(named.len(), clean.len() - waiting_arn);
    for (time, station, name) in &named {
        let expected = match station.as_str() {
            "LHR" if time.as_str() >= "2024-06-02T12:00:00" => "LHR-2".to_string(),
            s => format!("{s}-1"),
        };
        assert_eq!(name.as_deref(), Some(expected.as_str()), "{time} {station}");
    }
    let log = ok(ws.path(), &["log", "readings.named"]);
    assert!(
        log.contains("temporal table names (primary key station_id)"),
        "{log}"
    );
    ok(ws.path(), &["validate"]);
    ok(ws.path(), &["verify", "readings.named"]);
}

#[test]
fn a_temporal_table_that_is_not_an_input_is_refused_at_its_line() {
    let ws = workspace();
    manifests(ws.path());
    let file = ws.path().join("datasets/readings.named.yaml");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("- name: names", "- name: nomes");
    std::fs::write(&file, text).unwrap();
    let out = weir(ws.path()).args(["validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("readings.named.yaml:"), "{err}");
    assert!(err.contains("`nomes` is not an input"), "{err}");
}
