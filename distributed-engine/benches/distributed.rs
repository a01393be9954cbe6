//! The distributed path's cost and scaling on this machine: the same map/filter transform through the
//! embedded reference engine and through the distributed engine on a [`LocalCluster`] (scheduler and
//! executors in this process, on 127.0.0.1), for a small and a 10M-row input; and the distributed
//! engine on one executor against two.
//!
//! Each figure is a ratio from one run: the two sides of a ratio alternate (embedded then distributed,
//! one executor then two), and the ratio is the median of the per-pair ratios, so a load change on the
//! shared machine hits both sides of a pair alike.
//!
//! `cargo bench -p weir-distributed-engine --bench distributed` (as `cargo xtask bench` runs it) uses 10M
//! rows in 8 slices (generated once under `target/weir-bench/distributed-engine/`); under `cargo test`
//! it runs each side once on 40 000 rows as a smoke test. The figures table is printed, and written to
//! `$WEIR_BENCH_REPORT_DIR/distributed-engine.md` when that is set.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use chrono::{TimeZone, Utc};
use weir_distributed_engine::reference_engine::arrow::array::{
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use weir_distributed_engine::reference_engine::arrow::datatypes::{
    DataType, Field, Schema, TimeUnit,
};
use weir_distributed_engine::reference_engine::parquet::arrow::ArrowWriter;
use weir_distributed_engine::reference_engine::{
    DatasetId, DatasetVocabulary, NoProgress, OffsetInterval, ReferenceEngine, Transform,
    TransformRequest, TransformRequestInput, TransformSql,
};
use weir_distributed_engine::{ClusterConfig, LocalCluster, distributed_engine};

const QUERY: &str = "SELECT event_time, city, population * 2 AS population, population % 7 AS bucket \
                     FROM input WHERE population % 3 <> 0";
const SLICES: usize = 8;
const BATCH: usize = 65_536;

fn benching() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("weir-bench/distributed-engine")
}

/// `SLICES` input slices holding `rows` records in all, generated once.
fn input_slices(rows: usize) -> Vec<String> {
    let dir = bench_dir().join(format!("input-{rows}"));
    let per_slice = rows.div_ceil(SLICES);
    let paths: Vec<PathBuf> = (0..SLICES)
        .map(|n| dir.join(format!("slice-{n}")))
        .collect();
    if !paths.iter().all(|p| p.exists()) {
        std::fs::create_dir_all(&dir).expect("bench directory");
        let time = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let schema = Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("op", DataType::Int32, false),
            Field::new("system_time", time.clone(), false),
            Field::new("event_time", time, false),
            Field::new("city", DataType::Utf8, false),
            Field::new("population", DataType::Int64, false),
        ]));
        let cities = ["Ankara", "Bern", "Cairo", "Dakar", "Oslo", "Quito", "Riga"];
        for (n, path) in paths.iter().enumerate() {
            let file = std::fs::File::create(path).expect("slice file");
            let mut writer = ArrowWriter::try_new(file, schema.clone(), None).expect("writer");
            let first = n * per_slice;
            let last = ((n + 1) * per_slice).min(rows);
            let mut start = first;
            while start < last {
                let end = (start + BATCH).min(last);
                let offsets: Vec<i64> = (start as i64..end as i64).collect();
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(Int64Array::from(offsets.clone())),
                        Arc::new(Int32Array::from(vec![0; offsets.len()])),
                        Arc::new(
                            TimestampMillisecondArray::from(vec![0; offsets.len()])
                                .with_timezone("UTC"),
                        ),
                        Arc::new(
                            TimestampMillisecondArray::from(
                                offsets.iter().map(|o| o * 1000).collect::<Vec<_>>(),
                            )
                            .with_timezone("UTC"),
                        ),
                        Arc::new(StringArray::from(
                            offsets
                                .iter()
                                .map(|o| cities[(*o % 7) as usize])
                                .collect::<Vec<_>>(),
                        )),
                        Arc::new(Int64Array::from(
                            offsets
                                .iter()
                                .map(|o| (o * 7919) % 100_000)
                                .collect::<Vec<_>>(),
                        )),
                    ],
                )
                .expect("batch");
                writer.write(&batch).expect("write");
                start = end;
            }
            writer.close().expect("close");
        }
    }
    paths.iter().map(|p| p.display().to_string()).collect()
}

