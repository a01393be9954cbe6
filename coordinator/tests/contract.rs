//! Engines that break the engine contract, end to end: the `weir` binary runs the test engine
//! (`weir-test-engine`) as a process engine whose SQL text makes it lie. Each violation aborts the
//! transaction with exit 6 and an error naming the violation, and the dataset keeps its previous head.
//!
//! Every test starts from a derivative with one good transaction (offsets 0..=2) and a root that then
//! receives three more records, so the lying transaction must start at offset 3.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, OnceLock};

use arrow::array::{Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use common::*;
use parquet::arrow::ArrowWriter;

/// The derivative the test engine computes.
const DERIVED: &str = "numbers.out";

/// The test engine built for this machine (`cargo build -p weir-test-engine`), once per test binary,
/// the way engine-runtime's tests build it.
fn test_engine_binary() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(|| common::built_binary("weir-test-engine")) {
        Ok(path) => path.clone(),
        Err(why) => panic!("{why}"),
    }
}

/// An engine output file: the system columns, `event_time` and one Int64 data column `column`, one row
/// per offset.
fn output(offsets: &[i64], column: &str) -> RecordBatch {
    let utc = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    let n = offsets.len();
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", utc.clone(), false),
        Field::new("event_time", utc, false),
        Field::new(column, DataType::Int64, false),
    ]));
    let hour = 3_600_000;
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(offsets.to_vec())),
            Arc::new(Int32Array::from(vec![0; n])),
            Arc::new(
                TimestampMillisecondArray::from(vec![1_717_200_000_000; n]).with_timezone("UTC"),
            ),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(
                    offsets.iter().map(|o| 1_717_200_000_000 + o * hour),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_iter_values(offsets.iter().map(|o| o * 10))),
        ],
    )
    .unwrap()
}

/// A workspace whose derivative `numbers.out` is computed by the test engine (`engines.liar`) and
/// has one committed transaction; its root `numbers` has three more records waiting.
struct Liar {
    ws: tempfile::TempDir,
}

