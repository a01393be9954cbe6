//! `weir-flatc ARGS...`: runs the vendored `flatc` (FlatBuffers 25.12.19) with
//! the given arguments and exits with its status.
//!
//! `cargo xtask codegen` runs this through `cargo run --manifest-path
//! xtask/flatc/Cargo.toml`, so only code generation needs cmake and a C++
//! compiler, never the normal build.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let flatc = flatc_fork::flatc();
    let status = Command::new(flatc).args(std::env::args_os().skip(1)).status();
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("weir-flatc: {} failed ({status})", flatc.display());
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("weir-flatc: could not run {}: {error}", flatc.display());
            ExitCode::FAILURE
        }
    }
}
