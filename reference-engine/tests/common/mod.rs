//! Fixtures shared by the integration tests: real Parquet files in temporary directories.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeZone, Utc};
use tempfile::TempDir;
use weir_reference_engine::arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    UInt8Array, UInt64Array,
};
use weir_reference_engine::arrow::compute::concat_batches;
use weir_reference_engine::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use weir_reference_engine::parquet::arrow::ArrowWriter;
use weir_reference_engine::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use weir_reference_engine::{
    DatasetId, DatasetVocabulary, EngineError, ErrorKind, OffsetInterval, Progress,
    ReferenceEngine, Transform, TransformRequest, TransformRequestInput, TransformSql,
    TransformSuccess, Watermark,
};

pub const APPEND: i32 = 0;
pub const RETRACT: i32 = 1;
pub const CORRECT_FROM: i32 = 2;
pub const CORRECT_TO: i32 = 3;

/// One input record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub offset: i64,
    pub op: i32,
    pub event_time_ms: i64,
    pub city: String,
    pub population: i64,
}

pub fn record(offset: i64, op: i32, event_time_ms: i64, city: &str, population: i64) -> Record {
    Record {
        offset,
        op,
        event_time_ms,
        city: city.to_owned(),
        population,
    }
}

/// Appends with offsets from `first`, event times 1 s apart.
pub fn appends(first: i64, cities: &[(&str, i64)]) -> Vec<Record> {
    cities
        .iter()
        .enumerate()
        .map(|(i, (city, population))| {
            record(
                first + i as i64,
                APPEND,
                (first + i as i64) * 1000,
                city,
                *population,
            )
        })
        .collect()
}

/// How the system columns are typed in an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemTypes {
    /// Int64 offset, Int32 op (what existing engines write).
    Compatible,
    /// UInt64 offset, UInt8 op (the spec's types).
    Spec,
}

pub fn utc_ms() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

pub fn input_batch(records: &[Record], types: SystemTypes) -> RecordBatch {
    let (offset_type, op_type) = match types {
        SystemTypes::Compatible => (DataType::Int64, DataType::Int32),
        SystemTypes::Spec => (DataType::UInt64, DataType::UInt8),
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", offset_type, false),
        Field::new("op", op_type, false),
        Field::new("system_time", utc_ms(), false),
        Field::new("event_time", utc_ms(), false),
        Field::new("city", DataType::Utf8, false),
        Field::new("population", DataType::Int64, false),
    ]));
    let (offset, op): (ArrayRef, ArrayRef) = match types {
        SystemTypes::Compatible => (
            Arc::new(Int64Array::from_iter_values(
                records.iter().map(|r| r.offset),
            )),
            Arc::new(Int32Array::from_iter_values(records.iter().map(|r| r.op))),
        ),
        SystemTypes::Spec => (
            Arc::new(UInt64Array::from_iter_values(
                records.iter().map(|r| r.offset as u64),
            )),
            Arc::new(UInt8Array::from_iter_values(
                records.iter().map(|r| r.op as u8),
            )),
        ),
    };
    RecordBatch::try_new(
        schema,
        vec![
            offset,
            op,
            Arc::new(TimestampMillisecondArray::from_value(0, records.len()).with_timezone("UTC")),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(
                    records.iter().map(|r| r.event_time_ms),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(
                records.iter().map(|r| r.city.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(
                records.iter().map(|r| r.population),
            )),
        ],
    )
    .unwrap()
}

pub fn write_batch(path: &Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

pub fn read_parquet(path: impl AsRef<Path>) -> RecordBatch {
    let path = path.as_ref();
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let schema = builder.schema().clone();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(Result::unwrap).collect();
    concat_batches(&schema, &batches).unwrap()
}

pub fn column_names(batch: &RecordBatch) -> Vec<String> {
    batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

pub fn ints(batch: &RecordBatch, name: &str) -> Vec<i64> {
    let column = batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"));
    let column = weir_reference_engine::arrow::compute::cast(column, &DataType::Int64).unwrap();
    let column = column.as_any().downcast_ref::<Int64Array>().unwrap();
    (0..column.len()).map(|i| column.value(i)).collect()
}

pub fn strings(batch: &RecordBatch, name: &str) -> Vec<String> {
    let column = batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"));
    let column = column.as_any().downcast_ref::<StringArray>().unwrap();
    (0..column.len())
        .map(|i| column.value(i).to_owned())
        .collect()
}

pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(seconds, 0).unwrap()
}

pub fn system_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2023, 3, 1, 0, 0, 0).unwrap()
}

