//! What the distributed engine's integration tests share: a local cluster, input slices, requests and
//! the logical hash of an output.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use weir_distributed_engine::LocalCluster;
use weir_distributed_engine::reference_engine::arrow::array::{
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use weir_distributed_engine::reference_engine::arrow::datatypes::{
    DataType, Field, Schema, SchemaRef, TimeUnit,
};
use weir_distributed_engine::reference_engine::parquet::arrow::ArrowWriter;
use weir_distributed_engine::reference_engine::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use weir_distributed_engine::reference_engine::{
    DatasetId, DatasetVocabulary, OffsetInterval, Transform, TransformRequest,
    TransformRequestInput, TransformSql, Watermark,
};

/// Rows per input slice, and slices.
pub const ROWS: i64 = 20_000;
pub const SLICES: i64 = 4;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scheduler and two executors (one task at a time each), both registered.
pub async fn start_cluster() -> (LocalCluster, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(2, 1, root.path()).await.unwrap();
    (cluster, root)
}

pub fn time() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

pub fn input_schema() -> SchemaRef {
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
pub fn op_at(offset: i64) -> i32 {
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
pub fn write_slices(dir: &Path, changelog: bool) -> Vec<String> {
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

pub fn request(dir: &Path, slices: &[String], sql: &str, out: &str) -> TransformRequest {
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

pub fn read(path: &str) -> (SchemaRef, Vec<RecordBatch>) {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let schema = builder.schema().clone();
    let reader = builder.build().unwrap();
    (schema, reader.map(Result::unwrap).collect())
}

pub fn logical_hash(path: &str) -> String {
    let (schema, batches) = read(path);
    weir_odf::logical_hash::of_batches(&schema, &batches)
        .unwrap()
        .to_string()
}

/// Job folders (`<work dir>/<job id>`) an executor wrote shuffle files into.
pub fn jobs_run(work_dir: &Path) -> usize {
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
