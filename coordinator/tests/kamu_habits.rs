//! kamu's command-line habits, each as kamu means it: `pull --recursive`, `%` patterns, `verify
//! --integrity`, `delete --all` with its confirmation (asked on a terminal, tested in a pseudo-terminal),
//! `log --limit`, `tail -s`, `init`, `inspect schema|query|lineage`, progress bars on a terminal only, and a
//! pull summary whose times add up.
use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use serde_json::Value;

fn json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(dir, &all)).unwrap()
}

fn fails(dir: &Path, args: &[&str], code: i32) -> Output {
    let out = weir(dir).args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "weir {args:?}\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `weir --workspace DIR ARGS` in a pseudo-terminal (stdin, stdout and stderr all on it), answering
/// `answer` to a `[y/N]` question; returns the exit code and everything written to the terminal.
fn in_terminal(dir: &Path, args: &[&str], answer: Option<&str>) -> (i32, String) {
    const PTY: &str = r#"
import os, pty, select, sys
answer = os.environ.get("WEIR_TEST_ANSWER")
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out, sent = b"", False
while True:
    ready, _, _ = select.select([fd], [], [], 60)
    if not ready:
        break
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
    if answer is not None and not sent and b"[y/N]" in out:
        os.write(fd, (answer + "\n").encode())
        sent = True
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", PTY, env!("CARGO_BIN_EXE_weir"), "--workspace"])
        .arg(dir)
        .args(args)
        .env_remove("WEIR_FAULT_AT");
    match answer {
        Some(a) => cmd.env("WEIR_TEST_ANSWER", a),
        None => cmd.env_remove("WEIR_TEST_ANSWER"),
    };
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn pull_names_only_the_datasets_given_unless_recursive_and_takes_patterns() {
    let ws = workspace();
    let d = ws.path();
    ok(d, &["pull", "--all", "--quiet"]);
    add_day(d, 4);
    let daily = head_and_records(d, "readings.daily");
    let hot = head_and_records(d, "readings.hot-days");
    // A derivative alone reads its inputs as they are: nothing new in them, so nothing to do.
    ok(d, &["pull", "readings.daily", "--quiet"]);
    assert_eq!(head_and_records(d, "readings").1, 432);
    assert_eq!(head_and_records(d, "readings.daily"), daily);
    // -r: everything it is computed from, first.
    ok(d, &["pull", "-r", "readings.daily", "--quiet"]);
    assert_eq!(head_and_records(d, "readings").1, 576);
    assert!(head_and_records(d, "readings.daily").1 > daily.1);
    assert_eq!(
        head_and_records(d, "readings.hot-days"),
        hot,
        "not asked for"
    );
    // A pattern: every dataset whose name matches.
    add_day(d, 5);
    let summary = json(d, &["pull", "readings.%", "--quiet"]);
    let pulled: Vec<&str> = summary["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["dataset"].as_str().unwrap())
        .collect();
    assert_eq!(
        pulled,
        ["readings.clean", "readings.daily", "readings.hot-days"]
    );
    assert_eq!(
        head_and_records(d, "readings").1,
        576,
        "`readings` does not match"
    );
    let out = fails(d, &["pull", "nothing.%"], 4);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing.%"));
}

#[test]
fn the_pull_summary_says_wall_time_and_engine_time_so_that_they_add_up() {
    let ws = workspace();
    let d = ws.path();
    let text = ok(d, &["pull", "--all", "--quiet", "--max-concurrency", "2"]);
    assert!(text.contains("(wall time)"), "{text}");
    assert!(
        text.contains("summed over the datasets (up to 2 at once)"),
        "{text}"
    );
    assert!(text.contains("s of it in engines]"), "{text}");
    add_day(d, 4);
    let doc = json(d, &["pull", "--all", "--quiet"]);
    assert_eq!(doc["workers"], 2);
    let mut transactions = 0;
    let mut engines = 0;
    for s in doc["datasets"].as_array().unwrap() {
        let (millis, engine) = (
            s["millis"].as_u64().unwrap(),
            s["engineMillis"].as_u64().unwrap(),
        );
        assert!(engine <= millis, "{s}");
        transactions += millis;
        engines += engine;
    }
    assert_eq!(doc["transactionMillis"], transactions, "{doc:#}");
    assert_eq!(doc["engineMillis"], engines, "{doc:#}");
}

fn add_day(dir: &Path, day: u32) {
    let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        dir.join(format!("data/readings/2024-06-{day:02}.csv")),
        day3.replace("2024-06-03", &format!("2024-06-{day:02}")),
    )
    .unwrap();
}

#[test]
fn verify_integrity_checks_hashes_only_and_reports_a_damaged_file() {
    let ws = workspace();
    let d = ws.path();
    ok(d, &["pull", "--all", "--quiet"]);
    let doc = json(d, &["verify", "--integrity", "--all"]);
    let datasets = doc["datasets"].as_array().unwrap();
    assert_eq!(datasets.len(), 5);
    for v in datasets {
        assert_eq!(v["integrityOnly"], true, "{v}");
        assert!(v.get("steps").is_none(), "nothing replayed: {v}");
        assert!(v["dataFilesChecked"].as_u64().unwrap() >= 1, "{v}");
    }
    let daily = datasets
        .iter()
        .find(|v| v["dataset"] == "readings.daily")
        .unwrap();
    assert!(
        daily["checkpointsChecked"].as_u64().unwrap() >= 1,
        "{daily}"
    );
    let text = ok(d, &["verify", "--integrity", "readings.%"]);
    assert!(text.contains("no transform replayed"), "{text}");
    // A checkpoint truncated: found without replaying anything.
    let checkpoints = d.join(".weir/datasets/readings.daily/checkpoints");
    let file = std::fs::read_dir(&checkpoints)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let out = fails(d, &["verify", "--integrity", "readings.daily"], 8);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&file.file_name().unwrap().to_string_lossy().to_string()),
        "{err}"
    );
}

