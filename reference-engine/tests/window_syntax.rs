//! Window syntax as streaming pipelines are written: Flink's group windows (`TUMBLE`, `TUMBLE_START`,
//! `TUMBLE_END`), Flink's window table function (`TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))`) and
//! RisingWave's `tumble(t, ts, size) ... EMIT ON WINDOW CLOSE` run on the tumbling-window operator:
//! exact outputs, the same output as `date_bin` over a changelog split into transactions, and kamu's
//! `covid19.canada.daily-cases` transform as written.
use crate::common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use weir_reference_engine::arrow::array::{
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use weir_reference_engine::arrow::compute::concat_batches;
use weir_reference_engine::arrow::datatypes::{DataType, Field, Schema};
use weir_reference_engine::{DatasetVocabulary, TransformRequest};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

const DATE_BIN: &str = "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, city, \
    count(*) AS readings, sum(population) AS population, min(population) AS low \
    FROM foo GROUP BY 1, city";
const FLINK_GROUP_WINDOW: &str = "SELECT TUMBLE_START(event_time, INTERVAL '1' HOUR) AS event_time, city, \
    COUNT(*) AS readings, SUM(population) AS population, MIN(population) AS low \
    FROM foo GROUP BY TUMBLE(event_time, INTERVAL '1' HOUR), city";
const FLINK_TABLE_FUNCTION: &str = "SELECT window_start AS event_time, city, \
    count(*) AS readings, sum(population) AS population, min(population) AS low \
    FROM TABLE(TUMBLE(TABLE foo, DESCRIPTOR(event_time), INTERVAL '1' HOUR)) \
    GROUP BY window_start, window_end, city";
const RISINGWAVE: &str = "select window_start as event_time, city, \
    count(*) as readings, sum(population) as population, min(population) as low \
    from tumble(foo, event_time, interval '1' hour) \
    group by window_start, city \
    emit on window close";

/// A timestamp column (any unit) as milliseconds.
fn millis(batch: &RecordBatch, name: &str) -> Vec<i64> {
    let column = batch.column_by_name(name).unwrap();
    let column = weir_reference_engine::arrow::compute::cast(
        column,
        &DataType::Timestamp(
            weir_reference_engine::arrow::datatypes::TimeUnit::Millisecond,
            None,
        ),
    )
    .unwrap();
    let column = weir_reference_engine::arrow::compute::cast(&column, &DataType::Int64).unwrap();
    column
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .values()
        .to_vec()
}

/// Records over ten hours with corrections and retractions right after what they change.
fn changelog() -> Vec<Record> {
    let cities = ["A", "B", "C"];
    let mut records = Vec::new();
    let mut offset = 0;
    for i in 0..150i64 {
        let event_time = i * 4 * 60_000;
        let city = cities[(i % 3) as usize];
        let population = (i * 37) % 101;
        records.push(record(offset, APPEND, event_time, city, population));
        offset += 1;
        if i % 7 == 3 {
            records.push(record(offset, CORRECT_FROM, event_time, city, population));
            records.push(record(
                offset + 1,
                CORRECT_TO,
                event_time,
                city,
                population + 500,
            ));
            offset += 2;
        } else if i % 11 == 5 {
            records.push(record(offset, RETRACT, event_time, city, population));
            offset += 1;
        }
    }
    records
}

#[allow(clippy::too_many_arguments)]
fn request(
    fx: &Fixture,
    query: &str,
    slice: &Path,
    interval: (u64, u64),
    watermark_ms: i64,
    next_offset: u64,
    prev_checkpoint: Option<String>,
    name: &str,
) -> TransformRequest {
    let mut input = fx.input("foo", vec![slice.to_path_buf()], Some(interval));
    input.explicit_watermarks = vec![watermark(0, watermark_ms / 1000)];
    let mut request = fx.request(query, vec![input], next_offset);
    request.prev_checkpoint_path = prev_checkpoint;
    request.new_checkpoint_path = fx.path(&format!("{name}/checkpoint")).display().to_string();
    request.new_data_path = fx.path(&format!("{name}/data")).display().to_string();
    request
}

/// The output of `query` over the changelog in `transactions` transactions with checkpoints.
async fn run_split(fx: &Fixture, query: &str, transactions: usize, name: &str) -> RecordBatch {
    let records = changelog();
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let mut outputs = Vec::new();
    let mut checkpoint = None;
    let mut next_offset = 0;
    for (n, chunk) in records
        .chunks(records.len().div_ceil(transactions))
        .enumerate()
    {
        let interval = (chunk[0].offset as u64, chunk.last().unwrap().offset as u64);
        let watermark_ms = chunk.last().unwrap().event_time_ms - HOUR_MS / 2;
        let request = request(
            fx,
            query,
            &slice,
            interval,
            watermark_ms,
            next_offset,
            checkpoint.clone(),
            &format!("{name}-{n}"),
        );
        let outcome = transform_ok(&request).await;
        if let Some(interval) = outcome.new_offset_interval {
            next_offset = interval.end + 1;
        }
        outputs.push(read_parquet(&request.new_data_path));
        checkpoint = Some(request.new_checkpoint_path.clone());
    }
    concat_batches(&outputs[0].schema(), &outputs).unwrap()
}

#[tokio::test]
async fn every_window_syntax_gives_the_output_of_date_bin_in_one_or_seven_transactions() {
    let fx = Fixture::new();
    let expected = run_split(&fx, DATE_BIN, 1, "date-bin").await;
    assert!(expected.num_rows() >= 20, "{} rows", expected.num_rows());
    for (name, query) in [
        ("flink-group", FLINK_GROUP_WINDOW),
        ("flink-tvf", FLINK_TABLE_FUNCTION),
        ("risingwave", RISINGWAVE),
    ] {
        for transactions in [1, 7] {
            let output =
                run_split(&fx, query, transactions, &format!("{name}-{transactions}")).await;
            assert_eq!(output, expected, "{name} in {transactions} transactions");
        }
    }
}

#[tokio::test]
async fn tumble_start_and_end_and_shifted_window_bounds_are_exact() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 10 * 60_000, "A", 5),
        record(1, APPEND, 20 * 60_000, "B", 7),
        record(2, APPEND, 50 * 60_000, "A", 1),
        record(3, RETRACT, 50 * 60_000, "A", 1),
        record(4, APPEND, 70 * 60_000, "A", 3),
        record(5, APPEND, 130 * 60_000, "C", 4),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let query = "SELECT TUMBLE_START(event_time, INTERVAL '1' HOUR) AS event_time, \
        TUMBLE_END(event_time, INTERVAL '1' HOUR) AS window_end, \
        TUMBLE_ROWTIME(event_time, INTERVAL '1' HOUR) AS rowtime, \
        city, count(*) AS n, sum(population) AS total \
        FROM foo GROUP BY TUMBLE(event_time, INTERVAL '1' HOUR), city";
    let request = request(&fx, query, &slice, (0, 5), 2 * HOUR_MS, 10, None, "t");
    let outcome = transform_ok(&request).await;
    assert_eq!(
        outcome.new_offset_interval.map(|i| (i.start, i.end)),
        Some((10, 12))
    );
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        column_names(&out),
        [
            "offset",
            "op",
            "system_time",
            "event_time",
            "window_end",
            "rowtime",
            "city",
            "n",
            "total"
        ]
    );
    assert_eq!(ints(&out, "op"), [APPEND as i64; 3]);
    assert_eq!(ints(&out, "event_time"), [0, 0, HOUR_MS]);
    assert_eq!(millis(&out, "window_end"), [HOUR_MS, HOUR_MS, 2 * HOUR_MS]);
    assert_eq!(
        millis(&out, "rowtime"),
        [HOUR_MS - 1, HOUR_MS - 1, 2 * HOUR_MS - 1]
    );
    assert_eq!(strings(&out, "city"), ["A", "B", "A"]);
    assert_eq!(
        ints(&out, "n"),
        [1, 1, 1],
        "the retracted record is not counted"
    );
    assert_eq!(ints(&out, "total"), [5, 7, 3]);

    // The window of C (02:00-03:00) is still open and kept in the checkpoint.
    let next = {
        let slice = fx.slice(
            &[record(6, APPEND, 200 * 60_000, "C", 1)],
            SystemTypes::Compatible,
        );
        let mut next = self::request(
            &fx,
            query,
            &slice,
            (6, 6),
            4 * HOUR_MS,
            13,
            Some(request.new_checkpoint_path.clone()),
            "t2",
        );
        next.query_inputs[0].offset_interval =
            Some(weir_reference_engine::OffsetInterval { start: 6, end: 6 });
        next
    };
    transform_ok(&next).await;
    let out = read_parquet(&next.new_data_path);
    assert_eq!(ints(&out, "event_time"), [2 * HOUR_MS, 3 * HOUR_MS]);
    assert_eq!(strings(&out, "city"), ["C", "C"]);
    assert_eq!(ints(&out, "total"), [4, 1]);
}

