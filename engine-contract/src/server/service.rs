//! The tonic service around an [`Engine`]: decodes requests, runs the
//! engine, and enforces the response-stream contract on what goes out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::engine::{Engine, EngineError, ProgressSink};
use super::panic::catch_engine_panic;
use crate::grpc::Envelope;
use crate::grpc::raw::engine_server;
use crate::model::{EngineResponse, Progress, WireMessage};
use crate::operation::{
    DeriveProvenance, ExecuteRawQuery, ExecuteTransform, MigrateQuery, Operation, OperationKind,
    ValidateQuery,
};
use crate::stream_rules::{MessageKind, ResponseStreamRules};

/// One outgoing item: a message, or a status that ends the call.
pub(crate) type Outgoing = (MessageKind, Result<Envelope, Status>);

/// Default bound of the per-call queue of outgoing messages.
pub(crate) const DEFAULT_PROGRESS_BUFFER: usize = 16;

/// Serves an [`Engine`] as the `engine.Engine` gRPC service.
#[derive(Debug)]
pub(crate) struct EngineService<E> {
    engine: Arc<E>,
    progress_buffer: usize,
}

impl<E> EngineService<E> {
    pub(crate) fn new(engine: Arc<E>, progress_buffer: usize) -> Self {
        Self {
            engine,
            progress_buffer: progress_buffer.max(1),
        }
    }
}

fn encode_response<K: OperationKind>(response: EngineResponse<K::Success>) -> Envelope {
    Envelope::from_flatbuffer(K::Response::from(response).encode())
}

fn encode_progress<K: OperationKind>(progress: Progress) -> Vec<u8> {
    K::Response::from(EngineResponse::Progress(progress)).encode()
}

fn encode_internal_error<K: OperationKind>(message: String) -> Envelope {
    encode_response::<K>(EngineResponse::InternalError {
        message,
        backtrace: None,
    })
}

/// The outgoing side of one call: messages from the engine task pass
/// through [`ResponseStreamRules`]; anything after the terminal is dropped,
/// and a stream that would end without a terminal gets an InternalError.
/// Dropping it (client gone, deadline passed) aborts the engine task.
pub struct ResponseStream {
    receiver: mpsc::Receiver<Outgoing>,
    rules: ResponseStreamRules,
    operation: Operation,
    missing_terminal: Option<Envelope>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("operation", &self.operation)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

impl Stream for ResponseStream {
    type Item = Result<Envelope, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.rules.is_finished() {
                return Poll::Ready(None);
            }
            match self.receiver.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some((kind, item))) => match self.rules.on_message(kind) {
                    Ok(()) => return Poll::Ready(Some(item)),
                    Err(violation) => {
                        tracing::warn!(operation = %self.operation, %violation, "dropped");
                    }
                },
                Poll::Ready(None) => {
                    if let Err(violation) = self.rules.on_end() {
                        tracing::error!(operation = %self.operation, %violation, "engine task ended without a result");
                        let fallback = self.missing_terminal.take();
                        if let Some(envelope) = fallback {
                            // Counts as the terminal: the next poll ends the stream.
                            let _ = self.rules.on_message(MessageKind::Terminal);
                            return Poll::Ready(Some(Ok(envelope)));
                        }
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }
}

impl Drop for ResponseStream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            if !task.is_finished() {
                tracing::debug!(operation = %self.operation, "call dropped: aborting the engine task");
            }
            task.abort();
        }
    }
}

