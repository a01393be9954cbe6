//! Stateful query steps chained in one transform: kamu's `overdue_shipments` (an interval join, a
//! daily window over its output, a filter over the window's) as written, run in one transaction and in
//! several; ValidateQuery and MigrateQuery of a chain; and the incremental property of join -> window
//! -> filter: random orders and shipments split into random transactions give, as a union, exactly
//! DataFusion's batch result of the same steps.
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
use weir_reference_engine::{
    DatasetVocabulary, SqlQueryStep, Transform, TransformRequest, TransformRequestInput,
    TransformSql,
};

const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;

/// An order (`shipment_id` unused) or a shipment.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    offset: i64,
    event_time_ms: i64,
    id: i64,
    order_id: i64,
    quantity: i64,
}

fn event(offset: i64, event_time_ms: i64, order_id: i64, quantity: i64) -> Event {
    Event {
        offset,
        event_time_ms,
        id: offset + 100,
        order_id,
        quantity,
    }
}

/// Orders as kamu's `com.acme.orders` has them, shipments as `com.acme.shipments`.
fn events_batch(events: &[Event], shipments: bool) -> RecordBatch {
    let mut fields = vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", utc_ms(), false),
        Field::new("event_time", utc_ms(), false),
    ];
    let mut columns: Vec<Arc<dyn Array>> = vec![
        Arc::new(Int64Array::from_iter_values(
            events.iter().map(|e| e.offset),
        )),
        Arc::new(Int32Array::from_value(APPEND, events.len())),
        Arc::new(TimestampMillisecondArray::from_value(0, events.len()).with_timezone("UTC")),
        Arc::new(
            TimestampMillisecondArray::from_iter_values(events.iter().map(|e| e.event_time_ms))
                .with_timezone("UTC"),
        ),
    ];
    if shipments {
        fields.push(Field::new("shipment_id", DataType::Int64, false));
        columns.push(Arc::new(Int64Array::from_iter_values(
            events.iter().map(|e| e.id),
        )));
    }
    fields.push(Field::new("order_id", DataType::Int64, false));
    columns.push(Arc::new(Int64Array::from_iter_values(
        events.iter().map(|e| e.order_id),
    )));
    fields.push(Field::new("quantity", DataType::Int64, false));
    columns.push(Arc::new(Int64Array::from_iter_values(
        events.iter().map(|e| e.quantity),
    )));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

const ORDERS: &str = "com.acme.orders";
const SHIPMENTS: &str = "com.acme.shipments";

fn write_events(fx: &Fixture, name: &str, events: &[Event], shipments: bool) -> PathBuf {
    let path = fx.path(name);
    write_batch(&path, &events_batch(events, shipments));
    path
}

