//! `weir-test-engine`: a tiny ODF engine for engine-runtime's tests.
//!
//! It copies input files to the output (raw query: inputs → output file; transform: every input
//! slice → new data file, plus a checkpoint file), and obeys hooks chosen by the SQL text:
//! `sandbox-report`, `hang`, `crash`, `progress N`, `invalid`, and the contract-breaking
//! `respond FILE START END`, `respond-none START END`, `two-terminals`, `no-terminal` (see
//! [`hooks`]).
//!
//! It listens with a raw gRPC service ([`front::Front`]) that answers the stream-breaking hooks
//! itself and forwards every other call to the server SDK running [`engine::TestEngine`] on a
//! private loopback port.
//!
//! ```text
//! weir-test-engine --unix-socket /run/weir/engine.sock
//! weir-test-engine [--host 0.0.0.0] [--port 5544]
//! ```

mod engine;
mod front;
mod hooks;
mod sandbox_report;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use tonic::transport::Endpoint;
use weir_engine_contract::{DEFAULT_PORT, EngineAddress, EngineServer};

const USAGE: &str = "usage: weir-test-engine [--unix-socket PATH | [--host IP] [--port PORT]]";

fn parse_address(args: &[String]) -> Result<EngineAddress, String> {
    let mut host: IpAddr = [0, 0, 0, 0].into();
    let mut port = DEFAULT_PORT;
    let mut socket: Option<PathBuf> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--unix-socket" => socket = Some(PathBuf::from(value()?)),
            "--host" => host = value()?.parse().map_err(|e| format!("--host: {e}"))?,
            "--port" => port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--help" | "-h" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(match socket {
        Some(path) => EngineAddress::Unix(path),
        None => EngineAddress::Tcp((host, port).into()),
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let address = match parse_address(&args) {
        Ok(address) => address,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        // The SDK server on a private loopback port, behind the front.
        let sdk = EngineServer::new(engine::TestEngine)
            .address(EngineAddress::loopback(0))
            .bind()
            .await
            .map_err(|e| e.to_string())?;
        let EngineAddress::Tcp(sdk_address) = sdk.local_address().clone() else {
            return Err("the SDK server is not on TCP".to_owned());
        };
        let sdk_serving = tokio::spawn(sdk.serve());
        let channel = Endpoint::from_shared(format!("http://{sdk_address}"))
            .map_err(|e| e.to_string())?
            .tcp_nodelay(true)
            .connect_lazy();
        let served = front::Front::new(channel).serve(&address, terminate).await;
        sdk_serving.abort();
        served
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("test engine: {error}");
            ExitCode::FAILURE
        }
    }
}
