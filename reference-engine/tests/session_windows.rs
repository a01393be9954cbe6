//! Session windows: Flink's group window `GROUP BY SESSION(ts, gap)` with `SESSION_START`,
//! `SESSION_END`, `SESSION_ROWTIME`, and its table function `TABLE(SESSION(TABLE t PARTITION BY k,
//! DESCRIPTOR(ts), gap))`. Exact outputs across transactions, retractions that split a session, late
//! records, open sessions kept in the checkpoint, MigrateQuery, and the incremental property: the same
//! changelog in one transaction or many gives the sessions of the records left after its retractions
//! and corrections.
use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use weir_reference_engine::arrow::array::{Int64Array, RecordBatch};
use weir_reference_engine::arrow::compute::concat_batches;
use weir_reference_engine::arrow::datatypes::{DataType, TimeUnit};
use weir_reference_engine::{
    DatasetId, DatasetVocabulary, MigrateQueryRequest, NoProgress, OffsetInterval, ReferenceEngine,
    TransformRequest,
};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

const SESSION_GROUP: &str = "SELECT SESSION_START(event_time, INTERVAL '30' MINUTE) AS event_time, \
    SESSION_END(event_time, INTERVAL '30' MINUTE) AS session_end, \
    SESSION_ROWTIME(event_time, INTERVAL '30' MINUTE) AS rowtime, \
    city, count(*) AS n, sum(population) AS total \
    FROM foo GROUP BY SESSION(event_time, INTERVAL '30' MINUTE), city";
const SESSION_TABLE: &str = "SELECT window_start AS event_time, window_end AS session_end, \
    window_time AS rowtime, city, count(*) AS n, sum(population) AS total \
    FROM TABLE(SESSION(TABLE foo PARTITION BY city, DESCRIPTOR(event_time), INTERVAL '30' MINUTE)) \
    GROUP BY window_start, window_end, window_time, city";

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
async fn sessions_of_each_key_are_emitted_once_the_watermark_reaches_their_end() {
    for (name, query) in [("group", SESSION_GROUP), ("table", SESSION_TABLE)] {
        let fx = Fixture::new();
        let records = vec![
            record(0, APPEND, 0, "A", 5),
            record(1, APPEND, 20 * MINUTE_MS, "A", 3),
            record(2, APPEND, 10 * MINUTE_MS, "B", 7),
            record(3, APPEND, 45 * MINUTE_MS, "A", 1),
            record(4, APPEND, 50 * MINUTE_MS, "B", 2),
            record(5, APPEND, 100 * MINUTE_MS, "A", 4),
            record(6, APPEND, 120 * MINUTE_MS, "A", 6),
        ];
        let slice = fx.slice(&records, SystemTypes::Compatible);
        let first = request(&fx, query, &slice, (0, 5), 90 * MINUTE_MS, 0, None, "t0");
        let outcome = transform_ok(&first).await;
        assert_eq!(
            outcome.new_offset_interval,
            Some(OffsetInterval { start: 0, end: 2 }),
            "{name}"
        );
        let out = read_parquet(&first.new_data_path);
        assert_eq!(
            column_names(&out),
            [
                "offset",
                "op",
                "system_time",
                "event_time",
                "session_end",
                "rowtime",
                "city",
                "n",
                "total"
            ],
            "{name}"
        );
        // A: 00:00, 00:20, 00:45 (less than 30 minutes apart) are one session; B's records are 40
        // minutes apart: two sessions. In session end then key order.
        assert_eq!(ints(&out, "op"), [APPEND as i64; 3], "{name}");
        assert_eq!(ints(&out, "event_time"), minutes(&[10, 0, 50]), "{name}");
        assert_eq!(
            millis(&out, "session_end"),
            minutes(&[40, 75, 80]),
            "{name}"
        );
        assert_eq!(
            millis(&out, "rowtime"),
            [40 * MINUTE_MS - 1, 75 * MINUTE_MS - 1, 80 * MINUTE_MS - 1],
            "{name}"
        );
        assert_eq!(strings(&out, "city"), ["B", "A", "B"], "{name}");
        assert_eq!(ints(&out, "n"), [1, 3, 1], "{name}");
        assert_eq!(ints(&out, "total"), [7, 9, 2], "{name}");
        // The open session's record stays, with each key's last emitted session end (sign 0).
        let mut signs = ints(&read_parquet(&first.new_checkpoint_path), "__weir_sign");
        signs.sort_unstable();
        assert_eq!(signs, [0, 0, 1], "{name}");

        // A at 02:00 extends the open session 01:40-02:10 to 02:30.
        let second = request(
            &fx,
            query,
            &slice,
            (6, 6),
            3 * HOUR_MS,
            3,
            Some(first.new_checkpoint_path.clone()),
            "t1",
        );
        transform_ok(&second).await;
        let out = read_parquet(&second.new_data_path);
        assert_eq!(ints(&out, "offset"), [3], "{name}");
        assert_eq!(ints(&out, "event_time"), minutes(&[100]), "{name}");
        assert_eq!(millis(&out, "session_end"), minutes(&[150]), "{name}");
        assert_eq!(ints(&out, "n"), [2], "{name}");
        assert_eq!(ints(&out, "total"), [10], "{name}");
    }
}

