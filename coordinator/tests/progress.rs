//! What a transaction reports while it runs (the feed of `weir pull`'s progress bars), observed through the
//! library: the phases in order, the counts they end with, and the totals an ETA is computed from.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_dataset::progress::{Phase, Progress, Report};
use weir_engines::EngineRuntimeKind;
use weir_transaction::TxOutcome;

/// Runs `dataset`'s transactions until it is up to date; returns every report and the records committed.
async fn pull(ctx: &weir_transaction::Context, dataset: &str) -> (Vec<Report>, u64) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut ctx = ctx.with_progress(Progress::new(move |r| sink.lock().unwrap().push(r)));
    // The workspace copy is new: no settle time.
    ctx.source_settle = Some(Duration::ZERO);
    let mut records = 0;
    while let TxOutcome::Committed { records: r, .. } = ctx.run_once(dataset).await.unwrap() {
        records += r;
    }
    let reports = seen.lock().unwrap().clone();
    (reports, records)
}

fn phases(reports: &[Report]) -> Vec<Phase> {
    let mut out: Vec<Phase> = Vec::new();
    for r in reports {
        if out.last() != Some(&r.phase) {
            out.push(r.phase);
        }
    }
    out
}

fn last_of(reports: &[Report], phase: Phase) -> Report {
    reports
        .iter()
        .rev()
        .find(|r| r.phase == phase && (r.rows.is_some() || r.bytes.is_some()))
        .cloned()
        .unwrap_or_else(|| panic!("no counts for {phase}: {reports:?}"))
}

