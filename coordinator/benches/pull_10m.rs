//! End-to-end `weir pull` of a root dataset and a chain of three derivatives over 10 million rows, on the
//! embedded engine: the pull's wall time set against the time spent inside the engine, in the same runs.
//!
//! The workspace (generated once and cached under `target/weir-bench/coordinator/`):
//!
//! ```text
//! readings            root: one Parquet file of N readings over one week (Append merge, no preprocess)
//!  └ readings.converted   map:    observed_at AS event_time, temperature_f = temperature_c * 9 / 5 + 32
//!     └ readings.valid        filter: temperature_c IS NOT NULL AND humidity_pct < 95
//!        └ readings.hourly        tumbling one-hour window per city: count, avg, min, max
//! ```
//!
//! Every timed run pulls everything into a fresh storage folder (the previous one is removed outside the
//! clock), through the coordinator's library: `commands::open` and `commands::pull::run`, exactly what
//! `weir pull --all --engine embedded --max-concurrency 1` does. The engine's time is the pull summary's
//! `engineMillis` (wall time inside ExecuteTransform / preprocess calls); the coordinator's own time is
//! the rest: reading the source, writing and hashing data slices, staging inputs, reading back and checking
//! the engine's output, chains and commits, the gen-stage pipeline. After every run the record counts of
//! all four datasets are checked, so a pull that loses or duplicates records fails the bench.
//!
//! ```sh
//! cargo xtask bench -p weir-cli            # N = 10 000 000 (WEIR_BENCH_ROWS overrides, --quick: N / 10)
//! ```
//!
//! Before every timed pull, outside its clock, the **floor** runs: the root's source file read and written
//! again as one Snappy Parquet file through arrow/parquet directly, the least any ingest of those rows costs
//! on this machine. Each pull's summary also gives the time every dataset spent per phase (fetch, ingest,
//! stage, engine, check, commit: `phaseMillis` of `weir pull --format json`).
//!
//! **Memory curve**: with `WEIR_BENCH_CURVE=1000000,10000000,100000000` (rows, comma-separated), each size
//! is pulled once more in a child process of its own (this binary, `WEIR_BENCH_CHILD=N`), whose peak RSS
//! (`VmHWM`) is the point of the curve: the child does nothing but that one pull, so its peak is the pull's.
//! The curve is drawn as `pull_memory.svg` next to the figures.
//!
//! At the end the figures table for `docs/benchmarks.md` is printed, and written to
//! `$WEIR_BENCH_REPORT_DIR/coordinator.md` when that is set (`cargo xtask bench` sets it). Without
//! `--bench` (as under `cargo test --all-targets`) the pull runs once over 20 000 rows, as a smoke test.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use criterion::{Criterion, SamplingMode, Throughput};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use weir_cli::commands::{self, list, pull};
use weir_engines::EngineRuntimeKind;

/// Rows of the smoke run.
const SMOKE_ROWS: u64 = 20_000;
/// Rows of a full run.
const DEFAULT_ROWS: u64 = 10_000_000;
/// Rows per generated record batch (and Parquet row group).
const BATCH: u64 = 65_536;
const STATIONS: u64 = 1_000;
const CITIES: u64 = 100;
/// 2024-06-01T00:00:00Z.
const START_MS: i64 = 1_717_200_000_000;
const WEEK_MS: u64 = 7 * 24 * 3_600_000;
/// The derivatives, in chain order.
const DERIVATIVES: [&str; 3] = ["readings.converted", "readings.valid", "readings.hourly"];

fn rows(smoke: bool) -> u64 {
    if smoke {
        return SMOKE_ROWS;
    }
    if let Ok(raw) = std::env::var("WEIR_BENCH_ROWS") {
        match raw.replace('_', "").parse::<u64>() {
            Ok(rows) if rows > 0 => return rows,
            _ => panic!("WEIR_BENCH_ROWS must be a positive integer, got {raw:?}"),
        }
    }
    if std::env::var_os("WEIR_BENCH_QUICK").is_some() {
        DEFAULT_ROWS / 10
    } else {
        DEFAULT_ROWS
    }
}

/// The source spans one week whatever its size: row `i` of `rows` is observed at
/// `START + i * WEEK / rows` (every 60 ms at 10M rows), by station `i % 1000` in city `i % 100`.
fn observed_at(i: u64, rows: u64) -> i64 {
    START_MS + (u128::from(i) * u128::from(WEEK_MS) / u128::from(rows)) as i64
}

