//! Follows a container's stdout and stderr into `tracing` events (not into files).

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptionsBuilder;
use futures::StreamExt;
use tokio::task::JoinHandle;

use super::daemon::DockerDaemon;
use crate::engine_log::{EngineLog, OutputStream};

/// Spawns a task that forwards the container's output, from its first line, until the container
/// is gone.
pub(crate) fn follow(daemon: &DockerDaemon, container: &str, log: EngineLog) -> JoinHandle<()> {
    let docker = daemon.docker().clone();
    let container = container.to_owned();
    tokio::spawn(async move {
        let options = LogsOptionsBuilder::default()
            .follow(true)
            .stdout(true)
            .stderr(true)
            .build();
        let mut stream = docker.logs(&container, Some(options));
        let mut stdout = log.lines(OutputStream::Stdout);
        let mut stderr = log.lines(OutputStream::Stderr);
        while let Some(item) = stream.next().await {
            match item {
                Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                    stdout.push(&message);
                }
                Ok(LogOutput::StdErr { message }) => stderr.push(&message),
                Ok(LogOutput::StdIn { .. }) => {}
                Err(error) => {
                    tracing::debug!(%container, %error, "stopped following the engine's output");
                    break;
                }
            }
        }
        stdout.finish();
        stderr.finish();
    })
}
