//! The client SDK: [`EngineClient`] dials an engine over TCP or a Unix
//! socket and calls its operations.

mod call;
mod error;

use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint, Uri};

pub use call::OperationCall;
pub use error::ClientError;

use crate::address::EngineAddress;
use crate::grpc::Envelope;
use crate::grpc::raw::engine_client::EngineClient as RawEngineClient;
use crate::model::{
    DeriveProvenanceRequest, MigrateQueryRequest, RawQueryRequest, TransformRequest,
    ValidateQueryRequest, WireMessage,
};
use crate::operation::{
    DeriveProvenance, ExecuteRawQuery, ExecuteTransform, MigrateQuery, Operation, OperationKind,
    ValidateQuery,
};

/// How [`EngineClient::connect_with`] waits for an engine to be ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Keep retrying the connection for this long (default 30 s): a freshly
    /// started engine takes a moment to listen.
    pub ready_timeout: Duration,
    /// Pause between attempts (default 50 ms).
    pub retry_interval: Duration,
    /// Deadline of each call (default none). See
    /// [`EngineClient::with_deadline`].
    pub call_deadline: Option<Duration>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            ready_timeout: Duration::from_secs(30),
            retry_interval: Duration::from_millis(50),
            call_deadline: None,
        }
    }
}

/// A connection to an engine.
///
/// Cheap to clone; clones share the HTTP/2 connection.
///
/// ```no_run
/// use std::time::Duration;
/// use weir_engine_contract::{EngineAddress, EngineClient};
/// use weir_engine_contract::model::{RawQueryRequest, Transform, TransformSql};
///
/// # async fn run() -> Result<(), weir_engine_contract::ClientError> {
/// let address: EngineAddress = "127.0.0.1:5544".parse().unwrap();
/// let client = EngineClient::connect(address).await?.with_deadline(Duration::from_secs(60));
/// let request = RawQueryRequest {
///     input_data_paths: vec!["/opt/engine/in/input.parquet".into()],
///     transform: Transform::Sql(TransformSql::new("datafusion", "select * from input")),
///     output_data_path: "/opt/engine/out/output.parquet".into(),
/// };
/// let mut call = client.execute_raw_query(&request).await?;
/// while let Some(progress) = call.progress().await? {
///     println!("{progress:?}");
/// }
/// let success = call.finish().await?;
/// println!("{} rows", success.num_records);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct EngineClient {
    inner: RawEngineClient<Channel>,
    address: EngineAddress,
    call_deadline: Option<Duration>,
}

/// Any URI will do for a Unix socket: the connector ignores it.
const UNIX_PLACEHOLDER_URI: &str = "http://127.0.0.1:5544";

/// Bound of one connection attempt (a dropped SYN would otherwise wait for
/// the OS timeout).
const CONNECT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

