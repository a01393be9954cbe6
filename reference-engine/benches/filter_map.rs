//! A filter/map transform, Parquet to Parquet: the engine (ExecuteTransform with all its ODF rules)
//! against the same SQL run directly through DataFusion on the same file, in the same run: each timed
//! iteration runs the engine and then the direct query, back to back.
//!
//! `cargo bench -p weir-reference-engine --bench filter_map` uses 10 million rows (generated once and
//! cached under `target/weir-bench/`); under `cargo test` the benchmark runs once on 100 000 rows.
//! At the end the figures table for `docs/benchmarks.md` (medians of every timed pair, and the median of
//! the per-pair ratios) is printed, and written to `$WEIR_BENCH_REPORT_DIR/reference-engine.md` when that is set
//! (`cargo xtask bench` sets it).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use weir_reference_engine::arrow::array::{
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use weir_reference_engine::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use weir_reference_engine::parquet::arrow::ArrowWriter;
use weir_reference_engine::parquet::basic::{Compression, Encoding};
use weir_reference_engine::parquet::file::properties::WriterProperties;
use weir_reference_engine::parquet::schema::types::ColumnPath;
use weir_reference_engine::{
    DatasetId, DatasetVocabulary, NoProgress, OffsetInterval, ReferenceEngine, Transform,
    TransformRequest, TransformRequestInput, TransformSql,
};

const QUERY: &str = "SELECT event_time, city, population * 2 AS population, population % 7 AS bucket \
                     FROM input WHERE population % 3 <> 0";
const BATCH: usize = 65_536;

fn rows() -> usize {
    if std::env::args().any(|arg| arg == "--bench") {
        10_000_000
    } else {
        100_000
    }
}

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("weir-bench/reference-engine")
}

/// The input file with `rows` records, generated once, written as the engine writes a data slice
/// (Snappy; the system columns PLAIN without a dictionary), since that is what a derivative's input
/// is.
fn input_file(rows: usize) -> PathBuf {
    let path = bench_dir().join(format!("input-{rows}-v3.parquet"));
    if path.exists() {
        return path;
    }
    std::fs::create_dir_all(bench_dir()).expect("bench directory");
    let time = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", time.clone(), false),
        Field::new("event_time", time, false),
        Field::new("city", DataType::Utf8, false),
        Field::new("population", DataType::Int64, false),
    ]));
    let partial = path.with_extension("partial");
    let file = std::fs::File::create(&partial).expect("input file");
    let mut properties = WriterProperties::builder().set_compression(Compression::SNAPPY);
    for column in ["offset", "op", "system_time"] {
        let column = ColumnPath::from(column);
        properties = properties
            .set_column_dictionary_enabled(column.clone(), false)
            .set_column_encoding(column, Encoding::PLAIN);
    }
    let properties = properties.build();
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(properties)).expect("writer");
    let cities: Vec<String> = (0..100).map(|i| format!("city-{i:03}")).collect();
    for start in (0..rows).step_by(BATCH) {
        let end = (start + BATCH).min(rows);
        let offsets = start as i64..end as i64;
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(offsets.clone())),
                Arc::new(Int32Array::from_value(0, end - start)),
                Arc::new(
                    TimestampMillisecondArray::from_value(0, end - start).with_timezone("UTC"),
                ),
                Arc::new(
                    TimestampMillisecondArray::from_iter_values(offsets.clone().map(|o| o * 1000))
                        .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from_iter_values(
                    offsets.clone().map(|o| cities[(o % 100) as usize].as_str()),
                )),
                Arc::new(Int64Array::from_iter_values(
                    offsets.map(|o| (o * 7919) % 1_000_003),
                )),
            ],
        )
        .expect("batch");
        writer.write(&batch).expect("write");
    }
    writer.close().expect("close");
    std::fs::rename(&partial, &path).expect("rename");
    path
}

fn request(input: &Path, rows: usize, out: &Path) -> TransformRequest {
    let input = input.display().to_string();
    TransformRequest {
        dataset_id: DatasetId::from_key([1; 32]),
        dataset_alias: "bench.out".into(),
        system_time: Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap(),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new("datafusion", QUERY)),
        query_inputs: vec![TransformRequestInput {
            dataset_id: DatasetId::from_key([2; 32]),
            dataset_alias: "bench.in".into(),
            query_alias: "input".into(),
            vocab: DatasetVocabulary::default(),
            offset_interval: Some(OffsetInterval {
                start: 0,
                end: rows as u64 - 1,
            }),
            data_paths: vec![input.clone()],
            schema_file: input,
            explicit_watermarks: Vec::new(),
        }],
        next_offset: 0,
        prev_checkpoint_path: None,
        new_checkpoint_path: out.join("checkpoint").display().to_string(),
        new_data_path: out.join("data").display().to_string(),
    }
}

