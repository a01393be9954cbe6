//! `cargo xtask <task>`: the project's automation, in Rust, with no extra
//! binaries to install (the xtask pattern).

mod image;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const HELP: &str = "\
cargo xtask <TASK> [ARGS...]

Tasks:
  ci        What CI runs: fmt check, clippy -D warnings, the whole test suite
  test      The whole test suite only (cargo test --workspace --all-targets)
  lint      fmt check and clippy -D warnings only
  bench     Criterion benchmarks (extra args go to cargo bench, e.g. `-- chain`)
  image     Engine images FROM scratch with static binaries (--engine reference|test|all, --release)
  help      This text
";

fn main() -> ExitCode {
    let mut args = env::args().skip(1);
    let task = args.next().unwrap_or_else(|| "help".to_owned());
    let rest: Vec<String> = args.collect();
    let result = match task.as_str() {
        "ci" => lint().and_then(|()| test()),
        "test" => test(),
        "lint" => lint(),
        "bench" => bench(&rest),
        "codegen" => codegen(),
        "image" => image::image(&rest),
        "help" | "--help" | "-h" => {
            print!("{HELP}");
            Ok(())
        }
        other => Err(format!("unknown task `{other}`\n\n{HELP}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    // xtask/ lives directly under the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo(args: &[&str]) -> Result<(), String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("xtask: cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .current_dir(root())
        .status()
        .map_err(|e| format!("could not run {cargo}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn lint() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])
}

fn test() -> Result<(), String> {
    cargo(&["test", "--workspace", "--all-targets"])?;
    cargo(&["test", "--workspace", "--doc"])
}

fn bench(rest: &[String]) -> Result<(), String> {
    let mut args = vec!["bench", "--workspace"];
    args.extend(rest.iter().map(String::as_str));
    cargo(&args)
}

/// `cargo xtask codegen`: regenerates `engine-contract/src/generated/` from
/// `engine-contract/schema/engine.fbs` with a flatc of the same release as the
/// pinned `flatbuffers` crate. That flatc is built from bundled sources by the
/// `xtask/flatc` crate (its own workspace, needs cmake and a C++ compiler), so
/// the normal build never compiles it. The output is formatted with rustfmt
/// and committed.
fn codegen() -> Result<(), String> {
    let schema = "engine-contract/schema/engine.fbs";
    let out_dir = "engine-contract/src/generated";
    cargo(&[
        "run",
        "--quiet",
        "--manifest-path",
        "xtask/flatc/Cargo.toml",
        "--target-dir",
        "target/flatc",
        "--",
        "--rust",
        "-o",
        out_dir,
        schema,
    ])?;
    let generated = root().join(out_dir).join("engine_generated.rs");
    let status = Command::new("rustfmt")
        .args(["--edition", "2024"])
        .arg(&generated)
        .status()
        .map_err(|e| format!("could not run rustfmt: {e}"))?;
    if status.success() {
        eprintln!("xtask: regenerated {}", generated.display());
        Ok(())
    } else {
        Err(format!("rustfmt {} failed ({status})", generated.display()))
    }
}