#[tokio::test]
async fn a_retraction_before_the_session_closes_can_split_it() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 0, "A", 1),
        record(1, APPEND, 20 * MINUTE_MS, "A", 2),
        record(2, APPEND, 40 * MINUTE_MS, "A", 4),
        record(3, RETRACT, 20 * MINUTE_MS, "A", 2),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    // 00:00-01:10 is one session while 00:20 is there.
    let first = request(
        &fx,
        SESSION_GROUP,
        &slice,
        (0, 2),
        30 * MINUTE_MS,
        0,
        None,
        "t0",
    );
    transform_ok(&first).await;
    assert_eq!(read_parquet(&first.new_data_path).num_rows(), 0);
    // Without it, 00:00-00:30 has closed (its end is before the watermark) and 00:40-01:10 has not.
    let second = request(
        &fx,
        SESSION_GROUP,
        &slice,
        (3, 3),
        60 * MINUTE_MS,
        0,
        Some(first.new_checkpoint_path.clone()),
        "t1",
    );
    transform_ok(&second).await;
    let out = read_parquet(&second.new_data_path);
    assert_eq!(ints(&out, "event_time"), [0]);
    assert_eq!(millis(&out, "session_end"), minutes(&[30]));
    assert_eq!((ints(&out, "n"), ints(&out, "total")), (vec![1], vec![1]));
    // No new records, a later watermark.
    let mut third = request(
        &fx,
        SESSION_GROUP,
        &slice,
        (0, 0),
        2 * HOUR_MS,
        1,
        Some(second.new_checkpoint_path.clone()),
        "t2",
    );
    third.query_inputs[0].offset_interval = None;
    transform_ok(&third).await;
    let out = read_parquet(&third.new_data_path);
    assert_eq!(ints(&out, "event_time"), minutes(&[40]));
    assert_eq!(millis(&out, "session_end"), minutes(&[70]));
    assert_eq!((ints(&out, "n"), ints(&out, "total")), (vec![1], vec![4]));

    // The same changelog in one transaction: the same two sessions.
    let whole = request(
        &fx,
        SESSION_GROUP,
        &slice,
        (0, 3),
        2 * HOUR_MS,
        0,
        None,
        "whole",
    );
    transform_ok(&whole).await;
    let out = read_parquet(&whole.new_data_path);
    assert_eq!(ints(&out, "event_time"), minutes(&[0, 40]));
    assert_eq!(ints(&out, "total"), [1, 4]);
}

#[tokio::test]
async fn records_before_their_keys_last_emitted_session_end_are_late_and_dropped() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 0, "A", 1),
        record(1, APPEND, 20 * MINUTE_MS, "A", 10),
        record(2, APPEND, 20 * MINUTE_MS, "B", 100),
        record(3, APPEND, 35 * MINUTE_MS, "A", 1000),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let first = request(&fx, SESSION_GROUP, &slice, (0, 0), HOUR_MS, 0, None, "t0");
    transform_ok(&first).await;
    let out = read_parquet(&first.new_data_path);
    assert_eq!(millis(&out, "session_end"), minutes(&[30]));

    // A at 00:20 would join the session 00:00-00:30 already emitted: dropped. B has no emitted
    // session, and A at 00:35 starts after A's: both make sessions of their own.
    let second = request(
        &fx,
        SESSION_GROUP,
        &slice,
        (1, 3),
        2 * HOUR_MS,
        1,
        Some(first.new_checkpoint_path.clone()),
        "t1",
    );
    transform_ok(&second).await;
    let out = read_parquet(&second.new_data_path);
    assert_eq!(strings(&out, "city"), ["B", "A"]);
    assert_eq!(ints(&out, "event_time"), minutes(&[20, 35]));
    assert_eq!(millis(&out, "session_end"), minutes(&[50, 65]));
    assert_eq!(ints(&out, "total"), [100, 1000]);
}