/// The same SQL straight through DataFusion (default session), written as one Snappy Parquet file.
async fn datafusion_direct(input: &Path, out: &Path) {
    use weir_reference_engine::datafusion::config::TableParquetOptions;
    use weir_reference_engine::datafusion::dataframe::DataFrameWriteOptions;
    use weir_reference_engine::datafusion::prelude::{ParquetReadOptions, SessionContext};
    let ctx = SessionContext::new();
    ctx.register_parquet(
        "input",
        input.to_str().expect("utf-8 path"),
        ParquetReadOptions::default(),
    )
    .await
    .expect("register");
    let mut options = TableParquetOptions::default();
    options.global.compression = Some("snappy".to_owned());
    ctx.sql(QUERY)
        .await
        .expect("plan")
        .write_parquet(
            out.join("direct.parquet").to_str().expect("utf-8 path"),
            DataFrameWriteOptions::new().with_single_file_output(true),
            Some(options),
        )
        .await
        .expect("write");
}

/// Every timed pair, in seconds: `engine[i]` and `direct[i]` ran back to back.
#[derive(Debug, Default)]
struct Runs {
    engine: Vec<f64>,
    direct: Vec<f64>,
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The figures table: medians of the timed pairs (criterion's warm-up runs included), and the engine /
/// direct ratio as the median of the per-pair ratios (each pair ran back to back, under the same load).
fn table(runs: &Runs, rows: usize) -> Option<String> {
    let engine = median(&runs.engine)?;
    let direct = median(&runs.direct)?;
    let ratios: Vec<f64> = runs
        .engine
        .iter()
        .zip(&runs.direct)
        .map(|(engine, direct)| engine / direct)
        .collect();
    let ratio = median(&ratios)?;
    let lowest = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = ratios.iter().copied().fold(0.0, f64::max);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| rows | pairs | reference engine | rows/s | DataFusion direct | rows/s | engine / direct (median of pairs) | lowest, highest | target |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let _ = writeln!(
        out,
        "| {rows} | {} | {engine:.2} s | {:.2} M | {direct:.2} s | {:.2} M | {ratio:.2}x | {lowest:.2}x, {highest:.2}x | {} (<= 1.1x, issue 19) |",
        ratios.len(),
        rows as f64 / engine / 1e6,
        rows as f64 / direct / 1e6,
        if ratio <= 1.1 { "met" } else { "**missed**" },
    );
    Some(out)
}

fn filter_map(c: &mut Criterion) {
    let rows = rows();
    let input = input_file(rows);
    let out = bench_dir().join("out");
    std::fs::create_dir_all(&out).expect("output directory");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let engine = ReferenceEngine::new();
    let request = request(&input, rows, &out);

    let mut group = c.benchmark_group(format!("filter_map_{rows}_rows"));
    group.sample_size(10);
    group.throughput(Throughput::Elements(rows as u64));
    let runs = Mutex::new(Runs::default());
    // Each timed iteration runs the engine, then the same SQL directly, and records both: the two sides
    // see the same machine load, so their ratio holds on a busy machine. Criterion's own estimate
    // (`thrpt:`) is of the engine alone.
    group.bench_function("reference_engine_then_direct", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let request = request.clone();
                let started = Instant::now();

                // On a worker thread, as the coordinator and the gRPC server run it.
                let outcome = runtime
                    .block_on(runtime.spawn(async move {
                        engine.execute_transform(&request, &NoProgress).await
                    }))
                    .expect("transform task")
                    .expect("transform");
                let elapsed = started.elapsed();
                assert!(outcome.new_offset_interval.is_some());
                total += elapsed;

                let (input, out) = (input.clone(), out.clone());
                let started = Instant::now();
                runtime
                    .block_on(runtime.spawn(async move { datafusion_direct(&input, &out).await }))
                    .expect("direct task");
                let direct = started.elapsed();
                let mut runs = runs.lock().unwrap_or_else(|p| p.into_inner());
                runs.engine.push(elapsed.as_secs_f64());
                runs.direct.push(direct.as_secs_f64());
            }
            total
        });
    });
    group.finish();

    // `cargo bench` passes `--bench`; under `cargo test` the single run is a smoke test, not a figure.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let runs = runs.into_inner().unwrap_or_else(|p| p.into_inner());
    let Some(table) = table(&runs, rows) else {
        return;
    };
    println!("\n## reference-engine figures (medians of the timed runs)\n\n{table}");
    if let Some(dir) = std::env::var_os("WEIR_BENCH_REPORT_DIR") {
        let dir = PathBuf::from(dir);
        let path = dir.join("reference-engine.md");
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &table)) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(error) => eprintln!("cannot write {}: {error}", path.display()),
        }
    }
}

criterion_group!(benches, filter_map);
criterion_main!(benches);
