//! Cumulating windows, Flink's `TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), step, size))`: windows of one
//! start whose ends grow by the step up to the size, each emitted once the watermark reaches its end.
//! Exact outputs across transactions, records late for some of their windows, the same output in one
//! transaction or seven (with retractions and corrections), and the largest windows equal to tumbling
//! windows of the size.
use crate::common;

use std::path::Path;

use common::*;
use weir_reference_engine::arrow::array::{Int64Array, RecordBatch};
use weir_reference_engine::arrow::compute::concat_batches;
use weir_reference_engine::arrow::datatypes::{DataType, TimeUnit};
use weir_reference_engine::{OffsetInterval, TransformRequest};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

const CUMULATE: &str = "SELECT window_start AS event_time, window_end, city, \
    count(*) AS n, sum(population) AS total \
    FROM TABLE(CUMULATE(TABLE foo, DESCRIPTOR(event_time), INTERVAL '30' MINUTE, INTERVAL '2' HOUR)) \
    GROUP BY window_start, window_end, city";

/// A timestamp column (any unit) as milliseconds.
fn millis(batch: &RecordBatch, name: &str) -> Vec<i64> {
    let column = batch.column_by_name(name).unwrap();
    let column = weir_reference_engine::arrow::compute::cast(
        column,
        &DataType::Timestamp(TimeUnit::Millisecond, None),
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

fn minutes(values: &[i64]) -> Vec<i64> {
    values.iter().map(|v| v * MINUTE_MS).collect()
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

#[tokio::test]
async fn each_cumulating_window_is_emitted_once_the_watermark_reaches_its_end() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 10 * MINUTE_MS, "A", 5),
        record(1, APPEND, 40 * MINUTE_MS, "B", 7),
        record(2, APPEND, 50 * MINUTE_MS, "A", 1),
        record(3, RETRACT, 50 * MINUTE_MS, "A", 1),
        record(4, CORRECT_FROM, 40 * MINUTE_MS, "B", 7),
        record(5, CORRECT_TO, 40 * MINUTE_MS, "B", 9),
        record(6, APPEND, 70 * MINUTE_MS, "A", 3),
        record(7, APPEND, 130 * MINUTE_MS, "C", 4),
        record(8, APPEND, 200 * MINUTE_MS, "A", 2),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let first = request(&fx, CUMULATE, &slice, (0, 7), 2 * HOUR_MS, 0, None, "t0");
    let outcome = transform_ok(&first).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 0, end: 6 })
    );
    let out = read_parquet(&first.new_data_path);
    assert_eq!(
        column_names(&out),
        [
            "offset",
            "op",
            "system_time",
            "event_time",
            "window_end",
            "city",
            "n",
            "total"
        ]
    );
    assert_eq!(ints(&out, "op"), [APPEND as i64; 7]);
    // The windows of 00:00 end every 30 minutes up to 02:00; the retracted record counts nowhere,
    // the corrected one with its new value.
    assert_eq!(ints(&out, "event_time"), [0; 7]);
    assert_eq!(
        millis(&out, "window_end"),
        minutes(&[30, 60, 60, 90, 90, 120, 120])
    );
    assert_eq!(strings(&out, "city"), ["A", "A", "B", "A", "B", "A", "B"]);
    assert_eq!(ints(&out, "n"), [1, 1, 1, 2, 1, 2, 1]);
    assert_eq!(ints(&out, "total"), [5, 5, 9, 8, 9, 8, 9]);

    // C (02:10) waits in the checkpoint for the windows of 02:00; A (03:20) joins them.
    let second = request(
        &fx,
        CUMULATE,
        &slice,
        (8, 8),
        4 * HOUR_MS,
        7,
        Some(first.new_checkpoint_path.clone()),
        "t1",
    );
    let outcome = transform_ok(&second).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 7, end: 12 })
    );
    let out = read_parquet(&second.new_data_path);
    assert_eq!(ints(&out, "event_time"), [2 * HOUR_MS; 6]);
    assert_eq!(
        millis(&out, "window_end"),
        minutes(&[150, 180, 210, 210, 240, 240])
    );
    assert_eq!(strings(&out, "city"), ["C", "C", "A", "C", "A", "C"]);
    assert_eq!(ints(&out, "n"), [1; 6]);
    assert_eq!(ints(&out, "total"), [4, 4, 2, 4, 2, 4]);
}

