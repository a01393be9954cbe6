//! [`EngineServer`]: binds an address (TCP or Unix socket) and serves an
//! [`Engine`] until a shutdown signal.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use super::engine::Engine;
use super::rejections::RejectionLog;
use super::service::{DEFAULT_PROGRESS_BUFFER, EngineService};
use super::unix_connection::UnixConnection;
use crate::address::EngineAddress;
use crate::grpc::raw::engine_server::EngineServer as RawEngineServer;

/// Why an engine server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: EngineAddress,
        /// The OS error.
        source: std::io::Error,
    },
    /// A Unix socket path is in use by a live server.
    #[error("{path} is in use by another server")]
    SocketInUse {
        /// The socket path.
        path: PathBuf,
    },
    /// The gRPC transport failed while serving.
    #[error("engine server on {address} failed: {source}")]
    Transport {
        /// The address served.
        address: EngineAddress,
        /// What failed.
        source: tonic::transport::Error,
    },
}

type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Builds and runs an engine server.
///
/// Defaults: all interfaces on port [`DEFAULT_PORT`](crate::DEFAULT_PORT),
/// no shutdown signal (serve until the future is dropped).
///
/// ```no_run
/// # use weir_engine_contract::model::*;
/// # use weir_engine_contract::{Engine, EngineError, ProgressSink};
/// # struct MyEngine;
/// # impl Engine for MyEngine {
/// #   async fn execute_raw_query(&self, _: RawQueryRequest, _: ProgressSink) -> Result<RawQuerySuccess, EngineError> { Ok(RawQuerySuccess::default()) }
/// #   async fn execute_transform(&self, _: TransformRequest, _: ProgressSink) -> Result<TransformSuccess, EngineError> { Ok(TransformSuccess::default()) }
/// # }
/// use weir_engine_contract::EngineServer;
///
/// # async fn run() -> Result<(), weir_engine_contract::ServeError> {
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// # drop(stop);
/// EngineServer::new(MyEngine)
///     .port(2884)
///     .with_graceful_shutdown(async { let _ = stopped.await; })
///     .serve()
///     .await
/// # }
/// ```
pub struct EngineServer<E> {
    engine: Arc<E>,
    address: EngineAddress,
    shutdown: Option<Shutdown>,
    progress_buffer: usize,
}

impl<E> std::fmt::Debug for EngineServer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineServer")
            .field("address", &self.address)
            .field("progress_buffer", &self.progress_buffer)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> EngineServer<E> {
    /// A server for `engine` on the default address.
    pub fn new(engine: E) -> Self {
        Self::from_arc(Arc::new(engine))
    }

    /// A server for a shared engine.
    pub fn from_arc(engine: Arc<E>) -> Self {
        Self {
            engine,
            address: EngineAddress::default(),
            shutdown: None,
            progress_buffer: DEFAULT_PROGRESS_BUFFER,
        }
    }

    /// Listen on all interfaces on `port`.
    pub fn port(mut self, port: u16) -> Self {
        self.address = EngineAddress::all_interfaces(port);
        self
    }

    /// Listen on `address` (TCP, port 0 picks a free port, or Unix socket).
    pub fn address(mut self, address: EngineAddress) -> Self {
        self.address = address;
        self
    }

    /// Stop accepting calls when `signal` completes, let running calls
    /// finish, then return from [`serve`](Self::serve).
    pub fn with_graceful_shutdown(
        mut self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        self.shutdown = Some(Box::pin(signal));
        self
    }

    /// How many Progress messages may wait for a slow client before the
    /// engine's reports wait (default 16).
    pub fn progress_buffer(mut self, messages: usize) -> Self {
        self.progress_buffer = messages.max(1);
        self
    }

    /// Binds the address; the returned server knows its actual address.
    pub async fn bind(self) -> Result<BoundEngineServer<E>, ServeError> {
        let listener = match &self.address {
            EngineAddress::Tcp(address) => {
                let listener =
                    TcpListener::bind(address)
                        .await
                        .map_err(|source| ServeError::Bind {
                            address: self.address.clone(),
                            source,
                        })?;
                Listener::Tcp(listener)
            }
            EngineAddress::Unix(path) => Listener::Unix(bind_unix(path).await?, path.clone()),
        };
        let local_address = match &listener {
            Listener::Tcp(listener) => {
                EngineAddress::Tcp(listener.local_addr().map_err(|source| ServeError::Bind {
                    address: self.address.clone(),
                    source,
                })?)
            }
            Listener::Unix(_, path) => EngineAddress::Unix(path.clone()),
        };
        tracing::info!(address = %local_address, "engine server listening");
        Ok(BoundEngineServer {
            server: self,
            listener,
            local_address,
        })
    }

    /// Binds and serves until the shutdown signal.
    pub async fn serve(self) -> Result<(), ServeError> {
        self.bind().await?.serve().await
    }
}

