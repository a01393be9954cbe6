//! `weir tail` of a dataset holding one 64 MiB value among small ones: the time to show the last records,
//! which must not grow with the square of a value's size (it was 97 s for a 4 MiB value before `tail`
//! read only what it prints and cut cells at 200 characters).
//!
//! The dataset (a root ingesting one CSV file: 1 000 small rows, then a row whose `text` is 64 MiB, then
//! 10 small rows) is pulled once outside the clock; each sample is one `commands::tail::run` with `-n 20`,
//! exactly what `weir tail DATASET -n 20` does, its output checked to hold the cut value.
//!
//! ```sh
//! cargo xtask bench -p weir-cli     # or: cargo bench -p weir-cli --bench tail_large
//! ```
//! Without `--bench` (as under `cargo test --all-targets`) the value is 1 MiB and one tail runs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::Criterion;
use weir_cli::commands::{self, pull, tail};
use weir_engines::EngineRuntimeKind;

fn workspace(value_bytes: usize) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let root = target.join(format!("weir-bench/tail-{value_bytes}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("datasets")).expect("datasets");
    std::fs::create_dir_all(root.join("data")).expect("data");
    std::fs::write(root.join("weir.yaml"), "storage: .weir\n").expect("weir.yaml");
    std::fs::write(
        root.join("datasets/notes.yaml"),
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: notes\n  kind: Root\n  metadata:\n    \
         - kind: SetPollingSource\n      fetch: { kind: FilesGlob, path: data/*.csv }\n      \
         read: { kind: Csv, header: true, schema: [\"id BIGINT\", \"text STRING\"] }\n      merge: { kind: Append }\n",
    )
    .expect("manifest");
    let mut csv = String::from("id,text\n");
    for i in 0..1_000 {
        let _ = writeln!(csv, "{i},note {i}");
    }
    let _ = writeln!(csv, "1000,{}", "x".repeat(value_bytes));
    for i in 1_001..1_011 {
        let _ = writeln!(csv, "{i},note {i}");
    }
    std::fs::write(root.join("data/notes.csv"), csv).expect("source");
    root
}

fn main() {
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let value_bytes = if smoke { 1 << 20 } else { 64 << 20 };
    let root = workspace(value_bytes);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ctx = commands::open(&root, EngineRuntimeKind::Embedded, Duration::from_secs(600))
        .expect("open the workspace");
    runtime.block_on(async {
        let options = pull::PullOptions {
            all: true,
            recursive: false,
            datasets: Vec::new(),
            max_concurrency: 1,
            dispatcher_plugin: None,
            dispatcher_plugin_options: serde_json::Value::Null,
            quiet: true,
            recompute: false,
            // The sources were written completely before the pull.
            settle: Some(Duration::ZERO),
        };
        pull::run(&ctx, &options).await.expect("pull")
    });
    let once = || {
        let out = runtime
            .block_on(tail::run(&ctx, "notes", 20, 0))
            .expect("tail");
        assert!(out.text.contains("note 1010"), "the last record is shown");
        assert!(out.text.contains("xxx"), "the large value is shown, cut");
        assert!(
            out.text.len() < 64 << 10,
            "cells are cut: {} bytes",
            out.text.len()
        );
    };
    if smoke {
        once();
        return;
    }
    let started = Instant::now();
    once();
    let first = started.elapsed();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("tail");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("64MiB_value", |b| b.iter(once));
    group.finish();
    criterion.final_summary();
    let line = format!(
        "| tail -n 20 of a dataset with a 64 MiB value | first run {:.3} s | criterion: `tail/64MiB_value` |\n",
        first.as_secs_f64()
    );
    println!("{line}");
    if let Some(dir) = std::env::var_os("WEIR_BENCH_REPORT_DIR") {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(PathBuf::from(dir).join("tail.md"), line);
    }
}
