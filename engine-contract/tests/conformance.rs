//! The conformance kit against real servers on loopback: a toy engine that
//! keeps the contract passes every check, engines that break one rule fail
//! exactly the matching check with a reason.
//!
//! The toy engine reads and writes tables as JSON through a JSON
//! `DataFixtures` (the kit only needs engine and fixtures to agree on a
//! format; real engines use Parquet).
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use serde_json::json;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};
use weir_engine_contract::conformance::{
    self, Check, CheckStatus, Column, ColumnType, ConformanceOptions, DataFixtures, DataSetup,
    FixtureError, Table, Value, Verdict,
};
use weir_engine_contract::grpc::Envelope;
use weir_engine_contract::grpc::raw::engine_server::{self, EngineServer as RawEngineServer};
use weir_engine_contract::model::{
    EngineResponse, OffsetInterval, RawQueryRequest, RawQueryResponse, RawQuerySuccess, Transform,
    TransformRequest, TransformResponse, TransformSuccess,
};
use weir_engine_contract::{Engine, EngineAddress, EngineError, EngineServer, ProgressSink};

// ---------------------------------------------------------------------------
// JSON tables
// ---------------------------------------------------------------------------

struct JsonFixtures;

fn type_name(t: &ColumnType) -> String {
    match t {
        ColumnType::Int64 => "int64".into(),
        ColumnType::Int32 => "int32".into(),
        ColumnType::Utf8 => "utf8".into(),
        ColumnType::TimestampMillisUtc => "timestamp_ms".into(),
        ColumnType::Other(name) => name.clone(),
    }
}

fn value_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Int(i) | Value::TimestampMillis(i) => json!(i),
        Value::Utf8(s) => json!(s),
    }
}

fn write_table(path: &Path, table: &Table) -> std::io::Result<()> {
    let doc = json!({
        "columns": table.columns.iter().map(|c| json!([c.name, type_name(&c.data_type)])).collect::<Vec<_>>(),
        "rows": table.rows.iter().map(|r| r.iter().map(value_json).collect::<Vec<_>>()).collect::<Vec<_>>(),
    });
    std::fs::write(path, serde_json::to_vec(&doc).unwrap())
}

fn read_table(path: &Path) -> std::io::Result<Table> {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let columns: Vec<Column> = doc["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Column {
            name: c[0].as_str().unwrap().into(),
            data_type: match c[1].as_str().unwrap() {
                "int64" => ColumnType::Int64,
                "int32" => ColumnType::Int32,
                "utf8" => ColumnType::Utf8,
                "timestamp_ms" => ColumnType::TimestampMillisUtc,
                other => ColumnType::Other(other.into()),
            },
            nullable: false,
        })
        .collect();
    let rows = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .zip(&columns)
                .map(|(v, c)| match (&c.data_type, v) {
                    (_, serde_json::Value::Null) => Value::Null,
                    (ColumnType::Utf8, v) => Value::Utf8(v.as_str().unwrap().into()),
                    (ColumnType::TimestampMillisUtc, v) => {
                        Value::TimestampMillis(v.as_i64().unwrap())
                    }
                    (_, v) => Value::Int(v.as_i64().unwrap()),
                })
                .collect()
        })
        .collect();
    Ok(Table { columns, rows })
}

impl DataFixtures for JsonFixtures {
    fn write_parquet(&self, path: &Path, table: &Table) -> Result<(), FixtureError> {
        write_table(path, table).map_err(|e| FixtureError {
            message: e.to_string(),
        })
    }

    fn read_parquet(&self, path: &Path) -> Result<Table, FixtureError> {
        read_table(path).map_err(|e| FixtureError {
            message: e.to_string(),
        })
    }
}

// ---------------------------------------------------------------------------
// A toy engine: projections and UNION ALL of the kit's inputs, keeping the
// contract (unless told to break one rule).
// ---------------------------------------------------------------------------

const SELECT: &str = "SELECT op, event_time, city, population FROM ";
/// The projection that leaves `op` to the engine.
const SELECT_WITHOUT_OP: &str = "SELECT event_time, city, population FROM ";
/// What the raw-query check adds to `SELECT * FROM input`.
const COMPUTED: &str = ", CAST('2023-01-01 00:00:00' AS TIMESTAMP) AS computed_time";

