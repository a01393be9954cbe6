//! The distributed engine against a real Ballista cluster in this process: a scheduler and two
//! executors on 127.0.0.1 ports, each executor with its own work folder. Every result is compared
//! with the embedded reference engine's for the same request (ODF's logical hash).

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use distributed_engine::reference_engine::arrow::array::{
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use distributed_engine::reference_engine::arrow::datatypes::{
    DataType, Field, Schema, SchemaRef, TimeUnit,
};
use distributed_engine::reference_engine::parquet::arrow::ArrowWriter;
use distributed_engine::reference_engine::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use distributed_engine::reference_engine::{
    DatasetId, DatasetVocabulary, NoProgress, OffsetInterval, RawQueryRequest, ReferenceEngine,
    Transform, TransformRequest, TransformRequestInput, TransformSql, Watermark,
};
use distributed_engine::{ClusterConfig, LocalCluster, SchedulerAddress, distributed_engine};

/// Rows per input slice, and slices.
const ROWS: i64 = 20_000;
const SLICES: i64 = 4;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scheduler and two executors (one task at a time each), both registered.
async fn start_cluster() -> (LocalCluster, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(2, 1, root.path()).await.unwrap();
    (cluster, root)
}

fn time() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", time(), false),
        Field::new("event_time", time(), false),
        Field::new("city", DataType::Utf8, false),
        Field::new("population", DataType::Int64, false),
    ]))
}

/// The input's operation type at `offset`: mostly appends, a retraction every 97 records and a
/// correction pair (correct-from, correct-to) every 101, so changelog handling is exercised.
fn op_at(offset: i64) -> i32 {
    if offset % 101 == 50 {
        2
    } else if offset % 101 == 51 {
        3
    } else if offset % 97 == 10 {
        1
    } else {
        0
    }
}

/// `SLICES` slices of `ROWS` records each, offsets from 0, in offset order; with `changelog`, some
/// are retractions and corrections ([`op_at`]), else all are appends.
fn write_slices(dir: &Path, changelog: bool) -> Vec<String> {
    let cities = ["Ankara", "Bern", "Cairo", "Dakar", "Oslo"];
    (0..SLICES)
        .map(|slice| {
            let offsets: Vec<i64> = (slice * ROWS..(slice + 1) * ROWS).collect();
            let batch = RecordBatch::try_new(
                input_schema(),
                vec![
                    Arc::new(Int64Array::from(offsets.clone())),
                    Arc::new(Int32Array::from(
                        offsets
                            .iter()
                            .map(|&o| if changelog { op_at(o) } else { 0 })
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(
                        TimestampMillisecondArray::from(vec![1_000; offsets.len()])
                            .with_timezone("UTC"),
                    ),
                    Arc::new(
                        TimestampMillisecondArray::from(
                            offsets.iter().map(|o| o * 1_000).collect::<Vec<_>>(),
                        )
                        .with_timezone("UTC"),
                    ),
                    Arc::new(StringArray::from(
                        offsets
                            .iter()
                            .map(|&o| cities[(o % 5) as usize])
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(Int64Array::from(
                        offsets
                            .iter()
                            .map(|o| (o * 7919) % 1000)
                            .collect::<Vec<_>>(),
                    )),
                ],
            )
            .unwrap();
            let path = dir.join(format!("slice-{slice}"));
            let mut writer =
                ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), input_schema(), None)
                    .unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            path.display().to_string()
        })
        .collect()
}

fn request(dir: &Path, slices: &[String], sql: &str, out: &str) -> TransformRequest {
    TransformRequest {
        dataset_id: DatasetId::from_key([1; 32]),
        dataset_alias: "derived".into(),
        system_time: Utc.with_ymd_and_hms(2024, 5, 1, 0, 0, 0).unwrap(),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new("datafusion", sql)),
        query_inputs: vec![TransformRequestInput {
            dataset_id: DatasetId::from_key([2; 32]),
            dataset_alias: "readings".into(),
            query_alias: "readings".into(),
            vocab: DatasetVocabulary::default(),
            // Not the whole files: the first and last records are outside the interval.
            offset_interval: Some(OffsetInterval {
                start: 3,
                end: (SLICES * ROWS - 4) as u64,
            }),
            data_paths: slices.to_vec(),
            schema_file: slices[0].clone(),
            explicit_watermarks: vec![Watermark {
                system_time: Utc.with_ymd_and_hms(2024, 5, 1, 0, 0, 0).unwrap(),
                event_time: Utc.timestamp_millis_opt(SLICES * ROWS * 1_000).unwrap(),
            }],
        }],
        next_offset: 1_000,
        prev_checkpoint_path: None,
        new_checkpoint_path: dir.join(format!("{out}.checkpoint")).display().to_string(),
        new_data_path: dir.join(format!("{out}.data")).display().to_string(),
    }
}

fn read(path: &str) -> (SchemaRef, Vec<RecordBatch>) {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let schema = builder.schema().clone();
    let reader = builder.build().unwrap();
    (schema, reader.map(Result::unwrap).collect())
}

fn logical_hash(path: &str) -> String {
    let (schema, batches) = read(path);
    odf::logical_hash::of_batches(&schema, &batches)
        .unwrap()
        .to_string()
}

/// Job folders (`<work dir>/<job id>`) an executor wrote shuffle files into.
fn jobs_run(work_dir: &Path) -> usize {
    std::fs::read_dir(work_dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                // DataFusion's spill folders (`datafusion-*`) are not jobs.
                .filter(|e| {
                    e.path().is_dir() && !e.file_name().to_string_lossy().starts_with("datafusion-")
                })
                .count()
        })
        .unwrap_or(0)
}

