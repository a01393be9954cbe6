//! Stream-to-stream interval joins: exact outputs for matches and unmatched records across transactions,
//! kamu's `overdue_shipments` join step as written, refusals, and the incremental property: over random
//! orders and shipments split into random transactions, the union of the committed outputs equals the
//! same query run once over all input in DataFusion.
use crate::common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use proptest::prelude::*;
use weir_reference_engine::arrow::array::{
    Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use weir_reference_engine::arrow::compute::cast;
use weir_reference_engine::arrow::datatypes::{DataType, Field, Schema};
use weir_reference_engine::datafusion::prelude::{ParquetReadOptions, SessionContext};
use weir_reference_engine::{DatasetVocabulary, TransformRequest, TransformRequestInput};

const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;

/// An order or a shipment.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    offset: i64,
    event_time_ms: i64,
    order_id: String,
    quantity: i64,
}

fn event(offset: i64, event_time_ms: i64, order_id: &str, quantity: i64) -> Event {
    Event {
        offset,
        event_time_ms,
        order_id: order_id.to_owned(),
        quantity,
    }
}

fn events_batch(events: &[Event], op: i32) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", utc_ms(), false),
        Field::new("event_time", utc_ms(), false),
        Field::new("order_id", DataType::Utf8, false),
        Field::new("quantity", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(
                events.iter().map(|e| e.offset),
            )),
            Arc::new(Int32Array::from_value(op, events.len())),
            Arc::new(TimestampMillisecondArray::from_value(0, events.len()).with_timezone("UTC")),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(events.iter().map(|e| e.event_time_ms))
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(
                events.iter().map(|e| e.order_id.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(
                events.iter().map(|e| e.quantity),
            )),
        ],
    )
    .unwrap()
}

fn write_events(fx: &Fixture, name: &str, events: &[Event]) -> PathBuf {
    let path = fx.path(name);
    write_batch(&path, &events_batch(events, APPEND));
    path
}

/// An input over `files` with offsets `interval` and a watermark.
fn input(
    fx: &Fixture,
    alias: &str,
    files: Vec<PathBuf>,
    interval: Option<(u64, u64)>,
    watermark_ms: Option<i64>,
) -> TransformRequestInput {
    let schema = fx.path(&format!("{alias}-schema"));
    if !schema.exists() {
        write_events(fx, &format!("{alias}-schema"), &[]);
    }
    let mut input = fx.input(alias, files, interval);
    input.schema_file = schema.display().to_string();
    input.explicit_watermarks = watermark_ms
        .map(|w| {
            vec![weir_reference_engine::Watermark {
                system_time: at(0),
                event_time: chrono::DateTime::from_timestamp_millis(w).unwrap(),
            }]
        })
        .unwrap_or_default();
    input
}

fn order_time_vocab() -> DatasetVocabulary {
    DatasetVocabulary {
        event_time_column: "order_time".into(),
        ..DatasetVocabulary::default()
    }
}

const LEFT_JOIN: &str = "SELECT o.event_time AS order_time, o.order_id, o.quantity AS order_quantity, \
    s.event_time AS shipped_time, COALESCE(s.quantity, 0) AS shipped_quantity \
    FROM orders AS o LEFT JOIN shipments AS s \
    ON o.order_id = s.order_id AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL '2' DAY";

fn join_request(
    fx: &Fixture,
    query: &str,
    orders: TransformRequestInput,
    shipments: TransformRequestInput,
    next_offset: u64,
    prev_checkpoint: Option<String>,
    name: &str,
) -> TransformRequest {
    let mut request = fx.request(query, vec![orders, shipments], next_offset);
    request.vocab = order_time_vocab();
    request.prev_checkpoint_path = prev_checkpoint;
    request.new_checkpoint_path = fx.path(&format!("{name}/checkpoint")).display().to_string();
    request.new_data_path = fx.path(&format!("{name}/data")).display().to_string();
    request
}

fn nullable_ints(batch: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let column = cast(batch.column_by_name(name).unwrap(), &DataType::Int64).unwrap();
    let column = column.as_any().downcast_ref::<Int64Array>().unwrap();
    column.iter().collect()
}

