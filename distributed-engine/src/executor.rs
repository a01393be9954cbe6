//! [`ExecutorOptions`] and [`run_executor`]: a Ballista executor in this process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};

use crate::cluster::SchedulerAddress;
use crate::error::DistributedError;

/// How an executor runs.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Its id, as the scheduler and the logs name it.
    pub id: String,
    /// The IP address it listens on (`127.0.0.1` on one machine, `0.0.0.0` in a container).
    pub bind_host: String,
    /// The host the scheduler (and its Flight proxy) reaches it at; `None` lets the scheduler use the
    /// address the executor's connection comes from (an IP address, so no name is resolved: what a
    /// `FROM scratch` container without a resolver needs).
    pub external_host: Option<String>,
    /// Its Arrow Flight port: the scheduler's proxy and other executors fetch its shuffle files here.
    pub flight_port: u16,
    /// Its gRPC port: the scheduler launches tasks here.
    pub grpc_port: u16,
    /// The scheduler it works for.
    pub scheduler: SchedulerAddress,
    /// How many tasks it runs at once.
    pub vcores: usize,
    /// Where it writes shuffle files: one folder per job (`<work dir>/<job id>/<stage>/<partition>`).
    pub work_dir: PathBuf,
    /// How often it tells the scheduler it is alive (keep it well below the scheduler's
    /// `executor_timeout`).
    pub heartbeat: Duration,
    /// How long it keeps trying to reach the scheduler at start.
    pub connect_timeout: Duration,
}

impl ExecutorOptions {
    /// Ballista's configuration.
    fn ballista_config(&self) -> ExecutorProcessConfig {
        ExecutorProcessConfig {
            executor_id: self.id.clone(),
            bind_host: self.bind_host.clone(),
            external_host: self.external_host.clone(),
            port: self.flight_port,
            grpc_port: self.grpc_port,
            scheduler_host: self.scheduler.host.clone(),
            scheduler_port: self.scheduler.port,
            scheduler_connect_timeout_seconds: u16::try_from(self.connect_timeout.as_secs())
                .unwrap_or(u16::MAX)
                .max(1),
            vcores: self.vcores.max(1),
            work_dir: Some(self.work_dir.to_string_lossy().into_owned()),
            print_thread_info: false,
            executor_heartbeat_interval_seconds: self.heartbeat.as_secs().max(1),
            override_config_producer: Some(Arc::new(crate::job_store::job_session_config)),
            override_runtime_producer: Some({
                let work_dir = self.work_dir.clone();
                Arc::new(move |config: &_| crate::job_store::executor_runtime(config, &work_dir))
            }),
            ..ExecutorProcessConfig::default()
        }
    }
}

/// Runs an executor until SIGINT or SIGTERM (or until Ballista fails): it registers with the
/// scheduler, runs the tasks it is given and serves their shuffle files.
pub async fn run_executor(options: ExecutorOptions) -> Result<(), DistributedError> {
    std::fs::create_dir_all(&options.work_dir).map_err(|source| DistributedError::WorkDir {
        path: options.work_dir.clone(),
        source,
    })?;
    tracing::info!(
        id = %options.id,
        scheduler = %options.scheduler,
        flight_port = options.flight_port,
        grpc_port = options.grpc_port,
        vcores = options.vcores,
        work_dir = %options.work_dir.display(),
        "Ballista executor starting"
    );
    start_executor_process(Arc::new(options.ballista_config()))
        .await
        .map_err(|e| DistributedError::Executor {
            reason: e.to_string(),
        })
}
