//! Tumbling-window aggregation: watermark-driven output, state in a single checkpoint file, and the
//! same output for one big transaction as for many small ones.
use crate::common;

use std::path::Path;

use common::*;
use weir_reference_engine::arrow::array::RecordBatch;
use weir_reference_engine::arrow::compute::concat_batches;
use weir_reference_engine::{OffsetInterval, TransformRequest};

const HOUR_MS: i64 = 3_600_000;
const WINDOWED: &str = "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, city, \
    count(*) AS readings, sum(population) AS population, min(population) AS low, \
    max(population) AS high, avg(population) AS mean \
    FROM foo WHERE population >= 0 GROUP BY date_bin(INTERVAL '1 hour', event_time), city";

/// 240 records over ten hours with corrections and retractions right after what they change.
fn changelog() -> Vec<Record> {
    let cities = ["A", "B", "C"];
    let mut records = Vec::new();
    let mut offset = 0;
    for i in 0..200i64 {
        let event_time = i * 3 * 60_000;
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
                population + 1000,
            ));
            offset += 2;
        } else if i % 11 == 5 {
            records.push(record(offset, RETRACT, event_time, city, population));
            offset += 1;
        }
    }
    records
}

fn windowed_request(
    fx: &Fixture,
    slice: &Path,
    interval: (u64, u64),
    watermark_ms: i64,
    next_offset: u64,
    prev_checkpoint: Option<String>,
    name: &str,
) -> TransformRequest {
    let mut input = fx.input("foo", vec![slice.to_path_buf()], Some(interval));
    input.explicit_watermarks = vec![watermark(0, watermark_ms / 1000)];
    let mut request = fx.request(WINDOWED, vec![input], next_offset);
    request.prev_checkpoint_path = prev_checkpoint;
    request.new_checkpoint_path = fx.path(&format!("{name}/checkpoint")).display().to_string();
    request.new_data_path = fx.path(&format!("{name}/data")).display().to_string();
    request
}

#[tokio::test]
async fn one_transaction_and_ten_transactions_with_checkpoints_give_identical_output() {
    let fx = Fixture::new();
    let records = changelog();
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let last = records.len() as u64 - 1;
    // The watermark trails the newest event by an hour.
    let final_watermark = records.last().unwrap().event_time_ms - HOUR_MS;

    let whole = windowed_request(&fx, &slice, (0, last), final_watermark, 0, None, "whole");
    let outcome = transform_ok(&whole).await;
    let expected = read_parquet(&whole.new_data_path);
    assert!(
        expected.num_rows() > 20,
        "{} windows emitted",
        expected.num_rows()
    );
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval {
            start: 0,
            end: expected.num_rows() as u64 - 1
        })
    );

    let mut outputs: Vec<RecordBatch> = Vec::new();
    let mut checkpoint = None;
    let mut next_offset = 0u64;
    let per_transaction = records.len().div_ceil(10);
    for (n, chunk) in records.chunks(per_transaction).enumerate() {
        let interval = (chunk[0].offset as u64, chunk.last().unwrap().offset as u64);
        let watermark_ms = chunk.last().unwrap().event_time_ms - HOUR_MS;
        let request = windowed_request(
            &fx,
            &slice,
            interval,
            watermark_ms,
            next_offset,
            checkpoint.clone(),
            &format!("t{n}"),
        );
        let outcome = transform_ok(&request).await;
        assert!(
            Path::new(&request.new_checkpoint_path).is_file(),
            "the checkpoint is a single file"
        );
        if let Some(interval) = outcome.new_offset_interval {
            next_offset = interval.end + 1;
        }
        outputs.push(read_parquet(&request.new_data_path));
        checkpoint = Some(request.new_checkpoint_path.clone());
    }
    assert_eq!(outputs.len(), 10);
    let split = concat_batches(&expected.schema(), &outputs).unwrap();
    assert_eq!(split, expected);
}