/// The input `alias` over `events` (none: only its schema), with a watermark.
fn input(
    fx: &Fixture,
    alias: &str,
    name: &str,
    events: &[Event],
    watermark_ms: Option<i64>,
) -> TransformRequestInput {
    let shipments = alias == SHIPMENTS;
    let schema = write_events(fx, &format!("{alias}-schema"), &[], shipments);
    let files = if events.is_empty() {
        vec![]
    } else {
        vec![write_events(fx, name, events, shipments)]
    };
    let interval = events
        .first()
        .map(|first| (first.offset as u64, events.last().unwrap().offset as u64));
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

/// kamu's `com.acme.shipments.overdue` transform as written (its engine is Flink).
fn overdue_shipments() -> Transform {
    let step = |alias: Option<&str>, query: &str| SqlQueryStep {
        alias: alias.map(str::to_owned),
        query: query.to_owned(),
    };
    let mut sql = TransformSql::new("datafusion", "");
    sql.queries = Some(vec![
        step(
            Some("order_shipments"),
            "SELECT
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
",
        ),
        step(
            Some("order_shipments_agg"),
            "SELECT
  TUMBLE_START(order_time, INTERVAL '1' DAY) as order_time,
  order_id,
  count(*) as num_shipments,
  min(shipped_time) as first_shipment,
  max(shipped_time) as last_shipment,
  max(order_quantity) as order_quantity,
  sum(shipped_quantity) as shipped_quantity_total
FROM order_shipments
GROUP BY TUMBLE(order_time, INTERVAL '1' DAY), order_id
",
        ),
        step(
            None,
            "SELECT *
FROM order_shipments_agg
WHERE order_quantity <> shipped_quantity_total
",
        ),
    ]);
    Transform::Sql(sql)
}

fn request(
    fx: &Fixture,
    transform: Transform,
    inputs: Vec<TransformRequestInput>,
    next_offset: u64,
    prev_checkpoint: Option<String>,
    name: &str,
) -> TransformRequest {
    let mut request = fx.request("", inputs, next_offset);
    request.transform = transform;
    request.vocab = order_time_vocab();
    request.prev_checkpoint_path = prev_checkpoint;
    request.new_checkpoint_path = fx.path(&format!("{name}/checkpoint")).display().to_string();
    request.new_data_path = fx.path(&format!("{name}/data")).display().to_string();
    request
}

/// Orders and shipments of three transactions, and each transaction's watermarks (orders, shipments).
#[allow(clippy::type_complexity)]
fn acme() -> Vec<(Vec<Event>, Vec<Event>, i64, i64)> {
    let h = |day: i64, hour: i64| day * DAY_MS + hour * HOUR_MS;
    vec![
        (
            vec![event(0, h(0, 1), 1, 10), event(1, h(0, 5), 2, 20)],
            vec![event(0, h(0, 10), 1, 10)],
            h(0, 6),
            h(0, 11),
        ),
        (
            vec![event(2, h(1, 3), 3, 5), event(3, h(1, 10), 4, 7)],
            vec![
                event(1, h(1, 2), 2, 15),
                event(2, h(1, 20), 2, 5),
                event(3, h(2, 1), 4, 3),
            ],
            h(1, 12),
            h(2, 2),
        ),
        (
            vec![],
            // Order 3's shipment comes after its two days.
            vec![event(4, h(4, 0), 3, 5)],
            h(5, 0),
            h(5, 0),
        ),
    ]
}

fn overdue_rows(batch: &RecordBatch) -> Vec<String> {
    let times = ints(batch, "order_time");
    let orders = ints(batch, "order_id");
    let counts = ints(batch, "num_shipments");
    let ordered = ints(batch, "order_quantity");
    let shipped = ints(batch, "shipped_quantity_total");
    (0..batch.num_rows())
        .map(|i| {
            format!(
                "day {} order {} shipments {} ordered {} shipped {}",
                times[i] / DAY_MS,
                orders[i],
                counts[i],
                ordered[i],
                shipped[i]
            )
        })
        .collect()
}

#[tokio::test]
async fn kamus_overdue_shipments_runs_as_written_join_then_daily_window_then_filter() {
    let fx = Fixture::new();
    let mut outputs = Vec::new();
    let mut checkpoint = None;
    let mut next_offset = 0;
    let mut watermark = None;
    for (i, (orders, shipments, wo, ws)) in acme().into_iter().enumerate() {
        let request = request(
            &fx,
            overdue_shipments(),
            vec![
                input(&fx, ORDERS, &format!("orders-{i}"), &orders, Some(wo)),
                input(
                    &fx,
                    SHIPMENTS,
                    &format!("shipments-{i}"),
                    &shipments,
                    Some(ws),
                ),
            ],
            next_offset,
            checkpoint.clone(),
            &format!("t{i}"),
        );
        let outcome = transform_ok(&request).await;
        if let Some(interval) = outcome.new_offset_interval {
            next_offset = interval.end + 1;
        }
        watermark = outcome.new_watermark;
        outputs.push(read_parquet(&request.new_data_path));
        checkpoint = Some(request.new_checkpoint_path.clone());
    }
    // Nothing is emitted until the join's watermark (shipments' minus two days) closes day 1.
    assert_eq!(outputs[0].num_rows(), 0);
    assert_eq!(outputs[1].num_rows(), 0);
    assert_eq!(
        column_names(&outputs[2]),
        [
            "offset",
            "op",
            "system_time",
            "order_time",
            "order_id",
            "num_shipments",
            "first_shipment",
            "last_shipment",
            "order_quantity",
            "shipped_quantity_total"
        ]
    );
    // Orders 1 and 2 were shipped in full; 3 got nothing in time, 4 got 3 of 7.
    assert_eq!(
        overdue_rows(&outputs[2]),
        [
            "day 1 order 3 shipments 1 ordered 5 shipped 0",
            "day 1 order 4 shipments 1 ordered 7 shipped 3"
        ]
    );
    assert!(ints(&outputs[2], "op").iter().all(|&op| op == 0));
    assert_eq!(ints(&outputs[2], "offset"), [0, 1]);
    let first = outputs[2].column_by_name("first_shipment").unwrap();
    assert!(first.is_null(0) && !first.is_null(1));
    // The join's watermark (shipments' minus the two days), carried through the window.
    assert_eq!(watermark.map(|w| w.timestamp_millis()), Some(3 * DAY_MS));

    // One transaction of everything gives the same records.
    let fx = Fixture::new();
    let all = acme();
    let orders: Vec<Event> = all.iter().flat_map(|t| t.0.clone()).collect();
    let shipments: Vec<Event> = all.iter().flat_map(|t| t.1.clone()).collect();
    let request = request(
        &fx,
        overdue_shipments(),
        vec![
            input(&fx, ORDERS, "orders", &orders, Some(5 * DAY_MS)),
            input(&fx, SHIPMENTS, "shipments", &shipments, Some(5 * DAY_MS)),
        ],
        0,
        None,
        "once",
    );
    transform_ok(&request).await;
    assert_eq!(
        overdue_rows(&read_parquet(&request.new_data_path)),
        overdue_rows(&outputs[2])
    );
}

#[tokio::test]
async fn validate_query_gives_a_chains_output_columns_and_migrate_query_refuses_it() {
    let fx = Fixture::new();
    let inputs = vec![
        input(&fx, ORDERS, "o", &[], None),
        input(&fx, SHIPMENTS, "s", &[], None),
    ];
    let validate = weir_reference_engine::ValidateQueryRequest {
        dataset_id: weir_reference_engine::DatasetId::from_key([9; 32]),
        dataset_alias: "overdue".into(),
        vocab: order_time_vocab(),
        transform: overdue_shipments(),
        query_inputs: inputs
            .iter()
            .map(|i| weir_reference_engine::ValidateQueryInput {
                dataset_id: i.dataset_id,
                dataset_alias: i.dataset_alias.clone(),
                query_alias: i.query_alias.clone(),
                vocab: i.vocab.clone(),
                schema_file: i.schema_file.clone(),
            })
            .collect(),
        output_schema_path: fx.path("validate/schema").display().to_string(),
    };
    let outcome = terminal(
        weir_reference_engine::ReferenceEngine::new()
            .validate_query(&validate)
            .await,
    )
    .success();
    let names: Vec<&str> = outcome
        .output_columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "offset",
            "op",
            "system_time",
            "order_time",
            "order_id",
            "num_shipments",
            "first_shipment",
            "last_shipment",
            "order_quantity",
            "shipped_quantity_total"
        ]
    );

    let first = request(&fx, overdue_shipments(), inputs.clone(), 0, None, "t0");
    transform_ok(&first).await;
    let stateless = sql("SELECT event_time AS order_time, order_id FROM `com.acme.orders`");
    for (prev, next, checkpoint) in [
        (
            overdue_shipments(),
            stateless.clone(),
            Some(first.new_checkpoint_path.clone()),
        ),
        (stateless.clone(), overdue_shipments(), None),
    ] {
        let request = weir_reference_engine::MigrateQueryRequest {
            dataset_id: weir_reference_engine::DatasetId::from_key([9; 32]),
            dataset_alias: "overdue".into(),
            system_time: system_time(),
            vocab: order_time_vocab(),
            prev_transform: prev,
            next_transform: next,
            query_inputs: inputs.clone(),
            next_offset: 0,
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
            message.contains("chains stateful steps") && message.contains("weir pull --recompute"),
            "{message}"
        );
    }
    let provenance = weir_reference_engine::DeriveProvenanceRequest {
        dataset_id: weir_reference_engine::DatasetId::from_key([9; 32]),
        dataset_alias: "overdue".into(),
        system_time: system_time(),
        vocab: order_time_vocab(),
        transform: overdue_shipments(),
        query_inputs: inputs.clone(),
        next_offset: 0,
        prev_checkpoint_path: None,
        output_offsets: vec![0],
    };
    let message = terminal(
        weir_reference_engine::ReferenceEngine::new()
            .derive_provenance(&provenance, &weir_reference_engine::NoProgress)
            .await,
    )
    .invalid_query();
    assert!(
        message.contains("chained stateful query steps"),
        "{message}"
    );

    // A transform that is not the chain refuses the chain's checkpoint.
    let other = request(
        &fx,
        stateless,
        inputs,
        0,
        Some(first.new_checkpoint_path.clone()),
        "t1",
    );
    let message = transform(&other).await.0.invalid_query();
    assert!(message.contains("chained stateful steps"), "{message}");
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

