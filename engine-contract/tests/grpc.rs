//! A real engine server and client over loopback TCP and a Unix socket:
//! progress streaming, every error kind, deadlines, and misbehaving peers
//! (two terminals, no terminal, garbage) served by a raw scripted server.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use futures::Stream;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};
use weir_engine_contract::grpc::Envelope;
use weir_engine_contract::grpc::raw::engine_server::{self, EngineServer as RawEngineServer};
use weir_engine_contract::model::{
    DatasetId, DatasetVocabulary, EngineResponse, MigrateQueryRequest, OffsetInterval,
    OutputColumn, Progress, RawQueryRequest, RawQueryResponse, RawQuerySuccess, Transform,
    TransformRequest, TransformRequestInput, TransformSql, TransformSuccess, ValidateQueryRequest,
    ValidateQuerySuccess,
};
use weir_engine_contract::stream_rules::MessageKind;
use weir_engine_contract::{
    ClientError, ConnectOptions, Engine, EngineAddress, EngineClient, EngineError, EngineServer,
    Operation, ProgressSink,
};

/// An engine whose behaviour is chosen by the query text:
/// `progress:N`, `invalid`, `fail`, `panic`, `sleep:MS`, anything else
/// succeeds at once.
struct TestEngine;

fn query_of(transform: &Transform) -> String {
    let Transform::Sql(sql) = transform;
    sql.steps()
        .last()
        .map(|s| s.query.clone())
        .unwrap_or_default()
}

#[derive(Debug, thiserror::Error)]
#[error("disk full")]
struct DiskFull {
    #[source]
    source: std::io::Error,
}

async fn behave(query: &str, progress: &ProgressSink) -> Result<u64, EngineError> {
    if let Some(n) = query.strip_prefix("progress:") {
        let n: u64 = n.parse().unwrap();
        for i in 1..=n {
            progress
                .report(Progress {
                    phase: Some("executing".into()),
                    rows_read: Some(i * 10),
                    rows_written: Some(i),
                })
                .await;
        }
        return Ok(n);
    }
    if let Some(ms) = query.strip_prefix("sleep:") {
        tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
        return Ok(0);
    }
    match query {
        "invalid" => Err(EngineError::invalid_query("no such table: nope")),
        "fail" => Err(EngineError::internal(&DiskFull {
            source: std::io::Error::other("ENOSPC"),
        })),
        "panic" => panic!("engine bug"),
        _ => Ok(0),
    }
}

impl Engine for TestEngine {
    async fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        progress: ProgressSink,
    ) -> Result<RawQuerySuccess, EngineError> {
        let rows = behave(&query_of(&request.transform), &progress).await?;
        Ok(RawQuerySuccess { num_records: rows })
    }

    async fn execute_transform(
        &self,
        request: TransformRequest,
        progress: ProgressSink,
    ) -> Result<TransformSuccess, EngineError> {
        let rows = behave(&query_of(&request.transform), &progress).await?;
        Ok(TransformSuccess {
            new_offset_interval: (rows > 0)
                .then(|| OffsetInterval::new(request.next_offset, request.next_offset + rows - 1))
                .flatten(),
            new_watermark: None,
        })
    }

    async fn validate_query(
        &self,
        request: ValidateQueryRequest,
        _progress: ProgressSink,
    ) -> Result<ValidateQuerySuccess, EngineError> {
        Ok(ValidateQuerySuccess {
            output_columns: vec![OutputColumn {
                name: query_of(&request.transform),
                data_type: "Int64".into(),
                nullable: false,
            }],
        })
    }
}

struct Running {
    address: EngineAddress,
    stop: Option<oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<Result<(), weir_engine_contract::ServeError>>,
    _dir: Option<tempfile::TempDir>,
}

impl Running {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.handle.await.unwrap().unwrap();
    }
}

async fn start(address: EngineAddress, dir: Option<tempfile::TempDir>) -> Running {
    let (stop, stopped) = oneshot::channel::<()>();
    let bound = EngineServer::new(TestEngine)
        .address(address)
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .bind()
        .await
        .unwrap();
    let address = bound.local_address().clone();
    let handle = tokio::spawn(bound.serve());
    Running {
        address,
        stop: Some(stop),
        handle,
        _dir: dir,
    }
}