#[tokio::test]
async fn a_left_interval_join_emits_matches_at_once_and_unmatched_orders_when_the_bound_passes() {
    let fx = Fixture::new();
    // Transaction 1: orders A (day 0), B (day 0 + 1 h), C (day 1); shipment of A on day 1.
    let orders1 = write_events(
        &fx,
        "orders1",
        &[
            event(0, 0, "A", 5),
            event(1, HOUR_MS, "B", 3),
            event(2, DAY_MS, "C", 1),
        ],
    );
    let shipments1 = write_events(&fx, "shipments1", &[event(0, DAY_MS, "A", 5)]);
    let first = join_request(
        &fx,
        LEFT_JOIN,
        input(&fx, "orders", vec![orders1], Some((0, 2)), Some(DAY_MS)),
        input(
            &fx,
            "shipments",
            vec![shipments1],
            Some((0, 0)),
            Some(DAY_MS),
        ),
        0,
        None,
        "t1",
    );
    let outcome = transform_ok(&first).await;
    let out = read_parquet(&first.new_data_path);
    // Only A's match: B and C may still be shipped within their two days.
    assert_eq!(strings(&out, "order_id"), ["A"]);
    assert_eq!(nullable_ints(&out, "shipped_time"), [Some(DAY_MS)]);
    assert_eq!(ints(&out, "op"), [i64::from(APPEND)]);
    assert_eq!(
        outcome.new_offset_interval.map(|i| (i.start, i.end)),
        Some((0, 0))
    );
    // Kept records could still match records at or after both watermarks (day 1) within two days.
    assert_eq!(
        outcome.new_watermark.map(|w| w.timestamp_millis()),
        Some(-DAY_MS)
    );

    // Transaction 2: B is shipped late (outside its 2 days), C on time; shipments' watermark at day 2.5.
    let shipments2 = write_events(
        &fx,
        "shipments2",
        &[
            event(1, 2 * DAY_MS + 2 * HOUR_MS, "B", 3),
            event(2, 2 * DAY_MS + HOUR_MS, "C", 1),
        ],
    );
    let second = join_request(
        &fx,
        LEFT_JOIN,
        input(&fx, "orders", vec![], None, Some(DAY_MS)),
        input(
            &fx,
            "shipments",
            vec![shipments2],
            Some((1, 2)),
            Some(2 * DAY_MS + 12 * HOUR_MS),
        ),
        1,
        Some(first.new_checkpoint_path.clone()),
        "t2",
    );
    transform_ok(&second).await;
    let out = read_parquet(&second.new_data_path);
    // C matched; B's two days passed (day 2 + 1 h < day 2.5) without a shipment: emitted with nulls.
    // A matched earlier and is not emitted again.
    assert_eq!(strings(&out, "order_id"), ["B", "C"]);
    assert_eq!(
        nullable_ints(&out, "shipped_time"),
        [None, Some(2 * DAY_MS + HOUR_MS)]
    );
    assert_eq!(ints(&out, "shipped_quantity"), [0, 1]);
    assert_eq!(ints(&out, "order_time"), [HOUR_MS, DAY_MS]);
    assert_eq!(ints(&out, "offset"), [1, 2]);

    // Transaction 3: every watermark far ahead: C, matched, leaves without another record.
    let third = join_request(
        &fx,
        LEFT_JOIN,
        input(&fx, "orders", vec![], None, Some(10 * DAY_MS)),
        input(&fx, "shipments", vec![], None, Some(10 * DAY_MS)),
        3,
        Some(second.new_checkpoint_path.clone()),
        "t3",
    );
    let outcome = transform_ok(&third).await;
    assert_eq!(read_parquet(&third.new_data_path).num_rows(), 0);
    assert_eq!(outcome.new_offset_interval, None);
}

#[tokio::test]
async fn an_inner_interval_join_emits_only_matches_and_a_right_join_equals_the_swapped_left_join() {
    let fx = Fixture::new();
    let orders = write_events(
        &fx,
        "orders",
        &[
            event(0, 0, "A", 5),
            event(1, HOUR_MS, "B", 3),
            event(2, 5 * DAY_MS, "A", 2),
        ],
    );
    let shipments = write_events(
        &fx,
        "shipments",
        &[
            event(0, 2 * HOUR_MS, "A", 4),
            event(1, 3 * HOUR_MS, "A", 1),
            event(2, 10 * DAY_MS, "C", 9),
        ],
    );
    let run = |query: &'static str, name: &'static str| {
        let request = join_request(
            &fx,
            query,
            input(
                &fx,
                "orders",
                vec![orders.clone()],
                Some((0, 2)),
                Some(20 * DAY_MS),
            ),
            input(
                &fx,
                "shipments",
                vec![shipments.clone()],
                Some((0, 2)),
                Some(20 * DAY_MS),
            ),
            0,
            None,
            name,
        );
        async move {
            transform_ok(&request).await;
            read_parquet(&request.new_data_path)
        }
    };
    let inner = run(
        "SELECT o.event_time AS order_time, o.order_id, s.quantity AS shipped FROM orders o JOIN shipments s \
         ON o.order_id = s.order_id AND s.event_time >= o.event_time AND s.event_time < o.event_time + INTERVAL '1' DAY",
        "inner",
    )
    .await;
    assert_eq!(strings(&inner, "order_id"), ["A", "A"]);
    assert_eq!(ints(&inner, "shipped"), [1, 4]);
    assert_eq!(ints(&inner, "order_time"), [0, 0]);

    let left = run(LEFT_JOIN, "left").await;
    let right = run(
        "SELECT o.event_time AS order_time, o.order_id, o.quantity AS order_quantity, \
         s.event_time AS shipped_time, COALESCE(s.quantity, 0) AS shipped_quantity \
         FROM shipments AS s RIGHT JOIN orders AS o \
         ON o.order_id = s.order_id AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL '2' DAY",
        "right",
    )
    .await;
    assert_eq!(left, right);
    assert_eq!(strings(&left, "order_id"), ["A", "A", "B", "A"]);
    assert_eq!(
        nullable_ints(&left, "shipped_quantity"),
        [Some(4), Some(1), Some(0), Some(0)]
    );
}