/// kamu's `covid19.canada.case-details` shape: province, id, reported_date as event time.
fn case_details(fx: &Fixture) -> std::path::PathBuf {
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", utc_ms(), false),
        Field::new("reported_date", utc_ms(), false),
        Field::new("province", DataType::Utf8, false),
        Field::new("id", DataType::Int64, false),
    ]));
    let rows: Vec<(i64, i32, i64, &str)> = vec![
        (0, APPEND, 0, "AB"),
        (1, APPEND, 0, "BC"),
        (2, APPEND, 3 * HOUR_MS, "AB"),
        (3, APPEND, DAY_MS, "AB"),
        (4, APPEND, DAY_MS + 5 * HOUR_MS, "ON"),
        (5, RETRACT, DAY_MS + 5 * HOUR_MS, "ON"),
        (6, APPEND, 2 * DAY_MS, "QC"),
    ];
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(TimestampMillisecondArray::from_value(0, rows.len()).with_timezone("UTC")),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.2))
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0 * 10))),
        ],
    )
    .unwrap();
    let path = fx.path("case-details");
    write_batch(&path, &batch);
    path
}

#[tokio::test]
async fn kamus_canada_daily_cases_risingwave_transform_runs_as_written() {
    // examples/covid/canada.daily-cases.yaml, with `engine: risingwave` changed and nothing else.
    const DAILY_CASES: &str = r#"
          select
            window_end - interval '1' second as reported_date,
            province,
            count(1) as total_daily
          from tumble(
            "covid19.canada.case-details",
            reported_date,
            interval '1' day
          )
          group by 1, 2
          emit on window close
"#;
    let fx = Fixture::new();
    let details = case_details(&fx);
    let vocab = DatasetVocabulary {
        event_time_column: "reported_date".into(),
        ..DatasetVocabulary::default()
    };
    let mut input = fx.input(
        "covid19.canada.case-details",
        vec![details.clone()],
        Some((0, 6)),
    );
    input.vocab = vocab.clone();
    input.schema_file = details.display().to_string();
    input.explicit_watermarks = vec![watermark(0, 2 * DAY_MS / 1000)];
    let mut request = fx.request(DAILY_CASES, vec![input], 0);
    request.vocab = vocab;
    let outcome = transform_ok(&request).await;
    assert_eq!(
        outcome.new_offset_interval.map(|i| (i.start, i.end)),
        Some((0, 2))
    );
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        column_names(&out),
        [
            "offset",
            "op",
            "system_time",
            "reported_date",
            "province",
            "total_daily"
        ]
    );
    // Days 1 and 2 are closed by the watermark; ON's only case was retracted; day 3 stays open.
    assert_eq!(
        ints(&out, "reported_date"),
        [DAY_MS - 1000, DAY_MS - 1000, 2 * DAY_MS - 1000]
    );
    assert_eq!(strings(&out, "province"), ["AB", "BC", "AB"]);
    assert_eq!(ints(&out, "total_daily"), [2, 1, 1]);
}

