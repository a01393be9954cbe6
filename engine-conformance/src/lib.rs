#![doc = include_str!("../README.md")]

mod fixtures;

use std::path::PathBuf;
use std::sync::Arc;

pub use fixtures::ParquetFixtures;
pub use weir_engine_contract::conformance::{
    Check, CheckReport, CheckStatus, Column, ColumnType, ConformanceOptions, ConformanceReport,
    DataFixtures, DataSetup, FixtureError, Table, Value, Verdict,
};
pub use weir_engine_contract::{ClientError, EngineAddress};

/// Data for an engine on this host: it sees `dir` at the same path. `dir` should be a fresh,
/// private folder (the kit opens its output folders to every user, for an engine running as
/// another user).
pub fn local_data(dir: impl Into<PathBuf>) -> DataSetup {
    let dir = dir.into();
    mounted_data(dir.clone(), dir)
}

/// Data for an engine that sees this host's `host_dir` at `engine_dir` (a container's bind mount).
pub fn mounted_data(host_dir: impl Into<PathBuf>, engine_dir: impl Into<PathBuf>) -> DataSetup {
    DataSetup {
        fixtures: Arc::new(ParquetFixtures),
        host_dir: host_dir.into(),
        engine_dir: engine_dir.into(),
    }
}

/// Runs every check against the engine at `address` (`TransformSql.engine` = `engine`) with the
/// default deadlines (60 s per call, 30 s readiness wait) and `data`.
///
/// Fails only when the engine cannot be reached; everything else is in the report.
pub async fn run(
    address: &EngineAddress,
    engine: &str,
    data: DataSetup,
) -> Result<ConformanceReport, ClientError> {
    weir_engine_contract::conformance::run(
        address,
        &ConformanceOptions::new(engine).with_data(data),
    )
    .await
}