#[tokio::test]
async fn a_record_late_for_some_of_its_windows_counts_in_the_others() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 10 * MINUTE_MS, "A", 5),
        record(1, APPEND, 80 * MINUTE_MS, "A", 3),
        record(2, APPEND, 20 * MINUTE_MS, "A", 100),
        record(3, APPEND, 100 * MINUTE_MS, "A", 1000),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    // The watermark at 01:40 closes the windows ending 00:30, 01:00 and 01:30.
    let first = request(
        &fx,
        CUMULATE,
        &slice,
        (0, 0),
        100 * MINUTE_MS,
        0,
        None,
        "t0",
    );
    transform_ok(&first).await;
    let out = read_parquet(&first.new_data_path);
    assert_eq!(millis(&out, "window_end"), minutes(&[30, 60, 90]));
    assert_eq!(ints(&out, "total"), [5, 5, 5]);

    // 01:20 and 00:20 are late for the windows already emitted, not for the one ending 02:00.
    let second = request(
        &fx,
        CUMULATE,
        &slice,
        (1, 2),
        2 * HOUR_MS,
        3,
        Some(first.new_checkpoint_path.clone()),
        "t1",
    );
    transform_ok(&second).await;
    let out = read_parquet(&second.new_data_path);
    assert_eq!(millis(&out, "window_end"), minutes(&[120]));
    assert_eq!(ints(&out, "n"), [3]);
    assert_eq!(ints(&out, "total"), [108]);

    // 01:40 is late for every window it belongs to: dropped.
    let third = request(
        &fx,
        CUMULATE,
        &slice,
        (3, 3),
        150 * MINUTE_MS,
        4,
        Some(second.new_checkpoint_path.clone()),
        "t2",
    );
    let outcome = transform_ok(&third).await;
    assert_eq!(outcome.new_offset_interval, None);
    assert_eq!(read_parquet(&third.new_data_path).num_rows(), 0);
    assert_eq!(
        read_parquet(&third.new_checkpoint_path).num_rows(),
        0,
        "nothing is kept for it"
    );
}

/// Records over ten hours with corrections and retractions right after what they change.
fn changelog() -> Vec<Record> {
    let cities = ["A", "B", "C"];
    let mut records = Vec::new();
    let mut offset = 0;
    for i in 0..150i64 {
        let event_time = i * 4 * MINUTE_MS;
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
async fn cumulating_windows_give_the_same_output_in_one_or_seven_transactions() {
    let fx = Fixture::new();
    let expected = run_split(&fx, CUMULATE, 1, "one").await;
    assert!(expected.num_rows() >= 40, "{} rows", expected.num_rows());
    for transactions in [3, 7] {
        let output = run_split(
            &fx,
            CUMULATE,
            transactions,
            &format!("split-{transactions}"),
        )
        .await;
        assert_eq!(output, expected, "in {transactions} transactions");
    }

    // The largest window of each start is the tumbling window of the size.
    let tumbling = run_split(
        &fx,
        "SELECT window_start AS event_time, window_end, city, count(*) AS n, sum(population) AS total \
         FROM TABLE(TUMBLE(TABLE foo, DESCRIPTOR(event_time), INTERVAL '2' HOUR)) \
         GROUP BY window_start, window_end, city",
        1,
        "tumbling",
    )
    .await;
    let rows = |batch: &RecordBatch, whole: bool| -> Vec<(i64, i64, String, i64, i64)> {
        let (starts, ends) = (ints(batch, "event_time"), millis(batch, "window_end"));
        let (cities, n, total) = (
            strings(batch, "city"),
            ints(batch, "n"),
            ints(batch, "total"),
        );
        (0..batch.num_rows())
            .filter(|&i| !whole || ends[i] - starts[i] == 2 * HOUR_MS)
            .map(|i| (starts[i], ends[i], cities[i].clone(), n[i], total[i]))
            .collect()
    };
    let largest = rows(&expected, true);
    assert!(largest.len() >= 9, "{largest:?}");
    assert_eq!(largest, rows(&tumbling, false));
}

#[tokio::test]
async fn cumulating_windows_outside_the_supported_form_are_refused_saying_why() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    for (query, expected) in [
        (
            "SELECT window_start AS event_time, count(*) AS n \
             FROM TABLE(CUMULATE(TABLE foo, DESCRIPTOR(event_time), INTERVAL '40' MINUTE, INTERVAL '1' HOUR)) \
             GROUP BY window_start, window_end",
            "size must be a whole multiple of its step",
        ),
        (
            "SELECT window_start AS event_time, count(*) AS n \
             FROM TABLE(CUMULATE(TABLE foo, DESCRIPTOR(event_time), INTERVAL '30' MINUTE, INTERVAL '1' HOUR)) \
             GROUP BY window_start",
            "grouped by its end",
        ),
        (
            "SELECT * FROM TABLE(CUMULATE(TABLE foo, DESCRIPTOR(event_time), INTERVAL '30' MINUTE, INTERVAL '1' HOUR))",
            "aggregate it",
        ),
        (
            "SELECT CUMULATE_START(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR) AS event_time, count(*) AS n \
             FROM foo GROUP BY CUMULATE(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR)",
            "Flink has none",
        ),
        (
            "SELECT window_start AS event_time, count(*) AS n \
             FROM cumulate(foo, event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR) \
             GROUP BY window_start, window_end",
            "RisingWave has none",
        ),
    ] {
        let request = request(&fx, query, &slice, (0, 0), HOUR_MS, 0, None, "refused");
        let message = transform(&request).await.0.invalid_query();
        assert!(message.contains(expected), "{query}: {message}");
    }
}
