//! Readiness: connect to a freshly started engine (socket or TCP), then prove it speaks the
//! engine protocol with one gRPC exchange, while watching that it has not died.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;
use weir_engine_contract::grpc::Envelope;
use weir_engine_contract::{
    ClientError, ConnectOptions, EngineAddress, EngineClient, ValidateQuery,
};

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
    /// Nothing ever listened where the engine was expected to, for the whole start timeout.
    NeverListened {
        /// Where it was expected (as the user configured it).
        address: String,
    },
    /// Something listened, but the gRPC handshake never succeeded; the last error seen.
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
            Self::NeverListened { address } => RuntimeError::EngineNeverListened {
                engine: engine.to_owned(),
                operation_id: operation_id.to_string(),
                address,
                waited: timeout,
                log_tail: log.tail(),
            },
            Self::TimedOut(reason) => RuntimeError::EngineNotReady {
                engine: engine.to_owned(),
                operation_id: operation_id.to_string(),
                timeout,
                reason,
            },
        }
    }
}

/// How readiness learns whether anything listens where the engine should, before it spends a
/// gRPC attempt (and so that an engine listening elsewhere is told apart from a slow one).
#[derive(Debug, Clone)]
pub(crate) enum ListenProbe {
    /// A plain connect to the engine's own address: right for Unix sockets and for processes on
    /// loopback, where nothing stands between the coordinator and the engine.
    Dial,
    /// A container's TCP port: the daemon's port proxy accepts connections on the host whether
    /// or not the engine listens, so the container's own socket table (`/proc/<pid>/net/tcp` and
    /// `tcp6` of its init process) is read instead.
    ContainerPort {
        /// The container's init process, as the host sees it.
        pid: u32,
        /// The engine's port inside the container.
        port: u16,
    },
}

impl ListenProbe {
    /// Whether something listens now. `None` when this cannot be told (the container's socket
    /// table is unreadable): readiness then relies on the gRPC attempts alone.
    async fn listening(&self, address: &EngineAddress) -> Option<bool> {
        match (self, address) {
            (Self::Dial, EngineAddress::Unix(path)) => {
                Some(tokio::net::UnixStream::connect(path).await.is_ok())
            }
            (Self::Dial, EngineAddress::Tcp(socket)) => Some(
                tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(socket))
                    .await
                    .is_ok_and(|connected| connected.is_ok()),
            ),
            (Self::ContainerPort { pid, port }, _) => container_listens(*pid, *port),
        }
    }
}

/// Bound of one plain connect to a loopback port.
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the network namespace of `pid` has a TCP socket listening on `port` (any address).
fn container_listens(pid: u32, port: u16) -> Option<bool> {
    let mut readable = false;
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        readable = true;
        if listens_in_table(&text, port) {
            return Some(true);
        }
    }
    readable.then_some(false)
}

/// Whether a `/proc/net/tcp`-style table has a socket in state LISTEN (`0A`) on local `port`.
pub(crate) fn listens_in_table(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1);
        let state = fields.nth(1);
        state == Some("0A")
            && local
                .and_then(|l| l.rsplit(':').next())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok())
                == Some(port)
    })
}

/// Connects to `address` and completes a gRPC exchange within `timeout`, unless `exited`
/// (resolving with how the engine ended) resolves first. `expected` names where the engine should
/// listen, for the error when nothing ever does.
///
/// The exchange is a ValidateQuery call with an empty request: a Weir engine answers InvalidQuery
/// (the request does not decode, so no engine code runs), an engine without the operation answers
/// UNIMPLEMENTED. Either answer proves the engine serves the protocol; only transport failures
/// mean "not yet".
pub(crate) async fn connect_ready(
    address: &EngineAddress,
    probe: ListenProbe,
    expected: String,
    timeout: Duration,
    exited: impl Future<Output = String>,
) -> Result<EngineClient, ReadyFailure> {
    let give_up = Instant::now() + timeout;
    let attempts = async {
        let mut last_error = String::from("no attempt finished");
        let mut ever_listened = false;
        loop {
            let remaining = give_up.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(if ever_listened {
                    ReadyFailure::TimedOut(last_error)
                } else {
                    ReadyFailure::NeverListened { address: expected }
                });
            }
            match probe.listening(address).await {
                Some(false) => {
                    tokio::time::sleep(RETRY_INTERVAL.min(remaining)).await;
                    continue;
                }
                Some(true) => ever_listened = true,
                // Unknown: whatever the gRPC attempt finds decides.
                None => {}
            }
            let options = ConnectOptions {
                ready_timeout: remaining,
                retry_interval: RETRY_INTERVAL,
                call_deadline: Some(remaining.min(Duration::from_secs(5))),
            };
            match EngineClient::connect_with(address.clone(), options).await {
                Ok(client) => {
                    ever_listened = true;
                    match handshake(&client).await {
                        Ok(()) => return Ok(client),
                        Err(error) => last_error = format!("gRPC handshake failed: {error}"),
                    }
                }
                Err(error) => last_error = error.to_string(),
            }
            tokio::time::sleep(RETRY_INTERVAL.min(remaining)).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1770 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 1 1
   1: 0100007F:B0A1 0100007F:1770 01 00000000:00000000 00:00000000 00000000 65534        0 2 1
";

    #[test]
    fn a_listening_socket_is_found_by_port_and_an_established_one_is_not() {
        assert!(listens_in_table(TABLE, 6000), "0x1770 = 6000, state 0A");
        assert!(!listens_in_table(TABLE, 5544));
        assert!(
            !listens_in_table(TABLE, 0xB0A1),
            "an established connection's local port is no listener"
        );
        assert!(!listens_in_table("", 6000));
    }
}
