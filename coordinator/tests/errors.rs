//! What users see when a manifest or a query is wrong.
use crate::common;

use common::*;

#[test]
fn an_invalid_manifest_names_file_line_and_field_and_exits_3() {
    let ws = workspace();
    let f = ws.path().join("datasets/readings.yaml");
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("kind: Ledger", "kind: Legder");
    std::fs::write(&f, &text).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("kind: Legder"))
        .unwrap()
        + 1;
    let out = weir(ws.path()).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("datasets/readings.yaml:{line}:")),
        "{err}"
    );
    assert!(
        err.contains("field `content.metadata[0].merge.kind`"),
        "{err}"
    );
    assert!(err.contains("Legder"), "{err}");
}

#[test]
fn an_unknown_input_dataset_is_pointed_at() {
    let ws = workspace();
    let f = ws.path().join("datasets/readings.clean.yaml");
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("datasetRef: readings", "datasetRef: reading");
    std::fs::write(&f, text).unwrap();
    let out = weir(ws.path()).arg("validate").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("datasets/readings.clean.yaml:10:"), "{err}");
    assert!(err.contains("inputs[0].datasetRef"), "{err}");
}

#[test]
fn a_query_the_engine_rejects_shows_the_sql_error_exits_5_and_commits_nothing() {
    let ws = workspace();
    let f = ws.path().join("datasets/readings.clean.yaml");
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("FROM readings", "FROM readingz");
    std::fs::write(&f, text).unwrap();
    let out = weir(ws.path())
        .args(["pull", "--all", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("readingz"), "{err}");
    assert!(err.contains("rejected the query"), "{err}");
    // The root was ingested; the failed derivative and everything after it have no head.
    assert_eq!(head_and_records(ws.path(), "readings").1, 432);
    assert!(head_and_records(ws.path(), "readings.clean").0.is_null());
    let l = ok(ws.path(), &["list"]);
    assert!(l.contains("readings.hot-days"), "{l}");
}

#[test]
fn an_unknown_dataset_exits_4() {
    let ws = workspace();
    let out = weir(ws.path()).args(["tail", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown dataset `nope`"));
}

#[test]
fn the_conformance_kit_passes_against_the_embedded_engine() {
    let ws = workspace();
    let run = weir(ws.path())
        .args(["conformance", "datafusion"])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{out}\n{err}");
    assert!(out.contains("0 failed, 0 not run: PASSED"), "{out}");
    assert!(out.contains("PASS offsets_and_system_columns"), "{out}");
    assert!(out.contains("PASS raw_query_output_types"), "{out}");
    // The engine's complaints about the kit's bad requests are expected answers, not log noise.
    assert!(!err.contains("ERROR") && !err.contains("WARN"), "{err}");
}

#[test]
fn an_engine_the_runtime_cannot_serve_is_named_with_a_hint() {
    let ws = workspace();
    let out = weir(ws.path())
        .args(["--engine", "docker", "pull", "--all", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    // Every SQL step that needs the engine is named at its position, before anything is pulled.
    for at in [
        "datasets/readings.clean.yaml:13:9: field `content.metadata[0].transform.engine`",
        "datasets/readings.daily.yaml:15:9: field `content.metadata[0].transform.engine`",
        "datasets/readings.hot-days.yaml:14:9: field `content.metadata[0].transform.engine`",
        "datasets/stations.yaml:18:9: field `content.metadata[0].preprocess.engine`",
    ] {
        assert!(err.contains(at), "{at}\nin\n{err}");
    }
    assert!(
        err.contains("set `engines.datafusion.image` (pinned by digest) in weir.yaml"),
        "{err}"
    );
    // Nothing is committed, not even the roots that need no engine.
    assert!(head_and_records(ws.path(), "readings").0.is_null());
    assert!(head_and_records(ws.path(), "readings.clean").0.is_null());
}

#[test]
fn values_clap_can_refuse_are_usage_errors_exit_2() {
    let ws = workspace();
    for args in [
        &["pull", "--max-concurrency", "0"][..],
        &["pull", "--deadline-secs", "0"],
        &["--format", "dot", "list"],
    ] {
        let out = weir(ws.path()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("error:"),
            "{args:?}"
        );
    }
}

#[test]
fn log_weir_names_weirs_own_logs() {
    let ws = workspace();
    let out = weir(ws.path())
        .args(["--log", "weir=info", "pull", "--all", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("transaction committed"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "no colour codes when stderr is not a terminal: {err}"
    );
}

#[test]
fn a_failed_pull_says_each_failure_once_and_stays_structured_in_json() {
    let ws = workspace();
    let manifest = ws.path().join("datasets/readings.clean.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("FROM readings", "FROM readingz")).unwrap();
    let out = weir(ws.path())
        .args(["pull", "--all", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert_eq!(err.matches("readingz").count(), 1, "{err}");
    assert!(
        err.contains("error: 1 dataset(s) failed: readings.clean"),
        "{err}"
    );
    assert!(err.contains("fix the query"), "{err}");

    let out = weir(ws.path())
        .args(["--format", "json", "pull", "--all", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["exitCode"], 5);
    let state = |name: &str| {
        doc["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["dataset"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(state("readings")["state"], "upToDate");
    assert_eq!(state("readings.clean")["state"], "failed");
    assert_eq!(state("readings.clean")["exitCode"], 5);
    assert!(
        state("readings.clean")["error"]
            .as_str()
            .unwrap()
            .contains("readingz")
    );
    assert_eq!(state("readings.daily")["state"], "skipped");
    assert_eq!(state("readings.daily")["skippedBecause"], "readings.clean");
}

/// A query nested past the engine's bound is an invalid query at `validate` and `pull`, never a crash; one
/// within it runs.
#[test]
fn a_deeply_nested_query_is_refused_and_one_within_the_bound_runs() {
    let sum = |terms: usize| vec!["1"; terms].join(" + ");
    let with_column = |dir: &std::path::Path, terms: usize| {
        let file = dir.join("datasets/readings.clean.yaml");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(
            &file,
            text.replace("wind_kmh\n", &format!("wind_kmh, {} AS deep\n", sum(terms))),
        )
        .unwrap();
    };
    // Checked against its inputs once they have records: validate and the pull's ValidateQuery refuse it.
    let ws = common::workspace();
    common::ok(ws.path(), &["pull", "--all", "--quiet"]);
    with_column(ws.path(), 300);
    for args in [&["validate"][..], &["pull", "--all", "--quiet"]] {
        let out = common::weir(ws.path()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {stderr}");
        assert!(stderr.contains("levels deep"), "{args:?}: {stderr}");
    }
    // Within the bound, the same shape runs.
    let ws = common::workspace();
    with_column(ws.path(), 150);
    common::ok(ws.path(), &["pull", "--all", "--quiet"]);
}
