//! The raw `engine.Engine` service the test engine listens with.
//!
//! The server SDK guarantees the response-stream contract (Progress*, then exactly one terminal
//! message), so an [`Engine`](weir_engine_contract::Engine) cannot break it even when asked to. The
//! front answers the two stream-breaking hooks (`two-terminals`, `no-terminal`) with scripted
//! frames and forwards every other call, unchanged, to the SDK server running
//! [`TestEngine`](crate::engine::TestEngine) on a private loopback port, and streams its answer
//! back. The SDK service itself is not public, hence the forwarding.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use futures::Stream;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status, Streaming};
use weir_engine_contract::EngineAddress;
use weir_engine_contract::grpc::Envelope;
use weir_engine_contract::grpc::raw::engine_client::EngineClient as RawClient;
use weir_engine_contract::grpc::raw::engine_server::{self, EngineServer as RawServer};
use weir_engine_contract::model::{
    EngineResponse, Progress, RawQueryRequest, RawQuerySuccess, Transform, TransformRequest,
    TransformSuccess, WireMessage,
};

use crate::hooks::Hook;

/// The frames of one answer.
pub type Frames = Pin<Box<dyn Stream<Item = Result<Envelope, Status>> + Send>>;

type Answer = Result<Response<Frames>, Status>;

/// Answers the stream-breaking hooks; forwards everything else to the SDK server.
#[derive(Debug, Clone)]
pub struct Front {
    sdk: RawClient<Channel>,
}

impl Front {
    /// A front forwarding to the SDK server reached through `sdk`.
    pub fn new(sdk: Channel) -> Self {
        Self {
            sdk: RawClient::new(sdk),
        }
    }

    /// Serves the front on `address` until `shutdown` completes; a Unix socket file is removed on
    /// return.
    pub async fn serve(
        self,
        address: &EngineAddress,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), String> {
        let router = Server::builder().add_service(RawServer::new(self));
        match address {
            EngineAddress::Tcp(socket) => {
                let listener = TcpListener::bind(socket)
                    .await
                    .map_err(|e| format!("cannot listen on {address}: {e}"))?;
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await
                    .map_err(|e| format!("serving on {address}: {e}"))
            }
            EngineAddress::Unix(path) => {
                let listener = bind_unix(path)
                    .await
                    .map_err(|e| format!("cannot listen on {address}: {e}"))?;
                let served = router
                    .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
                    .await
                    .map_err(|e| format!("serving on {address}: {e}"));
                let _ = std::fs::remove_file(path);
                served
            }
        }
    }
}

/// Binds a Unix socket, replacing a stale socket file nothing accepts on.
async fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    match UnixListener::bind(path) {
        Err(e)
            if e.kind() == std::io::ErrorKind::AddrInUse
                && tokio::net::UnixStream::connect(path).await.is_err() =>
        {
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        bound => bound,
    }
}

/// The scripted frames for a stream-breaking hook in `envelope`, or `None` to forward the call.
/// A request that does not decode is forwarded too: the SDK answers it.
fn scripted<R, S>(envelope: &Envelope, transform: fn(&R) -> &Transform) -> Option<Frames>
where
    R: WireMessage,
    S: Default,
    EngineResponse<S>: WireMessage,
{
    let bytes = envelope.flatbuffer().ok()?;
    let request = R::decode(&bytes).ok()?;
    let responses: Vec<EngineResponse<S>> = match Hook::of(transform(&request)) {
        Hook::TwoTerminals => {
            tracing::warn!("sending two terminal messages, as asked");
            vec![
                EngineResponse::Success(S::default()),
                EngineResponse::Success(S::default()),
            ]
        }
        Hook::NoTerminal => {
            tracing::warn!("ending the stream without a terminal message, as asked");
            vec![EngineResponse::Progress(Progress {
                phase: Some("no-terminal".into()),
                ..Progress::default()
            })]
        }
        _ => return None,
    };
    let frames: Vec<Result<Envelope, Status>> = responses
        .iter()
        .map(|r| Ok(Envelope::from_flatbuffer(r.encode())))
        .collect();
    Some(Box::pin(futures::stream::iter(frames)))
}

/// The SDK server's answer, streamed back as it comes.
fn forwarded(answer: Result<Response<Streaming<Envelope>>, Status>) -> Answer {
    answer.map(|response| Response::new(Box::pin(response.into_inner()) as Frames))
}

#[tonic::async_trait]
impl engine_server::Engine for Front {
    type ExecuteRawQueryStream = Frames;
    type ExecuteTransformStream = Frames;
    type ValidateQueryStream = Frames;
    type MigrateQueryStream = Frames;
    type DeriveProvenanceStream = Frames;

    async fn execute_raw_query(&self, request: Request<Envelope>) -> Answer {
        let envelope = request.into_inner();
        if let Some(frames) =
            scripted::<RawQueryRequest, RawQuerySuccess>(&envelope, |r| &r.transform)
        {
            return Ok(Response::new(frames));
        }
        forwarded(self.sdk.clone().execute_raw_query(envelope).await)
    }

    async fn execute_transform(&self, request: Request<Envelope>) -> Answer {
        let envelope = request.into_inner();
        if let Some(frames) =
            scripted::<TransformRequest, TransformSuccess>(&envelope, |r| &r.transform)
        {
            return Ok(Response::new(frames));
        }
        forwarded(self.sdk.clone().execute_transform(envelope).await)
    }

    async fn validate_query(&self, request: Request<Envelope>) -> Answer {
        forwarded(self.sdk.clone().validate_query(request.into_inner()).await)
    }

    async fn migrate_query(&self, request: Request<Envelope>) -> Answer {
        forwarded(self.sdk.clone().migrate_query(request.into_inner()).await)
    }

    async fn derive_provenance(&self, request: Request<Envelope>) -> Answer {
        forwarded(
            self.sdk
                .clone()
                .derive_provenance(request.into_inner())
                .await,
        )
    }
}
