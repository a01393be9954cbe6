//! `weir-engine`: the reference ODF engine (SQL on DataFusion) as a gRPC server.

mod privileges;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use weir_engine_contract::{EngineAddress, EngineServer, ServeError};
use weir_reference_engine::ReferenceEngine;

const EXIT_CODES: &str = "\
Exit codes:
  0  stopped cleanly (SIGTERM or SIGINT)
  1  could not start (logging or runtime setup failed)
  2  bad command line
  3  cannot listen on the address (in use, no permission, bad socket path)
  4  the server failed while serving";

/// Exit code: could not start.
const EXIT_STARTUP: u8 = 1;
/// Exit code: cannot listen.
const EXIT_BIND: u8 = 3;
/// Exit code: the server failed.
const EXIT_SERVE: u8 = 4;

/// Serves the ODF engine contract (ExecuteTransform, ExecuteRawQuery, ValidateQuery, MigrateQuery,
/// DeriveProvenance) over gRPC, with SQL run by DataFusion.
#[derive(Debug, Parser)]
#[command(name = "weir-engine", version, after_help = EXIT_CODES)]
struct Cli {
    /// IP address to listen on (`localhost` means 127.0.0.1; use 0.0.0.0 inside a container).
    #[arg(long, default_value = "127.0.0.1", value_parser = parse_host)]
    host: IpAddr,
    /// TCP port to listen on.
    #[arg(long, default_value_t = weir_engine_contract::DEFAULT_PORT)]
    port: u16,
    /// Listen on this Unix socket instead of TCP (a stale socket file is replaced).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["host", "port"])]
    unix_socket: Option<PathBuf>,
    /// Log filter, in `RUST_LOG` syntax (logs are JSON lines on stderr).
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    log: String,
    /// When started as root, run as the user and group owning PATH (nobody if it does not exist;
    /// root only if PATH is root's) before serving; no effect otherwise. The image passes
    /// `/opt/engine/out`, the output folder ODF coordinators mount.
    #[arg(long, value_name = "PATH")]
    run_as_owner_of: Option<PathBuf>,
}

fn parse_host(text: &str) -> Result<IpAddr, String> {
    if text == "localhost" {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    text.parse()
        .map_err(|_| format!("`{text}` is not an IP address (host names are not resolved)"))
}

/// Stack size of the engine's threads (8 MiB, the main thread's usual size, is not enough for a
/// query at `MAX_EXPRESSION_DEPTH` in a debug build; the default 2 MiB of tokio's threads even less).
const ENGINE_THREAD_STACK: usize = 64 * 1024 * 1024;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(EnvFilter::new(&cli.log))
        .try_init()
    {
        eprintln!("weir-engine: cannot set up logging: {error}");
        return ExitCode::from(EXIT_STARTUP);
    }
    // Before the runtime starts any thread.
    if let Some(path) = &cli.run_as_owner_of {
        match privileges::run_as_owner_of(path) {
            Ok(privileges::RunAs::Switched { uid, gid }) => {
                tracing::info!(uid, gid, owner_of = %path.display(), "started as root: running as the owner of the output folder");
            }
            Ok(privileges::RunAs::Root) => {
                tracing::info!(owner_of = %path.display(), "started as root: the output folder is root's, staying root");
            }
            Ok(privileges::RunAs::Unchanged { uid, gid }) => {
                tracing::debug!(uid, gid, "not started as root: user unchanged");
            }
            Err(error) => {
                tracing::error!(%error, hint = "run the container with --user, or give it CAP_SETUID and CAP_SETGID", "cannot drop root privileges");
                return ExitCode::from(EXIT_STARTUP);
            }
        }
    }
    // DataFusion plans expressions by recursion: queries are bounded to `MAX_EXPRESSION_DEPTH` levels
    // (`check_query_depth`), and the threads get a stack that holds that depth with a wide margin in any
    // build (only the pages used are committed).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(ENGINE_THREAD_STACK)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::from(EXIT_STARTUP);
        }
    };
    let address = match &cli.unix_socket {
        Some(path) => EngineAddress::Unix(path.clone()),
        None => EngineAddress::Tcp(SocketAddr::new(cli.host, cli.port)),
    };
    let result = runtime.block_on(async {
        EngineServer::new(ReferenceEngine::new())
            .address(address)
            .with_graceful_shutdown(shutdown_signal())
            .serve()
            .await
    });
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let (code, hint) = match &error {
                ServeError::Bind { .. } | ServeError::SocketInUse { .. } => (
                    EXIT_BIND,
                    "choose another --port or --unix-socket, or stop the process using it",
                ),
                _ => (EXIT_SERVE, "see the error above"),
            };
            tracing::error!(error = %error_chain(&error), hint, "engine server stopped");
            ExitCode::from(code)
        }
    }
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
    tracing::info!(signal = name, "shutting down: finishing running operations");
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
