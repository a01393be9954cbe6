//! Runs ODF engines for the coordinator — in sandboxed OCI containers pinned by image id, as local
//! processes, or in-process — and stages their data with `object_store`.
//!
//! One trait, [`EngineRuntime`], with three implementations the coordinator does not need to tell
//! apart: [`ContainerRuntime`] (Docker or Podman through bollard; no network, read-only root,
//! non-root user, every capability dropped, resource limits), [`ProcessRuntime`] (a local binary as a
//! child process) and [`InProcessRuntime`] (an [`Engine`](weir_engine_contract::Engine) object served on
//! an in-process Unix socket). [`EngineRuntime::start`] returns an [`EngineHandle`]: a ready
//! [`EngineClient`](weir_engine_contract::EngineClient), the [`EngineIdentity`] to record (image id,
//! binary hash, or name and version), the paths the engine sees, and [`EngineHandle::stop`].
//! [`StagingArea`] brings remote inputs to local folders and uploads outputs;
//! [`StsConfig::assume_role`] gets [`TemporaryCredentials`] limited to one transaction's
//! [`AccessGrant`] for the stores and engines that touch them. [`shutdown`] ends
//! every engine the process started (for its SIGTERM/SIGINT handler: a signalled process runs no
//! destructors).
//!
//! ```
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! use weir_engine_contract::model::{RawQueryRequest, RawQuerySuccess, Transform, TransformRequest, TransformSql, TransformSuccess};
//! use weir_engine_contract::{Engine, EngineError, ProgressSink};
//! use weir_engine_runtime::{EngineRuntime, InProcessRuntime, OperationFolders, OperationId, RuntimeConfig, StartRequest};
//!
//! /// Counts its inputs.
//! struct Counter;
//!
//! impl Engine for Counter {
//!     async fn execute_raw_query(&self, request: RawQueryRequest, _: ProgressSink) -> Result<RawQuerySuccess, EngineError> {
//!         Ok(RawQuerySuccess { num_records: request.input_data_paths.len() as u64 })
//!     }
//!     async fn execute_transform(&self, _: TransformRequest, _: ProgressSink) -> Result<TransformSuccess, EngineError> {
//!         Err(EngineError::invalid_query("raw queries only"))
//!     }
//! }
//!
//! let runtime: Box<dyn EngineRuntime> =
//!     Box::new(InProcessRuntime::new("counter", "0.1.0", Counter, RuntimeConfig::default()));
//! let out = tempfile::tempdir().unwrap();
//! let engine = runtime
//!     .start(StartRequest::new(OperationId::generate(), OperationFolders::new(out.path())))
//!     .await
//!     .unwrap();
//! let request = RawQueryRequest {
//!     input_data_paths: vec!["a.parquet".into(), "b.parquet".into()],
//!     transform: Transform::Sql(TransformSql::new("counter", "select count(*)")),
//!     output_data_path: out.path().join("out.parquet").display().to_string(),
//! };
//! let success = engine.execute_raw_query(&request, |_progress| {}).await.unwrap();
//! assert_eq!(success.num_records, 2);
//! engine.stop().await.unwrap();
//! # });
//! ```

mod binary_hash;
mod config;
mod connect;
mod container;
mod endpoint;
mod engine_log;
mod error;
mod in_process;
mod operation;
mod ownership;
mod paths;
mod process;
mod runtime;
mod scoped_credentials;
mod shutdown;
mod staging;

pub use binary_hash::{HashError as BinaryHashError, binary_sha256, hashings as binary_hashings};
pub use config::RuntimeConfig;
pub use container::daemon::{DaemonSocket, DockerDaemon};
pub use container::image::{ImageDigest, PullPolicy};
pub use container::labels::{LABEL_ENGINE, LABEL_MANAGED, LABEL_OPERATION, LABEL_OWNER};
pub use container::sandbox::{
    CONTAINER_MQUEUE_DIR, CONTAINER_RUN_DIR, CONTAINER_SOCKET, ContainerUser, NOBODY, SandboxPolicy,
};
pub use container::{ContainerEngine, ContainerRuntime};
pub use endpoint::EngineEndpoint;
pub use error::RuntimeError;
pub use in_process::InProcessRuntime;
pub use operation::{OperationFolders, OperationId};
pub use paths::{CONTAINER_INPUT_DIR, CONTAINER_OUTPUT_DIR};
pub use process::{ProcessEndpoint, ProcessEngine, ProcessRuntime};
pub use runtime::{EngineEnvironment, EngineHandle, EngineIdentity, EngineRuntime, StartRequest};
pub use scoped_credentials::{
    AccessGrant, MAX_SESSION_DURATION, MIN_SESSION_DURATION, SESSION_POLICY_LIMIT, StsConfig,
    TemporaryCredentials,
};
pub use shutdown::{ShutdownReport, begin_shutdown, live_containers, shutdown, wait_for_removals};
pub use staging::{DataLocation, MULTIPART_THRESHOLD, PublishedObject, S3Config, StagingArea};

/// The README's example, compiled as a doc test so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