fn request(slices: &[String], rows: usize, out: &Path) -> TransformRequest {
    TransformRequest {
        dataset_id: DatasetId::from_key([1; 32]),
        dataset_alias: "bench".into(),
        system_time: Utc
            .with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("time"),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new("datafusion", QUERY)),
        query_inputs: vec![TransformRequestInput {
            dataset_id: DatasetId::from_key([2; 32]),
            dataset_alias: "input".into(),
            query_alias: "input".into(),
            vocab: DatasetVocabulary::default(),
            offset_interval: Some(OffsetInterval {
                start: 0,
                end: rows as u64 - 1,
            }),
            data_paths: slices.to_vec(),
            schema_file: slices[0].clone(),
            explicit_watermarks: vec![],
        }],
        next_offset: 0,
        prev_checkpoint_path: None,
        new_checkpoint_path: out.join("checkpoint").display().to_string(),
        new_data_path: out.join("data").display().to_string(),
    }
}

/// Seconds one transform takes on `engine`.
async fn time(engine: &ReferenceEngine, request: &TransformRequest) -> f64 {
    let started = Instant::now();
    let outcome = engine
        .execute_transform(request, &NoProgress)
        .await
        .expect("transform");
    assert!(outcome.new_offset_interval.is_some());
    started.elapsed().as_secs_f64()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One row of the table: `pairs` alternating runs of `a` and `b`.
struct Pairs {
    a: Vec<f64>,
    b: Vec<f64>,
}

impl Pairs {
    fn row(mut self, what: &str, rows: usize, a: &str, b: &str) -> String {
        let mut ratios: Vec<f64> = self.b.iter().zip(&self.a).map(|(b, a)| b / a).collect();
        let pairs = ratios.len();
        let ratio = median(&mut ratios);
        let (low, high) = (ratios[0], ratios[pairs - 1]);
        let (ta, tb) = (median(&mut self.a), median(&mut self.b));
        format!(
            "| {what} | {rows} | {pairs} | {a} {ta:.3} s | {b} {tb:.3} s | **{ratio:.2}x** | {low:.2}x, {high:.2}x |\n"
        )
    }
}

async fn pairs(
    first: &ReferenceEngine,
    second: &ReferenceEngine,
    request: &TransformRequest,
    pairs: usize,
) -> Pairs {
    // One run of each first: the cluster's sessions and the page cache warm up.
    time(first, request).await;
    time(second, request).await;
    let mut result = Pairs {
        a: Vec::new(),
        b: Vec::new(),
    };
    for _ in 0..pairs {
        result.a.push(time(first, request).await);
        result.b.push(time(second, request).await);
    }
    result
}

fn main() {
    let bench = benching();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 << 20)
        .build()
        .expect("runtime");
    let (small_rows, large_rows) = if bench {
        (10_000, 10_000_000)
    } else {
        (4_000, 40_000)
    };
    let (small_pairs, large_pairs) = if bench { (15, 3) } else { (1, 1) };
    let out = bench_dir().join("out");
    std::fs::create_dir_all(&out).expect("output directory");
    let table = runtime.block_on(async {
        let clusters = tempfile::tempdir().expect("cluster folder");
        // Two vcores per executor: each executor alone may keep both cores busy.
        let two = LocalCluster::start(2, 2, &clusters.path().join("two"))
            .await
            .expect("two-executor cluster");
        let one = LocalCluster::start(1, 2, &clusters.path().join("one"))
            .await
            .expect("one-executor cluster");
        let embedded = ReferenceEngine::new();
        let on_two = distributed_engine(&ClusterConfig::new(two.scheduler().clone()));
        let on_one = distributed_engine(&ClusterConfig::new(one.scheduler().clone()));

        let mut table = String::new();
        let _ = writeln!(
            table,
            "| figure | rows | pairs | first side (median) | second side (median) | second / first (median of pairs) | lowest, highest |"
        );
        let _ = writeln!(table, "|---|---:|---:|---:|---:|---:|---:|");
        let small = request(&input_slices(small_rows), small_rows, &out);
        table.push_str(
            &pairs(&embedded, &on_two, &small, small_pairs)
                .await
                .row("distributed overhead, small", small_rows, "embedded", "distributed (2 executors)"),
        );
        let large = request(&input_slices(large_rows), large_rows, &out);
        table.push_str(
            &pairs(&embedded, &on_two, &large, large_pairs)
                .await
                .row("distributed overhead, large", large_rows, "embedded", "distributed (2 executors)"),
        );
        table.push_str(
            &pairs(&on_one, &on_two, &large, large_pairs)
                .await
                .row("two executors against one", large_rows, "1 executor", "2 executors"),
        );
        table
    });
    if !bench {
        return;
    }
    println!("\n## distributed-engine figures\n\n{table}");
    if let Some(dir) = std::env::var_os("WEIR_BENCH_REPORT_DIR") {
        let dir = PathBuf::from(dir);
        let path = dir.join("distributed-engine.md");
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &table)) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(error) => eprintln!("cannot write {}: {error}", path.display()),
        }
    }
}
