//! [`Scheduler`]: a Ballista scheduler serving in this process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use tokio::net::TcpListener;

use crate::error::DistributedError;

/// How a scheduler runs.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Where it listens: its gRPC service for executors and clients, the Flight proxy through which
    /// clients fetch results, and `/healthz` and `/readyz`, all on one port (port 0 picks one).
    pub bind: SocketAddr,
    /// The host name it tells others it has (`localhost` on one machine; the container's name on a
    /// Docker network).
    pub external_host: String,
    /// An executor silent for this long is dead: its running tasks are scheduled again elsewhere.
    pub executor_timeout: Duration,
    /// `/readyz` answers 200 once this many executors are registered.
    pub min_ready_executors: usize,
    /// After a job ends, its shuffle files stay on the executors this long.
    pub job_data_ttl: Duration,
}

impl SchedulerOptions {
    /// A scheduler on `bind`, telling others it is `external_host`.
    pub fn new(bind: SocketAddr, external_host: impl Into<String>) -> Self {
        Self {
            bind,
            external_host: external_host.into(),
            executor_timeout: Duration::from_secs(20),
            min_ready_executors: 1,
            job_data_ttl: Duration::from_secs(300),
        }
    }

    /// Ballista's configuration: tasks spread over executors one by one (round robin), results
    /// fetched through the scheduler's own Flight proxy (clients never connect to executors), failed
    /// tasks tried again up to 4 times on any executor.
    fn ballista_config(&self, port: u16) -> SchedulerConfig {
        let executor_timeout = self.executor_timeout.as_secs().max(2);
        let mut config = SchedulerConfig::default()
            .with_hostname(self.external_host.clone())
            .with_port(port)
            .with_task_distribution(TaskDistributionPolicy::RoundRobin)
            .with_enable_embedded_flight_proxy(true)
            .with_finished_job_data_clean_up_interval_seconds(self.job_data_ttl.as_secs())
            .with_no_executors_grace_period_seconds(executor_timeout)
            .with_override_config_producer(Arc::new(crate::job_store::job_session_config))
            .with_override_session_builder(Arc::new(crate::job_store::scheduler_session));
        config.bind_host = self.bind.ip().to_string();
        config.executor_timeout_seconds = executor_timeout;
        config.expire_dead_executor_interval_seconds = (executor_timeout / 4).max(1);
        config.min_ready_executors = self.min_ready_executors;
        config
    }
}

/// A scheduler bound to its port, not yet serving.
#[derive(Debug)]
pub struct Scheduler {
    listener: TcpListener,
    options: SchedulerOptions,
}

impl Scheduler {
    /// Binds the scheduler's port.
    pub async fn bind(options: SchedulerOptions) -> Result<Self, DistributedError> {
        let listener = TcpListener::bind(options.bind).await.map_err(|source| {
            DistributedError::SchedulerBind {
                address: options.bind,
                source,
            }
        })?;
        Ok(Self { listener, options })
    }

    /// The address it listens on (with the port picked for port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, DistributedError> {
        self.listener
            .local_addr()
            .map_err(|source| DistributedError::SchedulerBind {
                address: self.options.bind,
                source,
            })
    }

    /// Serves until the process stops or Ballista fails.
    pub async fn serve(self) -> Result<(), DistributedError> {
        let address = self.local_addr()?;
        let config = self.options.ballista_config(address.port());
        config.validate().map_err(|e| DistributedError::Scheduler {
            reason: e.to_string(),
        })?;
        let failed = |e: ballista_core::error::BallistaError| DistributedError::Scheduler {
            reason: e.to_string(),
        };
        let cluster = BallistaCluster::new_from_config(&config)
            .await
            .map_err(failed)?;
        let scheduler =
            create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
                .await
                .map_err(failed)?;
        tracing::info!(%address, external_host = %self.options.external_host, "Ballista scheduler serving");
        start_grpc_service_with_listener(self.listener, scheduler)
            .await
            .map_err(failed)
    }
}
