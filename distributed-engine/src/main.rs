//! `weir-ballista`: Weir's distributed ODF engine and the Ballista scheduler and executor it runs on.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use weir_distributed_engine::{
    ClusterConfig, DistributedError, ExecutorOptions, Scheduler, SchedulerAddress,
    SchedulerOptions, distributed_engine, run_executor,
};
use weir_engine_contract::{EngineAddress, EngineServer, ServeError};

const EXIT_CODES: &str = "\
Exit codes:
  0  stopped cleanly (SIGTERM or SIGINT)
  1  could not start (logging or runtime setup failed)
  2  bad command line
  3  cannot listen on the address (in use, no permission, bad socket path)
  4  the server, scheduler or executor failed while running";

/// Exit code: could not start.
const EXIT_STARTUP: u8 = 1;
/// Exit code: cannot listen.
const EXIT_BIND: u8 = 3;
/// Exit code: failed while running.
const EXIT_SERVE: u8 = 4;

/// Weir's distributed ODF engine on DataFusion Ballista, and Ballista's scheduler and executor.
#[derive(Debug, Parser)]
#[command(name = "weir-ballista", version, after_help = EXIT_CODES)]
struct Cli {
    /// Log filter, in `RUST_LOG` syntax (logs are JSON lines on stderr).
    #[arg(long, env = "RUST_LOG", default_value = "info", global = true)]
    log: String,
    #[command(subcommand)]
    role: Role,
}

#[derive(Debug, Subcommand)]
enum Role {
    /// Serve the ODF engine contract; map/filter transforms and raw queries run as Ballista jobs.
    Engine {
        /// The Ballista scheduler, HOST:PORT.
        #[arg(long, env = "WEIR_BALLISTA_SCHEDULER")]
        scheduler: SchedulerAddress,
        /// Partitions a job's scans are split into (tasks of its first stage).
        #[arg(long, default_value_t = ClusterConfig::DEFAULT_PARTITIONS)]
        partitions: NonZeroUsize,
        /// IP address to listen on (`localhost` means 127.0.0.1).
        #[arg(long, default_value = "127.0.0.1", value_parser = parse_host)]
        host: IpAddr,
        /// TCP port to listen on.
        #[arg(long, default_value_t = weir_engine_contract::DEFAULT_PORT)]
        port: u16,
        /// Listen on this Unix socket instead of TCP (Weir's process runtime passes it).
        #[arg(long, value_name = "PATH", conflicts_with_all = ["host", "port"])]
        unix_socket: Option<PathBuf>,
    },
    /// Run a Ballista scheduler: executors register here, the engine submits jobs and fetches
    /// results here (Flight proxy), `/healthz` and `/readyz` answer on the same port.
    Scheduler {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:50050")]
        bind: SocketAddr,
        /// The host name executors and clients know the scheduler by.
        #[arg(long, default_value = "localhost")]
        external_host: String,
        /// Seconds after which a silent executor is dead and its tasks run elsewhere.
        #[arg(long, default_value_t = 20)]
        executor_timeout: u64,
        /// Executors registered before `/readyz` answers 200.
        #[arg(long, default_value_t = 1)]
        min_ready_executors: usize,
        /// Seconds a finished job's shuffle files stay on the executors.
        #[arg(long, default_value_t = 300)]
        job_data_ttl: u64,
    },
    /// Run a Ballista executor for a scheduler.
    Executor {
        /// The scheduler, HOST:PORT.
        #[arg(long)]
        scheduler: SchedulerAddress,
        /// The executor's id (default: `executor-<Flight port>-<process id>`).
        #[arg(long)]
        id: Option<String>,
        /// IP address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        bind_host: IpAddr,
        /// The host the scheduler reaches the executor at (default: the address its connection to
        /// the scheduler comes from).
        #[arg(long)]
        external_host: Option<String>,
        /// Arrow Flight port (shuffle files).
        #[arg(long, default_value_t = 50051)]
        flight_port: u16,
        /// gRPC port (task launches).
        #[arg(long, default_value_t = 50052)]
        grpc_port: u16,
        /// Tasks run at once.
        #[arg(long, default_value_t = 1)]
        vcores: usize,
        /// Folder for shuffle files.
        #[arg(long)]
        work_dir: PathBuf,
        /// Seconds between heartbeats to the scheduler.
        #[arg(long, default_value_t = 3)]
        heartbeat: u64,
        /// Seconds to keep trying to reach the scheduler at start.
        #[arg(long, default_value_t = 60)]
        connect_timeout: u64,
    },
}