#[tokio::test]
async fn kamus_overdue_shipments_join_step_runs_as_written() {
    // The first query of examples/overdue_shipments/com.acme.shipments.overdue.yaml, as written.
    const ORDER_SHIPMENTS: &str = "
              SELECT
                o.event_time as order_time,
                o.order_id,
                o.quantity as order_quantity,
                CAST(s.event_time as TIMESTAMP(3)) as shipped_time,
                COALESCE(s.quantity, 0) as shipped_quantity
              FROM `com.acme.orders` as o
              LEFT JOIN `com.acme.shipments` as s
              ON
                o.order_id = s.order_id
                AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL '2' DAY
";
    let fx = Fixture::new();
    let orders = write_events(
        &fx,
        "orders",
        &[event(0, 0, "1", 10), event(1, 0, "2", 120)],
    );
    let shipments = write_events(
        &fx,
        "shipments",
        &[
            event(0, DAY_MS, "1", 4),
            event(1, DAY_MS, "1", 6),
            event(2, DAY_MS, "2", 100),
        ],
    );
    let request = join_request(
        &fx,
        ORDER_SHIPMENTS,
        input(
            &fx,
            "com.acme.orders",
            vec![orders],
            Some((0, 1)),
            Some(5 * DAY_MS),
        ),
        input(
            &fx,
            "com.acme.shipments",
            vec![shipments],
            Some((0, 2)),
            Some(5 * DAY_MS),
        ),
        0,
        None,
        "t",
    );
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        column_names(&out),
        [
            "offset",
            "op",
            "system_time",
            "order_time",
            "order_id",
            "order_quantity",
            "shipped_time",
            "shipped_quantity"
        ]
    );
    assert_eq!(strings(&out, "order_id"), ["1", "1", "2"]);
    assert_eq!(ints(&out, "shipped_quantity"), [4, 6, 100]);
    assert_eq!(ints(&out, "shipped_time"), [DAY_MS; 3]);

    // The whole transform (join, then a daily window over its output, then a filter) runs chained:
    // order 2 got 100 of its 120.
    let mut whole = request.clone();
    whole.transform = weir_reference_engine::Transform::Sql(weir_reference_engine::TransformSql {
        queries: Some(vec![
            weir_reference_engine::SqlQueryStep {
                alias: Some("order_shipments".into()),
                query: ORDER_SHIPMENTS.into(),
            },
            weir_reference_engine::SqlQueryStep {
                alias: Some("order_shipments_agg".into()),
                query: "SELECT TUMBLE_START(order_time, INTERVAL '1' DAY) as order_time, order_id, \
                        count(*) as num_shipments, min(shipped_time) as first_shipment, \
                        max(shipped_time) as last_shipment, max(order_quantity) as order_quantity, \
                        sum(shipped_quantity) as shipped_quantity_total \
                        FROM order_shipments GROUP BY TUMBLE(order_time, INTERVAL '1' DAY), order_id"
                    .into(),
            },
            weir_reference_engine::SqlQueryStep {
                alias: None,
                query: "SELECT * FROM order_shipments_agg WHERE order_quantity <> shipped_quantity_total"
                    .into(),
            },
        ]),
        ..weir_reference_engine::TransformSql::new("datafusion", "")
    });
    whole.new_checkpoint_path = fx.path("whole/checkpoint").display().to_string();
    whole.new_data_path = fx.path("whole/data").display().to_string();
    transform_ok(&whole).await;
    let out = read_parquet(&whole.new_data_path);
    assert_eq!(strings(&out, "order_id"), ["2"]);
    assert_eq!(ints(&out, "order_quantity"), [120]);
    assert_eq!(ints(&out, "shipped_quantity_total"), [100]);
}

