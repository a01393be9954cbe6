//! [`ReferenceEngine`] behind the engine contract: the `Engine` trait that `weir_engine_contract::serve` (and
//! the coordinator's embedded engine) drive.
//!
//! Progress reports are relayed from the engine's synchronous [`ProgressSink`] to the contract's async
//! sink by a small task; the relay is drained before the operation returns, so every Progress message
//! precedes the terminal one.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weir_engine_contract::model::{Progress as WireProgress, ValidationError};
use weir_engine_contract::{Engine, EngineError as WireError, ProgressSink as WireSink};

use crate::engine::ReferenceEngine;
use crate::error::{EngineError, ErrorKind};
use crate::progress::{Progress, ProgressSink};
use crate::request::{
    DeriveProvenanceRequest, DeriveProvenanceSuccess, MigrateQueryRequest, MigrateQuerySuccess,
    RawQueryRequest, RawQuerySuccess, TransformRequest, TransformSuccess, ValidateQueryRequest,
    ValidateQuerySuccess,
};

/// The engine side of a relay: never blocks.
#[derive(Debug)]
struct RelaySink {
    sender: mpsc::UnboundedSender<Progress>,
}

impl ProgressSink for RelaySink {
    fn report(&self, progress: Progress) {
        // The relay task is gone only once the call is over: dropping the report is right then.
        let _ = self.sender.send(progress);
    }
}

/// Forwards reports to the contract's sink until the engine side is dropped.
#[derive(Debug)]
struct Relay {
    task: JoinHandle<()>,
}

impl Relay {
    fn start(wire: WireSink) -> (RelaySink, Self) {
        let (sender, mut receiver) = mpsc::unbounded_channel::<Progress>();
        let task = tokio::spawn(async move {
            while let Some(progress) = receiver.recv().await {
                wire.report(WireProgress {
                    phase: Some(progress.phase.as_str().to_owned()),
                    rows_read: progress.rows_read,
                    rows_written: progress.rows_written,
                })
                .await;
            }
        });
        (RelaySink { sender }, Self { task })
    }

    /// Waits until every report sent through `sink` has been forwarded.
    async fn finish(self, sink: RelaySink) {
        drop(sink);
        if let Err(error) = self.task.await {
            tracing::warn!(%error, "progress relay failed");
        }
    }
}

/// The wire form of an engine error: InvalidQuery or InternalError.
pub fn to_wire_error(error: EngineError) -> WireError {
    let message = error.to_string();
    match error.kind() {
        ErrorKind::InvalidQuery => WireError::InvalidQuery {
            errors: vec![ValidationError {
                query_alias: error.query_step().map(str::to_owned),
                message: message.clone(),
            }],
            message,
        },
        ErrorKind::Internal => WireError::Internal {
            message,
            backtrace: None,
        },
    }
}

/// The contract's operations, each a call of the inherent method of the same name.
impl Engine for ReferenceEngine {
    async fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        progress: WireSink,
    ) -> Result<RawQuerySuccess, WireError> {
        let (sink, relay) = Relay::start(progress);
        let result = ReferenceEngine::execute_raw_query(self, &request, &sink).await;
        relay.finish(sink).await;
        result.map_err(to_wire_error)
    }

    async fn execute_transform(
        &self,
        request: TransformRequest,
        progress: WireSink,
    ) -> Result<TransformSuccess, WireError> {
        let (sink, relay) = Relay::start(progress);
        let result = ReferenceEngine::execute_transform(self, &request, &sink).await;
        relay.finish(sink).await;
        result.map_err(to_wire_error)
    }

    async fn validate_query(
        &self,
        request: ValidateQueryRequest,
        _progress: WireSink,
    ) -> Result<ValidateQuerySuccess, WireError> {
        ReferenceEngine::validate_query(self, &request)
            .await
            .map_err(to_wire_error)
    }

    async fn migrate_query(
        &self,
        request: MigrateQueryRequest,
        progress: WireSink,
    ) -> Result<MigrateQuerySuccess, WireError> {
        let (sink, relay) = Relay::start(progress);
        let result = ReferenceEngine::migrate_query(self, &request, &sink).await;
        relay.finish(sink).await;
        result.map_err(to_wire_error)
    }

    async fn derive_provenance(
        &self,
        request: DeriveProvenanceRequest,
        progress: WireSink,
    ) -> Result<DeriveProvenanceSuccess, WireError> {
        let (sink, relay) = Relay::start(progress);
        let result = ReferenceEngine::derive_provenance(self, &request, &sink).await;
        relay.finish(sink).await;
        result.map_err(to_wire_error)
    }
}
