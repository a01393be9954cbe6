//! A temporal table join through the coordinator (embedded engine): readings enriched with the station names
//! valid at each reading's time, from a Snapshot root whose corrections and retractions change the names.
use crate::common;

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

/// A dataset's blocks read straight from its folder, oldest first.
fn raw_chain(dataset_dir: &Path) -> Vec<(weir_odf::Multihash, weir_odf::MetadataBlock)> {
    let head = std::fs::read_to_string(dataset_dir.join("refs/head")).unwrap();
    let mut next: Option<weir_odf::Multihash> = Some(head.trim().parse().unwrap());
    let mut out = Vec::new();
    while let Some(h) = next {
        let bytes = std::fs::read(dataset_dir.join("blocks").join(h.to_string())).unwrap();
        let block = weir_odf::MetadataBlock::decode(&bytes).unwrap();
        next = block.prev_block_hash;
        out.push((h, block));
    }
    out.reverse();
    out
}

#[test]
fn an_input_with_nothing_new_is_written_as_kamu_writes_it_and_the_old_form_is_upgraded() {
    let ws = workspace();
    manifests(ws.path());
    let first: Vec<(&str, &str, String)> = STATIONS
        .iter()
        .map(|s| ("2024-05-01T00:00:00Z", *s, format!("{s}-1")))
        .collect();
    let first: Vec<(&str, &str, &str)> =
        first.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
    names_file(ws.path(), "1.csv", &first);
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    // Only the names change: the next step of readings.named reads nothing new from `clean`.
    let mut second = first.clone();
    second[0] = ("2024-06-30T00:00:00Z", "LHR", "LHR-2");
    names_file(ws.path(), "2.csv", &second);
    ok(ws.path(), &["pull", "--all", "--quiet"]);

    let dir = ws.path().join(".weir/datasets/readings.named");
    let written = raw_chain(&dir);
    let (at, input) = written
        .iter()
        .enumerate()
        .find_map(|(k, (_, b))| match &b.event {
            weir_odf::MetadataEvent::ExecuteTransform(e) => e
                .query_inputs
                .iter()
                .position(|q| q.prev_block_hash.is_some() && q.new_block_hash.is_none())
                .map(|i| (k, i)),
            _ => None,
        })
        .expect("a step with an input that had nothing new");
    let weir_odf::MetadataEvent::ExecuteTransform(e) = &written[at].1.event else {
        unreachable!()
    };
    // kamu's form: no new block or offset, the previous ones carry the position.
    let q = &e.query_inputs[input];
    assert_eq!((q.new_block_hash, q.new_offset), (None, None));
    assert!(q.prev_offset.is_some());

    // The same chain as the Weir before wrote it: the previous block and offset repeated as new ones.
    let mut blocks: Vec<weir_odf::MetadataBlock> = written.iter().map(|(_, b)| b.clone()).collect();
    if let weir_odf::MetadataEvent::ExecuteTransform(e) = &mut blocks[at].event {
        let q = &mut e.query_inputs[input];
        q.new_block_hash = q.prev_block_hash;
        q.new_offset = q.prev_offset;
    }
    let mut prev = None;
    for b in &mut blocks {
        b.prev_block_hash = prev;
        let bytes = b.encode();
        let hash = weir_odf::MetadataBlock::hash(&bytes);
        std::fs::write(dir.join("blocks").join(hash.to_string()), bytes).unwrap();
        prev = Some(hash);
    }
    for (h, _) in &written[at..] {
        std::fs::remove_file(dir.join("blocks").join(h.to_string())).unwrap();
    }
    std::fs::write(dir.join("refs/head"), prev.unwrap().to_string()).unwrap();

    let out = weir(ws.path()).args(["validate"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(err.contains("weir upgrade"), "{err}");
    assert!(err.contains("readings.named"), "{err}");

    let upgraded = ok(ws.path(), &["upgrade"]);
    assert!(upgraded.contains("readings.named"), "{upgraded}");
    // The upgrade writes what the current Weir wrote: the same blocks, byte for byte, the same head.
    let after = raw_chain(&dir);
    assert_eq!(after.len(), written.len());
    for ((h1, b1), (h2, b2)) in written.iter().zip(&after) {
        assert_eq!(b1, b2);
        assert_eq!(h1, h2);
    }
    ok(ws.path(), &["validate"]);
    ok(ws.path(), &["verify", "readings.named"]);
}
