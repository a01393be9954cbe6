//! A stock gRPC client, Python grpcio (`tests/grpcio/client.py`), against a real engine server
//! over a Unix socket and over loopback TCP. For a `unix:` target grpcio sends the percent-encoded
//! socket path as `:authority`, which HTTP/2 alone would reset the stream for; the server accepts
//! any authority on a Unix socket, and logs requests it refuses.
//!
//! Needs `python3` with grpcio (`python3 -m pip install grpcio`). Without it each test prints
//! `NOT RUN` and passes, unless `WEIR_REQUIRE_GRPCIO=1` (CI), which makes it fail.
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use weir_engine_contract::grpc::Envelope;
use weir_engine_contract::model::{
    EngineResponse, RawQueryRequest, RawQueryResponse, RawQuerySuccess, Transform,
    TransformRequest, TransformSql, TransformSuccess,
};
use weir_engine_contract::{Engine, EngineAddress, EngineError, EngineServer, ProgressSink};

/// Answers a raw query with `num_records` = the number of input paths.
struct CountingEngine;

impl Engine for CountingEngine {
    async fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        _progress: ProgressSink,
    ) -> Result<RawQuerySuccess, EngineError> {
        Ok(RawQuerySuccess {
            num_records: request.input_data_paths.len() as u64,
        })
    }

    async fn execute_transform(
        &self,
        _request: TransformRequest,
        _progress: ProgressSink,
    ) -> Result<TransformSuccess, EngineError> {
        Err(EngineError::invalid_query("transforms are not supported"))
    }
}

/// Whether grpcio can be imported; says why not (or fails, under `WEIR_REQUIRE_GRPCIO=1`).
fn grpcio_available(test: &str) -> bool {
    let probe = Command::new("python3").args(["-c", "import grpc"]).output();
    let why = match probe {
        Ok(output) if output.status.success() => return true,
        Ok(output) => String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        Err(error) => format!("cannot run python3: {error}"),
    };
    assert!(
        std::env::var("WEIR_REQUIRE_GRPCIO").as_deref() != Ok("1"),
        "WEIR_REQUIRE_GRPCIO=1 but `python3 -c 'import grpc'` fails: {why}"
    );
    eprintln!(
        "NOT RUN: {test}: needs Python grpcio (`python3 -m pip install grpcio`); `python3 -c 'import grpc'` failed: {why}"
    );
    false
}

/// What the client saw for one call.
#[derive(Debug, PartialEq)]
struct Call {
    messages: Vec<Vec<u8>>,
    status: String,
}

/// Runs `client.py` (blocking: call from `spawn_blocking`).
fn grpcio(target: &str, method: &str, request: &[u8], calls: usize) -> Vec<Call> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpcio/client.py");
    let hex: String = request.iter().map(|b| format!("{b:02x}")).collect();
    let output = Command::new("python3")
        .arg(&script)
        .args([target, method, &hex, &calls.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client.py failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut result = Vec::new();
    let mut messages = Vec::new();
    for line in stdout.lines() {
        if let Some(hex) = line.strip_prefix("MESSAGE ") {
            messages.push(
                (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect(),
            );
        } else if let Some(status) = line.strip_prefix("STATUS ") {
            result.push(Call {
                messages: std::mem::take(&mut messages),
                status: status.to_owned(),
            });
        }
    }
    assert_eq!(result.len(), calls, "{stdout}");
    result
}

fn raw_query_envelope(paths: usize) -> Vec<u8> {
    let request = RawQueryRequest {
        input_data_paths: (0..paths).map(|i| format!("/in/{i}.parquet")).collect(),
        transform: Transform::Sql(TransformSql::new("datafusion", "SELECT * FROM input")),
        output_data_path: "/out/output.parquet".into(),
    };
    Envelope::from_flatbuffer(request.encode())
        .to_frame()
        .to_vec()
}

fn num_records(message: &[u8]) -> u64 {
    let flatbuffer = Envelope::raw(message.to_vec()).flatbuffer().unwrap();
    match RawQueryResponse::decode(&flatbuffer).unwrap() {
        EngineResponse::Success(success) => success.num_records,
        other => panic!("expected Success, got {other:?}"),
    }
}

async fn serve(address: EngineAddress) -> (EngineAddress, tokio::task::JoinHandle<()>) {
    let bound = EngineServer::new(CountingEngine)
        .address(address)
        .bind()
        .await
        .unwrap();
    let address = bound.local_address().clone();
    let server = tokio::spawn(async move {
        bound.serve().await.unwrap();
    });
    (address, server)
}

async fn call(target: String, method: &'static str, request: Vec<u8>, calls: usize) -> Vec<Call> {
    tokio::task::spawn_blocking(move || grpcio(&target, method, &request, calls))
        .await
        .unwrap()
}

const RAW_QUERY: &str = "/engine.Engine/ExecuteRawQuery";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_over_a_unix_socket_gets_the_engines_answer_on_every_call() {
    if !grpcio_available("grpcio_over_a_unix_socket_gets_the_engines_answer_on_every_call") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (address, server) = serve(EngineAddress::Unix(dir.path().join("engine.sock"))).await;
    // Three calls on one channel: the later requests refer to the first one's header table entries.
    let calls = call(address.to_string(), RAW_QUERY, raw_query_envelope(3), 3).await;
    server.abort();
    for call in &calls {
        assert_eq!(call.status, "OK", "{calls:?}");
        assert_eq!(call.messages.len(), 1, "{calls:?}");
        assert_eq!(num_records(&call.messages[0]), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_over_loopback_tcp_gets_the_engines_answer() {
    if !grpcio_available("grpcio_over_loopback_tcp_gets_the_engines_answer") {
        return;
    }
    let (address, server) = serve(EngineAddress::loopback(0)).await;
    let calls = call(address.to_string(), RAW_QUERY, raw_query_envelope(2), 1).await;
    server.abort();
    assert_eq!(calls[0].status, "OK", "{calls:?}");
    assert_eq!(num_records(&calls[0].messages[0]), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpcio_call_to_an_unknown_method_is_answered_unimplemented_and_logged() {
    if !grpcio_available("a_grpcio_call_to_an_unknown_method_is_answered_unimplemented_and_logged")
    {
        return;
    }
    let logs = capture_logs();
    let dir = tempfile::tempdir().unwrap();
    let (address, server) = serve(EngineAddress::Unix(dir.path().join("engine.sock"))).await;
    let calls = call(
        address.to_string(),
        "/engine.Engine/NoSuchOperation",
        raw_query_envelope(1),
        1,
    )
    .await;
    server.abort();
    assert!(calls[0].status.starts_with("UNIMPLEMENTED"), "{calls:?}");
    let lines = logs.lines_with("/engine.Engine/NoSuchOperation");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("request rejected") && l.contains("grpc_status=12")),
        "no log line for the rejected request: {lines:?}"
    );
}

/// This test binary's `tracing` output, kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines_with(&self, needle: &str) -> Vec<String> {
        let bytes = self.0.lock().unwrap();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

struct Writer(Arc<Mutex<Vec<u8>>>);

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() -> Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let buffer = captured.0.clone();
            tracing_subscriber::fmt()
                .with_ansi(false)
                .with_max_level(tracing::Level::INFO)
                .with_writer(move || Writer(buffer.clone()))
                .init();
            captured
        })
        .clone()
}
