//! `--format json`: every command, whatever its outcome, writes exactly one JSON document on stdout and
//! nothing else; a failure's document carries the error, its causes, the hint and the exit code the
//! process exits with. Logs and progress go to stderr.
use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

/// Runs `weir --format json ARGS` and returns the exit code and the one JSON document on stdout, after
/// checking that stdout holds exactly one document and, for a failure, that it says the exit code.
fn outcome(dir: &Path, args: &[&str]) -> (i32, Value) {
    let out = weir(dir)
        .arg("--format")
        .arg("json")
        .args(args)
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| {
            panic!("weir {args:?}: stdout is not JSON ({e}):\n{stdout}\nstderr:\n{stderr}")
        });
    assert_eq!(
        docs.len(),
        1,
        "weir {args:?}: expected one JSON document on stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let doc = docs.into_iter().next().unwrap();
    if code != 0 {
        assert_eq!(doc["exitCode"], code, "weir {args:?}: {doc:#}");
        assert!(
            doc["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{doc:#}"
        );
        assert!(doc["causes"].is_array(), "{doc:#}");
        assert!(doc.get("hint").is_some(), "{doc:#}");
    }
    (code, doc)
}

/// Asserts `weir --format json ARGS` fails with `code`; returns the document.
fn fails(dir: &Path, args: &[&str], code: i32) -> Value {
    let (got, doc) = outcome(dir, args);
    assert_eq!(got, code, "weir {args:?}: {doc:#}");
    doc
}

fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no {from:?}");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

#[test]
fn every_command_answers_a_bad_command_line_with_one_json_document() {
    let ws = workspace();
    let d = ws.path();
    // clap's refusals: the message, clap's tip as the hint, exit 2.
    let doc = fails(d, &["pull", "--recomput"], 2);
    assert!(
        doc["error"].as_str().unwrap().contains("--recomput"),
        "{doc:#}"
    );
    assert!(
        doc["hint"].as_str().unwrap().contains("--recompute"),
        "{doc:#}"
    );
    assert!(
        doc["usage"].as_str().unwrap().starts_with("weir pull"),
        "{doc:#}"
    );
    fails(d, &[], 2);
    fails(d, &["no-such-command"], 2);
    fails(d, &["verify"], 2);
    fails(d, &["tail", "readings", "-n", "many"], 2);
    fails(d, &["provenance", "readings"], 2);
    fails(d, &["engine"], 2);
    // `--format=json` is understood too, and `--format dot` outside lineage is a usage error.
    let out = weir(d)
        .args(["--format=json", "pull", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["exitCode"], 2);
    let out = weir(d).args(["--format", "dot", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stdout.is_empty(),
        "text mode: clap's message goes to stderr"
    );
    // The help says what JSON output promises.
    let out = weir(d).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("exactly one JSON document on stdout"),
        "{help}"
    );
    // Help and version are not errors: printed as usual.
    let out = weir(d)
        .args(["--format", "json", "--version"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("weir "));
}

#[test]
fn every_command_fails_with_one_json_document_on_stdout_and_succeeds_with_one() {
    let ws = workspace();
    let d = ws.path();
    // Not a workspace at all: exit 3, and the hint says what a workspace is, not how to fix a manifest.
    let missing = d.join("nonexistent");
    for args in [
        &["list"][..],
        &["pull", "--all"],
        &["validate"],
        &["sql", "-c", "SELECT 1"],
    ] {
        let doc = fails(&missing, args, 3);
        let hint = doc["hint"].as_str().unwrap();
        assert!(hint.contains("--workspace"), "{args:?}: {doc:#}");
        assert!(
            !hint.contains("manifest at the position"),
            "{args:?}: {doc:#}"
        );
    }

    // Before anything is pulled.
    for args in [
        &["pull", "nope"][..],
        &["verify", "nope"],
        &["reset", "nope"],
        &["rename", "nope", "other"],
        &["delete", "nope", "--yes"],
        &["log", "nope"],
        &["tail", "nope"],
        &["lineage", "nope"],
        &["provenance", "nope", "--offset", "0"],
        &["engine", "deprecate", "nope", "--to", "embedded"],
        &["conformance", "nope"],
        &["inspect", "schema", "nope"],
        &["inspect", "query", "nope"],
        &["inspect", "lineage", "nope"],
    ] {
        let doc = fails(d, args, 4);
        assert!(
            doc["error"].as_str().unwrap().contains("nope"),
            "{args:?}: {doc:#}"
        );
    }
    let doc = fails(d, &["verify", "--integrity", "no%match"], 4);
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("no dataset matches `no%match`"),
        "{doc:#}"
    );
    // `init` where a workspace is: refused; in a new folder: made.
    let doc = fails(d, &["init"], 11);
    assert!(
        doc["hint"].as_str().unwrap().contains("--exists-ok"),
        "{doc:#}"
    );
    let (code, doc) = outcome(&d.join("new-workspace"), &["init"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["created"], true);
    let (code, doc) = outcome(d, &["list"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(doc["datasets"].is_array());
    let (code, _) = outcome(d, &["engine", "list"]);
    assert_eq!(code, 0);
    let (code, _) = outcome(d, &["validate"]);
    assert_eq!(code, 0);
    let (code, _) = outcome(d, &["lineage"]);
    assert_eq!(code, 0);
    let (code, _) = outcome(d, &["upgrade", "--dry-run"]);
    assert_eq!(code, 0);

    // A pull where one derivative fails: the document has the error and every dataset's outcome.
    edit(
        d,
        "datasets/readings.daily.yaml",
        "FROM clean",
        "FROM cleen",
    );
    let doc = fails(d, &["pull", "--all"], 5);
    let datasets = doc["datasets"].as_array().unwrap();
    let state = |name: &str| {
        datasets
            .iter()
            .find(|s| s["dataset"] == name)
            .unwrap_or_else(|| panic!("{name} in {doc:#}"))
            .clone()
    };
    assert_eq!(state("readings")["state"], "upToDate");
    assert!(state("readings")["recordsAdded"].as_u64().unwrap() > 0);
    assert_eq!(state("readings.daily")["state"], "failed");
    assert_eq!(state("readings.daily")["exitCode"], 5);
    assert_eq!(state("readings.hot-days")["state"], "skipped");
    assert!(
        doc["error"].as_str().unwrap().contains("readings.daily"),
        "{doc:#}"
    );
    edit(
        d,
        "datasets/readings.daily.yaml",
        "FROM cleen",
        "FROM clean",
    );
    let (code, doc) = outcome(d, &["pull", "--all"]);
    assert_eq!(code, 0, "{doc:#}");

    // After a pull: the lifecycle commands' refusals and the readers' failures.
    // Without a terminal to ask on, and without --yes: refused, nothing deleted.
    let doc = fails(d, &["delete", "readings.hot-days"], 11);
    assert!(doc["hint"].as_str().unwrap().contains("--yes"), "{doc:#}");
    let doc = fails(d, &["delete", "readings", "--yes"], 11);
    assert!(
        doc["error"].as_str().unwrap().contains("--recursive"),
        "{doc:#}"
    );
    fails(d, &["reset", "readings"], 11);
    fails(d, &["reset", "readings", "--to", "zzzz"], 4);
    fails(d, &["rename", "readings", "stations"], 11);
    fails(d, &["provenance", "readings", "--offset", "999999"], 4);
    fails(d, &["sql", "-c", "SELECT * FROM nope"], 5);
    for args in [
        &["log", "readings"][..],
        &["tail", "readings", "-n", "2"],
        &["verify", "readings.clean"],
        &["sql", "-c", "SELECT count(*) AS n FROM readings"],
    ] {
        let (code, doc) = outcome(d, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }

    // A corrupt stored file: every reader fails with exit 8 in one document.
    let data = d.join(".weir/datasets/readings.clean/data");
    let file = std::fs::read_dir(&data)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&file, bytes).unwrap();
    fails(d, &["verify", "readings.clean"], 8);
    fails(d, &["verify", "--integrity", "readings.clean"], 8);
    fails(d, &["inspect", "schema", "readings.clean"], 8);
    fails(d, &["validate"], 8);
    fails(d, &["tail", "readings.clean", "-n", "1000"], 8);

    // An invalid manifest: exit 3 from every command that reads the workspace.
    edit(d, "datasets/readings.yaml", "kind: Ledger", "kind: Legder");
    for args in [
        &["list"][..],
        &["validate"],
        &["pull", "--all"],
        &["log", "readings"],
        &["upgrade"],
    ] {
        let doc = fails(d, args, 3);
        assert!(
            doc["error"].as_str().unwrap().contains("Legder"),
            "{args:?}: {doc:#}"
        );
    }
}

#[test]
fn a_locked_workspace_is_one_json_document_too() {
    let ws = workspace();
    let d = ws.path();
    // Held the way a `weir` process holds it.
    std::fs::create_dir_all(d.join(".weir")).unwrap();
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(d.join(".weir/weir.lock"))
        .unwrap();
    held.try_lock().unwrap();
    let doc = fails(d, &["pull", "--all"], 9);
    assert!(
        doc["hint"].as_str().unwrap().contains("--wait-lock"),
        "{doc:#}"
    );
    fails(d, &["delete", "stations", "--yes"], 9);
}