/// Binds a Unix socket, replacing a stale socket file left by a server
/// that is gone (nothing accepts on it).
async fn bind_unix(path: &PathBuf) -> Result<UnixListener, ServeError> {
    let address = || EngineAddress::Unix(path.clone());
    match UnixListener::bind(path) {
        Ok(listener) => Ok(listener),
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => {
            if tokio::net::UnixStream::connect(path).await.is_ok() {
                return Err(ServeError::SocketInUse { path: path.clone() });
            }
            tracing::info!(path = %path.display(), "removing stale socket file");
            std::fs::remove_file(path).map_err(|source| ServeError::Bind {
                address: address(),
                source,
            })?;
            UnixListener::bind(path).map_err(|source| ServeError::Bind {
                address: address(),
                source,
            })
        }
        Err(source) => Err(ServeError::Bind {
            address: address(),
            source,
        }),
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// An engine server whose address is bound; [`serve`](Self::serve) runs it.
pub struct BoundEngineServer<E> {
    server: EngineServer<E>,
    listener: Listener,
    local_address: EngineAddress,
}

impl<E> std::fmt::Debug for BoundEngineServer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundEngineServer")
            .field("local_address", &self.local_address)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> BoundEngineServer<E> {
    /// The address clients dial (with the actual port when 0 was asked).
    pub fn local_address(&self) -> &EngineAddress {
        &self.local_address
    }

    /// Serves until the shutdown signal (forever without one). A Unix
    /// socket file is removed on return.
    pub async fn serve(self) -> Result<(), ServeError> {
        let Self {
            server,
            listener,
            local_address,
        } = self;
        let service =
            RawEngineServer::new(EngineService::new(server.engine, server.progress_buffer));
        let shutdown = server
            .shutdown
            .unwrap_or_else(|| Box::pin(std::future::pending()));
        // Requests refused before they reach the engine leave a log line.
        let router = Server::builder().layer(RejectionLog).add_service(service);
        let result = match listener {
            Listener::Tcp(listener) => {
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await
            }
            Listener::Unix(listener, path) => {
                // Any `:authority` is accepted on a Unix socket (grpc-core sends the socket path,
                // which HTTP/2 would reset the stream for).
                let incoming = UnixListenerStream::new(listener)
                    .map(|connection| connection.map(UnixConnection::new));
                let result = router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await;
                if let Err(error) = std::fs::remove_file(&path) {
                    tracing::debug!(path = %path.display(), %error, "socket file not removed");
                }
                result
            }
        };
        tracing::info!(address = %local_address, "engine server stopped");
        result.map_err(|source| ServeError::Transport {
            address: local_address,
            source,
        })
    }
}

/// Serves `engine` on `address` until the process ends.
///
/// Use [`EngineServer`] for a shutdown signal or other options.
pub async fn serve<E: Engine>(engine: E, address: EngineAddress) -> Result<(), ServeError> {
    EngineServer::new(engine).address(address).serve().await
}
