//! Finds (building them if needed) the real plugin libraries the tests load.
//!
//! - The workspace plugins (`metrics-dispatcher`, `key-affinity-dispatcher`)
//!   come from `$WEIR_PLUGIN_DIR` when set (as `cargo xtask build` prints),
//!   else they are built with `cargo build -p ...` in the profile of this
//!   test binary, into `<target>/plugin-builds/`.
//! - The fixtures under `tests/fixtures/` (their own workspace) are built into
//!   `<target>/plugin-fixtures/`; `incompatible-plugin` is built twice (with
//!   and without its `other-layout` feature) and `panicking-plugin` once more
//!   with `panic = "abort"`, each copied to its own file name.
//!
//! Each build runs once per test binary; cargo's own file lock serialises
//! test binaries that build at the same time.
#![allow(dead_code)]

use std::env;
use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root (`plugin-host/..`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// `<target>/<profile dir>` of this test binary (`.../target/debug/deps/x` →
/// `.../target/debug`).
fn profile_dir() -> PathBuf {
    let exe = env::current_exe().expect("the test binary has a path");
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("the test binary lives in <target>/<profile>/deps")
}

fn target_dir() -> PathBuf {
    profile_dir()
        .parent()
        .map(Path::to_path_buf)
        .expect("the profile directory lives in the target directory")
}

/// The cargo arguments selecting this binary's profile.
fn profile_args() -> Vec<String> {
    let profile = profile_dir()
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_owned();
    match profile.as_str() {
        "debug" => vec![],
        "release" => vec!["--release".to_owned()],
        other => vec!["--profile".to_owned(), other.to_owned()],
    }
}

fn library_file(dir: &Path, crate_name: &str) -> PathBuf {
    dir.join(format!("{DLL_PREFIX}{crate_name}{DLL_SUFFIX}"))
}

fn cargo(args: &[String]) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .args(args)
        .current_dir(workspace_root())
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap_or_else(|e| panic!("could not run {cargo}: {e}"));
    assert!(
        output.status.success(),
        "`cargo {}` failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The directory holding the built workspace plugins.
fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = env::var_os("WEIR_PLUGIN_DIR") {
            return PathBuf::from(dir);
        }
        let mut args: Vec<String> = [
            "build",
            "--quiet",
            "-p",
            "weir-metrics-dispatcher",
            "-p",
            "weir-key-affinity-dispatcher",
            "--target-dir",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        // Their own target directory: a cdylib + rlib crate's files carry no
        // hash, so building it here with other features than `cargo test`
        // resolved would overwrite the rlib the doc tests link against.
        let target = target_dir().join("plugin-builds");
        args.push(target.display().to_string());
        args.extend(profile_args());
        cargo(&args);
        let profile = profile_dir();
        target.join(profile.file_name().unwrap_or(std::ffi::OsStr::new("debug")))
    })
}

/// The built `metrics-dispatcher` plugin.
pub fn metrics_plugin() -> PathBuf {
    library_file(plugin_dir(), "metrics_dispatcher")
}

/// The built `key-affinity-dispatcher` plugin.
pub fn key_affinity_plugin() -> PathBuf {
    library_file(plugin_dir(), "key_affinity_dispatcher")
}

/// The fixture libraries, built once.
pub struct Fixtures {
    /// A shared library without a root module.
    pub not_a_plugin: PathBuf,
    /// A root module declaring interface 2.0.0.
    pub future_interface: PathBuf,
    /// A root module declaring this interface version with another layout.
    pub other_layout: PathBuf,
    /// A plugin that panics where its options say.
    pub panicking: PathBuf,
    /// The same plugin built with `panic = "abort"`.
    pub panic_abort: PathBuf,
}

pub fn fixtures() -> &'static Fixtures {
    static FIXTURES: OnceLock<Fixtures> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let root = workspace_root();
        let manifest = root
            .join("plugin-host/tests/fixtures/Cargo.toml")
            .display()
            .to_string();
        let target = target_dir().join("plugin-fixtures");
        let built = target.join("debug");
        let copies = target.join("libraries");
        std::fs::create_dir_all(&copies).expect("create the fixture library directory");
        let build = |extra: &[&str], target: &Path| {
            let mut args: Vec<String> = vec![
                "build".into(),
                "--quiet".into(),
                "--manifest-path".into(),
                manifest.clone(),
                "--target-dir".into(),
                target.display().to_string(),
            ];
            args.extend(extra.iter().map(|s| (*s).to_owned()));
            cargo(&args);
        };
        // Copy, then rename into place: another test process may have the
        // previous copy mapped, and a rename leaves its inode alone.
        let copy = |from: PathBuf, name: &str| {
            let to = library_file(&copies, name);
            let partial = copies.join(format!("{name}.{}.partial", std::process::id()));
            std::fs::copy(&from, &partial).unwrap_or_else(|e| {
                panic!("copy {} to {}: {e}", from.display(), partial.display())
            });
            std::fs::rename(&partial, &to).unwrap_or_else(|e| {
                panic!("rename {} to {}: {e}", partial.display(), to.display())
            });
            to
        };

        build(&["--workspace"], &target);
        let not_a_plugin = copy(library_file(&built, "not_a_plugin"), "not_a_plugin");
        let future_interface = copy(
            library_file(&built, "incompatible_plugin"),
            "future_interface_plugin",
        );
        let panicking = copy(library_file(&built, "panicking_plugin"), "panicking_plugin");
        build(
            &["-p", "incompatible-plugin", "--features", "other-layout"],
            &target,
        );
        let other_layout = copy(
            library_file(&built, "incompatible_plugin"),
            "other_layout_plugin",
        );
        // panic = "abort" changes every crate's flags: its own target dir.
        let abort_target = target.join("panic-abort");
        build(
            &[
                "-p",
                "panicking-plugin",
                "--config",
                "profile.dev.panic=\"abort\"",
            ],
            &abort_target,
        );
        let panic_abort = copy(
            library_file(&abort_target.join("debug"), "panicking_plugin"),
            "panic_abort_plugin",
        );
        Fixtures {
            not_a_plugin,
            future_interface,
            other_layout,
            panicking,
            panic_abort,
        }
    })
}