#[test]
fn delete_says_what_it_removes_asks_on_a_terminal_and_refuses_unasked_without_yes() {
    let ws = workspace();
    let d = ws.path();
    ok(d, &["pull", "--all", "--quiet"]);
    // No terminal, no --yes: refused, nothing removed.
    let out = fails(d, &["delete", "readings.hot-days"], 11);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not confirmed"), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(d.join("datasets/readings.hot-days.yaml").exists());
    assert!(d.join(".weir/datasets/readings.hot-days").exists());

    // On a terminal: the question lists the manifest and the storage folder; "n" keeps everything.
    let (code, shown) = in_terminal(d, &["delete", "readings.hot-days"], Some("n"));
    assert_eq!(code, 11, "{shown}");
    assert!(shown.contains("readings.hot-days.yaml"), "{shown}");
    assert!(
        shown.contains(".weir/datasets/readings.hot-days"),
        "{shown}"
    );
    assert!(shown.contains("[y/N]"), "{shown}");
    assert!(d.join("datasets/readings.hot-days.yaml").exists());
    // "y" deletes.
    let (code, shown) = in_terminal(d, &["delete", "readings.hot-days"], Some("y"));
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("deleted `readings.hot-days`"), "{shown}");
    assert!(!d.join("datasets/readings.hot-days.yaml").exists());
    assert!(!d.join(".weir/datasets/readings.hot-days").exists());

    // A pattern: the matching datasets, downstream first; what reads them outside the pattern refuses it.
    let out = fails(d, &["delete", "readings.c%", "-y"], 11);
    assert!(String::from_utf8_lossy(&out.stderr).contains("readings.daily"));
    let doc = json(d, &["delete", "readings.%", "-y"]);
    assert_eq!(
        doc["deleted"],
        serde_json::json!(["readings.daily", "readings.clean"])
    );
    // --all: everything.
    let doc = json(d, &["delete", "--all", "--yes"]);
    assert_eq!(doc["deleted"].as_array().unwrap().len(), 2, "{doc}");
    assert_eq!(list(d)["datasets"].as_array().unwrap().len(), 0);
}

#[test]
fn log_limit_and_tail_skip() {
    let ws = workspace();
    let d = ws.path();
    ok(d, &["pull", "--all", "--quiet"]);
    let all = json(d, &["log", "readings"]);
    let total = all["blocks"].as_array().unwrap().len();
    assert!(total > 2);
    let two = json(d, &["log", "readings", "--limit", "2"]);
    assert_eq!(two["blocks"].as_array().unwrap().len(), 2);
    assert_eq!(two["blocks"][0], all["blocks"][0], "the newest first");
    assert_eq!(two["totalBlocks"], total);
    let text = ok(d, &["log", "readings", "--limit", "2"]);
    assert!(
        text.contains(&format!("{} older block(s) not shown", total - 2)),
        "{text}"
    );

    let three = json(d, &["tail", "readings", "-n", "3"]);
    let skipped = json(d, &["tail", "readings", "-n", "1", "-s", "2"]);
    assert_eq!(skipped["records"].as_array().unwrap().len(), 1);
    assert_eq!(skipped["records"][0], three["records"][0]);
    let skipped = json(d, &["tail", "readings", "-n", "2", "--skip", "1"]);
    assert_eq!(skipped["records"][0], three["records"][0]);
    assert_eq!(skipped["records"][1], three["records"][1]);
    let none = json(d, &["tail", "readings", "-s", "100000"]);
    assert_eq!(none["records"].as_array().unwrap().len(), 0);
}