#[derive(Clone, Copy, Default)]
struct Flaws {
    ignore_offset_interval: bool,
    internal_error_for_bad_sql: bool,
    skip_output_when_empty: bool,
    /// kamu's DataFusion engine: `op` = Append when the query does not select it.
    append_when_op_not_selected: bool,
    /// A raw query writes a timestamp computed in SQL as Timestamp(ns) without a time zone.
    naive_timestamps_in_raw_query: bool,
}

impl Flaws {
    fn bad_sql(&self, query: &str) -> EngineError {
        if self.internal_error_for_bad_sql {
            EngineError::Internal {
                message: "parser crashed".into(),
                backtrace: None,
            }
        } else {
            EngineError::invalid_query(format!("cannot parse {query:?}"))
        }
    }
}

struct ToyEngine {
    flaws: Flaws,
}

fn io_error(e: std::io::Error) -> EngineError {
    EngineError::internal(&e)
}

impl Engine for ToyEngine {
    async fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        _progress: ProgressSink,
    ) -> Result<RawQuerySuccess, EngineError> {
        let Transform::Sql(sql) = &request.transform;
        let query = sql
            .steps()
            .last()
            .map(|s| s.query.clone())
            .unwrap_or_default();
        let Some(rest) = query.strip_prefix("SELECT *") else {
            return Err(self.flaws.bad_sql(&query));
        };
        let mut output = Table::default();
        for path in &request.input_data_paths {
            let table = read_table(Path::new(path)).map_err(io_error)?;
            output.columns = table.columns;
            output.rows.extend(table.rows);
        }
        if rest.starts_with(COMPUTED) {
            output.columns.push(Column {
                name: "computed_time".into(),
                data_type: if self.flaws.naive_timestamps_in_raw_query {
                    ColumnType::Other("Timestamp(Nanosecond, None)".into())
                } else {
                    ColumnType::TimestampMillisUtc
                },
                nullable: false,
            });
            for row in &mut output.rows {
                row.push(Value::TimestampMillis(1_672_531_200_000));
            }
        }
        write_table(Path::new(&request.output_data_path), &output).map_err(io_error)?;
        Ok(RawQuerySuccess {
            num_records: output.rows.len() as u64,
        })
    }

    async fn execute_transform(
        &self,
        request: TransformRequest,
        _progress: ProgressSink,
    ) -> Result<TransformSuccess, EngineError> {
        let Transform::Sql(sql) = &request.transform;
        let query = sql
            .steps()
            .last()
            .map(|s| s.query.clone())
            .unwrap_or_default();
        if !query.starts_with("SELECT ") {
            return Err(self.flaws.bad_sql(&query));
        }
        if query.starts_with("SELECT offset") {
            return Err(EngineError::invalid_query(
                "the query outputs the system column `offset`",
            ));
        }
        let (query, negative_only) = match query.strip_suffix(" WHERE population < 0") {
            Some(q) => (q.to_owned(), true),
            None => (query.clone(), false),
        };
        let mut rows = Vec::new();
        let mut columns = None;
        let mut op_selected = true;
        for part in query.split(" UNION ALL ") {
            let alias = match part.strip_prefix(SELECT) {
                Some(alias) => alias,
                None => {
                    op_selected = false;
                    part.strip_prefix(SELECT_WITHOUT_OP).ok_or_else(|| {
                        EngineError::invalid_query(format!("cannot parse {part:?}"))
                    })?
                }
            };
            let input = request
                .query_inputs
                .iter()
                .find(|i| i.query_alias == alias)
                .ok_or_else(|| EngineError::invalid_query(format!("no table {alias}")))?;
            let schema = read_table(Path::new(&input.schema_file)).map_err(io_error)?;
            columns.get_or_insert(schema.columns);
            let Some(interval) = input.offset_interval else {
                continue;
            };
            for path in &input.data_paths {
                let table = read_table(Path::new(path)).map_err(io_error)?;
                for row in table.rows {
                    let Value::Int(offset) = row[0] else {
                        return Err(EngineError::invalid_query("offset is not an integer"));
                    };
                    if self.flaws.ignore_offset_interval || interval.contains(offset as u64) {
                        rows.push(row);
                    }
                }
            }
        }
        if negative_only {
            rows.retain(|row| matches!(row[5], Value::Int(p) if p < 0));
        }
        let system_time = Value::TimestampMillis(request.system_time.timestamp_millis());
        for (i, row) in rows.iter_mut().enumerate() {
            row[0] = Value::Int((request.next_offset + i as u64) as i64);
            row[2] = system_time.clone();
            if !op_selected && self.flaws.append_when_op_not_selected {
                row[1] = Value::Int(0);
            }
        }
        let n = rows.len() as u64;
        if n > 0 || !self.flaws.skip_output_when_empty {
            let output = Table {
                columns: columns.unwrap_or_default(),
                rows,
            };
            write_table(Path::new(&request.new_data_path), &output).map_err(io_error)?;
        }
        let new_watermark = request
            .query_inputs
            .iter()
            .filter_map(|i| i.explicit_watermarks.last().map(|w| w.event_time))
            .min();
        Ok(TransformSuccess {
            new_offset_interval: n.checked_sub(1).and_then(|last| {
                OffsetInterval::new(request.next_offset, request.next_offset + last)
            }),
            new_watermark,
        })
    }
}