const JOIN_STEP: &str = "SELECT o.event_time AS order_time, o.order_id, o.quantity AS order_quantity, \
    s.event_time AS shipped_time, COALESCE(s.quantity, 0) AS shipped_quantity \
    FROM orders AS o LEFT JOIN shipments AS s ON o.order_id = s.order_id \
    AND s.event_time BETWEEN o.event_time - INTERVAL '2' HOUR AND o.event_time + INTERVAL '1' DAY";
const WINDOW_STEP: &str = "SELECT date_bin(INTERVAL '6' HOUR, order_time) AS order_time, order_id, \
    count(*) AS n, max(order_quantity) AS ordered, sum(shipped_quantity) AS shipped \
    FROM joined GROUP BY date_bin(INTERVAL '6' HOUR, order_time), order_id";
const FILTER_STEP: &str = "SELECT * FROM windowed WHERE ordered > shipped";

/// The three steps in DataFusion over all records at once.
async fn batch_result(fx: &Fixture, orders: &[Event], shipments: &[Event]) -> Vec<String> {
    let ctx = SessionContext::new();
    for (name, events, is_shipments) in [("orders", orders, false), ("shipments", shipments, true)]
    {
        let path = write_events(fx, &format!("all-{name}.parquet"), events, is_shipments);
        ctx.register_parquet(name, path.to_str().unwrap(), ParquetReadOptions::default())
            .await
            .unwrap();
    }
    let query = format!("WITH joined AS ({JOIN_STEP}), windowed AS ({WINDOW_STEP}) {FILTER_STEP}");
    let batches = ctx.sql(&query).await.unwrap().collect().await.unwrap();
    batches
        .iter()
        .flat_map(|b| sorted_rows(b, &NAMES))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

const NAMES: [&str; 5] = ["order_time", "order_id", "n", "ordered", "shipped"];

fn chained() -> Transform {
    let mut sql = TransformSql::new("datafusion", FILTER_STEP);
    let mut steps = vec![
        SqlQueryStep {
            alias: Some("joined".into()),
            query: JOIN_STEP.into(),
        },
        SqlQueryStep {
            alias: Some("windowed".into()),
            query: WINDOW_STEP.into(),
        },
    ];
    steps.extend(sql.queries.take().unwrap());
    sql.queries = Some(steps);
    Transform::Sql(sql)
}

fn events(max: usize) -> impl Strategy<Value = Vec<(i64, i64, i64)>> {
    prop::collection::vec((0i64..(3 * DAY_MS / HOUR_MS), 0i64..4, 1i64..6), 0..max)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    #[test]
    fn the_union_of_committed_outputs_equals_the_batch_result_of_join_window_filter(
        orders in events(12),
        shipments in events(12),
        order_cuts in prop::collection::vec(0usize..20, 0..3),
        shipment_cuts in prop::collection::vec(0usize..20, 0..3),
    ) {
        // Each side in event time order (so perfect watermarks drop nothing), offsets in that order.
        let to_events = |raw: &[(i64, i64, i64)]| -> Vec<Event> {
            let mut raw = raw.to_vec();
            raw.sort_unstable();
            raw.iter()
                .enumerate()
                .map(|(i, (hour, key, quantity))| event(i as i64, hour * HOUR_MS, *key, *quantity))
                .collect()
        };
        let (orders, shipments) = (to_events(&orders), to_events(&shipments));
        let chunks = |events: &[Event], cuts: &[usize]| -> Vec<Vec<Event>> {
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (events.len() + 1)).collect();
            bounds.extend([0, events.len()]);
            bounds.sort_unstable();
            bounds.windows(2).map(|w| events[w[0]..w[1]].to_vec()).collect()
        };
        let order_chunks = chunks(&orders, &order_cuts);
        let shipment_chunks = chunks(&shipments, &shipment_cuts);
        let steps = order_chunks.len().max(shipment_chunks.len()) + 1;
        let end = 10 * DAY_MS;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let fx = Fixture::new();
            let expected = batch_result(&fx, &orders, &shipments).await;
            let mut union = Vec::new();
            let mut checkpoint = None;
            let mut next_offset = 0;
            for step in 0..steps {
                let side = |chunks: &[Vec<Event>], alias: &str| {
                    let chunk = chunks.get(step).cloned().unwrap_or_default();
                    // Perfect watermark: the earliest event still to come; the last step passes all.
                    let later = chunks.get(step + 1..).unwrap_or(&[]).iter().flatten()
                        .map(|e| e.event_time_ms).min();
                    let watermark = if step + 1 == steps { Some(end) } else { later.or(chunk.last().map(|e| e.event_time_ms)) };
                    (chunk, watermark, alias.to_owned())
                };
                let mut inputs = Vec::new();
                for (chunk, watermark, alias) in [side(&order_chunks, "orders"), side(&shipment_chunks, "shipments")] {
                    let shipments = alias == "shipments";
                    let schema = write_events(&fx, &format!("{alias}-schema"), &[], shipments);
                    let files = if chunk.is_empty() { vec![] } else {
                        vec![write_events(&fx, &format!("{alias}-{step}"), &chunk, shipments)]
                    };
                    let interval = chunk.first().map(|f| (f.offset as u64, chunk.last().unwrap().offset as u64));
                    let mut input = fx.input(&alias, files, interval);
                    input.schema_file = schema.display().to_string();
                    input.explicit_watermarks = watermark.map(|w| vec![weir_reference_engine::Watermark {
                        system_time: at(0),
                        event_time: chrono::DateTime::from_timestamp_millis(w).unwrap(),
                    }]).unwrap_or_default();
                    inputs.push(input);
                }
                let request = request(&fx, chained(), inputs, next_offset, checkpoint.clone(), &format!("step-{step}"));
                let outcome = transform_ok(&request).await;
                if let Some(interval) = outcome.new_offset_interval {
                    next_offset = interval.end + 1;
                }
                let output = read_parquet(&request.new_data_path);
                prop_assert!(ints(&output, "op").iter().all(|&op| op == i64::from(APPEND)));
                union.extend(sorted_rows(&output, &NAMES));
                checkpoint = Some(request.new_checkpoint_path.clone());
            }
            union.sort();
            let mut deduplicated = union.clone();
            deduplicated.dedup();
            // Each (window, order) is emitted once.
            prop_assert_eq!(&deduplicated, &union);
            prop_assert_eq!(union, expected);
            Ok::<(), TestCaseError>(())
        })?;
    }
}

