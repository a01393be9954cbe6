//! The [`Engine`] trait an engine implements, its [`EngineError`] and the
//! [`ProgressSink`] it reports progress through.

use std::future::Future;

use tokio::sync::mpsc;

use super::service::Outgoing;
use crate::grpc::Envelope;
use crate::model::{
    DeriveProvenanceRequest, DeriveProvenanceSuccess, MigrateQueryRequest, MigrateQuerySuccess,
    Progress, RawQueryRequest, RawQuerySuccess, TransformRequest, TransformSuccess,
    ValidateQueryRequest, ValidateQuerySuccess, ValidationError,
};
use crate::operation::Operation;
use crate::stream_rules::MessageKind;

/// A data engine: one async method per operation.
///
/// [`serve`](crate::serve) turns the returned `Result` into the response
/// stream's terminal message (`Ok` → Success, [`EngineError::InvalidQuery`]
/// → InvalidQuery, anything else or a panic → InternalError with a
/// backtrace) and forwards what the engine reports through its
/// [`ProgressSink`] as Progress messages before it.
///
/// The three Weir operations have default bodies answering
/// [`EngineError::OperationNotSupported`], which the server sends as gRPC
/// status UNIMPLEMENTED, exactly like an ODF engine that lacks them.
///
/// ```
/// use weir_engine_contract::model::{Progress, RawQueryRequest, RawQuerySuccess, TransformRequest, TransformSuccess};
/// use weir_engine_contract::{Engine, EngineError, ProgressSink};
///
/// struct Echo;
///
/// impl Engine for Echo {
///     async fn execute_raw_query(
///         &self,
///         request: RawQueryRequest,
///         _progress: ProgressSink,
///     ) -> Result<RawQuerySuccess, EngineError> {
///         Ok(RawQuerySuccess { num_records: request.input_data_paths.len() as u64 })
///     }
///
///     async fn execute_transform(
///         &self,
///         _request: TransformRequest,
///         progress: ProgressSink,
///     ) -> Result<TransformSuccess, EngineError> {
///         progress.report(Progress { phase: Some("executing".into()), ..Progress::default() }).await;
///         Err(EngineError::invalid_query("this engine computes nothing"))
///     }
/// }
/// ```
pub trait Engine: Send + Sync + 'static {
    /// ODF ExecuteRawQuery.
    fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        progress: ProgressSink,
    ) -> impl Future<Output = Result<RawQuerySuccess, EngineError>> + Send;

    /// ODF ExecuteTransform.
    fn execute_transform(
        &self,
        request: TransformRequest,
        progress: ProgressSink,
    ) -> impl Future<Output = Result<TransformSuccess, EngineError>> + Send;

    /// Weir ValidateQuery. Default: not supported.
    fn validate_query(
        &self,
        request: ValidateQueryRequest,
        progress: ProgressSink,
    ) -> impl Future<Output = Result<ValidateQuerySuccess, EngineError>> + Send {
        let _ = (request, progress);
        async {
            Err(EngineError::OperationNotSupported {
                operation: Operation::ValidateQuery,
            })
        }
    }

    /// Weir MigrateQuery. Default: not supported.
    fn migrate_query(
        &self,
        request: MigrateQueryRequest,
        progress: ProgressSink,
    ) -> impl Future<Output = Result<MigrateQuerySuccess, EngineError>> + Send {
        let _ = (request, progress);
        async {
            Err(EngineError::OperationNotSupported {
                operation: Operation::MigrateQuery,
            })
        }
    }

    /// Weir DeriveProvenance. Default: not supported.
    fn derive_provenance(
        &self,
        request: DeriveProvenanceRequest,
        progress: ProgressSink,
    ) -> impl Future<Output = Result<DeriveProvenanceSuccess, EngineError>> + Send {
        let _ = (request, progress);
        async {
            Err(EngineError::OperationNotSupported {
                operation: Operation::DeriveProvenance,
            })
        }
    }
}

/// How an engine operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The query cannot run: it does not parse or plan, or breaks a rule of
    /// the contract. Answered with InvalidQuery.
    #[error("invalid query: {message}")]
    InvalidQuery {
        /// What is wrong, for a person.
        message: String,
        /// Structured problems (carried on the wire by ValidateQuery only).
        errors: Vec<ValidationError>,
    },
    /// The engine failed. Answered with InternalError.
    #[error("engine internal error: {message}")]
    Internal {
        /// What failed, with its causes.
        message: String,
        /// Where.
        backtrace: Option<String>,
    },
    /// The engine does not implement the operation. Answered with gRPC
    /// status UNIMPLEMENTED.
    #[error("{operation} is not supported by this engine")]
    OperationNotSupported {
        /// The operation.
        operation: Operation,
    },
}

impl EngineError {
    /// An InvalidQuery with a message only.
    pub fn invalid_query(message: impl Into<String>) -> Self {
        Self::InvalidQuery {
            message: message.into(),
            errors: Vec::new(),
        }
    }

    /// An internal error from any error: the message holds its chain of
    /// causes, the backtrace is captured here.
    pub fn internal(error: &(dyn std::error::Error + 'static)) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Internal {
            message,
            backtrace: Some(std::backtrace::Backtrace::force_capture().to_string()),
        }
    }
}

/// Where an engine reports progress; each report becomes a Progress message
/// before the terminal message.
///
/// Cheap to clone. Reports wait while the client is slower than the engine
/// (bounded buffer: back-pressure, not loss); once the call is over
/// (terminal sent, or the client gone) reports are dropped.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    sender: Option<mpsc::Sender<Outgoing>>,
    encode: fn(Progress) -> Vec<u8>,
}

impl ProgressSink {
    pub(crate) fn new(sender: mpsc::Sender<Outgoing>, encode: fn(Progress) -> Vec<u8>) -> Self {
        Self {
            sender: Some(sender),
            encode,
        }
    }

    /// A sink that drops every report (for calling an [`Engine`] directly,
    /// e.g. in tests).
    pub fn discard() -> Self {
        fn nothing(_: Progress) -> Vec<u8> {
            Vec::new()
        }
        Self {
            sender: None,
            encode: nothing,
        }
    }

    /// Sends one Progress message.
    pub async fn report(&self, progress: Progress) {
        let Some(sender) = &self.sender else {
            return;
        };
        let envelope = Envelope::from_flatbuffer((self.encode)(progress));
        if sender
            .send((MessageKind::Progress, Ok(envelope)))
            .await
            .is_err()
        {
            tracing::trace!("progress after the call ended: dropped");
        }
    }

    /// Whether reports still reach the client.
    pub fn is_open(&self) -> bool {
        self.sender.as_ref().is_some_and(|s| !s.is_closed())
    }
}
