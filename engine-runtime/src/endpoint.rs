//! How the coordinator reaches an engine: a Unix socket or a TCP port.

/// Where an engine serves gRPC.
///
/// Weir engines serve on a Unix socket (`--unix-socket PATH`), which lets a container run with no
/// network at all. Engines that only speak TCP (existing ODF engine images) get their port published
/// on 127.0.0.1 only: that container has a network namespace with a bridge interface, a weaker
/// isolation that the runtime logs as a warning.
///
/// ```
/// use weir_engine_runtime::EngineEndpoint;
///
/// assert_eq!(EngineEndpoint::default(), EngineEndpoint::UnixSocket);
/// assert_eq!(EngineEndpoint::odf_tcp(), EngineEndpoint::Tcp { port: 2884 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineEndpoint {
    /// gRPC on a Unix socket in a folder the runtime creates (the default, and the only one that
    /// keeps a container off every network).
    #[default]
    UnixSocket,
    /// gRPC on this TCP port inside the container (or on a free loopback port for a process).
    Tcp {
        /// The port the engine listens on.
        port: u16,
    },
}

impl EngineEndpoint {
    /// The port Weir engines (and the ODF spec) use by default: 5544.
    pub const WEIR_TCP_PORT: u16 = 5544;
    /// The port existing ODF engine images listen on: 2884.
    pub const ODF_TCP_PORT: u16 = 2884;

    /// TCP on the Weir default port 5544.
    pub fn weir_tcp() -> Self {
        Self::Tcp {
            port: Self::WEIR_TCP_PORT,
        }
    }

    /// TCP on port 2884, where existing ODF engine images listen.
    pub fn odf_tcp() -> Self {
        Self::Tcp {
            port: Self::ODF_TCP_PORT,
        }
    }
}
