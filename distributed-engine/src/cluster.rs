//! [`SchedulerAddress`]: where a Ballista scheduler listens, as the engine and executors reach it.

use std::fmt;
use std::str::FromStr;

use crate::error::DistributedError;

/// A Ballista scheduler's address: a host (an IP address, `localhost`, or a name such as a container's
/// on a private Docker network) and its gRPC port. Written `HOST:PORT` (`[::1]:50050` for IPv6).
///
/// ```
/// use weir_distributed_engine::SchedulerAddress;
///
/// let address: SchedulerAddress = "127.0.0.1:50050".parse()?;
/// assert_eq!(address.url(), "http://127.0.0.1:50050");
/// assert!("127.0.0.1".parse::<SchedulerAddress>().is_err());
/// # Ok::<(), weir_distributed_engine::DistributedError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerAddress {
    /// The host.
    pub host: String,
    /// The gRPC port.
    pub port: u16,
}

impl SchedulerAddress {
    /// The scheduler at `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }

    /// The URL Ballista's client takes (`http://HOST:PORT`).
    pub fn url(&self) -> String {
        format!("http://{self}")
    }
}

impl fmt::Display for SchedulerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for SchedulerAddress {
    type Err = DistributedError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| DistributedError::SchedulerAddress {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        if text.contains("://") {
            return Err(invalid("it has a scheme; give the host and port alone"));
        }
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| invalid("it has no port"))?;
        let host = match host.strip_prefix('[') {
            Some(inner) => inner
                .strip_suffix(']')
                .ok_or_else(|| invalid("an IPv6 address in brackets is not closed"))?,
            None if host.contains(':') => {
                return Err(invalid("an IPv6 address must be written in brackets"));
            }
            None => host,
        };
        if host.is_empty() {
            return Err(invalid("it has no host"));
        }
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
        {
            return Err(invalid("the host holds characters no host name has"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| invalid("the port is not a number from 1 to 65535"))?;
        if port == 0 {
            return Err(invalid("the port is 0"));
        }
        Ok(Self::new(host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_addresses_parse_with_names_ipv4_and_bracketed_ipv6() {
        let parse = |text: &str| text.parse::<SchedulerAddress>();
        assert_eq!(
            parse("scheduler:50050").unwrap(),
            SchedulerAddress::new("scheduler", 50050)
        );
        assert_eq!(parse("[::1]:7").unwrap(), SchedulerAddress::new("::1", 7));
        assert_eq!(parse("[::1]:7").unwrap().to_string(), "[::1]:7");
        for bad in [
            "http://127.0.0.1:50050",
            "127.0.0.1",
            ":50050",
            "::1:50050",
            "host:0",
            "host:port",
            "a b:1",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }
}
