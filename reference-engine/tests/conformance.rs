//! The engine-contract conformance kit against this engine over real gRPC on loopback, data checks
//! included (Parquet fixtures from this crate).
use std::sync::Arc;

use weir_engine_contract::conformance::{self, CheckStatus, ConformanceOptions, DataSetup};
use weir_engine_contract::{EngineAddress, EngineServer};
use weir_reference_engine::{ParquetFixtures, ReferenceEngine};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_kit_passes_over_loopback_grpc() {
    let bound = EngineServer::new(ReferenceEngine::new())
        .address(EngineAddress::loopback(0))
        .bind()
        .await
        .unwrap();
    let address = bound.local_address().clone();
    let server = tokio::spawn(bound.serve());

    let dir = tempfile::tempdir().unwrap();
    let options = ConformanceOptions::new("datafusion").with_data(DataSetup {
        fixtures: Arc::new(ParquetFixtures),
        host_dir: dir.path().to_path_buf(),
        engine_dir: dir.path().to_path_buf(),
    });
    let report = conformance::run(&address, &options).await.unwrap();
    server.abort();

    let not_passed: Vec<String> = report
        .checks
        .iter()
        .filter(|check| check.status != CheckStatus::Passed)
        .map(|check| format!("{}: {:?} {}", check.check, check.status, check.reason))
        .collect();
    assert!(not_passed.is_empty(), "{report}\n{not_passed:#?}");
    assert!(report.checks.len() >= 12, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_kit_passes_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("engine.sock");
    let bound = EngineServer::new(ReferenceEngine::new())
        .address(EngineAddress::Unix(socket.clone()))
        .bind()
        .await
        .unwrap();
    let server = tokio::spawn(bound.serve());
    let report = conformance::run(
        &EngineAddress::Unix(socket),
        &ConformanceOptions::new("datafusion"),
    )
    .await
    .unwrap();
    server.abort();
    assert!(
        report
            .checks
            .iter()
            .all(|c| c.status != CheckStatus::Failed),
        "{report}"
    );
}