/// A temporary directory with input slices and output paths.
pub struct Fixture {
    pub dir: TempDir,
    files: Mutex<u32>,
}

impl Fixture {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            files: Mutex::new(0),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a slice file (named like a hash, no extension) and returns its path.
    pub fn slice(&self, records: &[Record], types: SystemTypes) -> PathBuf {
        let mut n = self.files.lock().unwrap();
        *n += 1;
        let path = self.path(&format!("slice-{n:03}"));
        write_batch(&path, &input_batch(records, types));
        path
    }

    /// An empty Parquet file with the input schema.
    pub fn schema_file(&self, types: SystemTypes) -> PathBuf {
        let path = self.path(&format!("schema-{types:?}.parquet"));
        write_batch(&path, &input_batch(&[], types));
        path
    }

    /// An input named `alias` reading `files`, keeping offsets `interval`.
    pub fn input(
        &self,
        alias: &str,
        files: Vec<PathBuf>,
        interval: Option<(u64, u64)>,
    ) -> TransformRequestInput {
        TransformRequestInput {
            dataset_id: DatasetId::from_key([1; 32]),
            dataset_alias: alias.to_owned(),
            query_alias: alias.to_owned(),
            vocab: DatasetVocabulary::default(),
            offset_interval: interval.map(|(start, end)| OffsetInterval { start, end }),
            data_paths: files.iter().map(|f| f.display().to_string()).collect(),
            schema_file: self
                .schema_file(SystemTypes::Compatible)
                .display()
                .to_string(),
            explicit_watermarks: Vec::new(),
        }
    }

    /// A transform request over `inputs` with output paths in the fixture.
    pub fn request(
        &self,
        query: &str,
        inputs: Vec<TransformRequestInput>,
        next_offset: u64,
    ) -> TransformRequest {
        TransformRequest {
            dataset_id: DatasetId::from_key([9; 32]),
            dataset_alias: "bar".to_owned(),
            system_time: system_time(),
            vocab: DatasetVocabulary::default(),
            transform: sql(query),
            query_inputs: inputs,
            next_offset,
            prev_checkpoint_path: None,
            new_checkpoint_path: self.path("out/checkpoint").display().to_string(),
            new_data_path: self.path("out/data").display().to_string(),
        }
    }
}

pub fn sql(query: &str) -> Transform {
    Transform::Sql(TransformSql::new("datafusion", query))
}

pub fn watermark(system_seconds: i64, event_seconds: i64) -> Watermark {
    Watermark {
        system_time: at(system_seconds),
        event_time: at(event_seconds),
    }
}

/// The terminal message an operation ends with.
#[derive(Debug)]
pub enum Terminal<T> {
    Success(T),
    InvalidQuery(String),
    InternalError(String),
}

impl<T: std::fmt::Debug> Terminal<T> {
    pub fn success(self) -> T {
        match self {
            Terminal::Success(value) => value,
            other => panic!("expected Success, got {other:?}"),
        }
    }

    pub fn invalid_query(self) -> String {
        match self {
            Terminal::InvalidQuery(message) => message,
            other => panic!("expected InvalidQuery, got {other:?}"),
        }
    }

    pub fn internal_error(self) -> String {
        match self {
            Terminal::InternalError(message) => message,
            other => panic!("expected InternalError, got {other:?}"),
        }
    }
}

pub fn terminal<T>(result: Result<T, EngineError>) -> Terminal<T> {
    match result {
        Ok(value) => Terminal::Success(value),
        Err(error) => match error.kind() {
            ErrorKind::InvalidQuery => Terminal::InvalidQuery(error.to_string()),
            ErrorKind::Internal => Terminal::InternalError(error.to_string()),
        },
    }
}

/// Runs a transform and collects its progress reports.
pub async fn transform(request: &TransformRequest) -> (Terminal<TransformSuccess>, Vec<Progress>) {
    let seen = Mutex::new(Vec::new());
    let sink = |progress: Progress| seen.lock().unwrap().push(progress);
    let result = ReferenceEngine::new()
        .execute_transform(request, &sink)
        .await;
    (terminal(result), seen.into_inner().unwrap())
}

pub async fn transform_ok(request: &TransformRequest) -> TransformSuccess {
    transform(request).await.0.success()
}