fn steps(steps: &[(Option<&str>, &str)]) -> Transform {
    let mut sql = TransformSql::new("datafusion", "");
    sql.queries = Some(
        steps
            .iter()
            .map(|(alias, query)| SqlQueryStep {
                alias: alias.map(str::to_owned),
                query: (*query).to_owned(),
            })
            .collect(),
    );
    Transform::Sql(sql)
}

/// Runs `transform` over orders in transactions (each with the orders' watermark).
async fn run_orders(
    fx: &Fixture,
    transform: &Transform,
    vocab: DatasetVocabulary,
    transactions: &[(Vec<Event>, i64)],
) -> Vec<RecordBatch> {
    let mut outputs = Vec::new();
    let mut checkpoint = None;
    let mut next_offset = 0;
    for (i, (orders, watermark)) in transactions.iter().enumerate() {
        let mut request = request(
            fx,
            transform.clone(),
            vec![input(
                fx,
                ORDERS,
                &format!("orders-{i}"),
                orders,
                Some(*watermark),
            )],
            next_offset,
            checkpoint.clone(),
            &format!("t{i}"),
        );
        request.vocab = vocab.clone();
        let outcome = transform_ok(&request).await;
        if let Some(interval) = outcome.new_offset_interval {
            next_offset = interval.end + 1;
        }
        outputs.push(read_parquet(&request.new_data_path));
        checkpoint = Some(request.new_checkpoint_path.clone());
    }
    outputs
}