impl<E: Engine> EngineService<E> {
    /// Runs one call of operation `K`: decode, run `run` with panic capture,
    /// map the result to the terminal message.
    fn call<K, F, Fut>(&self, request: Request<Envelope>, run: F) -> ResponseStream
    where
        K: OperationKind,
        F: FnOnce(Arc<E>, K::Request, ProgressSink) -> Fut + Send + 'static,
        Fut: Future<Output = Result<K::Success, EngineError>> + Send + 'static,
    {
        let operation = K::OPERATION;
        let (sender, receiver) = mpsc::channel(self.progress_buffer);
        let span = tracing::info_span!("engine_operation", %operation);
        let decoded = request
            .into_inner()
            .flatbuffer()
            .map_err(|e| format!("malformed protobuf envelope: {e}"))
            .and_then(|bytes| {
                K::Request::decode(&bytes)
                    .map_err(|e| format!("malformed {operation} request: {e}"))
            });
        let engine = Arc::clone(&self.engine);
        let task = tokio::spawn(
            async move {
                let terminal = match decoded {
                    Err(message) => {
                        tracing::warn!(%message, "request does not decode: answering InvalidQuery");
                        EngineResponse::invalid_query(message)
                    }
                    Ok(request) => {
                        let sink = ProgressSink::new(sender.clone(), encode_progress::<K>);
                        match catch_engine_panic(run(engine, request, sink)).await {
                            Ok(Ok(success)) => {
                                tracing::info!("succeeded");
                                EngineResponse::Success(success)
                            }
                            Ok(Err(EngineError::InvalidQuery { message, errors })) => {
                                tracing::info!(%message, "invalid query");
                                EngineResponse::InvalidQuery { message, errors }
                            }
                            Ok(Err(EngineError::Internal { message, backtrace })) => {
                                tracing::error!(%message, "engine failed");
                                EngineResponse::InternalError { message, backtrace }
                            }
                            Ok(Err(EngineError::OperationNotSupported { .. })) => {
                                // gRPC's answer for a method a server lacks,
                                // as ODF engines give for Weir's operations.
                                tracing::info!("not supported: answering UNIMPLEMENTED");
                                let status = Status::unimplemented(format!(
                                    "{operation} is not supported by this engine"
                                ));
                                let _ = sender.send((MessageKind::Terminal, Err(status))).await;
                                return;
                            }
                            Err(panic) => {
                                tracing::error!(message = %panic.message, "engine panicked");
                                EngineResponse::InternalError {
                                    message: format!("engine panicked: {}", panic.message),
                                    backtrace: Some(panic.backtrace),
                                }
                            }
                        }
                    }
                };
                let envelope = encode_response::<K>(terminal);
                if sender
                    .send((MessageKind::Terminal, Ok(envelope)))
                    .await
                    .is_err()
                {
                    tracing::debug!("client gone before the terminal message");
                }
            }
            .instrument(span),
        );
        ResponseStream {
            receiver,
            rules: ResponseStreamRules::new(),
            operation,
            missing_terminal: Some(encode_internal_error::<K>(format!(
                "{operation}: engine task ended without a result"
            ))),
            task: Some(task),
        }
    }
}

#[tonic::async_trait]
impl<E: Engine> engine_server::Engine for EngineService<E> {
    type ExecuteRawQueryStream = ResponseStream;
    type ExecuteTransformStream = ResponseStream;
    type ValidateQueryStream = ResponseStream;
    type MigrateQueryStream = ResponseStream;
    type DeriveProvenanceStream = ResponseStream;

    async fn execute_raw_query(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<ResponseStream>, Status> {
        Ok(Response::new(self.call::<ExecuteRawQuery, _, _>(
            request,
            |engine, request, sink| async move { engine.execute_raw_query(request, sink).await },
        )))
    }

    async fn execute_transform(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<ResponseStream>, Status> {
        Ok(Response::new(self.call::<ExecuteTransform, _, _>(
            request,
            |engine, request, sink| async move { engine.execute_transform(request, sink).await },
        )))
    }

    async fn validate_query(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<ResponseStream>, Status> {
        Ok(Response::new(self.call::<ValidateQuery, _, _>(
            request,
            |engine, request, sink| async move { engine.validate_query(request, sink).await },
        )))
    }

    async fn migrate_query(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<ResponseStream>, Status> {
        Ok(Response::new(self.call::<MigrateQuery, _, _>(
            request,
            |engine, request, sink| async move { engine.migrate_query(request, sink).await },
        )))
    }

    async fn derive_provenance(
        &self,
        request: Request<Envelope>,
    ) -> Result<Response<ResponseStream>, Status> {
        Ok(Response::new(self.call::<DeriveProvenance, _, _>(
            request,
            |engine, request, sink| async move { engine.derive_provenance(request, sink).await },
        )))
    }
}