#[tokio::test]
async fn stream_joins_outside_the_supported_form_are_refused_saying_why() {
    let fx = Fixture::new();
    let orders = write_events(&fx, "orders", &[event(0, 0, "A", 1)]);
    let shipments = write_events(&fx, "shipments", &[event(0, 0, "A", 1)]);
    for (query, expected) in [
        (
            "SELECT o.event_time AS order_time FROM orders o JOIN shipments s ON o.order_id = s.order_id",
            "bound one side's event time by the other's",
        ),
        (
            "SELECT o.event_time AS order_time FROM orders o JOIN shipments s ON o.order_id = s.order_id \
             AND s.event_time >= o.event_time",
            "below and above",
        ),
        (
            "SELECT o.event_time AS order_time FROM orders o FULL JOIN shipments s ON o.order_id = s.order_id \
             AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL '1' DAY",
            "Full join of two streams is not supported",
        ),
        (
            "SELECT o.event_time AS order_time FROM orders o JOIN shipments s ON o.order_id = s.order_id \
             AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL '1' DAY ORDER BY 1",
            "interval join emits matches",
        ),
    ] {
        let request = join_request(
            &fx,
            query,
            input(&fx, "orders", vec![orders.clone()], Some((0, 0)), None),
            input(
                &fx,
                "shipments",
                vec![shipments.clone()],
                Some((0, 0)),
                None,
            ),
            0,
            None,
            "refused",
        );
        let message = transform(&request).await.0.invalid_query();
        assert!(message.contains(expected), "{query}: {message}");
    }
}

