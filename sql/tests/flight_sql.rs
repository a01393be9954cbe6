//! The Flight SQL server on a real loopback socket: a Rust Flight client for the protocol's statuses, and
//! a stock client (ADBC's Flight SQL driver with pyarrow, `tests/flight_sql_client.py`) for what users run.
//!
//! The Python client needs `python3 -m pip install adbc-driver-flightsql pyarrow`. Without them the test
//! prints SKIPPED, unless `WEIR_REQUIRE_FLIGHT_SQL=1` (CI), where it fails.

mod common;

use std::net::SocketAddr;
use std::process::Stdio;

use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
use arrow_flight::{FlightDescriptor, decode::FlightRecordBatchStream};
use futures::TryStreamExt;
use prost::Message;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use weir_sql::{SqlError, bind_loopback, serve_flight_sql};

/// A server over the test tables on 127.0.0.1 and a free port; send on the sender to stop it.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), SqlError>>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let session = common::session(dir.path()).await;
        let listener = bind_loopback(0).await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("its address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_flight_sql(session, listener, async move {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop,
            task,
            _dir: dir,
        }
    }

    async fn client(&self) -> FlightServiceClient<tonic::transport::Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .expect("an endpoint")
            .connect()
            .await
            .expect("connect to the server");
        FlightServiceClient::new(channel)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("the server task")
            .expect("the server stops cleanly");
    }
}

fn statement(sql: &str) -> FlightDescriptor {
    FlightDescriptor::new_cmd(
        CommandStatementQuery {
            query: sql.to_owned(),
            transaction_id: None,
        }
        .as_any()
        .encode_to_vec(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_query_returns_its_rows_through_get_flight_info_and_do_get() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let info = client
        .get_flight_info(statement(
            r#"SELECT city, count(*) AS n FROM "readings.clean" GROUP BY city ORDER BY city"#,
        ))
        .await
        .expect("flight info")
        .into_inner();
    let schema = info.clone().try_decode_schema().expect("a schema");
    let names: Vec<_> = schema.fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["city", "n"]);
    let ticket = info.endpoint[0].ticket.clone().expect("a ticket");
    let stream = client.do_get(ticket).await.expect("do_get").into_inner();
    let batches: Vec<_> = FlightRecordBatchStream::new_from_flight_data(
        stream.map_err(arrow_flight::error::FlightError::from),
    )
    .try_collect()
    .await
    .expect("the rows");
    let text = weir_sql::format_results(&schema.into(), &batches, weir_sql::OutputFormat::Csv)
        .expect("csv");
    assert_eq!(text, "city,n\nLima,2\nOslo,2\nPune,1\n");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sql_unknown_tables_and_writes_are_invalid_argument() {
    let server = Server::start().await;
    let mut client = server.client().await;
    for (sql, says) in [
        ("SELEC 1", "does not parse"),
        ("SELECT * FROM nope", "nope"),
        (r#"DROP TABLE "readings.clean""#, "read-only"),
        (r#"SELECT * FROM "readings.raw""#, "no data yet"),
    ] {
        let status = client
            .get_flight_info(statement(sql))
            .await
            .expect_err("refused");
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{sql}: {status:?}"
        );
        assert!(
            status.message().contains(says),
            "{sql}: {}",
            status.message()
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn a_listener_off_loopback_is_refused() {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind");
    let session = weir_sql::SqlSession::new(Vec::new())
        .await
        .expect("a session");
    let err = serve_flight_sql(session, listener, std::future::ready(()))
        .await
        .expect_err("not loopback");
    assert!(matches!(err, SqlError::NotLoopback { .. }), "{err:?}");
}

/// Whether `python3` can import the ADBC Flight SQL driver and pyarrow; SKIPPED or a failure otherwise.
async fn python_client_available() -> bool {
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import adbc_driver_flightsql.dbapi, pyarrow"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await;
    let why = match probe {
        Ok(out) if out.status.success() => return true,
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        Err(e) => format!("cannot run python3: {e}"),
    };
    let message = format!(
        "the Flight SQL client test needs python3 with adbc-driver-flightsql and pyarrow \
         (python3 -m pip install adbc-driver-flightsql pyarrow): {why}"
    );
    if std::env::var("WEIR_REQUIRE_FLIGHT_SQL").is_ok_and(|v| v == "1") {
        panic!("{message}");
    }
    println!("SKIPPED: {message}");
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adbc_flight_sql_driver_queries_lists_tables_and_sees_errors() {
    if !python_client_available().await {
        return;
    }
    let server = Server::start().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/flight_sql_client.py");
    let run = tokio::process::Command::new("python3")
        .arg(script)
        .arg(format!("grpc://{}", server.addr))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .expect("the client finishes within 2 minutes")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let seen: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the client prints JSON ({e}):\n{stdout}\n{stderr}"));

    assert_eq!(
        seen["columns"],
        serde_json::json!(["offset", "city", "temp"])
    );
    assert_eq!(
        seen["types"],
        serde_json::json!(["int64", "string", "double"])
    );
    assert_eq!(
        seen["rows"],
        serde_json::json!([
            [0, "Oslo", 3.5],
            [1, "Lima", 18.0],
            [2, "Oslo", null],
            [3, "Lima", 19.5],
            [4, "Pune", 31.0]
        ])
    );
    assert_eq!(seen["joined"], serde_json::json!(["Pune", 560]));
    assert_eq!(
        seen["empty"],
        serde_json::json!({ "columns": ["city"], "rows": [] })
    );
    for (key, says) in [
        ("bad_query", "nope"),
        ("bad_syntax", "does not parse"),
        ("read_only", "read-only"),
        ("no_data", "readings.raw"),
    ] {
        let error = &seen[key];
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{key}: {error}");
        // gRPC InvalidArgument is ADBC's INVALID_ARGUMENT, a DB-API ProgrammingError.
        assert_eq!(error["type"], "ProgrammingError", "{key}: {error}");
        assert!(message.contains("INVALID_ARGUMENT"), "{key}: {error}");
    }
    assert_eq!(seen["catalogs"], serde_json::json!(["weir"]));
    assert_eq!(
        seen["tables"],
        serde_json::json!([
            ["public", "readings.clean"],
            ["public", "readings.empty"],
            ["public", "weather-stations"]
        ])
    );
    assert_eq!(
        seen["table_schema"],
        serde_json::json!(["offset", "op", "system_time", "city", "temp"])
    );
    server.stop().await;
}
