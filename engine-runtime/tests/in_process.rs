//! Engines inside the coordinator's process, through the same client and rules as the others.
use std::time::Duration;

use weir_engine_contract::model::{
    Progress, RawQueryRequest, RawQuerySuccess, Transform, TransformRequest, TransformSql,
    TransformSuccess,
};
use weir_engine_contract::{ClientError, Engine, EngineError, ProgressSink};
use weir_engine_runtime::{
    EngineIdentity, EngineRuntime, InProcessRuntime, OperationFolders, OperationId, RuntimeConfig,
    RuntimeError, StartRequest,
};

/// Writes the number of inputs to the output file; `sleep` takes forever.
struct Counter;

impl Engine for Counter {
    async fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        progress: ProgressSink,
    ) -> Result<RawQuerySuccess, EngineError> {
        let Transform::Sql(sql) = &request.transform;
        if sql.steps()[0].query == "sleep" {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        progress
            .report(Progress {
                phase: Some("counting".into()),
                ..Progress::default()
            })
            .await;
        let count = request.input_data_paths.len() as u64;
        tokio::fs::write(&request.output_data_path, count.to_string())
            .await
            .map_err(|e| EngineError::internal(&e))?;
        Ok(RawQuerySuccess { num_records: count })
    }

    async fn execute_transform(
        &self,
        _request: TransformRequest,
        _progress: ProgressSink,
    ) -> Result<TransformSuccess, EngineError> {
        Err(EngineError::invalid_query("raw queries only"))
    }
}

fn request(sql: &str, output: &std::path::Path) -> RawQueryRequest {
    RawQueryRequest {
        input_data_paths: vec!["a".into(), "b".into(), "c".into()],
        transform: Transform::Sql(TransformSql::new("counter", sql)),
        output_data_path: output.display().to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn in_process_engine_answers_through_the_runtime_trait() {
    let runtime: Box<dyn EngineRuntime> = Box::new(InProcessRuntime::new(
        "counter",
        "1.2.3",
        Counter,
        RuntimeConfig::default(),
    ));
    let out = tempfile::tempdir().unwrap();
    let engine = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(out.path()),
        ))
        .await
        .unwrap();
    assert_eq!(
        engine.identity(),
        &EngineIdentity::InProcess {
            name: "counter".into(),
            version: "1.2.3".into()
        }
    );
    let mut phases = Vec::new();
    let success = engine
        .execute_raw_query(&request("count", &out.path().join("n")), |p| {
            phases.extend(p.phase)
        })
        .await
        .unwrap();
    assert_eq!(success.num_records, 3);
    assert_eq!(phases, vec!["counting".to_owned()]);
    assert_eq!(std::fs::read_to_string(out.path().join("n")).unwrap(), "3");
    engine.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn in_process_engine_call_hits_the_deadline() {
    let runtime = InProcessRuntime::new(
        "counter",
        "1.2.3",
        Counter,
        RuntimeConfig::default()
            .with_operation_deadline(Duration::from_millis(300))
            .with_stop_grace(Duration::from_millis(200)),
    );
    let out = tempfile::tempdir().unwrap();
    let engine = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(out.path()),
        ))
        .await
        .unwrap();
    let error = engine
        .execute_raw_query(&request("sleep", &out.path().join("n")), |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(error, RuntimeError::DeadlineExceeded { .. }),
        "{error:?}"
    );
    engine.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_errors_reach_the_caller_typed() {
    let runtime = InProcessRuntime::new("counter", "1", Counter, RuntimeConfig::default());
    let out = tempfile::tempdir().unwrap();
    let engine = runtime
        .start(StartRequest::new(
            OperationId::generate(),
            OperationFolders::new(out.path()),
        ))
        .await
        .unwrap();
    let validate = weir_engine_contract::model::ValidateQueryRequest {
        dataset_id: weir_engine_contract::model::DatasetId::from_key([1; 32]),
        dataset_alias: "derived".into(),
        vocab: Default::default(),
        transform: Transform::Sql(TransformSql::new("counter", "count")),
        query_inputs: Vec::new(),
        output_schema_path: out.path().join("schema").display().to_string(),
    };
    let transform = engine
        .call(|client| async move { client.validate_query(&validate).await?.finish().await })
        .await;
    let error = transform.unwrap_err();
    assert!(
        matches!(error, RuntimeError::Engine { .. })
            && matches!(
                error.client_error(),
                Some(ClientError::OperationNotSupported { .. })
            ),
        "{error:?}"
    );
    engine.stop().await.unwrap();
}