/// A reading in 97 has no temperature, and humidity runs over 0..100, so the filter keeps a known share.
fn temperature_missing(i: u64) -> bool {
    i.is_multiple_of(97)
}

fn humidity(i: u64) -> i64 {
    ((i * 31) % 100) as i64
}

fn valid(i: u64) -> bool {
    !temperature_missing(i) && humidity(i) < 95
}

/// Records the filter keeps out of `rows`, and the rows of the hourly window: one per city and hour,
/// except the last hour, which stays open in the window's checkpoint (the watermark is inside it).
fn expected_records(rows: u64) -> (u64, u64) {
    let hour = |i| observed_at(i, rows).div_euclid(3_600_000);
    let mut kept = 0;
    let mut windows = std::collections::HashSet::new();
    let mut last_hour = i64::MIN;
    for i in (0..rows).filter(|&i| valid(i)) {
        kept += 1;
        windows.insert((hour(i), i % CITIES));
        last_hour = last_hour.max(hour(i));
    }
    let closed = windows.iter().filter(|(h, _)| *h < last_hour).count() as u64;
    (kept, closed)
}

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("weir-bench/coordinator")
}

/// The workspace for `rows` records: manifests rewritten every time, the source generated once.
fn workspace(rows: u64) -> PathBuf {
    let root = bench_dir().join(format!("workspace-{rows}"));
    let datasets = root.join("datasets");
    std::fs::create_dir_all(&datasets).expect("datasets folder");
    std::fs::create_dir_all(root.join("data")).expect("data folder");
    std::fs::write(root.join("weir.yaml"), "storage: .weir\n").expect("weir.yaml");
    for (name, text) in manifests() {
        std::fs::write(datasets.join(format!("{name}.yaml")), text).expect("manifest");
    }
    let source = root.join("data/readings.parquet");
    if !source.exists() {
        write_source(&source, rows);
    }
    root
}

fn manifests() -> [(&'static str, String); 4] {
    let derivative = |name: &str, input: &str, alias: &str, query: &str| {
        format!(
            "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: Derivative\n  metadata:\n    \
             - kind: SetTransform\n      inputs:\n        - datasetRef: {input}\n          alias: {alias}\n      \
             transform:\n        kind: Sql\n        engine: datafusion\n        query: >-\n          {query}\n"
        )
    };
    [
        (
            "readings",
            "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: readings\n  kind: Root\n  metadata:\n    \
             - kind: SetPollingSource\n      fetch: { kind: FilesGlob, path: data/*.parquet }\n      \
             read: { kind: Parquet }\n      merge: { kind: Append }\n    \
             - kind: SetVocab\n      eventTimeColumn: observed_at\n"
                .to_owned(),
        ),
        (
            DERIVATIVES[0],
            derivative(
                DERIVATIVES[0],
                "readings",
                "readings",
                "SELECT observed_at AS event_time, station_id, city, temperature_c, \
                 temperature_c * 9.0 / 5.0 + 32.0 AS temperature_f, humidity_pct FROM readings",
            ),
        ),
        (
            DERIVATIVES[1],
            derivative(
                DERIVATIVES[1],
                DERIVATIVES[0],
                "converted",
                "SELECT event_time, station_id, city, temperature_c, temperature_f, humidity_pct \
                 FROM converted WHERE temperature_c IS NOT NULL AND humidity_pct < 95",
            ),
        ),
        (
            DERIVATIVES[2],
            derivative(
                DERIVATIVES[2],
                DERIVATIVES[1],
                "valid",
                "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, city, \
                 count(*) AS readings, avg(temperature_c) AS avg_temperature_c, \
                 min(temperature_c) AS min_temperature_c, max(temperature_f) AS max_temperature_f \
                 FROM valid GROUP BY 1, city",
            ),
        ),
    ]
}

/// Writes the source file (Snappy Parquet) through a temporary name, so a crash leaves no partial file.
fn write_source(path: &Path, rows: u64) {
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "observed_at",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("station_id", DataType::Utf8, false),
        Field::new("city", DataType::Utf8, false),
        Field::new("temperature_c", DataType::Float64, true),
        Field::new("humidity_pct", DataType::Int64, false),
        Field::new("wind_kmh", DataType::Float64, false),
    ]));
    let partial = path.with_extension("partial");
    let file = std::fs::File::create(&partial).expect("source file");
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(properties)).expect("writer");
    let stations: Vec<String> = (0..STATIONS).map(|s| format!("st-{s:04}")).collect();
    let cities: Vec<String> = (0..CITIES).map(|c| format!("city-{c:03}")).collect();
    for first in (0..rows).step_by(BATCH as usize) {
        let range = first..(first + BATCH).min(rows);
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(
                    TimestampMillisecondArray::from_iter_values(
                        range.clone().map(|i| observed_at(i, rows)),
                    )
                    .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from_iter_values(
                    range
                        .clone()
                        .map(|i| stations[(i % STATIONS) as usize].as_str()),
                )),
                Arc::new(StringArray::from_iter_values(
                    range
                        .clone()
                        .map(|i| cities[(i % CITIES) as usize].as_str()),
                )),
                Arc::new(Float64Array::from_iter(range.clone().map(|i| {
                    (!temperature_missing(i)).then(|| ((i * 7919) % 400) as f64 / 10.0 - 5.0)
                }))),
                Arc::new(Int64Array::from_iter_values(range.clone().map(humidity))),
                Arc::new(Float64Array::from_iter_values(
                    range.map(|i| ((i * 104_729) % 600) as f64 / 10.0),
                )),
            ],
        )
        .expect("batch");
        writer.write(&batch).expect("write");
    }
    writer.close().expect("close");
    std::fs::rename(&partial, path).expect("rename");
}

