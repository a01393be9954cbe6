//! [`OperationCall`]: one call's response stream, read through the stream
//! rules into progress and a typed result.

use std::marker::PhantomData;
use std::time::Duration;

use tokio::time::Instant;
use tonic::Streaming;

use super::error::ClientError;
use crate::grpc::Envelope;
use crate::model::{EngineResponse, Progress, WireMessage};
use crate::operation::{Operation, OperationKind};
use crate::stream_rules::{MessageKind, ResponseStreamRules, StreamViolation};

/// How long [`OperationCall::finish`] waits for the stream to end after the
/// terminal message.
const AFTER_TERMINAL_GRACE: Duration = Duration::from_secs(5);

/// A call in flight: read its progress with [`progress`](Self::progress),
/// then its result with [`finish`](Self::finish).
///
/// The whole call (including reading the stream to its end) is bounded by
/// the client's deadline.
pub struct OperationCall<K: OperationKind> {
    stream: Streaming<Envelope>,
    rules: ResponseStreamRules,
    terminal: Option<EngineResponse<K::Success>>,
    deadline: Option<(Instant, Duration)>,
    _kind: PhantomData<K>,
}

impl<K: OperationKind> std::fmt::Debug for OperationCall<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationCall")
            .field("operation", &K::OPERATION)
            .field("rules", &self.rules)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

fn violation_error(operation: Operation, violation: StreamViolation) -> ClientError {
    match violation {
        StreamViolation::MessageAfterTerminal { kind, index } => {
            ClientError::MessageAfterTerminal {
                operation,
                kind,
                index,
            }
        }
        StreamViolation::EndedWithoutTerminal { progress_messages } => {
            ClientError::NoTerminalMessage {
                operation,
                progress_messages,
            }
        }
    }
}

impl<K: OperationKind> OperationCall<K> {
    pub(crate) fn new(stream: Streaming<Envelope>, deadline: Option<(Instant, Duration)>) -> Self {
        Self {
            stream,
            rules: ResponseStreamRules::new(),
            terminal: None,
            deadline,
            _kind: PhantomData,
        }
    }

    fn deadline_exceeded(&self) -> ClientError {
        ClientError::DeadlineExceeded {
            operation: K::OPERATION,
            deadline: self.deadline.map(|(_, d)| d).unwrap_or_default(),
        }
    }

    /// Next raw frame, bounded by the deadline; `None` at the end.
    async fn next_frame(&mut self) -> Result<Option<Envelope>, ClientError> {
        let next = self.stream.message();
        let result = match self.deadline {
            Some((at, _)) => match tokio::time::timeout_at(at, next).await {
                Ok(result) => result,
                Err(_) => return Err(self.deadline_exceeded()),
            },
            None => next.await,
        };
        result.map_err(|status| match status.code() {
            tonic::Code::DeadlineExceeded if self.deadline.is_some() => self.deadline_exceeded(),
            _ => ClientError::from_status(K::OPERATION, &status),
        })
    }

    /// Decodes a frame into a response message.
    fn decode(
        &self,
        index: u64,
        envelope: &Envelope,
    ) -> Result<EngineResponse<K::Success>, ClientError> {
        let operation = K::OPERATION;
        let bytes = envelope
            .flatbuffer()
            .map_err(|source| ClientError::MalformedEnvelope {
                operation,
                index,
                source,
            })?;
        K::Response::decode(&bytes)
            .map(Into::into)
            .map_err(|source| ClientError::GarbageResponse {
                operation,
                index,
                source,
            })
    }

    /// The next Progress message, or `None` once the terminal message has
    /// arrived (then call [`finish`](Self::finish)).
    pub async fn progress(&mut self) -> Result<Option<Progress>, ClientError> {
        if self.terminal.is_some() {
            return Ok(None);
        }
        let index = self.rules.messages_seen();
        let Some(envelope) = self.next_frame().await? else {
            return Err(violation_error(
                K::OPERATION,
                self.rules
                    .on_end()
                    .err()
                    .unwrap_or(StreamViolation::EndedWithoutTerminal {
                        progress_messages: self.rules.progress_messages(),
                    }),
            ));
        };
        let message = self.decode(index, &envelope)?;
        let kind = if message.is_terminal() {
            MessageKind::Terminal
        } else {
            MessageKind::Progress
        };
        self.rules
            .on_message(kind)
            .map_err(|v| violation_error(K::OPERATION, v))?;
        match message {
            EngineResponse::Progress(progress) => {
                tracing::debug!(operation = %K::OPERATION, ?progress, "progress");
                Ok(Some(progress))
            }
            terminal => {
                self.terminal = Some(terminal);
                Ok(None)
            }
        }
    }

    /// Reads the rest of the stream and returns the result: Success as
    /// `Ok`, InvalidQuery and InternalError as their [`ClientError`]s, and
    /// any breach of the stream contract as its own error.
    pub async fn finish(mut self) -> Result<K::Success, ClientError> {
        while self.progress().await?.is_some() {}
        // The terminal must be the last message. A peer that keeps the
        // stream open after it is given a grace period, not the whole
        // deadline: the result is already known.
        let index = self.rules.messages_seen();
        let grace = match self.deadline {
            Some((at, _)) => AFTER_TERMINAL_GRACE.min(at.saturating_duration_since(Instant::now())),
            None => AFTER_TERMINAL_GRACE,
        };
        let after = match tokio::time::timeout(grace, self.stream.message()).await {
            Ok(Ok(frame)) => frame,
            Ok(Err(status)) => return Err(ClientError::from_status(K::OPERATION, &status)),
            Err(_) => {
                tracing::warn!(operation = %K::OPERATION, ?grace, "stream still open after the terminal message");
                None
            }
        };
        if let Some(envelope) = after {
            let kind = match self.decode(index, &envelope)? {
                EngineResponse::Progress(_) => MessageKind::Progress,
                _ => MessageKind::Terminal,
            };
            let violation = self
                .rules
                .on_message(kind)
                .err()
                .unwrap_or(StreamViolation::MessageAfterTerminal { kind, index });
            return Err(violation_error(K::OPERATION, violation));
        }
        let operation = K::OPERATION;
        match self.terminal.take() {
            Some(EngineResponse::Success(success)) => Ok(success),
            Some(EngineResponse::InvalidQuery { message, errors }) => {
                Err(ClientError::InvalidQuery {
                    operation,
                    message,
                    errors,
                })
            }
            Some(EngineResponse::InternalError { message, backtrace }) => {
                Err(ClientError::EngineInternalError {
                    operation,
                    message,
                    backtrace,
                })
            }
            Some(EngineResponse::Progress(_)) | None => Err(ClientError::NoTerminalMessage {
                operation,
                progress_messages: self.rules.progress_messages(),
            }),
        }
    }

    /// Like [`finish`](Self::finish), handing each Progress to `on_progress`
    /// first.
    pub async fn finish_with(
        mut self,
        mut on_progress: impl FnMut(Progress),
    ) -> Result<K::Success, ClientError> {
        while let Some(progress) = self.progress().await? {
            on_progress(progress);
        }
        self.finish().await
    }
}
