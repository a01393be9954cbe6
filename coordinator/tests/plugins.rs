//! `weir pull --dispatcher-plugin`: real plugin libraries fed the pull's progress events. A plugin that
//! routes by key gets each event's dataset as its key; a plugin that panics fails the pull, naming the
//! plugin and the callback, instead of degrading quietly.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use common::*;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| {
            if p.is_absolute() {
                p
            } else {
                workspace_root().join(p)
            }
        })
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn cargo(args: &[&str]) {
    let out = StdCommand::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The key-affinity plugin of this workspace, built in the debug profile.
fn key_affinity() -> PathBuf {
    cargo(&["build", "-p", "weir-key-affinity-dispatcher"]);
    target_dir().join("debug/libkey_affinity_dispatcher.so")
}

/// plugin-host's panicking fixture (its own workspace), built where plugin-host's tests build it.
fn panicking() -> PathBuf {
    let dir = target_dir().join("plugin-fixtures");
    let manifest = workspace_root().join("plugin-host/tests/fixtures/Cargo.toml");
    cargo(&[
        "build",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "-p",
        "panicking-plugin",
        "--target-dir",
        dir.to_str().unwrap(),
    ]);
    dir.join("debug/libpanicking_plugin.so")
}

#[test]
fn a_plugin_that_routes_by_key_gets_the_dataset_as_key() {
    let ws = workspace();
    let plugin = key_affinity();
    let out = weir(ws.path())
        .args(["pull", "--all", "--quiet", "--dispatcher-plugin"])
        .arg(&plugin)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let delivered: u64 = text
        .lines()
        .find_map(|l| l.split(": ").nth(1)?.strip_suffix(" event(s) delivered"))
        .unwrap_or_else(|| panic!("{text}"))
        .parse()
        .unwrap();
    assert!(delivered > 0, "{text}");
}

#[test]
fn a_plugin_that_panics_fails_the_pull_naming_the_plugin_and_the_callback() {
    let ws = workspace();
    let plugin = panicking();
    for callback in ["ask", "dispatch"] {
        let out = weir(ws.path())
            .args(["pull", "--all", "--quiet", "--dispatcher-plugin"])
            .arg(&plugin)
            .args([
                "--dispatcher-plugin-options",
                &format!("{{\"panic_in\": \"{callback}\"}}"),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{callback}: {err}");
        assert!(err.contains("panicked in `"), "{callback}: {err}");
        assert!(err.contains(callback), "{callback}: {err}");
        assert!(err.contains("trap set off"), "{callback}: {err}");
        // The transactions went on without the plugin: the error says what they committed, the summary
        // (on stdout) each dataset's outcome, and the hint that a rerun has nothing to redo.
        let committed = if callback == "ask" {
            "the pull committed new blocks to 5 dataset(s)"
        } else {
            "the pull committed nothing; 5 dataset(s) were already up to date"
        };
        assert!(err.contains(committed), "{callback}: {err}");
        assert!(err.contains("nothing to redo"), "{callback}: {err}");
        let summary = String::from_utf8_lossy(&out.stdout);
        assert!(
            summary.contains("readings.hot-days: up to date"),
            "{callback}: {summary}"
        );
        assert_eq!(head_and_records(ws.path(), "readings").1, 432, "{callback}");
    }
    // Options that are not a JSON object are a usage error.
    let out = weir(ws.path())
        .args([
            "pull",
            "--dispatcher-plugin",
            "x.so",
            "--dispatcher-plugin-options",
            "[1]",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
