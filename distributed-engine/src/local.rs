//! [`LocalCluster`]: a scheduler and executors in this process, on 127.0.0.1 ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::cluster::SchedulerAddress;
use crate::error::DistributedError;
use crate::executor::{ExecutorOptions, run_executor};
use crate::scheduler::{Scheduler, SchedulerOptions};

/// How long [`LocalCluster::start`] waits for every executor to register.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A Ballista scheduler and executors as tasks of this process's tokio runtime, on 127.0.0.1 ports,
/// each executor with its own work folder: a whole cluster on one machine, for tests, benchmarks and
/// trying the distributed engine out. Dropping it stops the scheduler and executors.
#[derive(Debug)]
pub struct LocalCluster {
    scheduler: SchedulerAddress,
    work_dirs: Vec<PathBuf>,
    tasks: Vec<JoinHandle<()>>,
}

impl LocalCluster {
    /// Starts a scheduler and `executors` executors running `vcores` tasks each, their work folders
    /// `<root>/executor-<n>`, and returns once every executor has registered (the scheduler's
    /// `/readyz`).
    pub async fn start(
        executors: usize,
        vcores: usize,
        root: &Path,
    ) -> Result<Self, DistributedError> {
        let mut options = SchedulerOptions::new(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            "127.0.0.1".to_owned(),
        );
        options.min_ready_executors = executors;
        let scheduler = Scheduler::bind(options).await?;
        let address = scheduler.local_addr()?;
        let mut tasks = vec![tokio::spawn(async move {
            if let Err(error) = scheduler.serve().await {
                tracing::error!(%error, "local scheduler stopped");
            }
        })];
        let scheduler_address = SchedulerAddress::new("127.0.0.1", address.port());
        let mut work_dirs = Vec::with_capacity(executors);
        for n in 0..executors {
            let work_dir = root.join(format!("executor-{n}"));
            work_dirs.push(work_dir.clone());
            let options = ExecutorOptions {
                id: format!("executor-{n}"),
                bind_host: "127.0.0.1".to_owned(),
                external_host: Some("127.0.0.1".to_owned()),
                flight_port: free_port()?,
                grpc_port: free_port()?,
                scheduler: scheduler_address.clone(),
                vcores,
                work_dir,
                heartbeat: Duration::from_secs(1),
                connect_timeout: Duration::from_secs(10),
            };
            tasks.push(tokio::spawn(async move {
                if let Err(error) = run_executor(options).await {
                    tracing::error!(%error, "local executor stopped");
                }
            }));
        }
        let cluster = Self {
            scheduler: scheduler_address,
            work_dirs,
            tasks,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        while http_status(address, "/readyz").await != Some(200) {
            if Instant::now() > deadline {
                return Err(DistributedError::ClusterNotReady {
                    executors,
                    waited: READY_TIMEOUT,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(cluster)
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &SchedulerAddress {
        &self.scheduler
    }

    /// Each executor's work folder, in executor order.
    pub fn work_dirs(&self) -> &[PathBuf] {
        &self.work_dirs
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A port free on 127.0.0.1 now (Ballista's executor binds its ports itself).
fn free_port() -> Result<u16, DistributedError> {
    let address = SocketAddr::from(([127, 0, 0, 1], 0));
    std::net::TcpListener::bind(address)
        .and_then(|listener| listener.local_addr())
        .map(|bound| bound.port())
        .map_err(|source| DistributedError::SchedulerBind { address, source })
}

/// The status code of `GET path` on `address`, if it answers HTTP.
pub(crate) async fn http_status(address: SocketAddr, path: &str) -> Option<u16> {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.ok()?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8_lossy(&response);
        text.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .ok()
        .flatten()
}
