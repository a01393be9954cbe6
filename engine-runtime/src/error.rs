//! The one error type of this crate's API.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong starting, talking to, or cleaning up after an engine, or staging its
/// data. Each variant names what went wrong for the caller and carries what is needed to act.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// An operation id with characters a container name cannot hold.
    #[error(
        "invalid operation id {id:?}: use 1 to 64 ASCII letters, digits, '_', '.' or '-', starting with a letter or digit"
    )]
    InvalidOperationId {
        /// The rejected id.
        id: String,
    },
    /// A path that cannot be mounted into a container (it has no file name, e.g. `/`).
    #[error("{path} cannot be mounted into an engine container")]
    PathNotMountable {
        /// The path.
        path: PathBuf,
    },
    /// Two inputs with the same file name would be mounted at the same container path.
    #[error(
        "two inputs are named {name:?}: container inputs are mounted by file name, which must be unique"
    )]
    InputNameClash {
        /// The clashing file name.
        name: String,
    },
    /// A path given to [`EngineHandle::engine_path`](crate::EngineHandle::engine_path) that is not
    /// inside any input or the output folder.
    #[error(
        "{path} is not inside the operation's inputs or output folder, so the engine cannot see it"
    )]
    PathNotMounted {
        /// The host path.
        path: PathBuf,
    },
    /// The sandboxed engine's user could not read an input.
    #[error(
        "the engine runs as uid {uid} and cannot read {path}: make it readable by others (files 0644, folders 0755) or configure the engine user"
    )]
    InputNotReadable {
        /// The unreadable input.
        path: PathBuf,
        /// The engine's uid.
        uid: u32,
    },
    /// A file-system operation failed.
    #[error("could not {action} at {path}")]
    Io {
        /// What the runtime was doing.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No container daemon socket exists at any of the places looked at.
    #[error(
        "no Docker or Podman socket found (tried {tried:?}); start a daemon or set DOCKER_HOST"
    )]
    NoDaemonSocket {
        /// The paths probed.
        tried: Vec<PathBuf>,
    },
    /// `DOCKER_HOST` holds a scheme this runtime does not speak.
    #[error(
        "DOCKER_HOST={host:?} is not supported: use unix://PATH, tcp://HOST:PORT or http://HOST:PORT"
    )]
    UnsupportedDaemonHost {
        /// The value.
        host: String,
    },
    /// The daemon did not answer.
    #[error("the container daemon at {endpoint} does not answer")]
    DaemonUnavailable {
        /// Where it was expected.
        endpoint: String,
        /// The cause.
        #[source]
        source: bollard::errors::Error,
    },
    /// The daemon refused or failed a request.
    #[error("the container daemon could not {action}")]
    Daemon {
        /// What the runtime asked for.
        action: &'static str,
        /// The daemon's answer.
        #[source]
        source: bollard::errors::Error,
    },
    /// The image is not present locally and pulling is disabled (or the pull did not bring it).
    #[error(
        "engine image {image} is not present locally and cannot be pulled: build it (cargo xtask image) or enable pulling"
    )]
    ImageNotFound {
        /// The image reference.
        image: String,
    },
    /// Pulling the image failed.
    #[error("could not pull engine image {image}")]
    ImagePullFailed {
        /// The image reference.
        image: String,
        /// The daemon's answer.
        #[source]
        source: bollard::errors::Error,
    },
    /// The daemon described an image without an id.
    #[error("the daemon reported no id for image {image}")]
    ImageWithoutId {
        /// The image reference.
        image: String,
    },
    /// The engine binary of a process runtime does not exist or cannot be read.
    #[error("engine binary {path} not found or not readable")]
    EngineBinaryNotFound {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The engine process could not be started.
    #[error("could not start engine {engine} from {binary}")]
    SpawnFailed {
        /// The engine's name.
        engine: String,
        /// The binary.
        binary: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The engine exited before it was ready or during an operation.
    #[error(
        "engine {engine} exited with {status} during operation {operation_id}; its last output:\n{log_tail}"
    )]
    EngineExited {
        /// The engine's name.
        engine: String,
        /// The operation.
        operation_id: String,
        /// How it ended, e.g. `exit code 134`.
        status: String,
        /// The last lines the engine wrote.
        log_tail: String,
    },
    /// Nothing ever listened where the engine was expected to (its Unix socket or TCP port) for
    /// the whole start timeout, while the engine kept running: it was most likely given, or
    /// ignored, the wrong socket or port.
    #[error(
        "the engine never listened on {address}: engine {engine} ran for the whole {waited:?} start timeout of operation {operation_id} without listening there (check the socket or port it is configured with and the arguments it takes); its last output:\n{log_tail}"
    )]
    EngineNeverListened {
        /// The engine's name.
        engine: String,
        /// The operation.
        operation_id: String,
        /// Where it was expected to listen, e.g. `127.0.0.1:2884` or
        /// `port 2884 in container weir-spark-…`.
        address: String,
        /// How long the runtime waited (the start timeout).
        waited: Duration,
        /// The last lines the engine wrote.
        log_tail: String,
    },
    /// Another program already listens on the fixed TCP port a process engine is configured with:
    /// the runtime would talk to it instead of the engine, so it does not start the engine.
    #[error(
        "port {port} on 127.0.0.1 is taken by another program, so engine {engine} cannot listen there: stop that program or configure another port"
    )]
    PortInUse {
        /// The engine's name.
        engine: String,
        /// The port.
        port: u16,
    },
    /// [`shutdown`](crate::shutdown) was called: this process starts no more engines.
    #[error("engine {engine} was not started: the process is shutting down")]
    ShuttingDown {
        /// The engine's name.
        engine: String,
    },
    /// Something listened where the engine should, but it did not complete a gRPC handshake
    /// within the start timeout (it is not an engine, or a stuck one).
    #[error(
        "engine {engine} listened but did not answer the engine protocol within {timeout:?} for operation {operation_id}: {reason}"
    )]
    EngineNotReady {
        /// The engine's name.
        engine: String,
        /// The operation.
        operation_id: String,
        /// The start timeout.
        timeout: Duration,
        /// The last connection error.
        reason: String,
    },
    /// The operation did not finish before its deadline.
    #[error(
        "engine {engine} did not finish operation {operation_id} within its {deadline:?} deadline"
    )]
    DeadlineExceeded {
        /// The engine's name.
        engine: String,
        /// The operation.
        operation_id: String,
        /// The deadline.
        deadline: Duration,
    },
    /// The object store failed while staging data.
    #[error("staging data at {location} failed")]
    Staging {
        /// The data location.
        location: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// A remote input has no object at or under its path.
    #[error("input {location} does not exist")]
    InputNotFound {
        /// The data location.
        location: String,
    },
    /// An output object exists already; outputs are never overwritten.
    #[error("output {location} exists already and is never overwritten")]
    OutputExists {
        /// The object.
        location: String,
    },
    /// An [`AccessGrant`](crate::AccessGrant) with nothing to read or write has no session policy.
    #[error(
        "the access grant for bucket {bucket} allows nothing: add the objects it reads or the prefixes it writes under"
    )]
    EmptyAccessGrant {
        /// The grant's bucket.
        bucket: String,
    },
    /// A session policy longer than STS accepts.
    #[error(
        "the session policy is {length} characters, more than the {limit} STS accepts: grant coarser patterns (one `prefix/*` instead of many keys)"
    )]
    SessionPolicyTooLarge {
        /// The policy's length in characters.
        length: usize,
        /// The most STS accepts.
        limit: usize,
    },
    /// A role session name STS would refuse.
    #[error(
        "invalid role session name {name:?}: use 2 to 64 ASCII letters, digits or any of + = , . @ _ -"
    )]
    InvalidSessionName {
        /// The rejected name.
        name: String,
    },
    /// A session duration outside what STS grants.
    #[error("a session of {seconds} s cannot be assumed: STS grants {min} to {max} s")]
    SessionDurationOutOfRange {
        /// The requested duration in whole seconds.
        seconds: u64,
        /// The shortest STS grants.
        min: u64,
        /// The longest STS grants.
        max: u64,
    },
    /// No base credentials to sign the STS call with.
    #[error(
        "no credentials to call STS with: {variable} is not set (set it or give the credentials to StsConfig::with_credentials)"
    )]
    NoBaseCredentials {
        /// The missing environment variable.
        variable: &'static str,
    },
    /// STS refused `AssumeRole` with an error of its own (a bad signature, an unknown key, no
    /// permission to assume the role, an invalid policy...).
    #[error("STS at {endpoint} refused to assume {role_arn}: {code} (HTTP {status}): {message}")]
    AssumeRoleRejected {
        /// The STS endpoint.
        endpoint: String,
        /// The role.
        role_arn: String,
        /// The HTTP status.
        status: u16,
        /// STS's error code, e.g. `AccessDenied`, `InvalidClientTokenId`, `SignatureDoesNotMatch`,
        /// `MalformedPolicyDocument`.
        code: String,
        /// STS's message.
        message: String,
    },
    /// `AssumeRole` could not be asked or its answer was not STS's: an invalid endpoint, an
    /// unreachable one, or an answer that is neither credentials nor an STS error.
    #[error("could not assume {role_arn} through STS at {endpoint}: {reason}")]
    AssumeRole {
        /// The STS endpoint.
        endpoint: String,
        /// The role.
        role_arn: String,
        /// What went wrong.
        reason: String,
    },
    /// The daemon did not publish the TCP port of a TCP engine.
    #[error("container {container} has no host port published for its port {port}")]
    PortNotPublished {
        /// The container.
        container: String,
        /// The engine's port inside the container.
        port: u16,
    },
    /// The run folder is so deep that the socket path exceeds the 107 bytes Unix allows.
    #[error("socket path {path} is longer than a Unix socket path may be: use a shorter run root")]
    SocketPathTooLong {
        /// The path.
        path: PathBuf,
    },
    /// An in-process engine server could not start.
    #[error("could not serve in-process engine {engine}")]
    Serve {
        /// The engine's name.
        engine: String,
        /// The cause.
        #[source]
        source: weir_engine_contract::ServeError,
    },
    /// The engine answered, but not with success: InvalidQuery, InternalError, UNIMPLEMENTED
    /// (`OperationNotSupported`), or a breach of the response-stream contract. The source says
    /// which.
    #[error("engine {engine} failed operation {operation_id}")]
    Engine {
        /// The engine's name.
        engine: String,
        /// The operation.
        operation_id: String,
        /// What the client saw (boxed: it is large).
        #[source]
        source: Box<weir_engine_contract::ClientError>,
    },
}

impl RuntimeError {
    /// The engine's own answer or the protocol breach behind [`RuntimeError::Engine`], e.g. to tell
    /// an InvalidQuery (the user's SQL) from an engine failure.
    ///
    /// ```
    /// use weir_engine_runtime::RuntimeError;
    ///
    /// let error = RuntimeError::InputNotFound { location: "s3://b/x".into() };
    /// assert!(error.client_error().is_none());
    /// ```
    pub fn client_error(&self) -> Option<&weir_engine_contract::ClientError> {
        match self {
            Self::Engine { source, .. } => Some(source),
            _ => None,
        }
    }
}