#[test]
fn init_makes_a_workspace_with_a_commented_config_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("new");
    let text = ok(&root, &["init"]);
    assert!(text.contains("made a weir workspace"), "{text}");
    assert!(root.join("datasets").is_dir());
    let config = std::fs::read_to_string(root.join("weir.yaml")).unwrap();
    assert!(
        config
            .lines()
            .all(|l| l.trim().is_empty() || l.starts_with('#')),
        "every setting is a comment:\n{config}"
    );
    assert!(config.contains("# storage: .weir"), "{config}");
    // A usable, empty workspace.
    assert_eq!(list(&root)["datasets"].as_array().unwrap().len(), 0);
    ok(&root, &["validate"]);
    // Again: refused, unless --exists-ok; nothing changed either way.
    std::fs::write(root.join("weir.yaml"), "storage: elsewhere\n").unwrap();
    let out = fails(&root, &["init"], 11);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--exists-ok"));
    ok(&root, &["init", "--exists-ok"]);
    assert_eq!(
        std::fs::read_to_string(root.join("weir.yaml")).unwrap(),
        "storage: elsewhere\n"
    );
}

#[test]
fn inspect_shows_schema_queries_and_lineage() {
    let ws = workspace();
    let d = ws.path();
    let before = ok(d, &["inspect", "schema", "readings"]);
    assert!(before.contains("no schema yet"), "{before}");
    ok(d, &["pull", "--all", "--quiet"]);
    let schema = json(d, &["inspect", "schema", "readings"]);
    let columns: Vec<(String, String)> = schema["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["type"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        columns.contains(&("city".into(), "STRING".into())),
        "{columns:?}"
    );
    assert!(
        columns.contains(&("temperature_c".into(), "DOUBLE".into())),
        "{columns:?}"
    );
    assert!(columns.iter().any(|(n, _)| n == "offset"), "{columns:?}");
    assert_eq!(
        schema["schema"]["fields"].as_array().unwrap().len(),
        columns.len()
    );
    let text = ok(d, &["inspect", "schema", "readings"]);
    assert!(
        text.contains("temperature_c") && text.contains("DOUBLE"),
        "{text}"
    );

    let query = ok(d, &["inspect", "query", "readings.daily"]);
    assert!(query.contains("SetTransform"), "{query}");
    assert!(query.contains("date_bin"), "{query}");
    let q = json(d, &["inspect", "query", "readings.daily"]);
    assert_eq!(q["transforms"].as_array().unwrap().len(), 1);
    let root = ok(d, &["inspect", "query", "readings"]);
    assert!(root.contains("root dataset"), "{root}");

    assert_eq!(
        ok(d, &["inspect", "lineage", "readings.daily"]),
        ok(d, &["lineage", "readings.daily"])
    );
    let dot = ok(d, &["--format", "dot", "inspect", "lineage"]);
    assert!(dot.starts_with("digraph"), "{dot}");
}

#[test]
fn verify_shows_progress_on_a_terminal_only() {
    let ws = workspace();
    let d = ws.path();
    ok(d, &["pull", "--all", "--quiet"]);
    let (code, shown) = in_terminal(d, &["verify", "--all"], None);
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("ETA"), "a progress bar with an ETA: {shown}");
    let (code, shown) = in_terminal(d, &["verify", "--all", "--quiet"], None);
    assert_eq!(code, 0, "{shown}");
    assert!(!shown.contains("ETA"), "{shown}");
    let out = weir(d).args(["verify", "--all"]).output().unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("ETA"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn upgrade_shows_its_steps_with_an_eta_on_a_terminal() {
    let ws = workspace();
    let d = ws.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataset/tests/fixtures/pre-odf");
    for dataset in [
        "stations",
        "readings",
        "readings.clean",
        "readings.daily",
        "readings.hot-days",
    ] {
        copy_dir(
            &fixture.join(dataset),
            &d.join(".weir/datasets").join(dataset),
        );
    }
    let (code, shown) = in_terminal(d, &["upgrade", "--dry-run"], None);
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("weir upgrade"), "{shown}");
    assert!(
        shown.contains("/10 steps"),
        "5 datasets read and converted: {shown}"
    );
    assert!(shown.contains("ETA"), "{shown}");
    let out = weir(d).args(["upgrade", "--dry-run"]).output().unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("ETA"));
}