async fn start_tcp() -> Running {
    start(EngineAddress::loopback(0), None).await
}

async fn start_unix() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.sock");
    start(EngineAddress::Unix(path), Some(dir)).await
}

async fn client(address: &EngineAddress) -> EngineClient {
    EngineClient::connect(address.clone())
        .await
        .unwrap()
        .with_deadline(Duration::from_secs(20))
}

fn raw_query(query: &str) -> RawQueryRequest {
    RawQueryRequest {
        input_data_paths: vec!["/opt/engine/in/input.parquet".into()],
        transform: Transform::Sql(TransformSql::new("test", query)),
        output_data_path: "/opt/engine/out/output.parquet".into(),
    }
}

fn transform_request(query: &str) -> TransformRequest {
    TransformRequest {
        dataset_id: DatasetId::from_key([1; 32]),
        dataset_alias: "out".into(),
        system_time: Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap(),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new("test", query)),
        query_inputs: vec![TransformRequestInput {
            dataset_id: DatasetId::from_key([2; 32]),
            dataset_alias: "in".into(),
            query_alias: "in".into(),
            vocab: DatasetVocabulary::default(),
            offset_interval: OffsetInterval::new(0, 9),
            data_paths: vec!["/opt/engine/in/a".into()],
            schema_file: "/opt/engine/in/schema.parquet".into(),
            explicit_watermarks: vec![],
        }],
        next_offset: 100,
        prev_checkpoint_path: None,
        new_checkpoint_path: "/opt/engine/out/checkpoint".into(),
        new_data_path: "/opt/engine/out/data".into(),
    }
}