/// Rows of `batch`'s columns `names` as text, sorted.
fn sorted_rows(batch: &RecordBatch, names: &[&str]) -> Vec<String> {
    let columns: Vec<_> = names
        .iter()
        .map(|n| cast(batch.column_by_name(n).unwrap(), &DataType::Utf8).unwrap())
        .collect();
    let mut rows: Vec<String> = (0..batch.num_rows())
        .map(|i| {
            columns
                .iter()
                .map(|c| {
                    let c = c.as_any().downcast_ref::<StringArray>().unwrap();
                    if c.is_null(i) {
                        "∅".to_owned()
                    } else {
                        c.value(i).to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    rows
}

/// The query over all records at once, in DataFusion.
async fn batch_result(
    fx: &Fixture,
    query: &str,
    orders: &[Event],
    shipments: &[Event],
) -> RecordBatch {
    let ctx = SessionContext::new();
    for (name, events) in [("orders", orders), ("shipments", shipments)] {
        let path = write_events(fx, &format!("all-{name}.parquet"), events);
        ctx.register_parquet(name, path.to_str().unwrap(), ParquetReadOptions::default())
            .await
            .unwrap();
    }
    let batches = ctx.sql(query).await.unwrap().collect().await.unwrap();
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .unwrap_or_else(|| Arc::new(Schema::empty()));
    weir_reference_engine::arrow::compute::concat_batches(&schema, &batches).unwrap()
}

/// Runs `query` over the events split at `order_cuts` / `shipment_cuts` into transactions, with
/// watermarks that never make a record late, the last one past everything.
async fn incremental_result(
    fx: &Fixture,
    query: &str,
    orders: &[Event],
    shipments: &[Event],
    transactions: usize,
    order_cuts: &[usize],
    shipment_cuts: &[usize],
) -> Vec<RecordBatch> {
    let chunks = |events: &[Event], cuts: &[usize]| -> Vec<Vec<Event>> {
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (events.len() + 1)).collect();
        bounds.push(0);
        bounds.push(events.len());
        bounds.sort_unstable();
        let mut out: Vec<Vec<Event>> = bounds
            .windows(2)
            .map(|w| events[w[0]..w[1]].to_vec())
            .collect();
        out.resize(transactions.max(out.len()), Vec::new());
        out
    };
    let order_chunks = chunks(orders, order_cuts);
    let shipment_chunks = chunks(shipments, shipment_cuts);
    let steps = order_chunks.len().max(shipment_chunks.len());
    let end = orders
        .iter()
        .chain(shipments)
        .map(|e| e.event_time_ms)
        .max()
        .unwrap_or(0)
        + 10 * DAY_MS;
    let mut outputs = Vec::new();
    let mut checkpoint = None;
    let mut next_offset = 0;
    let order_file = write_events(fx, "orders-all", orders);
    let shipment_file = write_events(fx, "shipments-all", shipments);
    for step in 0..steps {
        let side = |chunks: &[Vec<Event>], file: &PathBuf, alias: &str| {
            let chunk = chunks.get(step).cloned().unwrap_or_default();
            // Perfect watermark: the earliest event still to come.
            let later = chunks
                .get(step + 1..)
                .unwrap_or(&[])
                .iter()
                .flatten()
                .map(|e| e.event_time_ms)
                .min();
            let watermark = if step + 1 == steps { Some(end) } else { later };
            let interval = chunk
                .first()
                .map(|first| (first.offset as u64, chunk.last().unwrap().offset as u64));
            let files = if interval.is_some() {
                vec![file.clone()]
            } else {
                vec![]
            };
            input(fx, alias, files, interval, watermark)
        };
        let request = join_request(
            fx,
            query,
            side(&order_chunks, &order_file, "orders"),
            side(&shipment_chunks, &shipment_file, "shipments"),
            next_offset,
            checkpoint.clone(),
            &format!("step-{step}"),
        );
        let outcome = transform_ok(&request).await;
        if let Some(interval) = outcome.new_offset_interval {
            next_offset = interval.end + 1;
        }
        outputs.push(read_parquet(&request.new_data_path));
        checkpoint = Some(request.new_checkpoint_path.clone());
    }
    outputs
}

fn events(max: usize) -> impl Strategy<Value = Vec<(i64, u8, i64)>> {
    prop::collection::vec((0i64..(6 * DAY_MS / HOUR_MS), 0u8..4, 1i64..100), 0..max)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn the_union_of_committed_outputs_equals_the_batch_join(
        orders in events(14),
        shipments in events(14),
        transactions in 1usize..5,
        order_cuts in prop::collection::vec(0usize..20, 0..4),
        shipment_cuts in prop::collection::vec(0usize..20, 0..4),
        left in any::<bool>(),
    ) {
        let to_events = |raw: &[(i64, u8, i64)]| -> Vec<Event> {
            raw.iter()
                .enumerate()
                .map(|(i, (hour, key, quantity))| event(i as i64, hour * HOUR_MS, &format!("k{key}"), *quantity))
                .collect()
        };
        let (orders, shipments) = (to_events(&orders), to_events(&shipments));
        let join = if left { "LEFT JOIN" } else { "JOIN" };
        let query = format!(
            "SELECT o.event_time AS order_time, o.order_id, o.quantity AS ordered, \
             s.event_time AS shipped_time, s.quantity AS shipped \
             FROM orders AS o {join} shipments AS s ON o.order_id = s.order_id \
             AND s.event_time BETWEEN o.event_time - INTERVAL '3' HOUR AND o.event_time + INTERVAL '1' DAY \
             WHERE o.quantity <> 50"
        );
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let fx = Fixture::new();
            let names = ["order_time", "order_id", "ordered", "shipped_time", "shipped"];
            let expected = batch_result(&fx, &query, &orders, &shipments).await;
            let outputs = incremental_result(
                &fx, &query, &orders, &shipments, transactions, &order_cuts, &shipment_cuts,
            )
            .await;
            let mut union = Vec::new();
            for output in &outputs {
                assert!(ints(output, "op").iter().all(|&op| op == i64::from(APPEND)));
                union.extend(sorted_rows(output, &names));
            }
            union.sort();
            let expected = if expected.num_rows() == 0 { Vec::new() } else { sorted_rows(&expected, &names) };
            prop_assert_eq!(union, expected);
            Ok::<(), TestCaseError>(())
        })?;
    }
}

#[tokio::test]
async fn migrate_query_to_or_from_an_interval_join_is_refused_naming_recompute_and_other_checkpoints_are_refused()
 {
    let fx = Fixture::new();
    let orders = write_events(&fx, "orders", &[event(0, 0, "A", 1)]);
    let shipments = write_events(&fx, "shipments", &[event(0, 0, "A", 1)]);
    let first = join_request(
        &fx,
        LEFT_JOIN,
        input(&fx, "orders", vec![orders.clone()], Some((0, 0)), Some(0)),
        input(
            &fx,
            "shipments",
            vec![shipments.clone()],
            Some((0, 0)),
            Some(0),
        ),
        0,
        None,
        "t1",
    );
    transform_ok(&first).await;
    let inputs = || {
        vec![
            input(&fx, "orders", vec![], None, None),
            input(&fx, "shipments", vec![], None, None),
        ]
    };
    let stateless = "SELECT event_time AS order_time, order_id FROM orders";
    for (prev, next, checkpoint) in [
        (
            LEFT_JOIN,
            stateless,
            Some(first.new_checkpoint_path.clone()),
        ),
        (stateless, LEFT_JOIN, None),
    ] {
        let request = weir_reference_engine::MigrateQueryRequest {
            dataset_id: weir_reference_engine::DatasetId::from_key([9; 32]),
            dataset_alias: "bar".into(),
            system_time: system_time(),
            vocab: order_time_vocab(),
            prev_transform: sql(prev),
            next_transform: sql(next),
            query_inputs: inputs(),
            next_offset: 1,
            prev_checkpoint_path: checkpoint,
            new_checkpoint_path: fx.path("migrate/checkpoint").display().to_string(),
            new_data_path: fx.path("migrate/data").display().to_string(),
        };
        let message = terminal(
            weir_reference_engine::ReferenceEngine::new()
                .migrate_query(&request, &weir_reference_engine::NoProgress)
                .await,
        )
        .invalid_query();
        assert!(
            message.contains("interval join") && message.contains("weir pull --recompute"),
            "{message}"
        );
    }

    // Another query's checkpoint (a different bound) is refused, pointing to MigrateQuery.
    let other_query = LEFT_JOIN.replace("INTERVAL '2' DAY", "INTERVAL '3' DAY");
    let second = join_request(
        &fx,
        &other_query,
        input(&fx, "orders", vec![], None, Some(0)),
        input(&fx, "shipments", vec![], None, Some(0)),
        1,
        Some(first.new_checkpoint_path.clone()),
        "t2",
    );
    let message = transform(&second).await.0.invalid_query();
    assert!(message.contains("MigrateQuery"), "{message}");
}

/// Events with their own operation types.
fn changes_batch(events: &[(Event, i32)]) -> RecordBatch {
    let plain: Vec<Event> = events.iter().map(|(e, _)| e.clone()).collect();
    let batch = events_batch(&plain, APPEND);
    let mut columns = batch.columns().to_vec();
    columns[1] = Arc::new(Int32Array::from_iter_values(
        events.iter().map(|(_, op)| *op),
    ));
    RecordBatch::try_new(batch.schema(), columns).unwrap()
}

const INNER_JOIN: &str = "SELECT o.event_time AS order_time, o.order_id, s.quantity AS shipped \
    FROM orders AS o JOIN shipments AS s \
    ON o.order_id = s.order_id AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL '1' DAY";

#[tokio::test]
async fn an_inner_interval_join_retracts_the_matches_of_retracted_and_corrected_records() {
    let fx = Fixture::new();
    let write = |name: &str, events: &[(Event, i32)]| {
        let path = fx.path(name);
        write_batch(&path, &changes_batch(events));
        path
    };
    let orders = write(
        "orders-1",
        &[(event(0, 0, "A", 1), APPEND), (event(1, 0, "B", 2), APPEND)],
    );
    let shipments = write(
        "shipments-1",
        &[
            (event(0, HOUR_MS, "A", 5), APPEND),
            (event(1, 2 * HOUR_MS, "B", 7), APPEND),
        ],
    );
    let first = join_request(
        &fx,
        INNER_JOIN,
        input(&fx, "orders", vec![orders], Some((0, 1)), None),
        input(&fx, "shipments", vec![shipments], Some((0, 1)), None),
        0,
        None,
        "t1",
    );
    transform_ok(&first).await;
    let out = read_parquet(&first.new_data_path);
    assert_eq!(strings(&out, "order_id"), ["A", "B"]);
    assert_eq!(ints(&out, "op"), [0, 0]);

    // Order B is retracted; shipment A's quantity is corrected from 5 to 6.
    let orders = write("orders-2", &[(event(2, 0, "B", 2), RETRACT)]);
    let shipments = write(
        "shipments-2",
        &[
            (event(2, HOUR_MS, "A", 5), CORRECT_FROM),
            (event(3, HOUR_MS, "A", 6), CORRECT_TO),
        ],
    );
    let second = join_request(
        &fx,
        INNER_JOIN,
        input(&fx, "orders", vec![orders], Some((2, 2)), None),
        input(&fx, "shipments", vec![shipments], Some((2, 3)), None),
        2,
        Some(first.new_checkpoint_path.clone()),
        "t2",
    );
    transform_ok(&second).await;
    let out = read_parquet(&second.new_data_path);
    // The new match first, then the retractions (by the order's offset).
    assert_eq!(ints(&out, "op"), [0, 1, 1]);
    assert_eq!(strings(&out, "order_id"), ["A", "A", "B"]);
    assert_eq!(ints(&out, "shipped"), [6, 5, 7]);
    assert_eq!(ints(&out, "offset"), [2, 3, 4]);

    // A retraction both sides of a match agree on retracts it once.
    let orders = write("orders-3", &[(event(3, 0, "A", 1), RETRACT)]);
    let shipments = write("shipments-3", &[(event(4, HOUR_MS, "A", 6), RETRACT)]);
    let third = join_request(
        &fx,
        INNER_JOIN,
        input(&fx, "orders", vec![orders], Some((3, 3)), None),
        input(&fx, "shipments", vec![shipments], Some((4, 4)), None),
        5,
        Some(second.new_checkpoint_path.clone()),
        "t3",
    );
    transform_ok(&third).await;
    let out = read_parquet(&third.new_data_path);
    assert_eq!(ints(&out, "op"), [1]);
    assert_eq!(ints(&out, "shipped"), [6]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    #[test]
    fn the_applied_changelog_equals_the_batch_join_of_the_live_records(
        orders in prop::collection::vec((prop::bool::weighted(0.3), 0i64..48, 0u8..3, 1i64..20, 0usize..40), 1..14),
        shipments in prop::collection::vec((prop::bool::weighted(0.3), 0i64..48, 0u8..3, 1i64..20, 0usize..40), 1..14),
        order_cuts in prop::collection::vec(0usize..20, 0..4),
        shipment_cuts in prop::collection::vec(0usize..20, 0..4),
        left in any::<bool>(),
    ) {
        let query = if left { INNER_JOIN.replace(" JOIN ", " LEFT JOIN ") } else { INNER_JOIN.to_owned() };
        let query = query.as_str();
        // Appends with distinct quantities per side, and retractions of live records (same data).
        let changes = |raw: &[(bool, i64, u8, i64, usize)]| -> (Vec<(Event, i32)>, Vec<Event>) {
            let mut all = Vec::new();
            let mut live: Vec<Event> = Vec::new();
            for (i, (retract, hour, key, quantity, pick)) in raw.iter().enumerate() {
                let offset = all.len() as i64;
                if *retract && !live.is_empty() {
                    let gone = live.remove(pick % live.len());
                    all.push((Event { offset, ..gone }, RETRACT));
                } else {
                    let e = event(offset, hour * HOUR_MS, &format!("k{key}"), quantity * 100 + i as i64);
                    live.push(e.clone());
                    all.push((e, APPEND));
                }
            }
            (all, live)
        };
        let (order_changes, live_orders) = changes(&orders);
        let (shipment_changes, live_shipments) = changes(&shipments);
        let chunks = |events: &[(Event, i32)], cuts: &[usize]| -> Vec<Vec<(Event, i32)>> {
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (events.len() + 1)).collect();
            bounds.extend([0, events.len()]);
            bounds.sort_unstable();
            bounds.windows(2).map(|w| events[w[0]..w[1]].to_vec()).collect()
        };
        let order_chunks = chunks(&order_changes, &order_cuts);
        let shipment_chunks = chunks(&shipment_changes, &shipment_cuts);
        let steps = order_chunks.len().max(shipment_chunks.len()) + 1;
        let names = ["order_time", "order_id", "shipped"];
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let fx = Fixture::new();
            let expected = batch_result(&fx, query, &live_orders, &live_shipments).await;
            let expected = if expected.num_rows() == 0 { Vec::new() } else { sorted_rows(&expected, &names) };
            let mut live: std::collections::BTreeMap<String, usize> = Default::default();
            let mut checkpoint = None;
            let mut next_offset = 0;
            for step in 0..steps {
                let side = |chunks: &[Vec<(Event, i32)>], alias: &str| {
                    let chunk = chunks.get(step).cloned().unwrap_or_default();
                    // Perfect watermark: the earliest record still to come (retractions included).
                    let later = chunks.get(step + 1..).unwrap_or(&[]).iter().flatten()
                        .map(|(e, _)| e.event_time_ms).min();
                    let watermark = if step + 1 == steps { Some(100 * DAY_MS) } else { later };
                    let files = if chunk.is_empty() { vec![] } else {
                        let path = fx.path(&format!("{alias}-{step}"));
                        write_batch(&path, &changes_batch(&chunk));
                        vec![path]
                    };
                    let interval = chunk.first().map(|(f, _)| (f.offset as u64, chunk.last().unwrap().0.offset as u64));
                    input(&fx, alias, files, interval, watermark)
                };
                let request = join_request(
                    &fx, query, side(&order_chunks, "orders"), side(&shipment_chunks, "shipments"),
                    next_offset, checkpoint.clone(), &format!("step-{step}"),
                );
                let outcome = transform_ok(&request).await;
                if let Some(interval) = outcome.new_offset_interval {
                    next_offset = interval.end + 1;
                }
                let output = read_parquet(&request.new_data_path);
                let ops = ints(&output, "op");
                let rows = if output.num_rows() == 0 { Vec::new() } else {
                    // Unsorted: the output's own order.
                    let columns: Vec<_> = names.iter()
                        .map(|n| cast(output.column_by_name(n).unwrap(), &DataType::Utf8).unwrap())
                        .collect();
                    (0..output.num_rows()).map(|i| columns.iter().map(|c| {
                        let c = c.as_any().downcast_ref::<StringArray>().unwrap();
                        if c.is_null(i) { "∅".to_owned() } else { c.value(i).to_owned() }
                    }).collect::<Vec<_>>().join("|")).collect()
                };
                for (row, op) in rows.into_iter().zip(ops) {
                    if op == i64::from(APPEND) {
                        *live.entry(row).or_default() += 1;
                    } else {
                        prop_assert_eq!(op, i64::from(RETRACT));
                        let n = live.get_mut(&row);
                        prop_assert!(n.as_ref().is_some_and(|n| **n > 0), "{} retracted but never appended", row);
                        if let Some(n) = n { *n -= 1; }
                    }
                }
                checkpoint = Some(request.new_checkpoint_path.clone());
            }
            let result: Vec<String> = live.into_iter().flat_map(|(row, n)| std::iter::repeat_n(row, n)).collect();
            prop_assert_eq!(result, expected);
            Ok::<(), TestCaseError>(())
        })?;
    }
}

