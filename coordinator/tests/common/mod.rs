//! Helpers shared by the integration tests: a private copy of the example workspace and the binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The example workspace shipped in `examples/weather`.
pub fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/weather")
}

/// A copy of the example workspace (without any stored chains) in a temporary folder.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&example(), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if name == ".weir" {
            continue;
        }
        let target = to.join(&name);
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// `weir --workspace DIR ...`
pub fn weir(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("weir").expect("weir binary");
    c.arg("--workspace")
        .arg(dir)
        .env_remove("WEIR_FAULT_AT")
        .env_remove("WEIR_LOG")
        // The tests write their source files completely before they pull (and the workspace copy is new):
        // no settle time, unless a test asks for one.
        .env("WEIR_SETTLE_SECS", "0");
    c
}

/// Runs a command expecting success and returns stdout.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = weir(dir).args(args).output().expect("run weir");
    assert!(
        out.status.success(),
        "weir {args:?} failed with {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `weir list --format json` as JSON.
pub fn list(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(dir, &["--format", "json", "list"])).expect("json")
}

/// Head and record count of a dataset.
pub fn head_and_records(dir: &Path, dataset: &str) -> (serde_json::Value, u64) {
    let l = list(dir);
    let d = l["datasets"]
        .as_array()
        .expect("datasets")
        .iter()
        .find(|d| d["name"] == dataset)
        .expect("dataset")
        .clone();
    (d["head"].clone(), d["records"].as_u64().unwrap_or(0))
}

/// `weir --format json tail` output (`records` of `dataset`) without what differs between two pulls of
/// the same data: `system_time` (the time of the pull) and, for `stations`, which has no event-time
/// column, `event_time` (the time of the ingest).
pub fn comparable_records(tail_json: &str, dataset: &str) -> Vec<serde_json::Value> {
    let json: serde_json::Value = serde_json::from_str(tail_json).expect("tail json");
    json["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let Some(fields) = r.as_object_mut() {
                fields.remove("system_time");
                if dataset == "stations" {
                    fields.remove("event_time");
                }
            }
            r
        })
        .collect()
}

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .expect("the coordinator lives in the workspace")
}

/// The engine binary `bin` (`weir-engine`, `weir-test-engine`, `weir-ballista`) the engine images hold
/// (`cargo xtask engines`: the workspace build's own, so nothing is built again after the test suite's
/// build; once per call site's `OnceLock`): engine binaries the tests run as `--engine process`.
pub fn built_binary(bin: &str) -> Result<PathBuf, String> {
    let output =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args(["xtask", "engines"])
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo xtask engines` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .find(|p| p.file_name().is_some_and(|n| n == bin))
        .ok_or_else(|| format!("`cargo xtask engines` built no `{bin}`"))
}
