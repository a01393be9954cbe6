//! Readiness: connect to a freshly started engine (socket or TCP), then prove it speaks the
//! engine protocol with one gRPC exchange, while watching that it has not died.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use engine_contract::grpc::Envelope;
use engine_contract::{ClientError, ConnectOptions, EngineAddress, EngineClient, ValidateQuery};
use tokio::time::Instant;

use crate::engine_log::EngineLog;
use crate::error::RuntimeError;
use crate::operation::OperationId;
use crate::ownership::lend_folder;

/// How long to wait for an exited engine's last output to arrive.
pub(crate) const LOG_SETTLE: Duration = Duration::from_secs(2);

/// Pause between readiness attempts.
const RETRY_INTERVAL: Duration = Duration::from_millis(25);

/// Why an engine did not become ready.
#[derive(Debug)]
pub(crate) enum ReadyFailure {
    /// It exited first, this way.
    Exited(String),
    /// The start timeout passed; the last error seen.
    TimedOut(String),
}

impl ReadyFailure {
    pub(crate) async fn into_error(
        self,
        engine: &str,
        operation_id: &OperationId,
        log: &EngineLog,
        timeout: Duration,
    ) -> RuntimeError {
        match self {
            Self::Exited(status) => {
                log.settle(LOG_SETTLE).await;
                RuntimeError::EngineExited {
                    engine: engine.to_owned(),
                    operation_id: operation_id.to_string(),
                    status,
                    log_tail: log.tail(),
                }
            }
            Self::TimedOut(reason) => RuntimeError::EngineNotReady {
                engine: engine.to_owned(),
                operation_id: operation_id.to_string(),
                timeout,
                reason,
            },
        }
    }
}

/// Connects to `address` and completes a gRPC exchange within `timeout`, unless `exited`
/// (resolving with how the engine ended) resolves first.
///
/// The exchange is a ValidateQuery call with an empty request: a Weir engine answers InvalidQuery
/// (the request does not decode, so no engine code runs), an engine without the operation answers
/// UNIMPLEMENTED. Either answer proves the engine serves the protocol; only transport failures
/// mean "not yet".
pub(crate) async fn connect_ready(
    address: &EngineAddress,
    timeout: Duration,
    exited: impl Future<Output = String>,
) -> Result<EngineClient, ReadyFailure> {
    let give_up = Instant::now() + timeout;
    let attempts = async {
        let mut last_error = String::from("no attempt finished");
        loop {
            let remaining = give_up.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(ReadyFailure::TimedOut(last_error));
            }
            let options = ConnectOptions {
                ready_timeout: remaining,
                retry_interval: RETRY_INTERVAL,
                call_deadline: Some(remaining.min(Duration::from_secs(5))),
            };
            match EngineClient::connect_with(address.clone(), options).await {
                Ok(client) => match handshake(&client).await {
                    Ok(()) => return Ok(client),
                    Err(error) => last_error = format!("gRPC handshake failed: {error}"),
                },
                Err(error) => last_error = error.to_string(),
            }
            tokio::time::sleep(RETRY_INTERVAL).await;
        }
    };
    tokio::select! {
        biased;
        status = exited => Err(ReadyFailure::Exited(status)),
        ready = attempts => ready,
    }
}

async fn handshake(client: &EngineClient) -> Result<(), ClientError> {
    match client
        .call_envelope::<ValidateQuery>(Envelope::from_flatbuffer(Vec::new()))
        .await
    {
        Ok(call) => match call.finish().await {
            Ok(_)
            | Err(ClientError::InvalidQuery { .. } | ClientError::OperationNotSupported { .. }) => {
                Ok(())
            }
            Err(error) => Err(error),
        },
        Err(ClientError::OperationNotSupported { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Whether a call failed because its deadline passed.
pub(crate) fn is_deadline(error: &ClientError) -> bool {
    matches!(error, ClientError::DeadlineExceeded { .. })
}

/// Whether a call failed below the protocol (connection or stream broken, garbage): the signs of
/// an engine that died.
pub(crate) fn is_transport(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Status { .. }
            | ClientError::NoTerminalMessage { .. }
            | ClientError::MalformedEnvelope { .. }
            | ClientError::GarbageResponse { .. }
            | ClientError::NotReady { .. }
    )
}

/// A fresh, private run folder for an engine's Unix socket, owned by the engine's user.
pub(crate) fn run_dir(
    root: &Path,
    engine_user: (u32, u32),
) -> Result<tempfile::TempDir, RuntimeError> {
    let dir = tempfile::Builder::new()
        .prefix("weir-run-")
        .tempdir_in(root)
        .map_err(|source| RuntimeError::Io {
            action: "create a run folder",
            path: root.to_path_buf(),
            source,
        })?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).map_err(
        |source| RuntimeError::Io {
            action: "set permissions",
            path: dir.path().to_path_buf(),
            source,
        },
    )?;
    // Unix socket paths are limited to 107 bytes.
    let socket = dir.path().join("engine.sock");
    if socket.as_os_str().len() > 107 {
        return Err(RuntimeError::SocketPathTooLong { path: socket });
    }
    lend_folder(dir.path(), engine_user)?;
    Ok(dir)
}

/// A TCP port free on 127.0.0.1 right now.
pub(crate) fn free_loopback_port() -> Result<u16, RuntimeError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|source| RuntimeError::Io {
            action: "find a free loopback port",
            path: "127.0.0.1:0".into(),
            source,
        })
}
