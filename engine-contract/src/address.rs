//! [`EngineAddress`]: where an engine listens, over TCP or a Unix socket.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

/// The port Weir engines listen on by default (the ODF spec's; existing ODF
/// engine images use 2884, see [`ODF_IMAGE_PORT`]).
pub const DEFAULT_PORT: u16 = 5544;

/// The port existing ODF engine images and the reference coordinator use.
pub const ODF_IMAGE_PORT: u16 = 2884;

/// Where an engine listens.
///
/// Text forms: `127.0.0.1:5544`, `[::1]:5544`, `localhost:5544` (TCP) and
/// `unix:/run/engine.sock` (Unix socket).
///
/// ```
/// use weir_engine_contract::EngineAddress;
///
/// let tcp: EngineAddress = "127.0.0.1:5544".parse().unwrap();
/// assert_eq!(tcp.to_string(), "127.0.0.1:5544");
/// let unix: EngineAddress = "unix:/tmp/engine.sock".parse().unwrap();
/// assert_eq!(unix, EngineAddress::Unix("/tmp/engine.sock".into()));
/// assert_eq!(unix.to_string(), "unix:/tmp/engine.sock");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EngineAddress {
    /// A TCP socket address.
    Tcp(SocketAddr),
    /// A Unix domain socket path.
    Unix(PathBuf),
}

/// Text that is not an [`EngineAddress`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an engine address (expected `host:port` or `unix:/path`)")]
pub struct InvalidEngineAddress {
    /// The rejected text.
    pub text: String,
}

impl EngineAddress {
    /// All interfaces on `port` (what an engine in a container binds).
    pub fn all_interfaces(port: u16) -> Self {
        Self::Tcp(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
    }

    /// Loopback on `port`.
    pub fn loopback(port: u16) -> Self {
        Self::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }
}

impl Default for EngineAddress {
    /// All interfaces on [`DEFAULT_PORT`].
    fn default() -> Self {
        Self::all_interfaces(DEFAULT_PORT)
    }
}

impl fmt::Display for EngineAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(address) => write!(f, "{address}"),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl FromStr for EngineAddress {
    type Err = InvalidEngineAddress;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidEngineAddress {
            text: text.to_owned(),
        };
        if let Some(path) = text.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(invalid());
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        if let Some(port) = text.strip_prefix("localhost:") {
            let port = port.parse().map_err(|_| invalid())?;
            return Ok(Self::loopback(port));
        }
        text.parse().map(Self::Tcp).map_err(|_| invalid())
    }
}

impl From<SocketAddr> for EngineAddress {
    fn from(address: SocketAddr) -> Self {
        Self::Tcp(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_all_interfaces_on_5544() {
        assert_eq!(EngineAddress::default().to_string(), "0.0.0.0:5544");
    }

    #[test]
    fn text_forms_parse() {
        assert_eq!(
            "localhost:2884".parse(),
            Ok(EngineAddress::loopback(ODF_IMAGE_PORT))
        );
        assert_eq!(
            "[::1]:5544".parse::<EngineAddress>().unwrap().to_string(),
            "[::1]:5544"
        );
        assert_eq!(
            "unix:///run/e.sock".parse(),
            Ok(EngineAddress::Unix("/run/e.sock".into()))
        );
        assert!("unix:".parse::<EngineAddress>().is_err());
        assert!("example:80".parse::<EngineAddress>().is_err());
        assert!("localhost:http".parse::<EngineAddress>().is_err());
    }
}