async fn progress_then_result(client: &EngineClient) {
    let mut call = client
        .execute_raw_query(&raw_query("progress:3"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(progress) = call.progress().await.unwrap() {
        seen.push(progress);
    }
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[2].phase.as_deref(), Some("executing"));
    assert_eq!(seen[2].rows_read, Some(30));
    assert_eq!(seen[2].rows_written, Some(3));
    assert_eq!(call.finish().await.unwrap().num_records, 3);
}

#[tokio::test]
async fn progress_streams_before_success_over_tcp() {
    let server = start_tcp().await;
    progress_then_result(&client(&server.address).await).await;
    server.stop().await;
}

#[tokio::test]
async fn progress_streams_before_success_over_a_unix_socket() {
    let server = start_unix().await;
    let EngineAddress::Unix(path) = server.address.clone() else {
        panic!("not a unix address");
    };
    assert!(path.exists());
    progress_then_result(&client(&server.address).await).await;
    server.stop().await;
    assert!(!path.exists(), "socket file left behind after shutdown");
}

#[tokio::test]
async fn transform_success_carries_the_output_offsets() {
    let server = start_tcp().await;
    let client = client(&server.address).await;
    let mut progress = 0;
    let success = client
        .execute_transform(&transform_request("progress:5"))
        .await
        .unwrap()
        .finish_with(|_| progress += 1)
        .await
        .unwrap();
    assert_eq!(progress, 5);
    assert_eq!(success.new_offset_interval, OffsetInterval::new(100, 104));
    server.stop().await;
}

#[tokio::test]
async fn invalid_query_is_reported_with_the_engine_message() {
    let server = start_tcp().await;
    let error = client(&server.address)
        .await
        .execute_transform(&transform_request("invalid"))
        .await
        .unwrap()
        .finish()
        .await
        .unwrap_err();
    match error {
        ClientError::InvalidQuery {
            operation, message, ..
        } => {
            assert_eq!(operation, Operation::ExecuteTransform);
            assert_eq!(message, "no such table: nope");
        }
        other => panic!("expected InvalidQuery, got {other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn engine_error_becomes_internal_error_with_causes_and_backtrace() {
    let server = start_tcp().await;
    let error = client(&server.address)
        .await
        .execute_raw_query(&raw_query("fail"))
        .await
        .unwrap()
        .finish()
        .await
        .unwrap_err();
    match error {
        ClientError::EngineInternalError {
            message, backtrace, ..
        } => {
            assert_eq!(message, "disk full: ENOSPC");
            assert!(!backtrace.unwrap().is_empty());
        }
        other => panic!("expected EngineInternalError, got {other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn engine_panic_becomes_internal_error_and_the_server_keeps_serving() {
    let server = start_tcp().await;
    let client = client(&server.address).await;
    let error = client
        .execute_raw_query(&raw_query("panic"))
        .await
        .unwrap()
        .finish()
        .await
        .unwrap_err();
    match error {
        ClientError::EngineInternalError {
            message, backtrace, ..
        } => {
            assert_eq!(message, "engine panicked: engine bug");
            // The backtrace is the panicking engine's, not the server's: it points into this
            // file (symbol names of async fns are elided with line-table-only debug info).
            let backtrace = backtrace.unwrap();
            assert!(backtrace.contains("tests/grpc.rs"), "{backtrace}");
        }
        other => panic!("expected EngineInternalError, got {other:?}"),
    }
    // Same connection, next call.
    progress_then_result(&client).await;
    server.stop().await;
}

#[tokio::test]
async fn undecodable_request_is_answered_invalid_query() {
    let server = start_tcp().await;
    let client = client(&server.address).await;
    for envelope in [
        // a valid envelope around garbage FlatBuffers
        Envelope::from_flatbuffer(&b"definitely not a flatbuffer"[..]),
        // a TransformResponse where a TransformRequest is expected
        Envelope::from_flatbuffer(
            RawQueryResponse::Success(RawQuerySuccess { num_records: 1 }).encode(),
        ),
        // not even a protobuf message
        Envelope::raw(&[0xFF, 0xFF, 0xFF][..]),
    ] {
        let error = client
            .call_envelope::<weir_engine_contract::ExecuteTransform>(envelope)
            .await
            .unwrap()
            .finish()
            .await
            .unwrap_err();
        match error {
            ClientError::InvalidQuery { message, .. } => {
                assert!(message.starts_with("malformed"), "{message}");
            }
            other => panic!("expected InvalidQuery, got {other:?}"),
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn operation_the_engine_lacks_is_operation_not_supported() {
    let server = start_tcp().await;
    let client = client(&server.address).await;
    let request = MigrateQueryRequest {
        dataset_id: DatasetId::from_key([1; 32]),
        dataset_alias: "out".into(),
        system_time: Utc::now(),
        vocab: DatasetVocabulary::default(),
        prev_transform: Transform::Sql(TransformSql::new("test", "a")),
        next_transform: Transform::Sql(TransformSql::new("test", "b")),
        query_inputs: vec![],
        next_offset: 0,
        prev_checkpoint_path: Some("/cp".into()),
        new_checkpoint_path: "/cp2".into(),
        new_data_path: "/data".into(),
    };
    let result = match client.migrate_query(&request).await {
        Ok(call) => call.finish().await.map(|_| ()),
        Err(error) => Err(error),
    };
    match result {
        Err(ClientError::OperationNotSupported { operation }) => {
            assert_eq!(operation, Operation::MigrateQuery);
        }
        other => panic!("expected OperationNotSupported, got {other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn weir_operation_the_engine_implements_answers() {
    let server = start_tcp().await;
    let request = ValidateQueryRequest {
        dataset_id: DatasetId::from_key([1; 32]),
        dataset_alias: "out".into(),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new("test", "population")),
        query_inputs: vec![],
        output_schema_path: "/out/schema.parquet".into(),
    };
    let success = client(&server.address)
        .await
        .validate_query(&request)
        .await
        .unwrap()
        .finish()
        .await
        .unwrap();
    assert_eq!(success.output_columns[0].name, "population");
    server.stop().await;
}

#[tokio::test]
async fn call_past_its_deadline_fails_with_deadline_exceeded() {
    let server = start_tcp().await;
    let client = EngineClient::connect(server.address.clone())
        .await
        .unwrap()
        .with_deadline(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let result = match client.execute_raw_query(&raw_query("sleep:10000")).await {
        Ok(call) => call.finish().await.map(|_| ()),
        Err(error) => Err(error),
    };
    match result {
        Err(ClientError::DeadlineExceeded {
            operation,
            deadline,
        }) => {
            assert_eq!(operation, Operation::ExecuteRawQuery);
            assert_eq!(deadline, Duration::from_millis(200));
        }
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    server.stop().await;
}

#[tokio::test]
async fn client_waits_for_an_engine_that_starts_late() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("late.sock");
    let address = EngineAddress::Unix(path);
    let connecting = tokio::spawn(EngineClient::connect_with(
        address.clone(),
        ConnectOptions {
            ready_timeout: Duration::from_secs(10),
            retry_interval: Duration::from_millis(20),
            call_deadline: Some(Duration::from_secs(10)),
        },
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!connecting.is_finished());
    let server = start(address, Some(dir)).await;
    let client = connecting.await.unwrap().unwrap();
    progress_then_result(&client).await;
    server.stop().await;
}

#[tokio::test]
async fn client_gives_up_when_no_engine_listens() {
    let dir = tempfile::tempdir().unwrap();
    let address = EngineAddress::Unix(dir.path().join("nobody.sock"));
    let error = EngineClient::connect_with(
        address.clone(),
        ConnectOptions {
            ready_timeout: Duration::from_millis(200),
            retry_interval: Duration::from_millis(20),
            call_deadline: None,
        },
    )
    .await
    .unwrap_err();
    match error {
        ClientError::NotReady {
            address: reported,
            waited,
            ..
        } => {
            assert_eq!(reported, address);
            assert!(waited >= Duration::from_millis(150));
        }
        other => panic!("expected NotReady, got {other:?}"),
    }
}

#[tokio::test]
async fn graceful_shutdown_lets_a_running_call_finish() {
    let server = start_tcp().await;
    let client = client(&server.address).await;
    let call = client
        .execute_raw_query(&raw_query("sleep:300"))
        .await
        .unwrap();
    let finishing = tokio::spawn(call.finish());
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.stop().await;
    assert_eq!(finishing.await.unwrap().unwrap().num_records, 0);
}

// ---------------------------------------------------------------------------
// A misbehaving peer: a raw server that answers every call with scripted
// frames, and records the request frames it received.
// ---------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Scripted {
    frames: Vec<Envelope>,
    /// Keep the stream open after the frames.
    hold_open: bool,
    received: Arc<Mutex<Vec<bytes::Bytes>>>,
}

type FrameStream = std::pin::Pin<Box<dyn Stream<Item = Result<Envelope, Status>> + Send>>;

impl Scripted {
    fn answer(&self, request: Request<Envelope>) -> Result<Response<FrameStream>, Status> {
        self.received
            .lock()
            .unwrap()
            .push(request.into_inner().to_frame());
        let frames: Vec<Result<Envelope, Status>> = self.frames.iter().cloned().map(Ok).collect();
        let frames = futures::stream::iter(frames);
        if self.hold_open {
            use futures::StreamExt;
            Ok(Response::new(Box::pin(
                frames.chain(futures::stream::pending()),
            )))
        } else {
            Ok(Response::new(Box::pin(frames)))
        }
    }
}

#[tonic::async_trait]
impl engine_server::Engine for Scripted {
    type ExecuteRawQueryStream = FrameStream;
    type ExecuteTransformStream = FrameStream;
    type ValidateQueryStream = FrameStream;
    type MigrateQueryStream = FrameStream;
    type DeriveProvenanceStream = FrameStream;

    async fn execute_raw_query(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        self.answer(request)
    }
    async fn execute_transform(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        self.answer(request)
    }
    async fn validate_query(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        self.answer(request)
    }
    async fn migrate_query(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        self.answer(request)
    }
    async fn derive_provenance(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<FrameStream>, Status> {
        self.answer(request)
    }
}

async fn start_scripted(scripted: Scripted) -> (EngineAddress, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = EngineAddress::Tcp(listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RawEngineServer::new(scripted))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    let _ = stopped.await;
                },
            ),
    );
    (address, stop)
}

fn frame(response: RawQueryResponse) -> Envelope {
    Envelope::from_flatbuffer(response.encode())
}

fn success(n: u64) -> Envelope {
    frame(EngineResponse::Success(RawQuerySuccess { num_records: n }))
}

fn progress() -> Envelope {
    frame(EngineResponse::Progress(Progress::default()))
}

async fn call_scripted(frames: Vec<Envelope>) -> Result<RawQuerySuccess, ClientError> {
    let (address, _stop) = start_scripted(Scripted {
        frames,
        ..Scripted::default()
    })
    .await;
    client(&address)
        .await
        .execute_raw_query(&raw_query("x"))
        .await?
        .finish()
        .await
}

#[tokio::test]
async fn odf_style_stream_with_only_a_terminal_succeeds() {
    assert_eq!(
        call_scripted(vec![success(7)]).await.unwrap().num_records,
        7
    );
}

#[tokio::test]
async fn second_terminal_message_is_reported() {
    match call_scripted(vec![progress(), success(1), success(2)]).await {
        Err(ClientError::MessageAfterTerminal {
            operation,
            kind,
            index,
        }) => {
            assert_eq!(operation, Operation::ExecuteRawQuery);
            assert_eq!(kind, MessageKind::Terminal);
            assert_eq!(index, 2);
        }
        other => panic!("expected MessageAfterTerminal, got {other:?}"),
    }
}

#[tokio::test]
async fn progress_after_the_terminal_message_is_reported() {
    match call_scripted(vec![success(1), progress()]).await {
        Err(ClientError::MessageAfterTerminal { kind, index, .. }) => {
            assert_eq!(kind, MessageKind::Progress);
            assert_eq!(index, 1);
        }
        other => panic!("expected MessageAfterTerminal, got {other:?}"),
    }
}

#[tokio::test]
async fn stream_without_terminal_message_is_reported() {
    match call_scripted(vec![progress(), progress()]).await {
        Err(ClientError::NoTerminalMessage {
            progress_messages, ..
        }) => assert_eq!(progress_messages, 2),
        other => panic!("expected NoTerminalMessage, got {other:?}"),
    }
    match call_scripted(vec![]).await {
        Err(ClientError::NoTerminalMessage {
            progress_messages, ..
        }) => assert_eq!(progress_messages, 0),
        other => panic!("expected NoTerminalMessage, got {other:?}"),
    }
}

#[tokio::test]
async fn garbage_flatbuffer_is_reported_with_its_position() {
    let garbage = Envelope::from_flatbuffer(&[0x01, 0x02, 0x03][..]);
    match call_scripted(vec![progress(), garbage]).await {
        Err(ClientError::GarbageResponse { index, .. }) => assert_eq!(index, 1),
        other => panic!("expected GarbageResponse, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_protobuf_envelope_is_reported() {
    match call_scripted(vec![Envelope::raw(&[0x0A, 0x7F, 0x00][..])]).await {
        Err(ClientError::MalformedEnvelope { index, .. }) => assert_eq!(index, 0),
        other => panic!("expected MalformedEnvelope, got {other:?}"),
    }
}

#[tokio::test]
async fn request_on_the_wire_is_tag_0x0a_varint_length_then_the_flatbuffer() {
    let scripted = Scripted {
        frames: vec![success(0)],
        ..Scripted::default()
    };
    let received = Arc::clone(&scripted.received);
    let (address, _stop) = start_scripted(scripted).await;
    let request = transform_request("select 1");
    client(&address)
        .await
        .execute_transform(&request)
        .await
        .unwrap()
        .progress()
        .await
        .unwrap();
    let flatbuffer = request.encode();
    assert!(flatbuffer.len() > 127, "want a multi-byte varint length");
    let mut expected = vec![0x0A];
    let mut len = flatbuffer.len();
    while len >= 0x80 {
        expected.push((len as u8) | 0x80);
        len >>= 7;
    }
    expected.push(len as u8);
    expected.extend_from_slice(&flatbuffer);
    let frames = received.lock().unwrap().clone();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].as_ref(), expected.as_slice());
    assert_eq!(
        TransformRequest::decode(&frames[0][expected.len() - flatbuffer.len()..]).unwrap(),
        request
    );
}

#[tokio::test]
async fn terminal_is_accepted_when_the_peer_keeps_the_stream_open() {
    let (address, _stop) = start_scripted(Scripted {
        frames: vec![success(4)],
        hold_open: true,
        ..Scripted::default()
    })
    .await;
    let client = EngineClient::connect(address)
        .await
        .unwrap()
        .with_deadline(Duration::from_millis(500));
    let started = std::time::Instant::now();
    let success = client
        .execute_raw_query(&raw_query("x"))
        .await
        .unwrap()
        .finish()
        .await
        .unwrap();
    assert_eq!(success.num_records, 4);
    assert!(started.elapsed() < Duration::from_secs(3));
}
