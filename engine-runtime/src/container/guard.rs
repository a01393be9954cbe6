//! A guard that removes its container when dropped without an orderly stop: on an error path, a
//! panic, or a cancelled future.

use std::path::PathBuf;

use super::daemon::{DockerDaemon, force_remove};
use crate::error::RuntimeError;
use crate::ownership::reclaim_folder;
use crate::shutdown::{ContainerEntry, RemovalInFlight};

/// Removes the named container on drop unless [`RemovalGuard::disarm`]ed, then gives the output
/// folder back to the coordinator's user. It holds the container's entry in the process-wide
/// register ([`crate::shutdown`]) from before the container is created until it is gone.
///
/// The removal runs on a thread of its own with a fresh daemon connection and a small runtime, so
/// it works whatever state the caller's async runtime is in (a panicking `#[tokio::test]` drops its
/// runtime, and with it every task spawned there). If the whole process exits first, the next
/// [`DockerDaemon::connect`] removes the container as an orphan.
#[derive(Debug)]
pub(crate) struct RemovalGuard {
    daemon: DockerDaemon,
    name: String,
    output: PathBuf,
    entry: Option<ContainerEntry>,
}

impl RemovalGuard {
    /// Registers container `name` of `engine` (to be created) and guards it; fails when the process
    /// is shutting down.
    pub(crate) fn new(
        daemon: DockerDaemon,
        engine: &str,
        name: String,
        output: PathBuf,
    ) -> Result<Self, RuntimeError> {
        let entry = ContainerEntry::register(engine, &name, &daemon)?;
        Ok(Self {
            daemon,
            name,
            output,
            entry: Some(entry),
        })
    }

    /// The container was removed in an orderly way (or never created): nothing left to do.
    pub(crate) fn disarm(&mut self) {
        if let Some(entry) = self.entry.take() {
            entry.removed();
        }
    }
}

impl Drop for RemovalGuard {
    fn drop(&mut self) {
        let Some(entry) = self.entry.take() else {
            return;
        };
        let name = std::mem::take(&mut self.name);
        let output = std::mem::take(&mut self.output);
        let docker = match self.daemon.reopen() {
            Ok(docker) => docker,
            Err(error) => {
                tracing::error!(container = %name, %error, "cannot reach the daemon to remove an engine container");
                return;
            }
        };
        tracing::debug!(container = %name, "removing an engine container left without an orderly stop");
        let in_flight = RemovalInFlight::begin();
        let spawned = std::thread::Builder::new()
            .name("weir-container-removal".to_owned())
            .spawn(move || {
                let _in_flight = in_flight;
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        tracing::error!(container = %name, %error, "cannot start the removal runtime");
                        return;
                    }
                };
                if let Err(error) = runtime.block_on(force_remove(&docker, &name)) {
                    tracing::error!(container = %name, %error, "could not remove an engine container");
                    return;
                }
                entry.removed();
                if let Err(error) = reclaim_folder(&output) {
                    tracing::error!(container = %name, %error, "could not hand the output folder back");
                }
            });
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the container removal thread");
        }
    }
}
