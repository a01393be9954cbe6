//! The conformance kit: runs the engine contract's checks against any engine
//! address and reports each as passed, failed (with the reason) or NOT RUN.
//!
//! Two checks need nothing but the address: malformed request bytes and
//! UNIMPLEMENTED handling. Every other check sends the requests a coordinator
//! sends: real Parquet input files (and their schema files) and a writable
//! output folder, then reads the output. Since this crate has no Parquet
//! dependency, they run only when the caller passes a [`DataSetup`] with a
//! [`DataFixtures`] implementation (the `engine-conformance` crate provides
//! one on arrow/parquet alone); otherwise they are reported as NOT RUN, and a
//! run with checks not run has not passed ([`Verdict::Incomplete`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use weir_engine_contract::conformance::{self, ConformanceOptions};
//!
//! # async fn run() -> Result<(), weir_engine_contract::ClientError> {
//! let options = ConformanceOptions::new("datafusion");
//! let report = conformance::run(&"127.0.0.1:5544".parse().unwrap(), &options).await?;
//! println!("{report}");
//! println!("{}", serde_json::to_string_pretty(&report).unwrap());
//! # Ok(())
//! # }
//! ```

mod data;
mod data_free;
mod fixtures;
mod report;

use std::time::Duration;

pub use data::DataSetup;
pub use fixtures::{Column, ColumnType, DataFixtures, FixtureError, Table, Value};
pub use report::{Check, CheckReport, CheckStatus, ConformanceReport, Verdict};

use crate::address::EngineAddress;
use crate::client::{ClientError, ConnectOptions, EngineClient};

/// How to run the checks.
#[derive(Debug, Clone)]
pub struct ConformanceOptions {
    /// The `TransformSql.engine` name to send (e.g. `datafusion`).
    pub engine: String,
    /// Deadline of each call.
    pub call_deadline: Duration,
    /// How long to wait for the engine to accept connections.
    pub ready_timeout: Duration,
    /// Files for the data checks; `None` skips them.
    pub data: Option<DataSetup>,
}

impl ConformanceOptions {
    /// Data-free checks only, 60 s per call, 30 s readiness wait.
    pub fn new(engine: impl Into<String>) -> Self {
        Self {
            engine: engine.into(),
            call_deadline: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(30),
            data: None,
        }
    }

    /// Also run the data checks with these fixtures and directories.
    pub fn with_data(mut self, data: DataSetup) -> Self {
        self.data = Some(data);
        self
    }
}

/// Runs every check against the engine at `address`.
///
/// Fails only when the engine cannot be reached at all; everything else is
/// in the report.
pub async fn run(
    address: &EngineAddress,
    options: &ConformanceOptions,
) -> Result<ConformanceReport, ClientError> {
    let client = EngineClient::connect_with(
        address.clone(),
        ConnectOptions {
            ready_timeout: options.ready_timeout,
            call_deadline: Some(options.call_deadline),
            ..ConnectOptions::default()
        },
    )
    .await?;
    let engine = options.engine.as_str();
    let span = tracing::info_span!("conformance", %address, engine);
    let _entered = span.enter();
    let mut checks = vec![
        data_free::malformed_request_answered_invalid_query(&client).await,
        data_free::unimplemented_operations_reported(&client, engine).await,
    ];
    for check in Check::DATA {
        let report = match &options.data {
            Some(setup) => data::run_check(check, &client, setup, engine).await,
            None => data_free::report(
                check,
                CheckStatus::NotRun,
                "needs input files: pass a DataSetup (ConformanceOptions::with_data; the engine-conformance crate provides ParquetFixtures)",
            ),
        };
        checks.push(report);
    }
    for check in &checks {
        match check.status {
            CheckStatus::Failed => {
                tracing::warn!(check = %check.check, reason = %check.reason, "failed")
            }
            _ => {
                tracing::info!(check = %check.check, status = ?check.status, reason = %check.reason)
            }
        }
    }
    let report = ConformanceReport::new(address.to_string(), checks);
    tracing::info!(verdict = %report.verdict(), "conformance run finished");
    Ok(report)
}
