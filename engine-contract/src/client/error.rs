//! [`ClientError`]: everything that can go wrong calling an engine.

use std::time::Duration;

use crate::address::EngineAddress;
use crate::grpc::EnvelopeError;
use crate::model::{DecodeError, ValidationError};
use crate::operation::Operation;
use crate::stream_rules::MessageKind;

/// Why a call to an engine failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The engine did not accept connections within the readiness wait.
    #[error("engine at {address} not ready after {waited:?}: {last_error}")]
    NotReady {
        /// Where it was dialled.
        address: EngineAddress,
        /// How long we tried.
        waited: Duration,
        /// The last connection error.
        last_error: String,
    },
    /// The engine answered gRPC UNIMPLEMENTED: it lacks the operation.
    #[error("{operation} is not supported by this engine")]
    OperationNotSupported {
        /// The operation.
        operation: Operation,
    },
    /// The call did not finish within its deadline.
    #[error("{operation} did not finish within its deadline of {deadline:?}")]
    DeadlineExceeded {
        /// The operation.
        operation: Operation,
        /// The deadline.
        deadline: Duration,
    },
    /// The stream ended before a terminal message.
    #[error(
        "{operation}: the engine ended the stream without a terminal message (after {progress_messages} progress messages)"
    )]
    NoTerminalMessage {
        /// The operation.
        operation: Operation,
        /// Progress messages received.
        progress_messages: u64,
    },
    /// A message arrived after the terminal message (a second terminal, or
    /// progress after it).
    #[error(
        "{operation}: the engine sent a {kind:?} message after the terminal message (message #{index})"
    )]
    MessageAfterTerminal {
        /// The operation.
        operation: Operation,
        /// Kind of the extra message: `Terminal` is a second terminal.
        kind: MessageKind,
        /// 0-based position in the stream.
        index: u64,
    },
    /// A response frame is not a valid protobuf envelope.
    #[error("{operation}: response message #{index} is not a valid protobuf envelope: {source}")]
    MalformedEnvelope {
        /// The operation.
        operation: Operation,
        /// 0-based position in the stream.
        index: u64,
        /// What is wrong.
        source: EnvelopeError,
    },
    /// A response message's FlatBuffer does not decode.
    #[error("{operation}: response message #{index} is garbage: {source}")]
    GarbageResponse {
        /// The operation.
        operation: Operation,
        /// 0-based position in the stream.
        index: u64,
        /// What is wrong.
        source: DecodeError,
    },
    /// The engine answered InvalidQuery.
    #[error("{operation}: invalid query: {message}")]
    InvalidQuery {
        /// The operation.
        operation: Operation,
        /// The engine's message.
        message: String,
        /// Structured problems (ValidateQuery only).
        errors: Vec<ValidationError>,
    },
    /// The engine answered InternalError.
    #[error("{operation}: engine internal error: {message}")]
    EngineInternalError {
        /// The operation.
        operation: Operation,
        /// The engine's message.
        message: String,
        /// The engine's backtrace, if it sent one.
        backtrace: Option<String>,
    },
    /// The call failed with another gRPC status (transport failure, engine
    /// crash, ...).
    #[error("{operation}: gRPC status {code:?}: {message}")]
    Status {
        /// The operation.
        operation: Operation,
        /// The status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
}

impl ClientError {
    pub(crate) fn from_status(operation: Operation, status: &tonic::Status) -> Self {
        match status.code() {
            tonic::Code::Unimplemented => Self::OperationNotSupported { operation },
            code => Self::Status {
                operation,
                code,
                message: status.message().to_owned(),
            },
        }
    }
}
