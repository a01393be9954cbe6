//! `cargo xtask <task>`: the project's automation, in Rust, with no extra
//! binaries to install (the xtask pattern).

mod image;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Every cargo step this run took, with its wall time and outcome, printed at the end.
static STEPS: Mutex<Vec<(String, Duration, bool)>> = Mutex::new(Vec::new());

const HELP: &str = "\
cargo xtask <TASK> [ARGS...]

Tasks:
  ci        What CI runs: fmt check, clippy -D warnings, rustdoc -D warnings, a publish dry run of every
            published crate, the whole test suite, the loom models
  test      The whole test suite only (cargo test --workspace --all-targets --all-features), then the loom models
  loom      gen-stage's loom models (mailbox, group executor) only, under --cfg loom in target/loom
  lint      fmt check and clippy -D warnings only
  docs      cargo doc --workspace --no-deps with rustdoc warnings as errors
  package   cargo publish --dry-run --no-verify of every crate that is published (packaged as crates.io would take it)
  bench     Criterion benchmarks: [--quick] [-p CRATE]... [FILTER] [-- ARGS]
            (figures tables go to target/bench-reports/, see docs/benchmarks.md)
  build     Build the workspace and every dispatcher plugin; print where the .so files are
  codegen   Regenerate engine-contract's and odf's FlatBuffers code with a matching flatc (needs cmake)
  image     Engine images FROM scratch: a binary and the libraries it loads (--engine reference|test|ballista|all, --release)
  engines   The engine binaries the images hold (the workspace build's own); prints their paths
  help      This text
";

fn main() -> ExitCode {
    let mut args = env::args().skip(1);
    let task = args.next().unwrap_or_else(|| "help".to_owned());
    let rest: Vec<String> = args.collect();
    let result = match task.as_str() {
        "ci" => lint()
            .and_then(|()| docs())
            .and_then(|()| package())
            .and_then(|()| test()),
        "test" => test(),
        "loom" => loom(),
        "lint" => lint(),
        "docs" => docs(),
        "package" => package(),
        "bench" => bench(&rest),
        "build" => build(&rest),
        "codegen" => codegen(),
        "image" => image::image(&rest),
        "engines" => image::engines(&rest),
        "help" | "--help" | "-h" => {
            print!("{HELP}");
            Ok(())
        }
        other => Err(format!("unknown task `{other}`\n\n{HELP}")),
    };
    print_steps();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The time of each cargo step, on stderr, when there was more than one.
fn print_steps() {
    let steps = STEPS.lock().map(|s| s.clone()).unwrap_or_default();
    if steps.len() < 2 {
        return;
    }
    let total: Duration = steps.iter().map(|(_, d, _)| *d).sum();
    eprintln!("xtask: time per step");
    for (step, took, ok) in &steps {
        let secs = took.as_secs();
        eprintln!(
            "xtask:   {:>3}:{:02}  {}  cargo {step}",
            secs / 60,
            secs % 60,
            if *ok { "ok    " } else { "FAILED" }
        );
    }
    let secs = total.as_secs();
    eprintln!("xtask:   {:>3}:{:02}  total", secs / 60, secs % 60);
}

fn root() -> PathBuf {
    // xtask/ lives directly under the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A `cargo` command whose environment does not carry what cargo set for the process that runs this
/// xtask (`cargo run` sets `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ... to xtask's; a test that runs
/// `cargo xtask` has its own package's). Build scripts that watch such a variable (ring's watches
/// `CARGO_MANIFEST_DIR`) would otherwise rerun, and everything above them rebuild, whenever a build is
/// started from a shell, from xtask or from a test in turn.
pub(crate) fn cargo_command() -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let set_by_cargo = matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "OUT_DIR"
        ) || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_BIN_EXE_");
        if set_by_cargo {
            command.env_remove(key);
        }
    }
    command
}

fn cargo(args: &[&str]) -> Result<(), String> {
    cargo_with_env(args, &[])
}

fn cargo_with_env(args: &[&str], envs: &[(String, String)]) -> Result<(), String> {
    for (key, value) in envs {
        eprintln!("xtask: {key}={value}");
    }
    eprintln!("xtask: cargo {}", args.join(" "));
    let started = Instant::now();
    let status = cargo_command()
        .args(args)
        .envs(envs.iter().map(|(key, value)| (key, value)))
        .current_dir(root())
        .status()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if let Ok(mut steps) = STEPS.lock() {
        steps.push((args.join(" "), started.elapsed(), status.success()));
    }
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn lint() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ])
}

