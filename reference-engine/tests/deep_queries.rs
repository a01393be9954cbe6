//! No query aborts the engine: deeply nested expressions are an InvalidQuery naming the limit, over the
//! `weir-engine` binary on TCP and on a Unix socket, for every operation that takes SQL, and the process
//! keeps serving. A query just inside the limit runs to the end in the binary.
use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use weir_engine_contract::{ClientError, EngineAddress, EngineClient};
use weir_reference_engine::{
    DatasetId, DatasetVocabulary, MAX_EXPRESSION_DEPTH, RawQueryRequest, ValidateQueryInput,
    ValidateQueryRequest,
};

const BINARY: &str = env!("CARGO_BIN_EXE_weir-engine");

/// The engine binary, killed when dropped.
struct Engine(Child);

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Engine {
    fn spawn(args: &[&str]) -> Self {
        Self(
            Command::new(BINARY)
                .args(args)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// Still running (not aborted).
    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn connect(address: EngineAddress) -> EngineClient {
    for _ in 0..200 {
        if let Ok(client) = EngineClient::connect(address.clone()).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the engine did not start listening on {address:?}");
}

fn chain(terms: usize, operator: &str) -> String {
    vec!["population"; terms].join(operator)
}

/// The three shapes of the issue: a 300-term sum, a 500-term OR, 1000 nested parentheses.
fn deep_queries() -> Vec<String> {
    vec![
        format!(
            "SELECT event_time, {} AS total FROM foo",
            vec!["1"; 300].join(" + ")
        ),
        format!(
            "SELECT event_time, city FROM foo WHERE {}",
            (0..500)
                .map(|i| format!("population = {i}"))
                .collect::<Vec<_>>()
                .join(" OR ")
        ),
        format!(
            "SELECT event_time, {}population{} AS p FROM foo",
            "(".repeat(1000),
            ")".repeat(1000)
        ),
    ]
}

fn assert_too_deep(result: Result<impl std::fmt::Debug, ClientError>) {
    match result {
        Err(ClientError::InvalidQuery { message, .. }) => {
            assert!(
                message.contains("deeper than")
                    && message.contains(&MAX_EXPRESSION_DEPTH.to_string()),
                "{message}"
            );
        }
        other => panic!("expected InvalidQuery, got {other:?}"),
    }
}

/// Every SQL operation refuses the deep queries, the engine stays up, and a query just inside the limit
/// (a sum of `MAX_EXPRESSION_DEPTH - 10` terms) runs and is right.
async fn deep_queries_are_refused_and_the_engine_keeps_serving(
    engine: &mut Engine,
    client: &EngineClient,
) {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1), ("B", 2)]), SystemTypes::Compatible);
    let input = fx.input("foo", vec![slice.clone()], Some((0, 1)));
    for query in deep_queries() {
        let request = fx.request(&query, vec![input.clone()], 0);
        assert_too_deep(
            client
                .execute_transform(&request)
                .await
                .unwrap()
                .finish()
                .await,
        );
        assert!(engine.alive(), "the engine died on ExecuteTransform");

        let raw = RawQueryRequest {
            input_data_paths: vec![slice.display().to_string()],
            transform: sql(&query.replace("FROM foo", "FROM input")),
            output_data_path: fx.path("raw/output").display().to_string(),
        };
        assert_too_deep(client.execute_raw_query(&raw).await.unwrap().finish().await);
        assert!(engine.alive(), "the engine died on ExecuteRawQuery");

        let validate = ValidateQueryRequest {
            dataset_id: DatasetId::from_key([9; 32]),
            dataset_alias: "bar".into(),
            vocab: DatasetVocabulary::default(),
            transform: sql(&query),
            query_inputs: vec![ValidateQueryInput {
                dataset_id: DatasetId::from_key([1; 32]),
                dataset_alias: "foo".into(),
                query_alias: "foo".into(),
                vocab: DatasetVocabulary::default(),
                schema_file: fx
                    .schema_file(SystemTypes::Compatible)
                    .display()
                    .to_string(),
            }],
            output_schema_path: fx.path("validate/schema").display().to_string(),
        };
        assert_too_deep(
            client
                .validate_query(&validate)
                .await
                .unwrap()
                .finish()
                .await,
        );
        assert!(engine.alive(), "the engine died on ValidateQuery");
    }

    // Just inside the limit: planned, optimised, executed and written by the binary.
    let terms = MAX_EXPRESSION_DEPTH - 10;
    let request = fx.request(
        &format!(
            "SELECT event_time, city, {} AS total FROM foo",
            chain(terms, " + ")
        ),
        vec![input],
        0,
    );
    let success = client
        .execute_transform(&request)
        .await
        .unwrap()
        .finish()
        .await
        .unwrap();
    assert_eq!(
        success.new_offset_interval.map(|i| (i.start, i.end)),
        Some((0, 1))
    );
    let out = read_parquet(&request.new_data_path);
    assert_eq!(ints(&out, "total"), [terms as i64, 2 * terms as i64]);
    assert!(engine.alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_expressions_are_an_invalid_query_over_tcp() {
    let port = free_port();
    let mut engine = Engine::spawn(&["--port", &port.to_string()]);
    let client = connect(EngineAddress::loopback(port)).await;
    deep_queries_are_refused_and_the_engine_keeps_serving(&mut engine, &client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_expressions_are_an_invalid_query_over_a_unix_socket() {
    let fx = Fixture::new();
    let socket = fx.path("engine.sock");
    let mut engine = Engine::spawn(&["--unix-socket", socket.to_str().unwrap()]);
    let client = connect(EngineAddress::Unix(socket)).await;
    deep_queries_are_refused_and_the_engine_keeps_serving(&mut engine, &client).await;
}

#[tokio::test]
async fn a_deep_query_step_is_named_in_the_error() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let mut request = fx.request("", vec![fx.input("foo", vec![slice], Some((0, 0)))], 0);
    request.transform =
        weir_reference_engine::Transform::Sql(weir_reference_engine::TransformSql {
            queries: Some(vec![
                weir_reference_engine::SqlQueryStep {
                    alias: Some("deep".into()),
                    query: format!("SELECT event_time, {} AS x FROM foo", chain(400, " * ")),
                },
                weir_reference_engine::SqlQueryStep {
                    alias: None,
                    query: "SELECT * FROM deep".into(),
                },
            ]),
            ..weir_reference_engine::TransformSql::new("datafusion", "")
        });
    let message = transform(&request).await.0.invalid_query();
    assert!(message.starts_with("in query step `deep`: "), "{message}");
    assert!(message.contains("line 1"), "{message}");
}