/// Bursts of records (eight every four minutes, then a pause of twenty) over cities in an uneven
/// order, with corrections and retractions right after what they change.
fn changelog() -> Vec<Record> {
    let cities = ["A", "B", "C"];
    let mut records = Vec::new();
    let mut offset = 0;
    for i in 0..160i64 {
        let event_time = i * 4 * MINUTE_MS + (i / 8) * 20 * MINUTE_MS;
        let city = cities[((i * 7 / 5) % 3) as usize];
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
        } else if i % 5 == 2 {
            records.push(record(offset, RETRACT, event_time, city, population));
            offset += 1;
        }
    }
    records
}

/// The sessions (start, end, city, records, total) of the records the changelog leaves, whose end is
/// at or before `watermark_ms`, in end then city order.
fn expected_sessions(
    records: &[Record],
    gap_ms: i64,
    watermark_ms: i64,
) -> Vec<(i64, i64, String, i64, i64)> {
    let mut live: Vec<(String, i64, i64)> = Vec::new();
    for r in records {
        let data = (r.city.clone(), r.event_time_ms, r.population);
        if r.op == APPEND || r.op == CORRECT_TO {
            live.push(data);
        } else {
            let at = live.iter().position(|l| *l == data).unwrap();
            live.remove(at);
        }
    }
    let mut by_city: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for (city, time, population) in live {
        by_city.entry(city).or_default().push((time, population));
    }
    let mut sessions = Vec::new();
    for (city, mut times) in by_city {
        times.sort_unstable();
        let mut current: Option<(i64, i64, i64, i64)> = None;
        for (time, population) in times {
            current = match current {
                Some((first, last, n, total)) if time - last < gap_ms => {
                    Some((first, time, n + 1, total + population))
                }
                Some((first, last, n, total)) => {
                    sessions.push((first, last + gap_ms, city.clone(), n, total));
                    Some((time, time, 1, population))
                }
                None => Some((time, time, 1, population)),
            };
        }
        if let Some((first, last, n, total)) = current {
            sessions.push((first, last + gap_ms, city.clone(), n, total));
        }
    }
    sessions.retain(|s| s.1 <= watermark_ms);
    sessions.sort_by(|a, b| (a.1, &a.2).cmp(&(b.1, &b.2)));
    sessions
}

fn sessions_of(batch: &RecordBatch) -> Vec<(i64, i64, String, i64, i64)> {
    let (starts, ends) = (ints(batch, "event_time"), millis(batch, "session_end"));
    let (cities, n, total) = (
        strings(batch, "city"),
        ints(batch, "n"),
        ints(batch, "total"),
    );
    (0..batch.num_rows())
        .map(|i| (starts[i], ends[i], cities[i].clone(), n[i], total[i]))
        .collect()
}