fn parse_host(text: &str) -> Result<IpAddr, String> {
    if text == "localhost" {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    text.parse()
        .map_err(|_| format!("`{text}` is not an IP address (host names are not resolved)"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(EnvFilter::new(&cli.log))
        .try_init()
    {
        eprintln!("weir-ballista: cannot set up logging: {error}");
        return ExitCode::from(EXIT_STARTUP);
    }
    // Ballista recurses over plans while (de)serialising them: big stacks, as its own binaries use.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 << 20)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::from(EXIT_STARTUP);
        }
    };
    runtime.block_on(run(cli.role))
}

async fn run(role: Role) -> ExitCode {
    match role {
        Role::Engine {
            scheduler,
            partitions,
            host,
            port,
            unix_socket,
        } => {
            let address = match unix_socket {
                Some(path) => EngineAddress::Unix(path),
                None => EngineAddress::Tcp(SocketAddr::new(host, port)),
            };
            let cluster = ClusterConfig {
                scheduler,
                partitions,
            };
            tracing::info!(scheduler = %cluster.scheduler, partitions = cluster.partitions.get(), "distributed engine starting");
            let result = EngineServer::new(distributed_engine(&cluster))
                .address(address)
                .with_graceful_shutdown(shutdown_signal())
                .serve()
                .await;
            match result {
                Ok(()) => stopped(),
                Err(error) => {
                    let code = match &error {
                        ServeError::Bind { .. } | ServeError::SocketInUse { .. } => EXIT_BIND,
                        _ => EXIT_SERVE,
                    };
                    failed(code, &error)
                }
            }
        }
        Role::Scheduler {
            bind,
            external_host,
            executor_timeout,
            min_ready_executors,
            job_data_ttl,
        } => {
            let mut options = SchedulerOptions::new(bind, external_host);
            options.executor_timeout = Duration::from_secs(executor_timeout);
            options.min_ready_executors = min_ready_executors;
            options.job_data_ttl = Duration::from_secs(job_data_ttl);
            let scheduler = match Scheduler::bind(options).await {
                Ok(scheduler) => scheduler,
                Err(error) => return failed(EXIT_BIND, &error),
            };
            tokio::select! {
                result = scheduler.serve() => match result {
                    Ok(()) => stopped(),
                    Err(error) => failed(EXIT_SERVE, &error),
                },
                () = shutdown_signal() => stopped(),
            }
        }
        Role::Executor {
            scheduler,
            id,
            bind_host,
            external_host,
            flight_port,
            grpc_port,
            vcores,
            work_dir,
            heartbeat,
            connect_timeout,
        } => {
            let options = ExecutorOptions {
                id: id.unwrap_or_else(|| format!("executor-{flight_port}-{}", std::process::id())),
                bind_host: bind_host.to_string(),
                external_host,
                flight_port,
                grpc_port,
                scheduler,
                vcores,
                work_dir,
                heartbeat: Duration::from_secs(heartbeat),
                connect_timeout: Duration::from_secs(connect_timeout),
            };
            // Ballista's executor stops itself on SIGINT or SIGTERM, telling the scheduler first.
            match run_executor(options).await {
                Ok(()) => stopped(),
                Err(error @ DistributedError::WorkDir { .. }) => failed(EXIT_STARTUP, &error),
                Err(error) => failed(EXIT_SERVE, &error),
            }
        }
    }
}

fn stopped() -> ExitCode {
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

fn failed(code: u8, error: &(dyn std::error::Error + 'static)) -> ExitCode {
    tracing::error!(error = %error_chain(error), "weir-ballista stopped");
    ExitCode::from(code)
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut terminate, mut interrupt) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(terminate), Ok(interrupt)) => (terminate, interrupt),
        (Err(error), _) | (_, Err(error)) => {
            tracing::error!(%error, "cannot listen for signals; stop with SIGKILL");
            return std::future::pending().await;
        }
    };
    let name = tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    };
    tracing::info!(signal = name, "shutting down");
}

/// An error with its chain of causes.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