/// The API docs of every crate, as docs.rs builds them, with rustdoc's warnings (broken intra-doc links,
/// private items linked from public docs, bad code blocks) as errors.
fn docs() -> Result<(), String> {
    let flags = match env::var("RUSTDOCFLAGS") {
        Ok(flags) if !flags.trim().is_empty() => format!("{flags} -D warnings"),
        _ => "-D warnings".to_owned(),
    };
    cargo_with_env(
        // --keep-going: one run reports every crate's warnings, not only the first crate's.
        &["doc", "--workspace", "--no-deps", "--keep-going"],
        &[("RUSTDOCFLAGS".to_owned(), flags)],
    )
}

/// `cargo publish --dry-run` of every crate that is published (`publish = false` ones are skipped by
/// cargo): each is packaged as crates.io would receive it, in dependency order, its manifest checked
/// (a version on every dependency, the metadata crates.io asks for) and resolved against the others'
/// packages. `--no-verify`: cargo's verification builds each package's dependencies again from nothing in
/// a target directory of its own (DataFusion several times over); the sources themselves are what the
/// build and the test suite compile.
fn package() -> Result<(), String> {
    cargo(&[
        "publish",
        "--dry-run",
        "--workspace",
        "--allow-dirty",
        "--no-verify",
    ])
}

fn test() -> Result<(), String> {
    // --no-fail-fast: one run reports every failing test binary, not only the first.
    // --all-features: every optional feature is tested (only `weir-odf` has some: the logical hash over
    // kamu's vectors, the serde spelling), in the same build as everything else.
    cargo(&[
        "test",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--no-fail-fast",
    ])?;
    cargo(&["test", "--workspace", "--doc", "--all-features"])?;
    loom()
}

/// `cargo xtask loom`: gen-stage's loom models of its hand-written concurrency (the mailbox and the group
/// executor, `gen-stage/src/loom_*.rs`), built with `--cfg loom` so that those cores run on loom's lock,
/// atomics and thread-locals (`gen-stage/src/sync.rs`). Release mode (loom runs each model thousands of
/// times) in its own target directory (`$CARGO_TARGET_DIR/loom` or `target/loom`), since a changed RUSTFLAGS
/// would otherwise rebuild the main build's whole cache. Each model's preemption bound is 3 unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise.
fn loom() -> Result<(), String> {
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(|dir| PathBuf::from(dir).join("loom"))
        .unwrap_or_else(|| root().join("target").join("loom"));
    let target = target.to_string_lossy().into_owned();
    let rustflags = match env::var("RUSTFLAGS") {
        Ok(flags) if !flags.trim().is_empty() => format!("{flags} --cfg loom"),
        _ => "--cfg loom".to_owned(),
    };
    cargo_with_env(
        &[
            "test",
            "-p",
            "weir-gen-stage",
            "--release",
            "--lib",
            "--target-dir",
            &target,
            "--",
            "loom_",
        ],
        &[("RUSTFLAGS".to_owned(), rustflags)],
    )
}