#[tokio::test]
async fn a_top_n_over_a_windows_output_corrects_the_best_day_when_a_better_day_closes() {
    let fx = Fixture::new();
    let transform = steps(&[
        (
            Some("daily"),
            "SELECT date_bin(INTERVAL '1' DAY, event_time) AS event_time, order_id, \
             sum(quantity) AS total FROM `com.acme.orders` GROUP BY 1, order_id",
        ),
        (
            None,
            "SELECT * FROM (SELECT row_number() OVER (ORDER BY total DESC) AS place, \
             event_time, order_id, total FROM daily) WHERE place <= 1",
        ),
    ]);
    let h = |day: i64, hour: i64| day * DAY_MS + hour * HOUR_MS;
    let outputs = run_orders(
        &fx,
        &transform,
        DatasetVocabulary::default(),
        &[
            (
                vec![
                    event(0, h(0, 1), 1, 5),
                    event(1, h(0, 2), 2, 7),
                    event(2, h(0, 3), 1, 4),
                ],
                h(0, 12),
            ),
            (vec![event(3, h(1, 1), 2, 3)], h(1, 5)),
            (vec![event(4, h(1, 6), 3, 20)], h(3, 0)),
        ],
    )
    .await;
    let described = |batch: &RecordBatch| -> Vec<String> {
        let ops = ints(batch, "op");
        let days = ints(batch, "event_time");
        let orders = ints(batch, "order_id");
        let totals = ints(batch, "total");
        (0..batch.num_rows())
            .map(|i| {
                format!(
                    "{} day {} order {} total {}",
                    ops[i],
                    days[i] / DAY_MS,
                    orders[i],
                    totals[i]
                )
            })
            .collect()
    };
    // Day 0 is open until the watermark passes it.
    assert!(described(&outputs[0]).is_empty());
    assert_eq!(described(&outputs[1]), ["0 day 0 order 1 total 9"]);
    // Day 1 closes: order 3's 20 is the new best, order 2's 3 is not.
    assert_eq!(
        described(&outputs[2]),
        ["2 day 0 order 1 total 9", "3 day 1 order 3 total 20"]
    );
}

