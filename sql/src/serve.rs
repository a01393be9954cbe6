//! Serving Flight SQL: the listener (loopback unless authenticated), TLS, and authentication in front of
//! every call.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use arrow_flight::flight_service_server::FlightServiceServer;
use tokio::net::TcpListener;
use tonic::transport::{Identity, ServerTlsConfig};

use crate::auth::Auth;
use crate::error::SqlError;
use crate::flight::FlightSqlServer;
use crate::live::LiveSession;

/// TLS for the server: a certificate chain and its private key, PEM.
#[derive(Clone)]
pub struct Tls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// TLS from PEM text: the certificate chain (server certificate first) and its private key.
    pub fn from_pem(cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        Self {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
        }
    }

    /// TLS from PEM files; an unreadable or non-PEM file is an error naming it.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, SqlError> {
        let read = |path: &Path, what: &str| -> Result<Vec<u8>, SqlError> {
            let bytes = std::fs::read(path).map_err(|e| SqlError::Config {
                message: format!("cannot read the TLS {what} {}: {e}", path.display()),
            })?;
            if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
                return Err(SqlError::Config {
                    message: format!(
                        "the TLS {what} {} is not PEM (no `-----BEGIN` line)",
                        path.display()
                    ),
                });
            }
            Ok(bytes)
        };
        Ok(Self::from_pem(
            read(cert, "certificate")?,
            read(key, "private key")?,
        ))
    }
}

/// How the server serves: who may call it, and TLS.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Authentication ([`Auth::none`]: none, loopback only).
    pub auth: Auth,
    /// TLS; `None`: plain HTTP/2 (`grpc://`).
    pub tls: Option<Tls>,
}

/// Binds a listener on `127.0.0.1:port` (`0`: a free port), for [`serve_flight_sql`].
pub async fn bind_loopback(port: u16) -> Result<TcpListener, SqlError> {
    bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)), &Auth::none()).await
}

/// Binds a listener on `addr`: a loopback address always, any other address only when `auth` has users
/// or bearer tokens ([`Auth::has_credentials`]); otherwise [`SqlError::NotLoopback`].
pub async fn bind(addr: SocketAddr, auth: &Auth) -> Result<TcpListener, SqlError> {
    check_address(addr, auth)?;
    TcpListener::bind(addr).await.map_err(|e| SqlError::Serve {
        message: format!("cannot listen on {addr}: {e}"),
    })
}

fn check_address(addr: SocketAddr, auth: &Auth) -> Result<(), SqlError> {
    if addr.ip().is_loopback() || auth.has_credentials() {
        Ok(())
    } else {
        Err(SqlError::NotLoopback { addr })
    }
}

/// Serves Flight SQL over `sessions` on `listener` until `shutdown` completes, then lets the calls under
/// way finish.
///
/// Every statement reads the datasets as they are when it runs ([`LiveSession::snapshot`]). The listener
/// must be on loopback unless `options.auth` has users or tokens ([`bind`]). With authentication, every
/// call is checked ([`Auth::authenticate`]) before it reaches the service, and the Flight handshake turns
/// a basic-auth login into a session token (in the response's `authorization: Bearer` header and its
/// payload).
///
/// Implemented: `CommandStatementQuery` (GetFlightInfo + DoGet); prepared statements with parameters
/// (CreatePreparedStatement, which returns the parameter schema; DoPut binding parameters; GetFlightInfo;
/// DoGet; ClosePreparedStatement); `CommandGetCatalogs`, `CommandGetDbSchemas`, `CommandGetTables` (with
/// schemas), `CommandGetTableTypes`, `CommandGetSqlInfo`; Handshake. Updates, ingestion, transactions,
/// Substrait and keys are `Unimplemented`; a bad query is `InvalidArgument`, an unknown table too, a
/// failure while reading data `Internal`; a call without valid credentials `Unauthenticated`.
pub async fn serve_flight_sql(
    sessions: LiveSession,
    listener: TcpListener,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), SqlError> {
    let addr = listener.local_addr().map_err(|e| SqlError::Serve {
        message: format!("the listener has no address: {e}"),
    })?;
    check_address(addr, &options.auth)?;
    let service = FlightSqlServer::new(sessions, options.auth.clone())?;
    let auth = options.auth.clone();
    let authenticated =
        FlightServiceServer::with_interceptor(service, move |mut request: tonic::Request<()>| {
            let principal = auth.authenticate(request.metadata())?;
            tracing::trace!(user = %principal.user, "Flight SQL call");
            request.extensions_mut().insert(principal);
            Ok(request)
        });
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &options.tls {
        builder = builder
            .tls_config(
                ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem)),
            )
            .map_err(|e| SqlError::Config {
                message: format!("the TLS certificate or key is unusable: {e}"),
            })?;
    }
    if !addr.ip().is_loopback() && options.tls.is_none() {
        tracing::warn!(
            %addr,
            "Flight SQL: listening beyond loopback without TLS: passwords and tokens cross the network in the clear"
        );
    }
    tracing::info!(
        %addr,
        tls = options.tls.is_some(),
        authentication = options.auth.is_enabled(),
        "Flight SQL server listening"
    );
    builder
        .add_service(authenticated)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )
        .await
        .map_err(|e| SqlError::Serve {
            message: e.to_string(),
        })?;
    tracing::info!(%addr, "Flight SQL server stopped");
    Ok(())
}