async fn dial(address: &EngineAddress) -> Result<Channel, String> {
    match address {
        EngineAddress::Tcp(socket) => {
            let endpoint = Endpoint::from_shared(format!("http://{socket}"))
                .map_err(|e| e.to_string())?
                .connect_timeout(CONNECT_ATTEMPT_TIMEOUT)
                .tcp_nodelay(true);
            endpoint.connect().await.map_err(|e| error_chain(&e))
        }
        EngineAddress::Unix(path) => {
            let path = path.clone();
            let endpoint = Endpoint::from_static(UNIX_PLACEHOLDER_URI);
            endpoint
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }
                }))
                .await
                .map_err(|e| error_chain(&e))
        }
    }
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl EngineClient {
    /// Connects, retrying for up to 30 s while the engine starts.
    pub async fn connect(address: EngineAddress) -> Result<Self, ClientError> {
        Self::connect_with(address, ConnectOptions::default()).await
    }

    /// Connects with explicit readiness and deadline options.
    pub async fn connect_with(
        address: EngineAddress,
        options: ConnectOptions,
    ) -> Result<Self, ClientError> {
        let started = Instant::now();
        let give_up = started + options.ready_timeout;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match dial(&address).await {
                Ok(channel) => {
                    tracing::debug!(%address, attempts, "connected to engine");
                    return Ok(Self {
                        inner: RawEngineClient::new(channel),
                        address,
                        call_deadline: options.call_deadline,
                    });
                }
                Err(last_error) => {
                    if Instant::now() + options.retry_interval > give_up {
                        return Err(ClientError::NotReady {
                            address,
                            waited: started.elapsed(),
                            last_error,
                        });
                    }
                    tracing::trace!(%address, attempts, %last_error, "engine not ready yet");
                    tokio::time::sleep(options.retry_interval).await;
                }
            }
        }
    }

    /// Sets the deadline of every call made through this client.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.call_deadline = Some(deadline);
        self
    }

    /// The engine's address.
    pub fn address(&self) -> &EngineAddress {
        &self.address
    }

    /// Starts a call of operation `K`.
    pub async fn call<K: OperationKind>(
        &self,
        request: &K::Request,
    ) -> Result<OperationCall<K>, ClientError> {
        self.call_envelope::<K>(Envelope::from_flatbuffer(request.encode()))
            .await
    }

    /// Starts a call of operation `K` with an arbitrary request frame (for
    /// conformance checks that send malformed requests).
    pub async fn call_envelope<K: OperationKind>(
        &self,
        envelope: Envelope,
    ) -> Result<OperationCall<K>, ClientError> {
        let operation = K::OPERATION;
        let deadline = self
            .call_deadline
            .map(|duration| (Instant::now() + duration, duration));
        let mut request = tonic::Request::new(envelope);
        if let Some((_, duration)) = deadline {
            request.set_timeout(duration);
        }
        tracing::debug!(%operation, address = %self.address, ?deadline, "calling engine");
        let mut inner = self.inner.clone();
        let started = async move {
            match operation {
                Operation::ExecuteRawQuery => inner.execute_raw_query(request).await,
                Operation::ExecuteTransform => inner.execute_transform(request).await,
                Operation::ValidateQuery => inner.validate_query(request).await,
                Operation::MigrateQuery => inner.migrate_query(request).await,
                Operation::DeriveProvenance => inner.derive_provenance(request).await,
            }
        };
        let exceeded = |deadline: Duration| ClientError::DeadlineExceeded {
            operation,
            deadline,
        };
        let response = match deadline {
            Some((at, duration)) => tokio::time::timeout_at(at, started)
                .await
                .map_err(|_| exceeded(duration))?,
            None => started.await,
        };
        match response {
            Ok(response) => Ok(OperationCall::new(response.into_inner(), deadline)),
            Err(status) => match (status.code(), deadline) {
                (tonic::Code::DeadlineExceeded, Some((_, duration))) => Err(exceeded(duration)),
                _ => Err(ClientError::from_status(operation, &status)),
            },
        }
    }

    /// ExecuteRawQuery.
    pub async fn execute_raw_query(
        &self,
        request: &RawQueryRequest,
    ) -> Result<OperationCall<ExecuteRawQuery>, ClientError> {
        self.call::<ExecuteRawQuery>(request).await
    }

    /// ExecuteTransform.
    pub async fn execute_transform(
        &self,
        request: &TransformRequest,
    ) -> Result<OperationCall<ExecuteTransform>, ClientError> {
        self.call::<ExecuteTransform>(request).await
    }

    /// ValidateQuery (Weir; [`ClientError::OperationNotSupported`] from an
    /// engine without it).
    pub async fn validate_query(
        &self,
        request: &ValidateQueryRequest,
    ) -> Result<OperationCall<ValidateQuery>, ClientError> {
        self.call::<ValidateQuery>(request).await
    }

    /// MigrateQuery (Weir).
    pub async fn migrate_query(
        &self,
        request: &MigrateQueryRequest,
    ) -> Result<OperationCall<MigrateQuery>, ClientError> {
        self.call::<MigrateQuery>(request).await
    }

    /// DeriveProvenance (Weir).
    pub async fn derive_provenance(
        &self,
        request: &DeriveProvenanceRequest,
    ) -> Result<OperationCall<DeriveProvenance>, ClientError> {
        self.call::<DeriveProvenance>(request).await
    }
}
