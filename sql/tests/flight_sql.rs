//! The Flight SQL server on a real loopback socket: Rust Flight SQL clients for the protocol (statuses,
//! live heads, parameters, authentication, TLS), and the stock clients kamu documents (ADBC's Flight SQL
//! driver with pandas, flightsql-dbapi, SQLAlchemy; `tests/flight_sql_client.py`,
//! `tests/flight_sql_clients.py`) for what users run.
//!
//! The Python clients need `python3 -m pip install adbc-driver-flightsql pyarrow pandas flightsql-dbapi
//! 'sqlalchemy<2'`. Without them those tests print SKIPPED, unless `WEIR_REQUIRE_FLIGHT_SQL=1` (CI), where
//! they fail.

use crate::common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
use arrow_flight::{FlightDescriptor, decode::FlightRecordBatchStream};
use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use prost::Message;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use weir_sql::{Auth, LiveSession, ServeOptions, SourceError, SqlError, Tables, Tls, bind};

const TOKEN: &str = "ci-token-0123456789abcdef";

/// A server over the test tables on 127.0.0.1 and a free port; send on the sender to stop it.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), SqlError>>,
    /// The tables the server sees; a test changes them as a pull would.
    tables: Arc<Mutex<Tables>>,
    dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Self {
        Self::start_with(ServeOptions::default()).await
    }

    async fn start_with(options: ServeOptions) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let tables = Arc::new(Mutex::new(common::tables(dir.path())));
        let shared = tables.clone();
        let live = LiveSession::new(move || {
            let now = shared.lock().expect("the tables").clone();
            async move { Ok::<_, SourceError>(now) }
        });
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0)), &options.auth)
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("its address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(weir_sql::serve_flight_sql(
            live,
            listener,
            options,
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            addr,
            stop,
            task,
            tables,
            dir,
        }
    }

    /// Commits a third slice of `readings.clean` (two more Oslo records), as a pull would.
    fn commit_slice(&self) {
        let third = common::write_slice(
            self.dir.path(),
            "f1620aa03",
            &common::readings_slice(5, &["Oslo", "Oslo"], &[Some(1.0), Some(2.0)]),
        );
        self.tables.lock().expect("the tables")[0].files.push(third);
    }

    async fn channel(&self) -> tonic::transport::Channel {
        tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .expect("an endpoint")
            .connect()
            .await
            .expect("connect to the server")
    }

    async fn client(&self) -> FlightServiceClient<tonic::transport::Channel> {
        FlightServiceClient::new(self.channel().await)
    }

    async fn sql_client(&self) -> FlightSqlServiceClient<tonic::transport::Channel> {
        FlightSqlServiceClient::new(self.channel().await)
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

/// Runs `sql` through GetFlightInfo + DoGet with `client` and returns its rows as CSV.
async fn csv_of(
    client: &mut FlightSqlServiceClient<tonic::transport::Channel>,
    sql: &str,
) -> String {
    let info = client
        .execute(sql.to_owned(), None)
        .await
        .expect("flight info");
    rows_csv(client, info).await
}

async fn rows_csv(
    client: &mut FlightSqlServiceClient<tonic::transport::Channel>,
    info: arrow_flight::FlightInfo,
) -> String {
    let ticket = info.endpoint[0].ticket.clone().expect("a ticket");
    let batches: Vec<RecordBatch> = client
        .do_get(ticket)
        .await
        .expect("do_get")
        .try_collect()
        .await
        .expect("the rows");
    let Some(first) = batches.first() else {
        return String::new();
    };
    weir_sql::format_results(&first.schema(), &batches, weir_sql::OutputFormat::Csv).expect("csv")
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
async fn bad_sql_too_deep_sql_unknown_tables_and_writes_are_invalid_argument() {
    let server = Server::start().await;
    let mut client = server.client().await;
    // Nested past the engine's bound: refused before DataFusion recurses over it (which would abort the
    // server's process), and the server goes on answering the statements after it.
    let deep = format!("SELECT {} AS x", vec!["1"; 20_000].join(" + "));
    for (sql, says) in [
        (deep.as_str(), "levels deep"),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_sees_the_heads_committed_before_it_ran() {
    let server = Server::start().await;
    let mut client = server.sql_client().await;
    let count = r#"SELECT count(*) AS n FROM "readings.clean""#;
    assert_eq!(csv_of(&mut client, count).await, "n\n5\n");
    // Planned before the commit, run after it: it runs on the heads when it runs.
    let planned = client
        .execute(count.to_owned(), None)
        .await
        .expect("planned");
    let mut prepared = client
        .prepare(count.to_owned(), None)
        .await
        .expect("prepared");
    server.commit_slice();
    assert_eq!(rows_csv(&mut client, planned).await, "n\n7\n");
    assert_eq!(csv_of(&mut client, count).await, "n\n7\n");
    let info = prepared
        .execute()
        .await
        .expect("the prepared statement again");
    assert_eq!(rows_csv(&mut client, info).await, "n\n7\n");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_take_parameters_and_report_their_schema() {
    let server = Server::start().await;
    let mut client = server.sql_client().await;
    let mut prepared = client
        .prepare(
            r#"SELECT "offset" FROM "readings.clean" WHERE city = ? AND "offset" >= ? ORDER BY "offset""#
                .to_owned(),
            None,
        )
        .await
        .expect("prepared");
    let params: Vec<(String, DataType)> = prepared
        .parameter_schema()
        .expect("a parameter schema")
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    assert_eq!(
        params,
        [
            ("$1".to_owned(), DataType::Utf8),
            ("$2".to_owned(), DataType::Int64)
        ]
    );
    let bind = |city: &str, from: i64| {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("city", DataType::Utf8, false),
                Field::new("from", DataType::Int64, false),
            ])),
            vec![
                Arc::new(StringArray::from(vec![city])),
                Arc::new(Int64Array::from(vec![from])),
            ],
        )
        .expect("a batch")
    };
    prepared.set_parameters(bind("Oslo", 0)).expect("bound");
    let info = prepared.execute().await.expect("runs");
    assert_eq!(rows_csv(&mut client, info).await, "offset\n0\n2\n");
    prepared.set_parameters(bind("Lima", 2)).expect("bound");
    let info = prepared.execute().await.expect("runs again");
    assert_eq!(rows_csv(&mut client, info).await, "offset\n3\n");

    // One value for two parameters is refused where it is bound.
    let one = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("city", DataType::Utf8, false)])),
        vec![Arc::new(StringArray::from(vec!["Oslo"]))],
    )
    .expect("a batch");
    prepared.set_parameters(one).expect("set");
    let err = prepared.execute().await.expect_err("too few");
    assert!(err.to_string().contains("2 parameter(s), 1 bound"), "{err}");
    prepared.close().await.expect("closes");
    server.stop().await;
}

