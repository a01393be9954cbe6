#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! The ODF engine protocol: how a coordinator drives a data engine, wire
//! compatible with existing ODF engines and coordinators.
//!
//! - [`model`]: the typed, owned messages (`TransformRequest`,
//!   `TransformResponse`, ...) and their FlatBuffers bytes. Decoding runs the
//!   FlatBuffers verifier and returns a [`model::DecodeError`]; it never
//!   panics.
//! - [`grpc`]: service `engine.Engine` over tonic; every message is a
//!   protobuf `bytes flatbuffer = 1` envelope, encoded by hand (no protoc).
//! - Server SDK: implement [`Engine`], run it with [`serve`] or
//!   [`EngineServer`] (TCP or Unix socket, default port [`DEFAULT_PORT`]).
//!   The server guarantees the stream contract: zero or more Progress, then
//!   exactly one terminal message.
//! - Client SDK: [`EngineClient`] with a readiness wait, a deadline per call,
//!   progress, a typed result and a specific [`ClientError`] for each way a
//!   peer can misbehave.
//! - [`stream_rules`]: the response-stream contract as a sans-IO state
//!   machine, shared by client and server.
//! - [`conformance`]: checks any engine address against the contract.
//!
//! # Example
//!
//! ```
//! use weir_engine_contract::model::*;
//! use weir_engine_contract::{Engine, EngineAddress, EngineClient, EngineError, EngineServer, ProgressSink};
//!
//! struct CountingEngine;
//!
//! impl Engine for CountingEngine {
//!     async fn execute_raw_query(
//!         &self,
//!         request: RawQueryRequest,
//!         progress: ProgressSink,
//!     ) -> Result<RawQuerySuccess, EngineError> {
//!         progress.report(Progress { phase: Some("reading".into()), ..Progress::default() }).await;
//!         Ok(RawQuerySuccess { num_records: request.input_data_paths.len() as u64 })
//!     }
//!
//!     async fn execute_transform(
//!         &self,
//!         _request: TransformRequest,
//!         _progress: ProgressSink,
//!     ) -> Result<TransformSuccess, EngineError> {
//!         Err(EngineError::invalid_query("transforms are not supported"))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = EngineServer::new(CountingEngine)
//!     .address(EngineAddress::loopback(0))
//!     .with_graceful_shutdown(async { let _ = stopped.await; })
//!     .bind()
//!     .await?;
//! let address = server.local_address().clone();
//! let serving = tokio::spawn(server.serve());
//!
//! let client = EngineClient::connect(address).await?;
//! let request = RawQueryRequest {
//!     input_data_paths: vec!["/in/a.parquet".into(), "/in/b.parquet".into()],
//!     transform: Transform::Sql(TransformSql::new("datafusion", "select * from input")),
//!     output_data_path: "/out/output.parquet".into(),
//! };
//! let mut call = client.execute_raw_query(&request).await?;
//! assert_eq!(call.progress().await?.and_then(|p| p.phase).as_deref(), Some("reading"));
//! assert_eq!(call.finish().await?.num_records, 2);
//!
//! let _ = stop.send(());
//! serving.await??;
//! # Ok(())
//! # }
//! ```
//!
//! # Weir's additions to the wire
//!
//! - **Progress fields.** ODF's `*ResponseProgress` tables have no fields;
//!   Weir appends optional `phase: string`, `rows_read: uint64 = null`,
//!   `rows_written: uint64 = null` at the end of each. New vtable slots are
//!   backwards compatible: ODF peers ignore them, and an ODF Progress decodes
//!   here with all three absent.
//! - **Three operations**, `ValidateQuery`, `MigrateQuery` and
//!   `DeriveProvenance`: same service, same style (server-streaming, one
//!   `bytes flatbuffer = 1` message each way, Progress* then one terminal),
//!   FlatBuffers tables in `schema/engine.fbs` (see [`model`] and the
//!   README). An engine lacking one answers gRPC UNIMPLEMENTED, which the
//!   client reports as [`ClientError::OperationNotSupported`].
//!
//! # Architecture invariants
//!
//! `engine-contract` never starts a container and never reads a dataset:
//! it knows messages, sockets and the stream contract. It has no
//! Arrow/Parquet dependency; the conformance checks that need data take a
//! [`conformance::DataFixtures`] implementation from the caller.
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod address;
mod client;
pub mod conformance;
// flatc's accessors: not part of the API (hidden, outside semver), the owned `model` is; the crate's tests
// use them to build messages the way another implementation might.
#[doc(hidden)]
pub mod generated;
pub mod grpc;
pub mod model;
mod operation;
mod server;
pub mod stream_rules;

pub use address::{DEFAULT_PORT, EngineAddress, InvalidEngineAddress, ODF_IMAGE_PORT};
pub use client::{ClientError, ConnectOptions, EngineClient, OperationCall};
pub use operation::{
    DeriveProvenance, ExecuteRawQuery, ExecuteTransform, MigrateQuery, Operation, OperationKind,
    ValidateQuery,
};
pub use server::{
    BoundEngineServer, Engine, EngineError, EngineServer, ProgressSink, ResponseStream, ServeError,
    serve,
};
