//! Datasets as the coordinator stores them: Parquet slices named by hash, with ODF's system columns.

#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::parquet::arrow::ArrowWriter;
use weir_sql::{SqlSession, Table};

/// The schema of `readings.clean`: system columns, event time, data.
pub fn readings_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new(
            "system_time",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("city", DataType::Utf8, false),
        Field::new("temp", DataType::Float64, true),
    ]))
}

/// A slice of `readings.clean` with the records `first..first + cities.len()`.
pub fn readings_slice(first: i64, cities: &[&str], temps: &[Option<f64>]) -> RecordBatch {
    let n = cities.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(first..first + n as i64)),
        Arc::new(Int32Array::from(vec![0; n])),
        Arc::new(TimestampMillisecondArray::from(vec![1_700_000_000_000; n]).with_timezone("UTC")),
        Arc::new(StringArray::from(cities.to_vec())),
        Arc::new(Float64Array::from(temps.to_vec())),
    ];
    RecordBatch::try_new(readings_schema(), columns).expect("a valid batch")
}

/// Writes a batch as a Parquet file named like a stored slice (a multihash, no extension).
pub fn write_slice(dir: &Path, name: &str, batch: &RecordBatch) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).expect("create the slice");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).expect("a Parquet writer");
    writer.write(batch).expect("write the slice");
    writer.close().expect("close the slice");
    path
}

/// The workspace of the tests: `readings.clean` (two slices, 5 records), `weather-stations` (one slice),
/// `readings.empty` (a schema, no data) and `readings.raw` (nothing yet).
pub fn tables(dir: &Path) -> Vec<Table> {
    let first = write_slice(
        dir,
        "f1620aa01",
        &readings_slice(0, &["Oslo", "Lima", "Oslo"], &[Some(3.5), Some(18.0), None]),
    );
    let second = write_slice(
        dir,
        "f1620aa02",
        &readings_slice(3, &["Lima", "Pune"], &[Some(19.5), Some(31.0)]),
    );
    let stations_schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("elevation", DataType::Int64, false),
    ]));
    let stations = RecordBatch::try_new(
        stations_schema,
        vec![
            Arc::new(StringArray::from(vec!["Oslo", "Lima", "Pune"])),
            Arc::new(Int64Array::from(vec![23, 154, 560])),
        ],
    )
    .expect("a valid batch");
    let stations = write_slice(dir, "f1620bb01", &stations);
    vec![
        Table::new("readings.clean", [first, second]),
        Table::new("weather-stations", [stations]),
        Table::empty("readings.empty", Some(readings_schema())),
        Table::empty("readings.raw", None),
    ]
}

/// A session over [`tables`] in `dir`.
pub async fn session(dir: &Path) -> SqlSession {
    SqlSession::new(tables(dir))
        .await
        .expect("the session opens")
}