#[tokio::test]
async fn uneven_hops_offsets_and_months_are_refused_naming_what_to_write() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    for (query, expected) in [
        (
            "SELECT HOP_START(event_time, INTERVAL '40' MINUTE, INTERVAL '1' HOUR) AS event_time, count(*) AS n \
             FROM foo GROUP BY HOP(event_time, INTERVAL '40' MINUTE, INTERVAL '1' HOUR)",
            "whole multiple of its slide",
        ),
        (
            "SELECT TUMBLE_START(event_time, INTERVAL '1' HOUR) AS event_time, count(*) AS n \
             FROM foo GROUP BY TUMBLE(event_time, INTERVAL '1' HOUR, INTERVAL '5' MINUTE)",
            "window offsets are not supported",
        ),
        (
            "SELECT TUMBLE_START(event_time, INTERVAL '1' MONTH) AS event_time, count(*) AS n \
             FROM foo GROUP BY TUMBLE(event_time, INTERVAL '1' MONTH)",
            "months",
        ),
        (
            "SELECT window_start AS event_time, window_end - window_start AS width, count(*) AS n \
             FROM tumble(foo, event_time, INTERVAL '1' HOUR) GROUP BY window_start, window_end",
            "must be a GROUP BY key",
        ),
    ] {
        let request = request(&fx, query, &slice, (0, 0), HOUR_MS, 0, None, "refused");
        let message = transform(&request).await.0.invalid_query();
        assert!(message.contains(expected), "{query}: {message}");
    }
}