fn auth() -> Auth {
    Auth::none()
        .with_user("alice", "correct horse")
        .with_token("ci", TOKEN)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_gives_a_session_token_and_bearer_tokens_work_without_a_handshake() {
    let server = Server::start_with(ServeOptions {
        auth: auth(),
        tls: None,
    })
    .await;
    let count = r#"SELECT count(*) AS n FROM "readings.clean""#;

    let mut nobody = server.sql_client().await;
    let err = nobody
        .execute(count.to_owned(), None)
        .await
        .expect_err("no credentials");
    assert!(err.to_string().contains("authentication required"), "{err}");

    let mut wrong = server.sql_client().await;
    let err = wrong
        .handshake("alice", "wrong")
        .await
        .expect_err("wrong password");
    assert!(
        err.to_string().contains("wrong user name or password"),
        "{err}"
    );

    let mut alice = server.sql_client().await;
    let payload = alice
        .handshake("alice", "correct horse")
        .await
        .expect("logs in");
    let token = String::from_utf8(payload.to_vec()).expect("a text token");
    assert!(token.starts_with("weir_"), "{token}");
    assert_eq!(csv_of(&mut alice, count).await, "n\n5\n");

    // The session token works on another connection; a made-up one does not.
    let mut again = server.sql_client().await;
    again.set_token(token);
    assert_eq!(csv_of(&mut again, count).await, "n\n5\n");
    let mut forged = server.sql_client().await;
    forged.set_token("weir_00000000".to_owned());
    let err = forged
        .execute(count.to_owned(), None)
        .await
        .expect_err("forged");
    assert!(err.to_string().contains("not valid"), "{err}");

    let mut ci = server.sql_client().await;
    ci.set_token(TOKEN.to_owned());
    assert_eq!(csv_of(&mut ci, count).await, "n\n5\n");

    // Anonymous is not configured here.
    let mut anonymous = server.sql_client().await;
    let err = anonymous
        .handshake("anonymous", "anonymous")
        .await
        .expect_err("refused");
    assert!(
        err.to_string().contains("anonymous access is not allowed"),
        "{err}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_logs_in_only_when_allowed() {
    let server = Server::start_with(ServeOptions {
        auth: Auth::none().allowing_anonymous(true),
        tls: None,
    })
    .await;
    let mut anonymous = server.sql_client().await;
    let token = anonymous
        .handshake("anonymous", "anonymous")
        .await
        .expect("allowed");
    assert!(token.starts_with(b"anon_"));
    assert_eq!(csv_of(&mut anonymous, "SELECT 1 AS one").await, "one\n1\n");
    let mut empty_password = server.sql_client().await;
    empty_password
        .handshake("anonymous", "")
        .await
        .expect("allowed");
    // Still no access without logging in.
    let mut nobody = server.sql_client().await;
    let err = nobody
        .execute("SELECT 1".to_owned(), None)
        .await
        .expect_err("no login");
    assert!(err.to_string().contains("authentication required"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn a_listener_off_loopback_needs_users_or_tokens() {
    let any: SocketAddr = "0.0.0.0:0".parse().expect("an address");
    let err = bind(any, &Auth::none()).await.expect_err("no auth");
    assert!(matches!(err, SqlError::NotLoopback { .. }), "{err:?}");
    let err = bind(any, &Auth::none().allowing_anonymous(true))
        .await
        .expect_err("anonymous is not authentication");
    assert!(matches!(err, SqlError::NotLoopback { .. }), "{err:?}");
    // serve_flight_sql checks a listener bound elsewhere too (bound on loopback here: the tests use only
    // loopback; the check is on the address, so a wildcard listener is what it refuses).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let ok = weir_sql::serve_flight_sql(
        LiveSession::fixed(Vec::new()),
        listener,
        ServeOptions::default(),
        std::future::ready(()),
    )
    .await;
    assert!(ok.is_ok(), "{ok:?}");
}

/// A self-signed certificate for 127.0.0.1 and localhost, PEM: (certificate, key).
fn self_signed() -> (String, String) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("a certificate");
    (certified.cert.pem(), certified.signing_key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_clients_that_trust_the_certificate() {
    let (cert, key) = self_signed();
    let server = Server::start_with(ServeOptions {
        auth: auth(),
        tls: Some(Tls::from_pem(cert.clone(), key)),
    })
    .await;
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&cert))
        .domain_name("localhost");
    let channel = tonic::transport::Endpoint::from_shared(format!("https://{}", server.addr))
        .expect("an endpoint")
        .tls_config(tls)
        .expect("tls")
        .connect()
        .await
        .expect("a TLS connection");
    let mut client = FlightSqlServiceClient::new(channel);
    client
        .handshake("alice", "correct horse")
        .await
        .expect("logs in");
    assert_eq!(csv_of(&mut client, "SELECT 1 AS one").await, "one\n1\n");

    // A plain-text client gets no answer from a TLS server.
    let mut plain = server.sql_client_plain().await;
    assert!(plain.handshake("alice", "correct horse").await.is_err());
    server.stop().await;
}

impl Server {
    /// A plain-text client; `None` if it cannot even connect.
    async fn sql_client_plain(&self) -> FlightSqlServiceClient<tonic::transport::Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .expect("an endpoint")
            .connect_lazy();
        FlightSqlServiceClient::new(channel)
    }
}

#[test]
fn tls_files_that_are_not_pem_are_refused_naming_them() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, "not a certificate").expect("write");
    std::fs::write(&key, "not a key").expect("write");
    let err = Tls::from_files(&cert, &key).expect_err("not PEM");
    assert!(err.to_string().contains("cert.pem"), "{err}");
    let err = Tls::from_files(&dir.path().join("missing.pem"), &key).expect_err("missing");
    assert!(err.to_string().contains("missing.pem"), "{err}");
}

