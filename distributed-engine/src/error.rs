//! [`DistributedError`]: why a distributed engine, scheduler or executor could not run.

use std::net::SocketAddr;

/// Why the distributed engine, a scheduler or an executor could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DistributedError {
    /// A scheduler address is not `HOST:PORT`.
    #[error(
        "`{text}` is not a scheduler address: {reason} (write HOST:PORT, e.g. 127.0.0.1:50050)"
    )]
    SchedulerAddress {
        /// What was given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The scheduler cannot listen on its address.
    #[error("the scheduler cannot listen on {address}: {source}")]
    SchedulerBind {
        /// The address.
        address: SocketAddr,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// Ballista refused the scheduler's configuration or failed while serving.
    #[error("the Ballista scheduler failed: {reason}")]
    Scheduler {
        /// Ballista's message.
        reason: String,
    },
    /// Ballista refused the executor's configuration or failed while running.
    #[error("the Ballista executor failed: {reason}")]
    Executor {
        /// Ballista's message.
        reason: String,
    },
    /// A local cluster's executors did not all register in time.
    #[error("the local cluster's {executors} executors did not all register within {waited:?}")]
    ClusterNotReady {
        /// Executors started.
        executors: usize,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// The executor's work folder cannot be used.
    #[error("the executor's work folder {path} cannot be used: {source}")]
    WorkDir {
        /// The folder.
        path: std::path::PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}