const HOP_GROUP: &str = "SELECT HOP_START(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR) AS event_time, \
    HOP_END(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR) AS window_end, city, \
    count(*) AS n, sum(population) AS total \
    FROM foo GROUP BY HOP(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR), city";

#[tokio::test]
async fn hopping_windows_hold_each_record_in_every_window_that_covers_it() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 10 * 60_000, "A", 5),
        record(1, APPEND, 70 * 60_000, "A", 3),
        record(2, APPEND, 40 * 60_000, "B", 7),
        record(3, APPEND, 150 * 60_000, "B", 1),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let request = request(&fx, HOP_GROUP, &slice, (0, 3), 2 * HOUR_MS, 0, None, "t");
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    let half = HOUR_MS / 2;
    // Windows of an hour every 30 minutes closed by 02:00 (the last starts at 01:00); B at 02:30 waits.
    assert_eq!(
        ints(&out, "event_time"),
        [-half, 0, 0, half, half, 2 * half]
    );
    assert_eq!(
        millis(&out, "window_end"),
        [half, 2 * half, 2 * half, 3 * half, 3 * half, 4 * half]
    );
    assert_eq!(strings(&out, "city"), ["A", "A", "B", "A", "B", "A"]);
    assert_eq!(ints(&out, "n"), [1; 6]);
    assert_eq!(ints(&out, "total"), [5, 5, 7, 3, 7, 3]);
}

#[tokio::test]
async fn every_hopping_window_syntax_gives_the_same_output_in_one_or_seven_transactions() {
    let fx = Fixture::new();
    let expected = run_split(&fx, HOP_GROUP, 1, "hop-group").await;
    assert!(expected.num_rows() >= 40, "{} rows", expected.num_rows());
    let tvf = "SELECT window_start AS event_time, window_end, city, count(*) AS n, sum(population) AS total \
        FROM TABLE(HOP(TABLE foo, DESCRIPTOR(event_time), INTERVAL '30' MINUTE, INTERVAL '1' HOUR)) \
        GROUP BY window_start, window_end, city";
    let risingwave = "select window_start as event_time, window_end, city, count(*) as n, sum(population) as total \
        from hop(foo, event_time, interval '30' minute, interval '1' hour) \
        group by window_start, window_end, city emit on window close";
    for (name, query) in [
        ("group", HOP_GROUP),
        ("tvf", tvf),
        ("risingwave", risingwave),
    ] {
        for transactions in [1, 7] {
            let output = run_split(
                &fx,
                query,
                transactions,
                &format!("hop-{name}-{transactions}"),
            )
            .await;
            assert_eq!(output, expected, "{name} in {transactions} transactions");
        }
    }
}