async fn serve_toy(flaws: Flaws) -> (EngineAddress, oneshot::Sender<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let bound = EngineServer::new(ToyEngine { flaws })
        .address(EngineAddress::loopback(0))
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .bind()
        .await
        .unwrap();
    let address = bound.local_address().clone();
    tokio::spawn(bound.serve());
    (address, stop)
}

fn options(dir: &Path) -> ConformanceOptions {
    let mut options = ConformanceOptions::new("toy").with_data(DataSetup {
        fixtures: Arc::new(JsonFixtures),
        host_dir: dir.to_path_buf(),
        engine_dir: dir.to_path_buf(),
    });
    options.call_deadline = Duration::from_secs(20);
    options
}

async fn run_against(flaws: Flaws) -> conformance::ConformanceReport {
    let dir = tempfile::tempdir().unwrap();
    let (address, _stop) = serve_toy(flaws).await;
    conformance::run(&address, &options(dir.path()))
        .await
        .unwrap()
}

fn failed(report: &conformance::ConformanceReport) -> Vec<Check> {
    report
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Failed)
        .map(|c| c.check)
        .collect()
}

#[tokio::test]
async fn engine_keeping_the_contract_passes_every_check() {
    let report = run_against(Flaws::default()).await;
    assert!(report.is_conformant(), "{report}");
    assert_eq!(report.count(CheckStatus::Passed), 14, "{report}");
    let text = report.to_string();
    assert!(
        text.ends_with("conformance: 14 passed, 0 failed, 0 not run: PASSED"),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["checks"][0]["check"],
        "malformed_request_answered_invalid_query"
    );
    assert_eq!(json["checks"][0]["status"], "passed");
    assert_eq!(json["verdict"], "passed");
}