/// `cargo xtask bench [--quick] [-p CRATE]... [FILTER] [-- ARGS]`: every
/// bench target of the workspace (or of the given crates), in the bench
/// profile. `FILTER` selects criterion benchmarks by id (e.g.
/// `chain/current_thread`); `ARGS` go to the bench binaries as they are.
/// `--quick` shortens runs: criterion's `--quick`, and `WEIR_BENCH_QUICK=1`
/// for benches that size their own work (gen-stage's run a tenth of the
/// events). Benches that print a figures table
/// also write it to `target/bench-reports/<crate>.md`
/// (`WEIR_BENCH_REPORT_DIR`).
fn bench(rest: &[String]) -> Result<(), String> {
    let mut quick = false;
    let mut packages: Vec<&str> = Vec::new();
    let mut bench_args: Vec<&str> = Vec::new();
    let mut args = rest.iter().map(String::as_str);
    while let Some(arg) = args.next() {
        match arg {
            "--quick" => quick = true,
            "-p" | "--package" => {
                packages.push(
                    args.next()
                        .ok_or_else(|| format!("{arg} needs a crate name"))?,
                );
            }
            "--" => bench_args.extend(args.by_ref()),
            flag if flag.starts_with('-') => {
                return Err(format!(
                    "bench: unknown option `{flag}` (bench binary flags go after `--`)"
                ));
            }
            filter => bench_args.push(filter),
        }
    }

    let mut cargo_args = vec!["bench"];
    if packages.is_empty() {
        cargo_args.push("--workspace");
    }
    for package in &packages {
        cargo_args.extend(["-p", package]);
    }
    // Only the bench targets: not the libraries' empty libtest harnesses.
    cargo_args.extend(["--bench", "*", "--"]);
    if quick {
        cargo_args.push("--quick");
    }
    cargo_args.extend(bench_args);

    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let report_dir = env::var_os("WEIR_BENCH_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir.join("bench-reports"));
    let mut envs = vec![(
        "WEIR_BENCH_REPORT_DIR".to_owned(),
        report_dir.display().to_string(),
    )];
    if quick {
        envs.push(("WEIR_BENCH_QUICK".to_owned(), "1".to_owned()));
    }
    cargo_with_env(&cargo_args, &envs)?;
    if let Ok(entries) = std::fs::read_dir(&report_dir) {
        for entry in entries.flatten() {
            eprintln!("xtask: figures table {}", entry.path().display());
        }
    }
    Ok(())
}

/// One FlatBuffers schema that `cargo xtask codegen` compiles into committed Rust code.
struct Codegen {
    /// The schema, relative to the workspace root.
    schema: &'static str,
    /// Where flatc writes, relative to the workspace root.
    out_dir: &'static str,
    /// The file flatc writes there (`<schema stem>_generated.rs`).
    generated: &'static str,
    /// Applied to the formatted code before it is written back; fails loudly when the text it expects is
    /// not there (a new flatc or schema must be looked at, not silently half-patched).
    post_process: fn(String) -> Result<String, String>,
}

const CODEGEN: &[Codegen] = &[
    Codegen {
        schema: "engine-contract/schema/engine.fbs",
        out_dir: "engine-contract/src/generated",
        generated: "engine_generated.rs",
        post_process: Ok,
    },
    Codegen {
        schema: "odf/schema/odf.fbs",
        out_dir: "odf/src/generated",
        generated: "odf_generated.rs",
        post_process: odf_timestamp_alignment_1,
    },
];

/// `cargo xtask codegen`: regenerates `engine-contract/src/generated/` from
/// `engine-contract/schema/engine.fbs` and `odf/src/generated/` from `odf/schema/odf.fbs` with a flatc of the
/// same release as the pinned `flatbuffers` crate. That flatc is built from bundled sources by the
/// `xtask/flatc` crate (its own workspace, needs cmake and a C++ compiler, built under
/// `$CARGO_TARGET_DIR/flatc` or `target/flatc`), so the normal build never compiles it. The output is
/// formatted with rustfmt, post-processed where [`CODEGEN`] says so, and committed.
fn codegen() -> Result<(), String> {
    let flatc_target = env::var_os("CARGO_TARGET_DIR")
        .map(|dir| PathBuf::from(dir).join("flatc"))
        .unwrap_or_else(|| root().join("target").join("flatc"));
    let flatc_target = flatc_target.to_string_lossy().into_owned();
    for job in CODEGEN {
        cargo(&[
            "run",
            "--quiet",
            "--manifest-path",
            "xtask/flatc/Cargo.toml",
            "--target-dir",
            &flatc_target,
            "--",
            "--rust",
            "-o",
            job.out_dir,
            job.schema,
        ])?;
        let generated = root().join(job.out_dir).join(job.generated);
        let status = Command::new("rustfmt")
            .args(["--edition", "2024"])
            .arg(&generated)
            .status()
            .map_err(|e| format!("could not run rustfmt: {e}"))?;
        if !status.success() {
            return Err(format!("rustfmt {} failed ({status})", generated.display()));
        }
        let code = std::fs::read_to_string(&generated)
            .map_err(|e| format!("could not read {}: {e}", generated.display()))?;
        let code = (job.post_process)(code)
            .map_err(|e| format!("post-processing {} failed: {e}", generated.display()))?;
        std::fs::write(&generated, code)
            .map_err(|e| format!("could not write {}: {e}", generated.display()))?;
        eprintln!("xtask: regenerated {}", generated.display());
    }
    Ok(())
}

/// The `alignment()` override flatc writes into `impl ::flatbuffers::Push for Timestamp` (rustfmt'ed).
const TIMESTAMP_ALIGNMENT_OVERRIDE: &str = "
    #[inline]
    fn alignment() -> ::flatbuffers::PushAlignment {
        ::flatbuffers::PushAlignment::new(4)
    }
";

/// ODF manifest version 2 pushes the `Timestamp` struct with alignment 1, not the 4 that flatc generates:
/// kamu-cli up to 0.264 (e.g. ba5878ea, which kamu-engine-datafusion 0.9 locks) removes this override from
/// its generated code (kamu issue 1084), so a version-2 block can place a `Timestamp` at any byte (the
/// vectors put `system_time` at byte 30 of `root/00_Seed.bin`'s inner buffer). Manifest version 3 (kamu
/// 0.265) aligns it to 4. Weir writes version 2, so it does what kamu did: removes the override and lets
/// `Push` fall back to `align_of::<Timestamp>()`, which is 1 (the struct is a `[u8; 16]`).
fn odf_timestamp_alignment_1(code: String) -> Result<String, String> {
    let impl_start = code
        .find("impl<'b> ::flatbuffers::Push for Timestamp {")
        .ok_or("`impl<'b> ::flatbuffers::Push for Timestamp` not found")?;
    let impl_len = code[impl_start..]
        .find("\n}\n")
        .ok_or("end of `impl flatbuffers::Push for Timestamp` not found")?;
    // The body up to and including the newline before the closing brace.
    let body = &code[impl_start..=impl_start + impl_len];
    let at = body.find(TIMESTAMP_ALIGNMENT_OVERRIDE).ok_or(
        "the `fn alignment()` override of `impl ::flatbuffers::Push for Timestamp` is not in the form \
         expected (PushAlignment::new(4)); flatc or the schema changed, look at the generated code",
    )?;
    let at = impl_start + at;
    let mut out = String::with_capacity(code.len());
    out.push_str(&code[..at]);
    out.push('\n');
    out.push_str(&code[at + TIMESTAMP_ALIGNMENT_OVERRIDE.len()..]);
    if out.contains(TIMESTAMP_ALIGNMENT_OVERRIDE) {
        return Err("more than one `fn alignment()` override of Timestamp".to_owned());
    }
    Ok(out)
}

/// `cargo xtask build [CARGO BUILD ARGS]`: builds the workspace, which
/// includes every dispatcher plugin under `plugins/` (each a `cdylib`), and
/// says where the plugin libraries are. Extra args go to `cargo build` (e.g.
/// `--release`).
fn build(rest: &[String]) -> Result<(), String> {
    let mut args = vec!["build", "--workspace"];
    args.extend(rest.iter().map(String::as_str));
    cargo(&args)?;
    let profile = if rest.iter().any(|a| a == "--release" || a == "-r") {
        "release".to_owned()
    } else {
        match rest.iter().position(|a| a == "--profile") {
            Some(i) => match rest.get(i + 1).map(String::as_str) {
                Some("dev") | None => "debug".to_owned(),
                Some(other) => other.to_owned(),
            },
            None => "debug".to_owned(),
        }
    };
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let out_dir = target.join(profile);
    let plugins_dir = root().join("plugins");
    let mut plugins: Vec<String> = std::fs::read_dir(&plugins_dir)
        .map_err(|e| format!("could not list {}: {e}", plugins_dir.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    plugins.sort();
    println!("dispatcher plugins:");
    for plugin in &plugins {
        let file = out_dir.join(format!(
            "{}{}{}",
            env::consts::DLL_PREFIX,
            plugin.replace('-', "_"),
            env::consts::DLL_SUFFIX
        ));
        if !file.is_file() {
            return Err(format!(
                "plugin `{plugin}` built no library at {}",
                file.display()
            ));
        }
        println!("  {plugin}: {}", file.display());
    }
    println!(
        "tests and examples find them with: export WEIR_PLUGIN_DIR={}",
        out_dir.display()
    );
    Ok(())
}