/// Whether `python3` can import `modules`; SKIPPED or a failure otherwise.
async fn python_has(modules: &str) -> bool {
    let probe = tokio::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
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
        "the Flight SQL client tests need python3 with {modules} (python3 -m pip install \
         adbc-driver-flightsql pyarrow pandas flightsql-dbapi 'sqlalchemy<2'): {why}"
    );
    if std::env::var("WEIR_REQUIRE_FLIGHT_SQL").is_ok_and(|v| v == "1") {
        panic!("{message}");
    }
    println!("SKIPPED: {message}");
    false
}

/// Runs a client script with `args` and parses the one JSON document it prints.
async fn run_client(script: &str, args: &[String]) -> serde_json::Value {
    let script = format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR"));
    let run = tokio::process::Command::new("python3")
        .arg(&script)
        .args(args)
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
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the client prints JSON ({e}):\n{stdout}\n{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adbc_flight_sql_driver_queries_lists_tables_and_sees_errors() {
    if !python_has("adbc_driver_flightsql.dbapi, pyarrow").await {
        return;
    }
    let server = Server::start().await;
    let seen = run_client("flight_sql_client.py", &[format!("grpc://{}", server.addr)]).await;

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

/// What every kamu example client sees over the test tables: `select 1`, `show tables`, the readings.
fn assert_kamu_example_results(client: &str, seen: &serde_json::Value) {
    let tables = seen["show_tables"].to_string();
    for name in ["readings.clean", "readings.empty", "weather-stations"] {
        assert!(tables.contains(name), "{client}: {tables}");
    }
    let rows = seen["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{client}: {seen}"));
    assert_eq!(rows.len(), 5, "{client}: {seen}");
    assert_eq!(rows[4]["city"], "Pune", "{client}: {seen}");
}

fn credentials(kind: &str) -> Vec<String> {
    match kind {
        "anonymous" => vec![
            "--user".into(),
            "anonymous".into(),
            "--password".into(),
            "anonymous".into(),
        ],
        "user" => vec![
            "--user".into(),
            "alice".into(),
            "--password".into(),
            "correct horse".into(),
        ],
        "wrong" => vec![
            "--user".into(),
            "alice".into(),
            "--password".into(),
            "wrong".into(),
        ],
        "token" => vec!["--token".into(), TOKEN.into()],
        _ => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kamus_example_clients_log_in_query_and_bind_parameters() {
    if !python_has("adbc_driver_flightsql.dbapi, pyarrow, pandas, flightsql, sqlalchemy").await {
        return;
    }
    let server = Server::start_with(ServeOptions {
        auth: auth().allowing_anonymous(true),
        tls: None,
    })
    .await;
    let uri = format!("grpc://{}", server.addr);
    let port = server.addr.port().to_string();
    for login in ["anonymous", "user", "token"] {
        // ADBC + pandas, as client_flightsql_adbc.py.
        let mut args = vec!["adbc".to_owned(), uri.clone()];
        args.extend(credentials(login));
        let seen = run_client("flight_sql_clients.py", &args).await;
        assert_eq!(
            seen["select1"].as_array().map(Vec::len),
            Some(1),
            "adbc {login}: {seen}"
        );
        assert_kamu_example_results("adbc", &seen);
        assert_eq!(
            seen["param_schema"],
            serde_json::json!([["$1", "string"]]),
            "{seen}"
        );
        assert_eq!(
            seen["params"],
            serde_json::json!([[1, "Lima"], [3, "Lima"]]),
            "{seen}"
        );
        assert_eq!(
            seen["params_again"],
            serde_json::json!([[0, "Oslo"], [2, "Oslo"]]),
            "{seen}"
        );
        let unbound = seen["unbound"]["message"].as_str().unwrap_or_default();
        assert!(unbound.contains("none are bound"), "{seen}");

        // flightsql-dbapi, as client_flightsql_dbapi2.py.
        let mut args = vec!["dbapi".to_owned(), "127.0.0.1".to_owned(), port.clone()];
        args.extend(credentials(login));
        let seen = run_client("flight_sql_clients.py", &args).await;
        assert_eq!(
            seen["select1"],
            serde_json::json!({ "columns": ["value"], "rows": [[1]] }),
            "dbapi {login}: {seen}"
        );
        assert_kamu_example_results("dbapi", &seen);
        assert_eq!(
            seen["params"],
            serde_json::json!([{ "offset": 1, "city": "Lima" }, { "offset": 3, "city": "Lima" }]),
            "{seen}"
        );

        // SQLAlchemy through flightsql-dbapi, as client_flightsql_sqlalchemy.py.
        let mut args = vec![
            "sqlalchemy".to_owned(),
            "127.0.0.1".to_owned(),
            port.clone(),
        ];
        args.extend(credentials(login));
        let seen = run_client("flight_sql_clients.py", &args).await;
        assert_eq!(
            seen["select1"],
            serde_json::json!([{ "value": 1 }]),
            "sqlalchemy {login}: {seen}"
        );
        assert_kamu_example_results("sqlalchemy", &seen);
        assert_eq!(
            seen["table_names"],
            serde_json::json!(["readings.clean", "readings.empty", "weather-stations"]),
            "{seen}"
        );
        assert_eq!(
            seen["columns"],
            serde_json::json!(["offset", "op", "system_time", "city", "temp"]),
            "{seen}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kamus_example_clients_are_refused_with_a_wrong_password_or_no_anonymous_access() {
    if !python_has("adbc_driver_flightsql.dbapi, pyarrow, pandas, flightsql, sqlalchemy").await {
        return;
    }
    let server = Server::start_with(ServeOptions {
        auth: auth(),
        tls: None,
    })
    .await;
    let uri = format!("grpc://{}", server.addr);
    let port = server.addr.port().to_string();
    for (login, says) in [
        ("wrong", &["wrong user name or password"][..]),
        ("anonymous", &["anonymous access is not allowed"][..]),
        // flightsql-dbapi without credentials sends `Bearer None`.
        (
            "none",
            &["authentication required", "bearer token is not valid"][..],
        ),
    ] {
        for client in ["adbc", "dbapi", "sqlalchemy"] {
            let mut args = match client {
                "adbc" => vec![client.to_owned(), uri.clone()],
                _ => vec![client.to_owned(), "127.0.0.1".to_owned(), port.clone()],
            };
            args.extend(credentials(login));
            let seen = run_client("flight_sql_clients.py", &args).await;
            let message = seen["error"]["message"].as_str().unwrap_or_default();
            assert!(
                says.iter().any(|s| message.contains(s)),
                "{client} {login}: {seen}"
            );
            assert!(
                message.to_lowercase().contains("unauthenticated"),
                "{client} {login}: {seen}"
            );
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adbc_over_tls_with_the_servers_certificate() {
    if !python_has("adbc_driver_flightsql.dbapi, pyarrow, pandas").await {
        return;
    }
    let (cert, key) = self_signed();
    let server = Server::start_with(ServeOptions {
        auth: auth(),
        tls: Some(Tls::from_pem(cert.clone(), key)),
    })
    .await;
    let root = server.dir.path().join("root.pem");
    std::fs::write(&root, &cert).expect("write the certificate");
    let mut args = vec![
        "adbc".to_owned(),
        format!("grpc+tls://localhost:{}", server.addr.port()),
        "--tls-root".to_owned(),
        root.display().to_string(),
    ];
    args.extend(credentials("token"));
    let seen = run_client("flight_sql_clients.py", &args).await;
    assert_kamu_example_results("adbc over TLS", &seen);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adbc_connection_sees_a_commit_made_between_two_statements() {
    if !python_has("adbc_driver_flightsql.dbapi, pyarrow, pandas").await {
        return;
    }
    let server = Server::start().await;
    let script = format!("{}/tests/flight_sql_clients.py", env!("CARGO_MANIFEST_DIR"));
    let mut child = tokio::process::Command::new("python3")
        .arg(&script)
        .args([
            "live",
            &format!("grpc://{}", server.addr),
            r#"SELECT count(*) FROM "readings.clean""#,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut ask = async || -> serde_json::Value {
        stdin.write_all(b"count\n").await.expect("ask");
        stdin.flush().await.expect("flush");
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("an answer within a minute")
            .expect("reads")
            .expect("a line");
        serde_json::from_str(&line).expect("JSON")
    };
    assert_eq!(
        ask().await,
        serde_json::json!({ "new": [[5]], "same": [[5]] })
    );
    server.commit_slice();
    assert_eq!(
        ask().await,
        serde_json::json!({ "new": [[7]], "same": [[7]] })
    );
    drop(stdin);
    let status = child.wait().await.expect("the client ends");
    assert!(status.success(), "{status:?}");
    server.stop().await;
}