#[tokio::test]
async fn engine_reading_outside_the_offset_interval_fails_that_check() {
    let report = run_against(Flaws {
        ignore_offset_interval: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(
        failed(&report),
        vec![Check::InputOffsetIntervalRespected],
        "{report}"
    );
    let reason = &report
        .get(Check::InputOffsetIntervalRespected)
        .unwrap()
        .reason;
    assert!(reason.contains("expected 3 output rows, got 5"), "{reason}");
}

#[tokio::test]
async fn engine_answering_bad_sql_with_internal_error_fails_that_check() {
    let report = run_against(Flaws {
        internal_error_for_bad_sql: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(
        failed(&report),
        vec![Check::InvalidQueryForBadSql],
        "{report}"
    );
}

#[tokio::test]
async fn engine_skipping_zero_row_output_fails_the_empty_checks() {
    let report = run_against(Flaws {
        skip_output_when_empty: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(
        failed(&report),
        vec![Check::EmptyInput, Check::ZeroRowOutputWritesFile],
        "{report}"
    );
}

#[tokio::test]
async fn engine_writing_append_when_the_query_does_not_select_op_fails_that_check() {
    let report = run_against(Flaws {
        append_when_op_not_selected: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(
        failed(&report),
        vec![Check::OperationTypeCarriedWhenNotSelected],
        "{report}"
    );
    let reason = &report
        .get(Check::OperationTypeCarriedWhenNotSelected)
        .unwrap()
        .reason;
    assert!(
        reason.contains("op column should be [Int(0), Int(0), Int(1), Int(2), Int(3)], got [Int(0), Int(0), Int(0), Int(0), Int(0)]"),
        "{reason}"
    );
    assert!(reason.contains("does not select `op`"), "{reason}");
}

#[tokio::test]
async fn engine_writing_naive_nanosecond_timestamps_fails_the_raw_query_types_check() {
    let report = run_against(Flaws {
        naive_timestamps_in_raw_query: true,
        ..Flaws::default()
    })
    .await;
    assert_eq!(
        failed(&report),
        vec![Check::RawQueryOutputTypes],
        "{report}"
    );
    let reason = &report.get(Check::RawQueryOutputTypes).unwrap().reason;
    assert!(
        reason.contains(
            "`computed_time` is Timestamp(Nanosecond, None), ODF engines write Timestamp(ms, \"UTC\")"
        ),
        "{reason}"
    );
}

#[tokio::test]
async fn without_fixtures_the_data_checks_are_not_run_and_the_run_has_not_passed() {
    let (address, _stop) = serve_toy(Flaws::default()).await;
    let report = conformance::run(&address, &ConformanceOptions::new("toy"))
        .await
        .unwrap();
    assert_eq!(report.count(CheckStatus::Passed), 2, "{report}");
    assert_eq!(report.count(CheckStatus::NotRun), 12, "{report}");
    assert_eq!(report.count(CheckStatus::Failed), 0, "{report}");
    assert_eq!(report.verdict(), Verdict::Incomplete);
    assert!(!report.is_conformant());
    let text = report.to_string();
    assert!(
        text.contains("NOT RUN terminal_message_rules: needs input files"),
        "{text}"
    );
    assert!(text.ends_with("NOT PASSED (checks not run)"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["verdict"], "incomplete");
    assert_eq!(json["checks"][2]["status"], "not_run");
}

// A peer that answers every call with two terminal messages.
#[derive(Clone)]
struct TwoTerminals;

type FrameStream = std::pin::Pin<Box<dyn Stream<Item = Result<Envelope, Status>> + Send>>;

fn two_terminals(frame: Envelope) -> Result<Response<FrameStream>, Status> {
    Ok(Response::new(Box::pin(futures::stream::iter(vec![
        Ok(frame.clone()),
        Ok(frame),
    ]))))
}

#[tonic::async_trait]
impl engine_server::Engine for TwoTerminals {
    type ExecuteRawQueryStream = FrameStream;
    type ExecuteTransformStream = FrameStream;
    type ValidateQueryStream = FrameStream;
    type MigrateQueryStream = FrameStream;
    type DeriveProvenanceStream = FrameStream;

    async fn execute_raw_query(
        &self,
        _: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        two_terminals(Envelope::from_flatbuffer(
            RawQueryResponse::from(EngineResponse::Success(RawQuerySuccess { num_records: 1 }))
                .encode(),
        ))
    }
    async fn execute_transform(
        &self,
        _: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        two_terminals(Envelope::from_flatbuffer(
            TransformResponse::from(EngineResponse::Success(TransformSuccess::default())).encode(),
        ))
    }
    async fn validate_query(&self, _: Request<Envelope>) -> Result<Response<FrameStream>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn migrate_query(&self, _: Request<Envelope>) -> Result<Response<FrameStream>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn derive_provenance(
        &self,
        _: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        Err(Status::unimplemented("no"))
    }
}

#[tokio::test]
async fn peer_sending_two_terminals_fails_the_stream_rules_check() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = EngineAddress::Tcp(listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RawEngineServer::new(TwoTerminals))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let dir = tempfile::tempdir().unwrap();
    let report = conformance::run(&address, &options(dir.path()))
        .await
        .unwrap();
    let rules = report.get(Check::TerminalMessageRules).unwrap();
    assert_eq!(rules.status, CheckStatus::Failed, "{report}");
    assert!(
        rules.reason.contains("after the terminal message"),
        "{}",
        rules.reason
    );
    // UNIMPLEMENTED for all three Weir operations is conformant.
    let weir = report.get(Check::UnimplementedOperationsReported).unwrap();
    assert_eq!(weir.status, CheckStatus::Passed, "{report}");
    assert!(
        weir.reason.contains("ValidateQuery: UNIMPLEMENTED"),
        "{}",
        weir.reason
    );
}