/// Orders, shipments and their watermarks of one transaction.
type Transaction = (
    Vec<(Event, i32)>,
    Vec<(Event, i32)>,
    Option<i64>,
    Option<i64>,
);

#[tokio::test]
async fn a_left_interval_join_retracts_matches_and_null_padded_orders_of_retracted_records() {
    let fx = Fixture::new();
    let left = INNER_JOIN.replace(" JOIN ", " LEFT JOIN ");
    let write = |name: &str, events: &[(Event, i32)]| {
        let path = fx.path(name);
        write_batch(&path, &changes_batch(events));
        path
    };
    let mut checkpoint = None;
    let mut next_offset = 0;
    let mut outputs = Vec::new();
    let transactions: Vec<Transaction> = vec![
        (
            vec![(event(0, 0, "A", 1), APPEND), (event(1, 0, "B", 2), APPEND)],
            vec![(event(0, HOUR_MS, "A", 5), APPEND)],
            None,
            None,
        ),
        // A's only shipment is retracted: A is unmatched again; B is retracted before it matched.
        (
            vec![(event(2, 0, "B", 2), RETRACT)],
            vec![(event(1, HOUR_MS, "A", 5), RETRACT)],
            None,
            None,
        ),
        // The shipments' watermark passes A's bound: A is written with nulls.
        (vec![], vec![], None, Some(10 * DAY_MS)),
        // A itself is retracted (on time for the orders): its null-padded record is retracted.
        (
            vec![(event(3, 0, "A", 1), RETRACT)],
            vec![],
            None,
            Some(10 * DAY_MS),
        ),
    ];
    for (i, (orders, shipments, wo, ws)) in transactions.iter().enumerate() {
        let files = |name: &str, events: &[(Event, i32)]| {
            if events.is_empty() {
                (vec![], None)
            } else {
                let interval = (
                    events[0].0.offset as u64,
                    events.last().unwrap().0.offset as u64,
                );
                (vec![write(name, events)], Some(interval))
            }
        };
        let (order_files, order_interval) = files(&format!("orders-{i}"), orders);
        let (shipment_files, shipment_interval) = files(&format!("shipments-{i}"), shipments);
        let request = join_request(
            &fx,
            &left,
            input(&fx, "orders", order_files, order_interval, *wo),
            input(&fx, "shipments", shipment_files, shipment_interval, *ws),
            next_offset,
            checkpoint.clone(),
            &format!("t{i}"),
        );
        let outcome = transform_ok(&request).await;
        if let Some(interval) = outcome.new_offset_interval {
            next_offset = interval.end + 1;
        }
        outputs.push(read_parquet(&request.new_data_path));
        checkpoint = Some(request.new_checkpoint_path.clone());
    }
    let described = |batch: &RecordBatch| -> Vec<String> {
        let ops = ints(batch, "op");
        let orders = strings(batch, "order_id");
        let shipped = nullable_ints(batch, "shipped");
        (0..batch.num_rows())
            .map(|i| format!("{} {} {:?}", ops[i], orders[i], shipped[i]))
            .collect()
    };
    assert_eq!(described(&outputs[0]), ["0 A Some(5)"]);
    assert_eq!(described(&outputs[1]), ["1 A Some(5)"]);
    assert_eq!(described(&outputs[2]), ["0 A None"]);
    assert_eq!(described(&outputs[3]), ["1 A None"]);
}