#[tokio::test]
async fn windows_are_emitted_once_the_watermark_passes_them_as_appends_with_system_columns() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 10, "B", 5),
        record(1, APPEND, 20, "A", 7),
        record(2, CORRECT_FROM, 20, "A", 7),
        record(3, CORRECT_TO, 20, "A", 9),
        record(4, APPEND, HOUR_MS + 5, "A", 1),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let request = windowed_request(&fx, &slice, (0, 4), HOUR_MS, 50, None, "t");
    let outcome = transform_ok(&request).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 50, end: 51 })
    );
    assert_eq!(outcome.new_watermark, Some(at(3600)));
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        column_names(&out),
        [
            "offset",
            "op",
            "system_time",
            "event_time",
            "city",
            "readings",
            "population",
            "low",
            "high",
            "mean"
        ]
    );
    assert_eq!(ints(&out, "op"), [0, 0]);
    assert_eq!(ints(&out, "event_time"), [0, 0]);
    assert_eq!(strings(&out, "city"), ["A", "B"]);
    assert_eq!(ints(&out, "readings"), [1, 1]);
    assert_eq!(
        ints(&out, "population"),
        [9, 5],
        "the correction replaced 7 by 9"
    );
}

#[tokio::test]
async fn without_a_watermark_nothing_is_emitted_and_state_is_kept() {
    let fx = Fixture::new();
    let slice = fx.slice(&[record(0, APPEND, 10, "A", 5)], SystemTypes::Compatible);
    let mut request = windowed_request(&fx, &slice, (0, 0), 0, 0, None, "t");
    request.query_inputs[0].explicit_watermarks.clear();
    let outcome = transform_ok(&request).await;
    assert_eq!(outcome.new_offset_interval, None);
    assert_eq!(
        read_parquet(&request.new_data_path).num_rows(),
        0,
        "the data file is still written"
    );
    let checkpoint = read_parquet(&request.new_checkpoint_path);
    assert_eq!(
        checkpoint.num_rows(),
        1,
        "the open window's record is in the checkpoint"
    );
}

#[tokio::test]
async fn a_checkpoint_of_another_query_is_refused() {
    let fx = Fixture::new();
    let slice = fx.slice(&[record(0, APPEND, 10, "A", 5)], SystemTypes::Compatible);
    let first = windowed_request(&fx, &slice, (0, 0), 0, 0, None, "t0");
    transform_ok(&first).await;
    let mut second = windowed_request(
        &fx,
        &slice,
        (0, 0),
        0,
        0,
        Some(first.new_checkpoint_path.clone()),
        "t1",
    );
    second.transform = sql(&WINDOWED.replace("1 hour", "2 hours"));
    let message = transform(&second).await.0.invalid_query();
    assert!(
        message.contains("written by a different query") && message.contains("MigrateQuery"),
        "{message}"
    );
}

#[tokio::test]
async fn a_window_aggregation_outside_the_supported_form_says_what_is_unsupported() {
    let fx = Fixture::new();
    let slice = fx.slice(&[record(0, APPEND, 10, "A", 5)], SystemTypes::Compatible);
    let query = "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, count(DISTINCT city) AS cities \
                 FROM foo GROUP BY 1";
    let request = windowed_request(&fx, &slice, (0, 0), 0, 0, None, "t");
    let request = TransformRequest {
        transform: sql(query),
        ..request
    };
    let message = transform(&request).await.0.invalid_query();
    assert!(
        message.contains("unsupported window aggregation") && message.contains("DISTINCT"),
        "{message}"
    );
}

/// Windows are emitted as the input passes them when the input files' statistics bound the event times
/// still to come; a record out of order in a later file still counts. The output equals that of the same
/// records in one file (one row group: nothing can close before the end).
#[tokio::test]
async fn windows_emitted_while_reading_many_files_equal_those_emitted_at_the_end_out_of_order_records_included()
 {
    let fx = Fixture::new();
    // More records than one batch of the engine's stream (8192), over ten hours.
    let mut records: Vec<Record> = (0..40_000i64)
        .map(|i| {
            record(
                i,
                APPEND,
                i * 900,
                ["A", "B", "C"][(i % 3) as usize],
                i % 101,
            )
        })
        .collect();
    // A late-arriving record of the first hour, at the very end of the input.
    let next = records.len() as i64;
    records.push(record(next, APPEND, 5 * 60_000, "A", 77));
    let last = records.len() as u64 - 1;
    let final_watermark = 9 * HOUR_MS;

    let one = fx.slice(&records, SystemTypes::Compatible);
    let whole = windowed_request(&fx, &one, (0, last), final_watermark, 0, None, "one-file");
    transform_ok(&whole).await;
    let expected = read_parquet(&whole.new_data_path);

    // The same records in eight files, in offset order.
    let chunk = records.len().div_ceil(8);
    let files: Vec<_> = records
        .chunks(chunk)
        .map(|c| fx.slice(c, SystemTypes::Compatible))
        .collect();
    let mut input = fx.input("foo", files, Some((0, last)));
    input.explicit_watermarks = vec![watermark(0, final_watermark / 1000)];
    let mut request = fx.request(WINDOWED, vec![input], 0);
    request.new_checkpoint_path = fx.path("many/checkpoint").display().to_string();
    request.new_data_path = fx.path("many/data").display().to_string();
    transform_ok(&request).await;
    let got = read_parquet(&request.new_data_path);
    assert_eq!(got, expected);
    // The late record is in its window: four records of city A in the first hour (three every nine
    // minutes, one late).
    assert!(expected.num_rows() > 20);
}