/// One timed pull.
#[derive(Debug, Clone)]
struct Run {
    /// Wall time of `open` + `pull::run`.
    total: Duration,
    /// The pull summary's total `engineMillis`.
    engine: Duration,
    /// Per dataset, in chain order.
    datasets: Vec<DatasetRun>,
    /// The floor measured just before this pull.
    floor: Duration,
}

/// The phases of a transaction, as `phaseMillis` names them.
const PHASES: [&str; 6] = ["fetch", "ingest", "stage", "engine", "check", "commit"];

/// One dataset's share of a timed pull (the pull summary's figures).
#[derive(Debug, Clone)]
struct DatasetRun {
    name: String,
    transactions: u64,
    total: Duration,
    engine: Duration,
    /// Time per phase, in the order of [`PHASES`].
    phases: [Duration; 6],
}

/// The floor: the root's source read and written again as one Snappy Parquet file by arrow/parquet alone.
fn floor_once(source: &Path) -> Duration {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let out = source.with_extension("floor.parquet");
    let started = Instant::now();
    let file = std::fs::File::open(source).expect("source");
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("source footer")
        .with_batch_size(8192)
        .build()
        .expect("reader");
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut writer = None;
    for batch in reader {
        let batch = batch.expect("batch");
        let w = writer.get_or_insert_with(|| {
            ArrowWriter::try_new(
                std::fs::File::create(&out).expect("floor file"),
                batch.schema(),
                Some(properties.clone()),
            )
            .expect("writer")
        });
        w.write(&batch).expect("write");
    }
    if let Some(w) = writer {
        w.close().expect("close");
    }
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&out);
    elapsed
}

/// One `weir pull --all` into a fresh storage folder; checks the record counts afterwards.
fn pull_once(
    runtime: &tokio::runtime::Runtime,
    root: &Path,
    rows: u64,
    expected: (u64, u64),
) -> Run {
    let storage = root.join(".weir");
    if storage.exists() {
        std::fs::remove_dir_all(&storage).expect("remove the previous storage");
    }
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
    let floor = floor_once(&root.join("data/readings.parquet"));
    let started = Instant::now();
    let output = runtime.block_on(async {
        let ctx = commands::open(root, EngineRuntimeKind::Embedded, Duration::from_secs(3600))
            .expect("open the workspace");
        pull::run(&ctx, &options).await.expect("pull")
    });
    let total = started.elapsed();

    let ms = |v: &serde_json::Value| Duration::from_millis(v.as_u64().expect("milliseconds"));
    let summary = &output.json;
    let mut datasets = Vec::new();
    for item in summary["datasets"].as_array().expect("datasets") {
        let phase =
            |p: &str| Duration::from_millis(item["phaseMillis"][p].as_u64().unwrap_or_default());
        datasets.push(DatasetRun {
            name: item["dataset"].as_str().expect("name").to_owned(),
            transactions: item["transactions"].as_u64().expect("transactions"),
            total: ms(&item["millis"]),
            engine: ms(&item["engineMillis"]),
            phases: PHASES.map(phase),
        });
    }
    check_records(runtime, root, rows, expected);
    Run {
        total,
        engine: ms(&summary["engineMillis"]),
        datasets,
        floor,
    }
}

