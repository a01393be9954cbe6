//! Timeouts shared by every runtime.

use std::time::Duration;

/// How long an engine may take to start, to run one operation, and to stop.
///
/// ```
/// use std::time::Duration;
/// use weir_engine_runtime::RuntimeConfig;
///
/// let config = RuntimeConfig::default().with_operation_deadline(Duration::from_secs(30));
/// assert_eq!(config.operation_deadline(), Duration::from_secs(30));
/// assert_eq!(config.start_timeout(), Duration::from_secs(60));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeConfig {
    start_timeout: Duration,
    operation_deadline: Duration,
    stop_grace: Duration,
}

impl Default for RuntimeConfig {
    /// Start within 60 s, finish each operation within 1 h, 10 s between the stop signal and the kill.
    fn default() -> Self {
        Self {
            start_timeout: Duration::from_secs(60),
            operation_deadline: Duration::from_secs(3600),
            stop_grace: Duration::from_secs(10),
        }
    }
}

impl RuntimeConfig {
    /// Readiness (connect, then a gRPC handshake) must succeed within this time.
    #[must_use]
    pub fn with_start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Each operation must finish within this time.
    #[must_use]
    pub fn with_operation_deadline(mut self, deadline: Duration) -> Self {
        self.operation_deadline = deadline;
        self
    }

    /// Time between the polite stop signal (SIGTERM) and the kill.
    #[must_use]
    pub fn with_stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// The start timeout.
    pub fn start_timeout(&self) -> Duration {
        self.start_timeout
    }

    /// The per-operation deadline.
    pub fn operation_deadline(&self) -> Duration {
        self.operation_deadline
    }

    /// The stop grace period.
    pub fn stop_grace(&self) -> Duration {
        self.stop_grace
    }
}