/// Checkpoints that an engine wrote before cumulating and session windows existed (format 1,
/// `tumbling_window`; `tests/fixtures/`, written by that engine for the queries below over records
/// 0-5 of `fixture_records` with the watermark at 01:00) resume: the open windows are emitted with the
/// new records.
#[tokio::test]
async fn checkpoints_of_format_1_written_by_an_earlier_engine_still_resume() {
    const HOP: &str = "SELECT HOP_START(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR) AS event_time, \
        HOP_END(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR) AS window_end, city, \
        count(*) AS n, sum(population) AS total \
        FROM foo GROUP BY HOP(event_time, INTERVAL '30' MINUTE, INTERVAL '1' HOUR), city";
    const TUMBLE: &str = "SELECT TUMBLE_START(event_time, INTERVAL '1' HOUR) AS event_time, city, \
        count(*) AS n, sum(population) AS total \
        FROM foo GROUP BY TUMBLE(event_time, INTERVAL '1' HOUR), city";
    let minute = 60_000;
    let fixture_records = [
        record(0, APPEND, 10 * minute, "A", 5),
        record(1, APPEND, 40 * minute, "B", 7),
        record(2, APPEND, 70 * minute, "A", 3),
        record(3, APPEND, 100 * minute, "B", 2),
        record(4, RETRACT, 100 * minute, "B", 2),
        record(5, APPEND, 110 * minute, "C", 4),
        record(6, APPEND, 130 * minute, "A", 1),
    ];
    let fx = Fixture::new();
    let slice = fx.slice(&fixture_records, SystemTypes::Compatible);
    for (name, query, next_offset) in [("hop", HOP, 3), ("tumbling", TUMBLE, 2)] {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "tests/fixtures/{name}-window-checkpoint-format-1.parquet"
        ));
        let bytes = std::fs::read(&fixture).unwrap();
        let header = br#""format":1,"kind":"tumbling_window""#;
        assert!(
            bytes.windows(header.len()).any(|w| w == header),
            "{name}: a format 1 checkpoint"
        );
        let mut input = fx.input("foo", vec![slice.clone()], Some((6, 6)));
        input.explicit_watermarks = vec![watermark(0, 3 * 3600)];
        let mut request = fx.request(query, vec![input], next_offset);
        request.prev_checkpoint_path = Some(fixture.display().to_string());
        request.new_checkpoint_path = fx.path(&format!("{name}/checkpoint")).display().to_string();
        request.new_data_path = fx.path(&format!("{name}/data")).display().to_string();
        transform_ok(&request).await;
        let out = read_parquet(&request.new_data_path);
        let minutes = |values: &[i64]| values.iter().map(|v| v * minute).collect::<Vec<_>>();
        if name == "hop" {
            // The windows open at 01:00 (from 00:30 on), B's retracted record subtracted.
            assert_eq!(
                ints(&out, "event_time"),
                minutes(&[30, 30, 60, 60, 90, 90, 120])
            );
            assert_eq!(strings(&out, "city"), ["A", "B", "A", "C", "A", "C", "A"]);
            assert_eq!(ints(&out, "total"), [3, 7, 3, 4, 1, 4, 1]);
        } else {
            assert_eq!(ints(&out, "event_time"), minutes(&[60, 60, 120]));
            assert_eq!(strings(&out, "city"), ["A", "C", "A"]);
            assert_eq!(ints(&out, "total"), [3, 4, 1]);
        }
        assert_eq!(ints(&out, "n"), vec![1; out.num_rows()]);
        assert_eq!(ints(&out, "offset")[0], next_offset as i64);
    }
}