/// The output of `query` over the changelog in `transactions` transactions with checkpoints, and the
/// last watermark.
async fn run_split(
    fx: &Fixture,
    query: &str,
    transactions: usize,
    name: &str,
) -> (RecordBatch, i64) {
    let records = changelog();
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let mut outputs = Vec::new();
    let mut checkpoint = None;
    let mut next_offset = 0;
    let mut watermark_ms = 0;
    for (n, chunk) in records
        .chunks(records.len().div_ceil(transactions))
        .enumerate()
    {
        let interval = (chunk[0].offset as u64, chunk.last().unwrap().offset as u64);
        watermark_ms = chunk.last().unwrap().event_time_ms - HOUR_MS / 2;
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
    (
        concat_batches(&outputs[0].schema(), &outputs).unwrap(),
        watermark_ms,
    )
}

#[tokio::test]
async fn sessions_of_a_changelog_are_those_of_its_live_records_in_one_or_many_transactions() {
    let fx = Fixture::new();
    let (expected, watermark_ms) = run_split(&fx, SESSION_GROUP, 1, "group-1").await;
    let sessions = expected_sessions(&changelog(), 30 * MINUTE_MS, watermark_ms);
    assert!(sessions.len() >= 25, "{} sessions", sessions.len());
    assert!(
        sessions.iter().any(|s| s.3 >= 3) && sessions.iter().any(|s| s.3 == 1),
        "sessions of one record and of several: {sessions:?}"
    );
    assert_eq!(sessions_of(&expected), sessions);
    for (name, query) in [("group", SESSION_GROUP), ("table", SESSION_TABLE)] {
        for transactions in [1, 4, 9] {
            let (output, _) =
                run_split(&fx, query, transactions, &format!("{name}-{transactions}")).await;
            assert_eq!(output, expected, "{name} in {transactions} transactions");
        }
    }
}

#[tokio::test]
async fn migrate_emits_the_open_sessions_and_starts_the_next_query() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &[
            record(0, APPEND, 0, "A", 5),
            record(1, APPEND, 10 * MINUTE_MS, "A", 7),
            record(2, APPEND, 0, "B", 1),
        ],
        SystemTypes::Compatible,
    );
    // No watermark: both sessions stay open in the checkpoint.
    let mut first = fx.request(
        SESSION_GROUP,
        vec![fx.input("foo", vec![slice], Some((0, 2)))],
        0,
    );
    first.new_checkpoint_path = fx.path("t0/checkpoint").display().to_string();
    transform_ok(&first).await;

    let next_query = SESSION_GROUP.replace("'30' MINUTE", "'1' HOUR");
    let request = MigrateQueryRequest {
        dataset_id: DatasetId::from_key([9; 32]),
        dataset_alias: "bar".into(),
        system_time: system_time(),
        vocab: DatasetVocabulary::default(),
        prev_transform: sql(SESSION_GROUP),
        next_transform: sql(&next_query),
        query_inputs: vec![fx.input("foo", vec![], None)],
        next_offset: 0,
        prev_checkpoint_path: Some(first.new_checkpoint_path.clone()),
        new_checkpoint_path: fx.path("migrate/checkpoint").display().to_string(),
        new_data_path: fx.path("migrate/data").display().to_string(),
    };
    let outcome = terminal(
        ReferenceEngine::new()
            .migrate_query(&request, &NoProgress)
            .await,
    )
    .success();
    assert!(outcome.new_checkpoint_written);
    let out = read_parquet(&request.new_data_path);
    assert_eq!(strings(&out, "city"), ["B", "A"]);
    assert_eq!(millis(&out, "session_end"), minutes(&[30, 40]));
    assert_eq!(ints(&out, "total"), [1, 12]);
    assert_eq!(read_parquet(&request.new_checkpoint_path).num_rows(), 0);

    // The next query continues from the new checkpoint, with its own gap.
    let slice = fx.slice(
        &[
            record(3, APPEND, 3 * HOUR_MS, "C", 1),
            record(4, APPEND, 3 * HOUR_MS + 50 * MINUTE_MS, "C", 2),
        ],
        SystemTypes::Compatible,
    );
    let mut next = fx.request(
        &next_query,
        vec![fx.input("foo", vec![slice], Some((3, 4)))],
        2,
    );
    next.prev_checkpoint_path = Some(request.new_checkpoint_path.clone());
    next.query_inputs[0].explicit_watermarks = vec![watermark(0, 6 * HOUR_MS / 1000)];
    transform_ok(&next).await;
    let out = read_parquet(&next.new_data_path);
    assert_eq!(ints(&out, "n"), [2]);
    assert_eq!(millis(&out, "session_end"), [4 * HOUR_MS + 50 * MINUTE_MS]);
}

#[tokio::test]
async fn session_windows_outside_the_supported_form_are_refused_saying_why() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    for (query, expected) in [
        (
            "SELECT window_start AS event_time, city, count(*) AS n \
             FROM TABLE(SESSION(TABLE foo, DESCRIPTOR(event_time), INTERVAL '30' MINUTE)) \
             GROUP BY window_start, window_end, city",
            "must be its PARTITION BY columns",
        ),
        (
            "SELECT window_end AS event_time, count(*) AS n \
             FROM TABLE(SESSION(TABLE foo, DESCRIPTOR(event_time), INTERVAL '30' MINUTE)) \
             GROUP BY window_end",
            "grouped by its start",
        ),
        (
            "SELECT * FROM TABLE(SESSION(TABLE foo PARTITION BY city, DESCRIPTOR(event_time), INTERVAL '30' MINUTE))",
            "aggregate it",
        ),
        (
            "SELECT window_start AS event_time, count(*) AS n \
             FROM session(foo, event_time, INTERVAL '30' MINUTE) GROUP BY window_start, window_end",
            "RisingWave has none",
        ),
    ] {
        let request = request(&fx, query, &slice, (0, 0), HOUR_MS, 0, None, "refused");
        let message = transform(&request).await.0.invalid_query();
        assert!(message.contains(expected), "{query}: {message}");
    }
}