fn check_records(runtime: &tokio::runtime::Runtime, root: &Path, rows: u64, expected: (u64, u64)) {
    let listed = runtime.block_on(async {
        let ctx = commands::open(root, EngineRuntimeKind::Embedded, Duration::from_secs(60))
            .expect("open the workspace");
        list::run(&ctx).await.expect("list")
    });
    let records = |name: &str| {
        listed.json["datasets"]
            .as_array()
            .expect("datasets")
            .iter()
            .find(|d| d["name"] == name)
            .and_then(|d| d["records"].as_u64())
            .unwrap_or_else(|| panic!("no record count for {name}"))
    };
    assert_eq!(records("readings"), rows, "root records");
    assert_eq!(records(DERIVATIVES[0]), rows, "map records");
    assert_eq!(records(DERIVATIVES[1]), expected.0, "filter records");
    assert_eq!(records(DERIVATIVES[2]), expected.1, "window records");
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The figures table: medians over every timed run (criterion's warm-up runs included).
fn table(runs: &[Run], rows: u64) -> String {
    let secs =
        |f: &dyn Fn(&Run) -> Duration| median(runs.iter().map(|r| f(r).as_secs_f64()).collect());
    let total = secs(&|r| r.total);
    let engine = secs(&|r| r.engine);
    let own = secs(&|r| r.total.saturating_sub(r.engine));
    let ratio = median(
        runs.iter()
            .map(|r| {
                r.total.saturating_sub(r.engine).as_secs_f64() / r.engine.as_secs_f64().max(1e-9)
            })
            .collect(),
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| rows | runs | total | engines | coordinator (total - engines) | coordinator / engines | rows/s (end to end) |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| {rows} | {} | {total:.2} s | {engine:.2} s | {own:.2} s | {ratio:.2}x | {:.2} M |",
        runs.len(),
        rows as f64 / total / 1e6,
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| dataset | transactions | total | engine | coordinator | coordinator / engine |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    let Some(first) = runs.first() else {
        return out;
    };
    for (
        i,
        DatasetRun {
            name, transactions, ..
        },
    ) in first.datasets.iter().enumerate()
    {
        let pick = |f: &dyn Fn(&DatasetRun) -> f64| {
            median(
                runs.iter()
                    .filter_map(|r| r.datasets.get(i))
                    .map(f)
                    .collect(),
            )
        };
        let total = pick(&|d| d.total.as_secs_f64());
        let engine = pick(&|d| d.engine.as_secs_f64());
        let own = pick(&|d| d.total.saturating_sub(d.engine).as_secs_f64());
        let ratio = if engine > 0.0 {
            format!("{:.2}x", own / engine)
        } else {
            "- (no engine call)".to_owned()
        };
        let _ = writeln!(
            out,
            "| {name} | {transactions} | {total:.2} s | {engine:.2} s | {own:.2} s | {ratio} |"
        );
    }

    // Where each dataset's time went, by phase.
    let _ = writeln!(out);
    let _ = writeln!(out, "| dataset | {} |", PHASES.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(PHASES.len()));
    for (i, DatasetRun { name, .. }) in first.datasets.iter().enumerate() {
        let cells: Vec<String> = (0..PHASES.len())
            .map(|p| {
                let v = median(
                    runs.iter()
                        .filter_map(|r| r.datasets.get(i))
                        .map(|d| d.phases[p].as_secs_f64())
                        .collect(),
                );
                format!("{v:.2} s")
            })
            .collect();
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    }

    // The root's ingest against the floor, pull by pull.
    let floor = secs(&|r| r.floor);
    let root = median(
        runs.iter()
            .filter_map(|r| r.datasets.first())
            .map(|d| d.total.as_secs_f64())
            .collect(),
    );
    let ratio = median(
        runs.iter()
            .filter_map(|r| {
                r.datasets
                    .first()
                    .map(|d| d.total.as_secs_f64() / r.floor.as_secs_f64().max(1e-9))
            })
            .collect(),
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| root ingest | floor (arrow/parquet read + write) | ingest / floor | ingest rows/s | floor rows/s |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| {root:.2} s | {floor:.2} s | {ratio:.2}x | {:.2} M | {:.2} M |",
        rows as f64 / root / 1e6,
        rows as f64 / floor / 1e6
    );
    out
}

/// One pull of `rows` in a child process of this binary; returns its peak RSS in MiB.
fn child_peak_rss(rows: u64) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new(exe)
        .arg("--bench")
        .env("WEIR_BENCH_CHILD", rows.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("the {rows}-row child pull failed: {:?}", out.status);
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("peak_rss_mib="))
        .and_then(|v| v.trim().parse().ok())
}

/// Draws rows against peak RSS as an SVG file.
fn plot_memory(points: &[(u64, f64)], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_rows = points.iter().map(|p| p.0).max().unwrap_or(1) as f64 / 1e6;
    let max_mib = points.iter().map(|p| p.1).fold(1024.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "weir pull: peak RSS against rows pulled",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_rows * 1.05, 0f64..max_mib)?;
    chart
        .configure_mesh()
        .x_desc("rows (millions)")
        .y_desc("peak RSS (MiB)")
        .draw()?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1024.0), (max_rows * 1.05, 1024.0)],
            RED.stroke_width(1),
        ))?
        .label("1 GiB target")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
    let series: Vec<(f64, f64)> = points.iter().map(|&(r, m)| (r as f64 / 1e6, m)).collect();
    chart
        .draw_series(LineSeries::new(series.clone(), BLUE.stroke_width(2)))?
        .label("peak RSS")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
    chart.draw_series(series.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))?;
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`, Linux), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(child) = std::env::var_os("WEIR_BENCH_CHILD") {
        // One point of the memory curve: one pull, then this process's peak RSS.
        let rows: u64 = child
            .to_string_lossy()
            .parse()
            .expect("WEIR_BENCH_CHILD rows");
        let root = workspace(rows);
        let run = pull_once(&runtime, &root, rows, expected_records(rows));
        println!("total_secs={:.2}", run.total.as_secs_f64());
        if let Some(peak) = peak_rss_mib() {
            println!("peak_rss_mib={peak:.0}");
        }
        return;
    }
    let rows = rows(smoke);
    let root = workspace(rows);
    let expected = expected_records(rows);
    let runs: Mutex<Vec<Run>> = Mutex::new(Vec::new());

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("pull");
    // One pull lasts many seconds: the fewest samples criterion allows, one pull per sample.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(rows));
    group.bench_function(format!("root_and_3_derivatives/{rows}"), |bencher| {
        bencher.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let run = pull_once(&runtime, &root, rows, expected);
                total += run.total;
                runs.lock().unwrap_or_else(|p| p.into_inner()).push(run);
            }
            total
        })
    });
    group.finish();
    criterion.final_summary();

    let runs = runs.into_inner().unwrap_or_else(|p| p.into_inner());
    if smoke || runs.is_empty() {
        return;
    }
    let mut table = table(&runs, rows);
    if let Some(peak) = peak_rss_mib() {
        let _ = writeln!(
            table,
            "\npeak RSS of the bench process over all runs (VmHWM): {peak:.0} MiB"
        );
    }
    let curve: Vec<u64> = std::env::var("WEIR_BENCH_CURVE")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|n| n.trim().replace('_', "").parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if !curve.is_empty() {
        let points: Vec<(u64, f64)> = curve
            .iter()
            .filter_map(|&n| child_peak_rss(n).map(|m| (n, m)))
            .collect();
        let _ = writeln!(table, "\n| rows | peak RSS of a process doing one pull |");
        let _ = writeln!(table, "|---:|---:|");
        for (n, m) in &points {
            let _ = writeln!(table, "| {n} | {m:.0} MiB |");
        }
        let dir = std::env::var_os("WEIR_BENCH_REPORT_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(bench_dir);
        let _ = std::fs::create_dir_all(&dir);
        let svg = dir.join("pull_memory.svg");
        match plot_memory(&points, &svg) {
            Ok(()) => println!("memory curve drawn in {}", svg.display()),
            Err(e) => eprintln!("cannot draw {}: {e}", svg.display()),
        }
    }
    println!("\n## coordinator figures (medians of the timed runs)\n\n{table}");
    if let Some(dir) = std::env::var_os("WEIR_BENCH_REPORT_DIR") {
        let dir = PathBuf::from(dir);
        let path = dir.join("coordinator.md");
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &table)) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(error) => eprintln!("cannot write {}: {error}", path.display()),
        }
    }
}