/// Runs the same transform on the embedded and the distributed engine; the outcomes and the
/// outputs' logical hashes must be equal. Returns the distributed output's path.
async fn same_as_embedded(
    cluster: &LocalCluster,
    dir: &Path,
    slices: &[String],
    sql: &str,
) -> String {
    let embedded_request = request(dir, slices, sql, "embedded");
    let embedded = ReferenceEngine::new()
        .execute_transform(&embedded_request, &NoProgress)
        .await
        .unwrap();
    let distributed_request = request(dir, slices, sql, "distributed");
    let engine = distributed_engine(&ClusterConfig::new(cluster.scheduler().clone()));
    let distributed = engine
        .execute_transform(&distributed_request, &NoProgress)
        .await
        .unwrap();
    assert_eq!(distributed, embedded, "{sql}");
    assert_eq!(
        logical_hash(&distributed_request.new_data_path),
        logical_hash(&embedded_request.new_data_path),
        "{sql}"
    );
    distributed_request.new_data_path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn map_filter_transform_on_two_executors_equals_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);

    let output = same_as_embedded(
        &cluster,
        data.path(),
        &slices,
        "SELECT event_time, city, population * 2 AS doubled FROM readings WHERE population % 3 <> 0",
    )
    .await;

    // Both executors ran tasks of the job: each wrote shuffle files under its work folder.
    for work_dir in cluster.work_dirs() {
        assert!(jobs_run(work_dir) > 0, "{} ran no task", work_dir.display());
    }
    // ODF's rules: offsets from next_offset, in input offset order; system time the request's;
    // the input's operation types carried through the filter (pairs repaired).
    let (_, batches) = read(&output);
    let offsets: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(
        offsets,
        (1_000..1_000 + offsets.len() as i64).collect::<Vec<_>>()
    );
    let ops: Vec<i32> = batches
        .iter()
        .flat_map(|b| {
            b.column(1)
                .as_any()
                .downcast_ref::<Int32Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert!(ops.contains(&1), "retractions carried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn union_all_and_multi_step_queries_equal_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);
    same_as_embedded(
        &cluster,
        data.path(),
        &slices,
        "SELECT event_time, city FROM readings WHERE city = 'Oslo' \
         UNION ALL SELECT event_time, upper(city) AS city FROM readings WHERE population < 100",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn window_aggregation_stays_local_and_equals_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), false);
    same_as_embedded(
        &cluster,
        data.path(),
        &slices,
        "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, city, count(*) AS readings, \
         sum(population) AS population FROM readings \
         GROUP BY date_bin(INTERVAL '1 hour', event_time), city",
    )
    .await;
    // Stateful queries never reach the cluster.
    for work_dir in cluster.work_dirs() {
        assert_eq!(jobs_run(work_dir), 0, "{} ran a task", work_dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raw_query_aggregation_on_two_executors_equals_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);
    let sql = "SELECT city, count(*) AS readings, max(population) AS highest, min(event_time) AS first \
               FROM input GROUP BY city ORDER BY city";
    let raw = |out: &str| RawQueryRequest {
        input_data_paths: slices.clone(),
        transform: Transform::Sql(TransformSql::new("datafusion", sql)),
        output_data_path: data.path().join(out).display().to_string(),
    };
    let (embedded_request, distributed_request) = (raw("embedded"), raw("distributed"));
    let embedded = ReferenceEngine::new()
        .execute_raw_query(&embedded_request, &NoProgress)
        .await
        .unwrap();
    let engine = distributed_engine(&ClusterConfig::new(cluster.scheduler().clone()));
    let distributed = engine
        .execute_raw_query(&distributed_request, &NoProgress)
        .await
        .unwrap();
    assert_eq!(distributed, embedded);
    assert_eq!(distributed.num_records, 5);
    let (embedded_schema, embedded_batches) = read(&embedded_request.output_data_path);
    let (schema, batches) = read(&distributed_request.output_data_path);
    assert_eq!(schema, embedded_schema);
    let concat = |schema: &SchemaRef, batches: &[RecordBatch]| {
        distributed_engine::reference_engine::arrow::compute::concat_batches(schema, batches)
            .unwrap()
    };
    assert_eq!(
        concat(&schema, &batches),
        concat(&embedded_schema, &embedded_batches)
    );
    for work_dir in cluster.work_dirs() {
        assert!(jobs_run(work_dir) > 0, "{} ran no task", work_dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_scheduler_is_an_internal_error_and_writes_no_output() {
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);
    let request = request(
        data.path(),
        &slices,
        "SELECT event_time, city FROM readings",
        "nowhere",
    );
    let engine = distributed_engine(&ClusterConfig::new(SchedulerAddress::new(
        "127.0.0.1",
        free_port(),
    )));
    let error = engine
        .execute_transform(&request, &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        distributed_engine::reference_engine::ErrorKind::Internal,
        "{error}"
    );
    assert!(!Path::new(&request.new_data_path).exists());
}

/// With `WEIR_BALLISTA_SCHEDULER=HOST:PORT` and `WEIR_BALLISTA_SHARE=DIR` (a folder the cluster's
/// scheduler and executors see at the same path): the same comparison on that cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_external_cluster_gives_the_embedded_engines_output() {
    let (Ok(scheduler), Ok(share)) = (
        std::env::var("WEIR_BALLISTA_SCHEDULER"),
        std::env::var("WEIR_BALLISTA_SHARE"),
    ) else {
        eprintln!("NOT RUN: set WEIR_BALLISTA_SCHEDULER and WEIR_BALLISTA_SHARE");
        return;
    };
    let scheduler: SchedulerAddress = scheduler.parse().unwrap();
    let data = tempfile::tempdir_in(share).unwrap();
    let slices = write_slices(data.path(), true);
    let sql = "SELECT event_time, city, population * 2 AS doubled FROM readings WHERE population % 3 <> 0";
    let embedded_request = request(data.path(), &slices, sql, "embedded");
    let embedded = ReferenceEngine::new()
        .execute_transform(&embedded_request, &NoProgress)
        .await
        .unwrap();
    let distributed_request = request(data.path(), &slices, sql, "distributed");
    let distributed = distributed_engine(&ClusterConfig::new(scheduler))
        .execute_transform(&distributed_request, &NoProgress)
        .await
        .unwrap();
    assert_eq!(distributed, embedded);
    assert_eq!(
        logical_hash(&distributed_request.new_data_path),
        logical_hash(&embedded_request.new_data_path)
    );
}