impl Liar {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        let dir = ws.path();
        std::fs::create_dir_all(dir.join("datasets")).unwrap();
        std::fs::create_dir_all(dir.join("data/numbers")).unwrap();
        std::fs::create_dir_all(dir.join("engine-output")).unwrap();
        std::fs::write(
            dir.join("weir.yaml"),
            format!(
                "storage: .weir\nengines:\n  liar:\n    binary: {}\n",
                test_engine_binary().display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("datasets/numbers.yaml"),
            "kind: DatasetSnapshot
version: 1
content:
  name: numbers
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: { kind: FilesGlob, path: data/numbers/*.csv }
      read: { kind: Csv, header: true, schema: [\"event_time TIMESTAMP\", \"n BIGINT\"] }
      merge: { kind: Append }
",
        )
        .unwrap();
        let liar = Self { ws };
        liar.add_numbers("1", 0);
        let good = liar.engine_output("good-0-2", &output(&[0, 1, 2], "n"));
        liar.set_query(&format!("respond {} 0 2", good.display()));
        let out = liar.pull(&[]);
        assert_success(&out);
        assert_eq!(head_and_records(liar.path(), DERIVED).1, 3);
        liar.add_numbers("2", 3);
        liar
    }

    fn path(&self) -> &Path {
        self.ws.path()
    }

    /// Three records of the root, in a new source file.
    fn add_numbers(&self, file: &str, first: i64) {
        let csv: String = (first..first + 3)
            .map(|i| format!("2024-06-01T{i:02}:00:00Z,{}\n", i * 10))
            .collect();
        std::fs::write(
            self.path().join(format!("data/numbers/{file}.csv")),
            format!("event_time,n\n{csv}"),
        )
        .unwrap();
    }

    /// Writes `batch` as a Parquet file for the engine to hand back.
    fn engine_output(&self, name: &str, batch: &RecordBatch) -> PathBuf {
        let path = self.path().join(format!("engine-output/{name}.parquet"));
        let mut file = std::fs::File::create(&path).unwrap();
        let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), None).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
        assert!(
            !path.to_string_lossy().contains(char::is_whitespace),
            "the test engine's hooks split on whitespace: {}",
            path.display()
        );
        path
    }

    /// Makes the derivative's SQL text (the test engine's hook) `query`.
    fn set_query(&self, query: &str) {
        std::fs::write(
            self.path().join(format!("datasets/{DERIVED}.yaml")),
            format!(
                "kind: DatasetSnapshot
version: 1
content:
  name: {DERIVED}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{{ datasetRef: numbers }}]
      transform: {{ kind: Sql, engine: liar, query: \"{query}\" }}
"
            ),
        )
        .unwrap();
    }

    /// `weir --engine process pull --all --quiet ARGS`.
    fn pull(&self, args: &[&str]) -> Output {
        weir(self.path())
            .args(["--engine", "process", "pull", "--all", "--quiet"])
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs a pull with `query` and checks that it failed with exit 6 naming `violation`, that the
    /// derivative kept its head and its three records, that the root still moved on, and that the
    /// stored chains are valid. Returns stderr.
    fn assert_aborted(&self, query: &str, args: &[&str], violation: &str) -> String {
        let before = head_and_records(self.path(), DERIVED);
        assert!(!before.0.is_null());
        self.set_query(query);
        let out = self.pull(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(6),
            "`{query}` should exit 6\nstdout:\n{}\nstderr:\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("{DERIVED}: FAILED")),
            "`{query}`: {stdout}"
        );
        assert!(stderr.contains(violation), "`{query}`: {stderr}");
        assert_eq!(
            head_and_records(self.path(), DERIVED),
            before,
            "`{query}`: the head must not move"
        );
        assert_eq!(
            head_and_records(self.path(), "numbers").1,
            6,
            "the root does not depend on the engine"
        );
        ok(self.path(), &["validate"]);
        stderr
    }

    /// A well-behaved answer for the waiting records (offsets 3..=5) now succeeds.
    fn assert_a_good_engine_then_succeeds(&self) {
        let good = self.engine_output("good-3-5", &output(&[3, 4, 5], "n"));
        self.set_query(&format!("respond {} 3 5", good.display()));
        assert_success(&self.pull(&[]));
        assert_eq!(head_and_records(self.path(), DERIVED).1, 6);
        let log = ok(self.path(), &["log", DERIVED]);
        assert!(log.contains("engine=liar (process sha256:"), "{log}");
        ok(self.path(), &["validate"]);
    }
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "pull failed with {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const CONTRACT: &str = "engine `liar` broke the engine contract";

#[test]
fn an_engine_that_claims_records_but_writes_no_file_is_aborted_and_a_good_rerun_succeeds() {
    let liar = Liar::new();
    liar.assert_aborted(
        "respond-none 3 5",
        &[],
        &format!("{CONTRACT}: the engine claims records [3, 5] but wrote no data file"),
    );
    liar.assert_a_good_engine_then_succeeds();
}

#[test]
fn an_engine_whose_offsets_are_not_contiguous_is_aborted() {
    let liar = Liar::new();
    let gap = liar.engine_output("gap", &output(&[3, 4, 6], "n"));
    liar.assert_aborted(
        &format!("respond {} 3 5", gap.display()),
        &[],
        &format!("{CONTRACT}: offsets are not contiguous: record 2 has offset 6, expected 5"),
    );
    liar.assert_a_good_engine_then_succeeds();
}

#[test]
fn an_engine_whose_output_starts_at_the_wrong_offset_is_aborted() {
    let liar = Liar::new();
    let shifted = liar.engine_output("shifted", &output(&[4, 5, 6], "n"));
    liar.assert_aborted(
        &format!("respond {} 4 6", shifted.display()),
        &[],
        &format!(
            "{CONTRACT}: the engine's output starts at offset 4 but must start at next_offset 3"
        ),
    );
}

#[test]
fn an_engine_whose_file_holds_fewer_records_than_claimed_is_aborted() {
    let liar = Liar::new();
    let short = liar.engine_output("short", &output(&[3, 4], "n"));
    liar.assert_aborted(
        &format!("respond {} 3 5", short.display()),
        &[],
        &format!("{CONTRACT}: the engine claims 3 records but its data file holds 2"),
    );
}

#[test]
fn an_engine_whose_output_schema_changes_between_transactions_is_aborted() {
    let liar = Liar::new();
    let renamed = liar.engine_output("renamed", &output(&[3, 4, 5], "m"));
    let stderr = liar.assert_aborted(
        &format!("respond {} 3 5", renamed.display()),
        &[],
        &format!("{CONTRACT}: the output schema changed: was ["),
    );
    assert!(stderr.contains("n: Int64]"), "{stderr}");
    assert!(stderr.contains("m: Int64]"), "{stderr}");
    liar.assert_a_good_engine_then_succeeds();
}

#[test]
fn an_engine_that_sends_two_terminal_messages_is_aborted() {
    let liar = Liar::new();
    liar.assert_aborted(
        "two-terminals",
        &[],
        &format!("{CONTRACT}: the engine sent two terminal messages"),
    );
    liar.assert_a_good_engine_then_succeeds();
}

#[test]
fn an_engine_that_ends_the_stream_without_a_terminal_message_is_aborted() {
    let liar = Liar::new();
    liar.assert_aborted(
        "no-terminal",
        &[],
        &format!("{CONTRACT}: the engine closed the stream without a terminal message"),
    );
}

#[test]
fn an_engine_that_hangs_past_the_deadline_is_aborted() {
    let liar = Liar::new();
    liar.assert_aborted(
        "hang",
        &["--deadline-secs", "2"],
        &format!("{CONTRACT}: the engine did not answer within the 2 s deadline"),
    );
    liar.assert_a_good_engine_then_succeeds();
}

#[test]
fn an_engine_that_crashes_mid_operation_is_aborted_with_its_last_output() {
    let liar = Liar::new();
    let stderr = liar.assert_aborted("crash", &[], "engine `liar` failed: engine liar exited");
    assert!(
        stderr.contains("test engine: aborting mid-operation, as asked"),
        "{stderr}"
    );
    liar.assert_a_good_engine_then_succeeds();
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Liar {
    /// Serves the engine the way a foreign ODF engine binary runs: on a fixed TCP `port` of weir.yaml,
    /// started with `args` alone (no `--unix-socket`).
    fn on_tcp(&self, port: u16, args: &[String]) {
        std::fs::write(
            self.path().join("weir.yaml"),
            format!(
                "storage: .weir\nengines:\n  liar:\n    binary: {}\n    port: {port}\n    args: [{}]\n",
                test_engine_binary().display(),
                args.iter()
                    .map(|a| format!("\"{a}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .unwrap();
    }
}

#[test]
fn a_process_engine_on_a_configured_tcp_port_gets_only_its_own_arguments() {
    let liar = Liar::new();
    let port = free_port();
    liar.on_tcp(port, &["--port".into(), port.to_string()]);
    liar.assert_a_good_engine_then_succeeds();
}

#[test]
fn a_process_engine_that_listens_elsewhere_is_reported_as_never_listened_not_as_a_deadline() {
    let liar = Liar::new();
    let (port, elsewhere) = (free_port(), free_port());
    liar.on_tcp(port, &["--port".into(), elsewhere.to_string()]);
    let before = head_and_records(liar.path(), DERIVED);
    // The start timeout is a minute, or the deadline when that is shorter.
    let out = liar.pull(&["--deadline-secs", "3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("never listened on 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(!stderr.contains("deadline"), "{stderr}");
    assert_eq!(head_and_records(liar.path(), DERIVED), before);
}
