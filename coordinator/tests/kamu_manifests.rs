//! Manifests as kamu writes them: `read.schema` as an ODF schema (short and long type forms, either case)
//! or `ddlSchema`, kamu's CSV options and defaults (no schema: every column a string), camelCase event
//! kinds, `prepare` steps (gzip, zip with `subPath`, a `Pipe` command), engine names mapped in
//! `weir.yaml`; and `weir validate` reporting every problem of every manifest in one run, at its line,
//! with `pull` committing nothing for a workspace `validate` refuses.
use crate::common;

use std::io::Write as _;
use std::path::Path;

use common::*;

/// A workspace with the given manifests (`datasets/<name>.yaml`) and files (`data/...`).
fn ws(manifests: &[(&str, &str)], files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    for (name, text) in manifests {
        std::fs::write(ws.path().join(format!("datasets/{name}.yaml")), text).unwrap();
    }
    for (path, bytes) in files {
        let p = ws.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    ws
}

fn run(ws: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = weir(ws).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn records(ws: &Path, dataset: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&ok(
        ws,
        &["--format", "json", "tail", dataset, "-n", "1000"],
    ))
    .unwrap();
    v["records"].as_array().cloned().unwrap_or_default()
}

/// Shaped like kamu's covid `alberta.case-details`: lower-case ODF types, `kind: option`,
/// `setAttachments` in camelCase.
const ALBERTA: &str = "\
kind: DatasetSnapshot
version: 1
content:
  name: covid19.alberta.case-details
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/alberta/*.csv
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - name: id
              type: int64
            - name: date_reported
              type: timestamp
            - name: zone
              type:
                kind: option
                inner: string
            - name: gender
              type:
                kind: Option
                inner: String
      merge:
        kind: Ledger
        primaryKey:
          - id
    - kind: SetVocab
      eventTimeColumn: date_reported
    - kind: SetInfo
      description: Cases.
      keywords: [Healthcare]
    - kind: setAttachments
      attachments:
        kind: Embedded
        items:
          - path: README.md
            content: |
              # Cases
    - kind: SetLicense
      shortName: OGL-Canada-2.0
      spdxId: OGL-Canada-2.0
      name: Open Government Licence - Canada
      websiteUrl: https://open.canada.ca/en/open-government-licence-canada
";

#[test]
fn an_odf_read_schema_in_kamus_forms_types_the_columns_and_keeps_empty_options_null() {
    let ws = ws(
        &[("alberta", ALBERTA)],
        &[(
            "data/alberta/1.csv",
            b"id,date_reported,zone,gender\n1,2020-03-06T00:00:00Z,Calgary Zone,Female\n2,2020-03-07T00:00:00Z,,Male\n",
        )],
    );
    ok(ws.path(), &["validate"]);
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let r = records(ws.path(), "covid19.alberta.case-details");
    assert_eq!(r.len(), 2, "{r:?}");
    let second = r.iter().find(|r| r["id"] == 2).unwrap();
    assert!(second["zone"].is_null(), "{second}");
    assert_eq!(second["gender"], "Male");
    let log = ok(ws.path(), &["log", "covid19.alberta.case-details"]);
    assert!(log.contains("SetAttachments"), "{log}");
}

#[test]
fn an_empty_value_in_a_column_the_schema_declares_non_null_is_refused_with_its_line() {
    let ws = ws(
        &[("alberta", ALBERTA)],
        &[(
            "data/alberta/1.csv",
            b"id,date_reported,zone,gender\n1,2020-03-06T00:00:00Z,A,F\n,2020-03-07T00:00:00Z,B,M\n",
        )],
    );
    let (code, _, err) = run(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(code, Some(10), "{err}");
    assert!(err.contains("line 3") && err.contains("\"id\""), "{err}");
    assert!(err.contains("non-null"), "{err}");
    assert!(
        head_and_records(ws.path(), "covid19.alberta.case-details")
            .0
            .is_null()
    );
}

/// Shaped like kamu's covid `british-columbia.case-details`: no schema (every column a string, as kamu
/// reads it), `nullValue: ""`, and a preprocess query that parses the dates itself.
const BC: &str = "\
kind: DatasetSnapshot
version: 1
content:
  name: covid19.british-columbia.case-details
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/bc/*.csv
      read:
        kind: Csv
        separator: \",\"
        header: true
        nullValue: \"\"
      preprocess:
        kind: Sql
        engine: datafusion
        query: |
          select
            to_timestamp(Reported_Date) as reported_date,
            Classification_Reported as classification,
            cast(row_number() over (order by Reported_Date) as bigint) as id,
            HA as ha,
            Sex as sex,
            Age_Group as age_group
          from input
      merge:
        kind: Ledger
        primaryKey:
          - id
    - kind: SetVocab
      eventTimeColumn: reported_date
";

#[test]
fn a_csv_without_a_schema_is_read_as_strings_as_kamu_reads_it() {
    let ws = ws(
        &[("bc", BC)],
        &[(
            "data/bc/1.csv",
            b"Reported_Date,HA,Sex,Age_Group,Classification_Reported\n2020-01-29,Vancouver Coastal,F,40-49,Lab-diagnosed\n2020-02-06,Fraser,M,,Lab-diagnosed\n",
        )],
    );
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let r = records(ws.path(), "covid19.british-columbia.case-details");
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r.iter().any(|r| r["age_group"].is_null()), "{r:?}");
}

#[test]
fn kamus_csv_options_separator_quote_escape_null_value_and_ddl_schema_are_honoured() {
    let manifest = "\
kind: DatasetSnapshot
version: 1
content:
  name: prices
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: { kind: FilesGlob, path: 'data/prices/*.csv' }
      read:
        kind: csv
        separator: ';'
        quote: \"'\"
        escape: '\\'
        header: true
        nullValue: NA
        ddlSchema:
          - at TIMESTAMP
          - item STRING
          - price DECIMAL(10,2)
      merge: { kind: ledger, primaryKey: [item] }
    - kind: SetVocab
      eventTimeColumn: at
";
    let ws = ws(
        &[("prices", manifest)],
        &[(
            "data/prices/1.csv",
            b"at;item;price\n2024-01-01T00:00:00Z;'tea; green';1.50\n2024-01-01T00:00:00Z;'it\\'s';NA\n",
        )],
    );
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let r = records(ws.path(), "prices");
    assert!(r.iter().any(|r| r["item"] == "tea; green"), "{r:?}");
    let its = r.iter().find(|r| r["item"] == "it's").unwrap();
    assert!(its["price"].is_null(), "{its}");
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn zipped(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, body) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(body).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn decompress_root(name: &str, path: &str, prepare: &str) -> String {
    format!(
        "kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{ kind: FilesGlob, path: '{path}' }}
      prepare:
{prepare}
      read: {{ kind: Csv, header: true, schema: {{ fields: [{{name: at, type: Timestamp}}, {{name: v, type: Int64}}] }} }}
      merge: {{ kind: Append }}
    - kind: SetVocab
      eventTimeColumn: at
"
    )
}

#[test]
fn gzip_and_zip_sources_are_decompressed_and_a_gzip_without_the_step_is_refused_with_it() {
    let body = b"at,v\n2024-01-01T00:00:00Z,1\n2024-01-02T00:00:00Z,2\n";
    let ws = ws(
        &[
            (
                "g",
                &decompress_root(
                    "g",
                    "data/g/*.csv.gz",
                    "        - kind: Decompress\n          format: Gzip",
                ),
            ),
            (
                "z",
                &decompress_root(
                    "z",
                    "data/z/*.zip",
                    "        - kind: decompress\n          format: zip\n          subPath: 'export/*.csv'",
                ),
            ),
        ],
        &[
            ("data/g/1.csv.gz", &gz(body)),
            (
                "data/z/1.zip",
                &zipped(&[("export/values.csv", body), ("export/README.txt", b"hi")]),
            ),
        ],
    );
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(head_and_records(ws.path(), "g").1, 2);
    assert_eq!(head_and_records(ws.path(), "z").1, 2);

    // The same gzip source without its Decompress step: the message says which step to add.
    let plain = decompress_root("g", "data/g/*.csv.gz", "        []")
        .replace("      prepare:\n        []\n", "");
    std::fs::write(ws.path().join("datasets/g.yaml"), plain).unwrap();
    std::fs::write(ws.path().join("data/g/2.csv.gz"), gz(body)).unwrap();
    let (code, _, err) = run(ws.path(), &["pull", "g", "--quiet"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("kind: Decompress, format: Gzip"), "{err}");
}

/// Shaped like kamu's `ca.bankofcanada.exchange-rates.daily`: a preamble before the CSV, stripped by a
/// `sed` Pipe step.
pub const RATES: &str = "\
kind: DatasetSnapshot
version: 1
content:
  name: ca.bankofcanada.exchange-rates.daily
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/rates/*.csv
      prepare:
        - kind: Pipe
          command:
            - sed
            - -e
            - 1,/OBSERVATIONS/d
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - { name: date, type: timestamp }
            - { name: FXAUDCAD, type: float64 }
            - { name: FXUSDCAD, type: float64 }
      merge:
        kind: Ledger
        primaryKey:
          - date
      preprocess:
        kind: Sql
        engine: datafusion
        query: |
          select
            date,
            'USD' as currency_base,
            'CAD' as currency_target,
            FXUSDCAD as rate
          from input
    - kind: SetVocab
      eventTimeColumn: date
";

#[test]
fn a_pipe_step_strips_a_preamble_as_in_kamus_currency_conversion_and_a_failing_one_commits_nothing()
{
    let file = "\"TERMS AND CONDITIONS\"\n\"https://example.org/terms\"\n\n\"SERIES\"\n\"id\",\"label\"\n\n\"OBSERVATIONS\"\n\"date\",\"FXAUDCAD\",\"FXUSDCAD\"\n\"2017-01-03\",\"0.9702\",\"1.3435\"\n\"2017-01-04\",\"0.9678\",\"1.3315\"\n";
    let ws = ws(
        &[("rates", RATES)],
        &[("data/rates/1.csv", file.as_bytes())],
    );
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let r = records(ws.path(), "ca.bankofcanada.exchange-rates.daily");
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r.iter().any(|r| r["rate"] == 1.3435), "{r:?}");

    let failing = RATES.replace(
        "            - sed\n            - -e\n            - 1,/OBSERVATIONS/d\n",
        "            - sh\n            - -c\n            - 'echo no such series >&2; exit 4'\n",
    );
    std::fs::write(ws.path().join("datasets/rates.yaml"), failing).unwrap();
    std::fs::write(ws.path().join("data/rates/2.csv"), file).unwrap();
    let before = head_and_records(ws.path(), "ca.bankofcanada.exchange-rates.daily");
    let (code, _, err) = run(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("exit status: 4") && err.contains("no such series"),
        "{err}"
    );
    assert_eq!(
        head_and_records(ws.path(), "ca.bankofcanada.exchange-rates.daily").0,
        before.0
    );
}

const BROKEN_ROOT: &str = "\
kind: DatasetSnapshot
version: 1
content:
  name: broken
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/broken/*.csv
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - name: id
              type: STRNG
            - name: at
              type: Timestamp
      merge:
        kind: Ledger
        primaryKey: [idd]
    - kind: SetVocab
      eventTimeColumn: observed
";

const UNSUPPORTED_ROOT: &str = "\
kind: DatasetSnapshot
version: 1
content:
  name: odd
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/odd/*.csv
      read:
        kind: Csv
        header: true
        ddlSchema: [\"at TIMESTAMP\", \"v BIGINT\"]
      merge:
        kind: Ledger
        primaryKey: [v]
    - kind: SetVocab
      eventTimeColumn: at
";

const FLINK: &str = "\
kind: DatasetSnapshot
version: 1
content:
  name: odd.doubled
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: odd
      transform:
        kind: Sql
        engine: flink
        query: |
          SELECT at AS event_time, v * 2 AS v FROM odd
";

#[test]
fn validate_reports_every_error_of_every_manifest_at_its_position_and_pull_commits_nothing() {
    let ws = ws(
        &[
            ("broken", BROKEN_ROOT),
            ("odd", UNSUPPORTED_ROOT),
            ("odd.doubled", FLINK),
        ],
        &[
            ("data/broken/1.csv", b"id,at\na,2024-01-01T00:00:00Z\n"),
            ("data/odd/1.csv", b"at,v\n2024-01-01T00:00:00Z,1\n"),
        ],
    );
    let (code, _, err) = run(ws.path(), &["validate"]);
    assert_eq!(code, Some(3), "{err}");
    // The schema's error stops the other checks of that source (they need the schema); the other
    // manifests are checked all the same.
    assert!(
        err.contains("datasets/broken.yaml:17:15: field `content.metadata[0].read.schema.fields[0].type`: unknown type `STRNG`"),
        "{err}"
    );
    assert!(
        err.contains(
            "datasets/odd.doubled.yaml:12:9: field `content.metadata[0].transform.engine`"
        ),
        "{err}"
    );
    assert!(err.contains("engines: {flink: {use: datafusion}}"), "{err}");
    let (code, _, perr) = run(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(code, Some(3), "{perr}");
    // The storage folder and the lock are taken before the manifests are read; no dataset is written.
    assert!(
        !ws.path().join(".weir/datasets").exists(),
        "nothing was written"
    );

    // With the type fixed, the key and event-time typos are both reported, in one run.
    std::fs::write(
        ws.path().join("datasets/broken.yaml"),
        BROKEN_ROOT.replace("STRNG", "String"),
    )
    .unwrap();
    let (code, _, err) = run(ws.path(), &["validate"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("datasets/broken.yaml:22:22: field `content.metadata[0].merge.primaryKey[0]`: `idd` is not a column of the read schema (`id`, `at`)"),
        "{err}"
    );
    assert!(
        err.contains("datasets/broken.yaml:24:7: field `content.metadata[1].eventTimeColumn`: `observed` is not a column of the read schema"),
        "{err}"
    );
    assert!(err.contains("odd.doubled.yaml"), "{err}");
}

#[test]
fn an_engine_name_mapped_in_weir_yaml_runs_on_weirs_engine_and_a_glob_matching_nothing_is_a_warning()
 {
    let ws = ws(
        &[("odd", UNSUPPORTED_ROOT), ("odd.doubled", FLINK)],
        &[
            (
                "data/odd/1.csv",
                b"at,v\n2024-01-01T00:00:00Z,1\n2024-01-02T00:00:00Z,2\n",
            ),
            ("weir.yaml", b"engines:\n  flink:\n    use: datafusion\n"),
        ],
    );
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let r = records(ws.path(), "odd.doubled");
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r.iter().any(|r| r["v"] == 4), "{r:?}");
    let v = ok(ws.path(), &["validate"]);
    assert!(!v.contains("warning"), "{v}");

    std::fs::write(
        ws.path().join("datasets/odd.yaml"),
        UNSUPPORTED_ROOT.replace("data/odd/*.csv", "data/typo/*.csv"),
    )
    .unwrap();
    let v = ok(ws.path(), &["validate"]);
    assert!(
        v.contains("warning: datasets/odd.yaml:10:9: field `content.metadata[0].fetch.path`: `data/typo/*.csv` matches no file yet"),
        "{v}"
    );
}

#[test]
fn every_unsupported_kamu_feature_is_refused_with_what_to_do_instead_in_one_run() {
    let manifest = "\
kind: DatasetSnapshot
version: 1
content:
  name: elsewhere
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Container
        image: ghcr.io/example/fetch:0.1.0
      read:
        kind: GeoJson
      merge:
        kind: UpsertStream
        primaryKey: [id]
";
    let ws = ws(&[("elsewhere", manifest)], &[]);
    let (code, _, err) = run(ws.path(), &["validate"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("datasets/elsewhere.yaml:9:9: field `content.metadata[0].fetch.kind`: `Container` is not supported by Weir"), "{err}");
    assert!(err.contains("kind: FilesGlob"), "{err}");
    assert!(err.contains("datasets/elsewhere.yaml:12:9: field `content.metadata[0].read.kind`: `GeoJson` is not supported"), "{err}");
    assert!(err.contains("datasets/elsewhere.yaml:14:9: field `content.metadata[0].merge.kind`: `UpsertStream` is not supported"), "{err}");
}

/// Every kind of manifest among kamu-cli's `examples/` (`tests/fixtures/kamu/shapes`, one manifest shaped
/// like each): `validate` accepts the ones Weir carries out and refuses the others, all in one run, each at
/// its field with a precise reason.
#[test]
fn every_manifest_shape_of_kamus_examples_loads_or_is_refused_with_a_precise_reason() {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kamu/shapes/datasets");
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    for e in std::fs::read_dir(&from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), ws.path().join("datasets").join(e.file_name())).unwrap();
    }
    std::fs::create_dir_all(ws.path().join("data")).unwrap();
    std::fs::write(
        ws.path().join("data/orders-001.csv"),
        "event_time,order_id,quantity\n2020-01-01T00:00:00Z,1,10\n",
    )
    .unwrap();
    let refused = [
        (
            "housing.block-outlines.yaml",
            "read.kind",
            "`NdGeoJson` is not supported",
        ),
        (
            "housing.local-areas.yaml",
            "read.kind",
            "`GeoJson` is not supported",
        ),
        ("leaderboard.yaml", "transform.engine", "`risingwave`"),
        ("temp.yaml", "fetch.kind", "`Mqtt` is not supported"),
        ("orders.overdue.yaml", "transform.engine", "`flink`"),
        ("bob.shared.yaml", "inputs[0].datasetRef", "account `alice`"),
        (
            "account.transactions.yaml",
            "read.kind",
            "`Json` is not supported",
        ),
        (
            "prices.eth-usd.yaml",
            "fetch.kind",
            "`Container` is not supported",
        ),
        (
            "tokens-burned.yaml",
            "fetch.kind",
            "`EthereumLogs` is not supported",
        ),
        ("holdings.yaml", "transform.engine", "`flink`"),
    ];
    let (code, _, err) = run(ws.path(), &["validate"]);
    assert_eq!(code, Some(3), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(": field `")).collect();
    for (file, field, reason) in refused {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("datasets/{file}:"))
                    && l.contains(&format!("{field}`: "))
                    && l.contains(reason)),
            "{file} {field} {reason}\nin\n{err}"
        );
    }
    assert_eq!(
        lines.len(),
        refused.len(),
        "one error each, none for the others:\n{err}"
    );

    // Without the refused manifests, and with `flink` mapped, the rest loads.
    for (file, _, _) in refused {
        if !["orders.overdue.yaml", "holdings.yaml"].contains(&file) {
            std::fs::remove_file(ws.path().join("datasets").join(file)).unwrap();
        }
    }
    std::fs::write(
        ws.path().join("weir.yaml"),
        "engines:\n  flink:\n    use: datafusion\n",
    )
    .unwrap();
    let v = ok(ws.path(), &["validate"]);
    // `player-scores` (leaderboard's push source) is among them.
    assert!(v.contains("6 manifest(s) valid"), "{v}");
}

#[test]
fn event_time_from_the_file_name_stamps_records_without_an_event_time_column() {
    let manifest = "\
kind: DatasetSnapshot
version: 1
content:
  name: sales
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/sales/*.csv
        eventTime:
          kind: fromPath
          pattern: 'sales-(\\d+-\\d+-\\d+)\\.csv'
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - { name: item, type: String }
            - { name: amount, type: Int64 }
      merge:
        kind: Append
";
    let ws = ws(
        &[("sales", manifest)],
        &[
            ("data/sales/sales-2024-06-01.csv", b"item,amount\ntea,3\n"),
            (
                "data/sales/sales-2024-06-02.csv",
                b"item,amount\ncoffee,5\n",
            ),
        ],
    );
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let r = records(ws.path(), "sales");
    let time = |item: &str| {
        r.iter().find(|r| r["item"] == item).unwrap()["event_time"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(time("tea").starts_with("2024-06-01T00:00:00"), "{r:?}");
    assert!(time("coffee").starts_with("2024-06-02T00:00:00"), "{r:?}");

    // A file name the pattern does not match fails the pull, naming the pattern and the file.
    std::fs::write(
        ws.path().join("data/sales/sales-june.csv"),
        "item,amount\nx,1\n",
    )
    .unwrap();
    let (code, _, err) = run(ws.path(), &["pull", "--all", "--quiet"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("does not match the file name `sales-june.csv`"),
        "{err}"
    );
}