#[tokio::test]
async fn a_root_reports_ingest_with_the_source_size_and_a_derivative_every_phase_with_its_records()
{
    let ws = common::workspace();
    let ctx = weir_cli::commands::open(
        ws.path(),
        EngineRuntimeKind::Embedded,
        Duration::from_secs(120),
    )
    .unwrap();

    // A CSV root: the source file is hashed before it is read (its snapshot) and after (unchanged?), each
    // counting bytes of its size; its ingest counts bytes of the source file (so an ETA is known) and ends
    // at its size.
    let (reports, records) = pull(&ctx, "readings").await;
    assert!(records > 0);
    assert_eq!(
        phases(&reports)[..4],
        [Phase::Fetch, Phase::Ingest, Phase::Check, Phase::Commit],
        "{reports:?}"
    );
    for (phase, detail) in [
        (Phase::Fetch, "snapshot"),
        (Phase::Check, "source unchanged"),
    ] {
        let hashed = last_of(&reports, phase);
        assert_eq!(hashed.detail.as_deref(), Some(detail), "{hashed:?}");
        let size = hashed.total_bytes.expect("the file's size");
        assert!(size > 0);
        assert_eq!(hashed.done_of(), Some((size, size)), "{hashed:?}");
    }
    let ingest = last_of(&reports, Phase::Ingest);
    let source_bytes: u64 = std::fs::read_dir(ws.path().join("data/readings"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect::<Vec<_>>()
        .into_iter()
        .max()
        .unwrap();
    let total = ingest.total_bytes.expect("a local file's size is known");
    assert!(total > 0 && total <= source_bytes, "{ingest:?}");
    assert_eq!(
        ingest.bytes,
        Some(total),
        "the last report has read the whole file"
    );
    assert_eq!(ingest.done_of(), Some((total, total)));

    // A derivative: inputs staged, the engine's own Progress messages, the output checked, the commit.
    let (reports, records) = pull(&ctx, "readings.clean").await;
    assert!(records > 0);
    assert_eq!(
        phases(&reports),
        [Phase::Stage, Phase::Engine, Phase::Check, Phase::Commit],
        "{reports:?}"
    );
    let engine: Vec<&Report> = reports
        .iter()
        .filter(|r| r.phase == Phase::Engine)
        .collect();
    assert!(
        engine.iter().any(|r| r
            .detail
            .as_deref()
            .is_some_and(|d| d.starts_with("planning"))),
        "the engine's phases reach the report: {engine:?}"
    );
    assert!(
        engine
            .iter()
            .all(|r| r.total_rows.is_some() || r.detail.is_none())
    );
    let check = last_of(&reports, Phase::Check);
    assert_eq!(check.rows, Some(records));
    assert_eq!(check.total_rows, Some(records));
}

#[tokio::test]
async fn a_preprocessed_root_reports_reading_the_source_then_the_engine() {
    let ws = common::workspace();
    let ctx = weir_cli::commands::open(
        ws.path(),
        EngineRuntimeKind::Embedded,
        Duration::from_secs(120),
    )
    .unwrap();
    let (reports, records) = pull(&ctx, "stations").await;
    assert!(records > 0);
    let p = phases(&reports);
    assert_eq!(
        p[..6],
        [
            Phase::Fetch,
            Phase::Ingest,
            Phase::Engine,
            Phase::Ingest,
            Phase::Check,
            Phase::Commit
        ],
        "{reports:?}"
    );
    let engine = reports.iter().find(|r| r.phase == Phase::Engine).unwrap();
    assert_eq!(engine.detail.as_deref(), Some("preprocess"));
    assert!(engine.total_rows.is_some_and(|n| n > 0), "{engine:?}");
}

#[tokio::test]
async fn a_pushed_file_reports_its_ingest_with_its_size_then_the_check_that_it_is_unchanged() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    std::fs::write(
        ws.path().join("datasets/p.yaml"),
        "kind: DatasetSnapshot
version: 1
content:
  name: p
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read: { kind: Csv, header: true, schema: [\"at TIMESTAMP\", \"id BIGINT\"] }
      merge: { kind: Append }
    - kind: SetVocab
      eventTimeColumn: at
",
    )
    .unwrap();
    let file = ws.path().join("p.csv");
    let csv: String = (0..20_000)
        .map(|i| format!("2024-01-01T00:00:00Z,{i}\n"))
        .collect();
    std::fs::write(&file, format!("at,id\n{csv}")).unwrap();
    let size = std::fs::metadata(&file).unwrap().len();
    let ctx = weir_cli::commands::open(
        ws.path(),
        EngineRuntimeKind::Embedded,
        Duration::from_secs(120),
    )
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let ctx = ctx.with_progress(Progress::new(move |r| sink.lock().unwrap().push(r)));
    let m = &ctx.workspace.datasets["p"];
    let snapshot = weir_ingest::source_file::FileSnapshot::take(&file, "p.csv").unwrap();
    let content = snapshot.sha3;
    let pushed = weir_transaction::Pushed {
        source_name: "default".into(),
        read: m.push_sources[0].read.clone(),
        file: weir_ingest::fetch::Fetched {
            name: "p.csv".into(),
            path: file.clone(),
            size,
            state: weir_odf::SourceState {
                source_name: "default".into(),
                kind: String::new(),
                value: String::new(),
            },
        },
        snapshot: Some(snapshot),
        content,
        again: false,
    };
    let outcome = ctx.ingest_pushed("p", pushed).await.unwrap();
    assert!(matches!(
        outcome,
        weir_transaction::PushOutcome::Ingested(TxOutcome::Committed {
            records: 20_000,
            ..
        })
    ));
    let reports = seen.lock().unwrap().clone();
    assert_eq!(
        phases(&reports),
        [Phase::Ingest, Phase::Check, Phase::Commit],
        "{reports:?}"
    );
    let ingest = last_of(&reports, Phase::Ingest);
    assert_eq!(ingest.rows, Some(20_000));
    assert_eq!(ingest.done_of(), Some((size, size)), "{ingest:?}");
    let check = last_of(&reports, Phase::Check);
    assert_eq!(check.done_of(), Some((size, size)), "{check:?}");
}