#[tokio::test]
async fn a_daily_window_over_an_hourly_windows_output_sums_the_hours() {
    let fx = Fixture::new();
    let transform = steps(&[
        (
            Some("hourly"),
            "SELECT TUMBLE_START(event_time, INTERVAL '1' HOUR) AS event_time, order_id, \
             sum(quantity) AS quantity, count(*) AS n \
             FROM `com.acme.orders` GROUP BY TUMBLE(event_time, INTERVAL '1' HOUR), order_id",
        ),
        (
            None,
            "SELECT TUMBLE_START(event_time, INTERVAL '1' DAY) AS event_time, order_id, \
             sum(quantity) AS quantity, sum(n) AS orders, count(*) AS hours \
             FROM hourly GROUP BY TUMBLE(event_time, INTERVAL '1' DAY), order_id",
        ),
    ]);
    let h = |day: i64, hour: i64| day * DAY_MS + hour * HOUR_MS;
    let outputs = run_orders(
        &fx,
        &transform,
        DatasetVocabulary::default(),
        &[
            (
                vec![
                    event(0, h(0, 1), 1, 5),
                    event(1, h(0, 1) + 60_000, 1, 1),
                    event(2, h(0, 3), 1, 4),
                ],
                h(0, 20),
            ),
            (vec![event(3, h(1, 2), 1, 2)], h(2, 0)),
        ],
    )
    .await;
    assert_eq!(outputs[0].num_rows(), 0);
    assert_eq!(ints(&outputs[1], "event_time"), [0, DAY_MS]);
    assert_eq!(ints(&outputs[1], "quantity"), [10, 2]);
    assert_eq!(ints(&outputs[1], "orders"), [3, 1]);
    assert_eq!(ints(&outputs[1], "hours"), [2, 1]);
}

#[tokio::test]
async fn a_query_step_declared_as_a_temporal_table_is_refused() {
    let fx = Fixture::new();
    let mut transform = steps(&[
        (
            Some("daily"),
            "SELECT date_bin(INTERVAL '1' DAY, event_time) AS event_time, order_id, \
             sum(quantity) AS total FROM `com.acme.orders` GROUP BY 1, order_id",
        ),
        (
            None,
            "SELECT o.event_time, o.order_id, d.total FROM `com.acme.orders` AS o \
             JOIN daily FOR SYSTEM_TIME AS OF o.event_time AS d ON o.order_id = d.order_id",
        ),
    ]);
    let Transform::Sql(sql) = &mut transform;
    sql.temporal_tables = Some(vec![weir_reference_engine::TemporalTable {
        name: "daily".into(),
        primary_key: vec!["order_id".into()],
    }]);
    let mut request = request(
        &fx,
        transform,
        vec![input(&fx, ORDERS, "o", &[], None)],
        0,
        None,
        "refused",
    );
    request.vocab = DatasetVocabulary::default();
    let message = transform_result(&request).await;
    assert!(
        message.contains("the temporal table `daily` is a query step"),
        "{message}"
    );
}

async fn transform_result(request: &TransformRequest) -> String {
    transform(request).await.0.invalid_query()
}
