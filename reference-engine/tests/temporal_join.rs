//! Temporal table joins: a stream (`orders`) joined with a temporal table (`prices`, primary key `city`)
//! as of each order's event time, with the table's changelog, the table's watermark, checkpoints and the
//! other operations.
use crate::common;

use std::path::Path;

use common::*;
use weir_reference_engine::arrow::array::{Array, Int64Array, RecordBatch};
use weir_reference_engine::arrow::compute::concat_batches;
use weir_reference_engine::arrow::datatypes::DataType;
use weir_reference_engine::{
    DatasetId, DatasetVocabulary, MigrateQueryRequest, MigrateQuerySuccess, NoProgress,
    OffsetInterval, ReferenceEngine, TemporalTable, Transform, TransformRequest, TransformSql,
    ValidateQueryInput, ValidateQueryRequest,
};

const ENRICH: &str = "SELECT s.event_time, s.city, s.population AS amount, t.population AS price \
    FROM orders AS s \
    JOIN prices FOR SYSTEM_TIME AS OF s.event_time AS t ON s.city = t.city";

const ENRICH_LEFT: &str = "SELECT s.event_time, s.city, s.population AS amount, t.population AS price \
    FROM orders AS s \
    LEFT JOIN prices FOR SYSTEM_TIME AS OF s.event_time AS t ON s.city = t.city";

fn temporal(query: &str) -> Transform {
    Transform::Sql(TransformSql {
        temporal_tables: Some(vec![TemporalTable {
            name: "prices".into(),
            primary_key: vec!["city".into()],
        }]),
        ..TransformSql::new("datafusion", query)
    })
}

/// One transaction's inputs: order and price records (each with their own offsets) and watermarks
/// (seconds of event time).
struct Tx<'a> {
    orders: &'a [Record],
    prices: &'a [Record],
    orders_watermark: Option<i64>,
    prices_watermark: Option<i64>,
}

fn input(
    fx: &Fixture,
    alias: &str,
    records: &[Record],
    watermark_s: Option<i64>,
) -> weir_reference_engine::TransformRequestInput {
    let mut input = match (records.first(), records.last()) {
        (Some(first), Some(last)) => fx.input(
            alias,
            vec![fx.slice(records, SystemTypes::Compatible)],
            Some((first.offset as u64, last.offset as u64)),
        ),
        _ => fx.input(alias, vec![], None),
    };
    input.explicit_watermarks = watermark_s.map(|w| watermark(0, w)).into_iter().collect();
    input
}

fn request(
    fx: &Fixture,
    name: &str,
    query: &str,
    tx: &Tx<'_>,
    next_offset: u64,
    prev_checkpoint: Option<&TransformRequest>,
) -> TransformRequest {
    let inputs = vec![
        input(fx, "orders", tx.orders, tx.orders_watermark),
        input(fx, "prices", tx.prices, tx.prices_watermark),
    ];
    let mut request = fx.request(query, inputs, next_offset);
    request.transform = temporal(query);
    request.prev_checkpoint_path = prev_checkpoint.map(|r| r.new_checkpoint_path.clone());
    request.new_checkpoint_path = fx.path(&format!("{name}/checkpoint")).display().to_string();
    request.new_data_path = fx.path(&format!("{name}/data")).display().to_string();
    request
}

/// (event time ms, city, amount, price) of each output record.
fn rows(batch: &RecordBatch) -> Vec<(i64, String, i64, Option<i64>)> {
    let price = batch.column_by_name("price").unwrap();
    let price = weir_reference_engine::arrow::compute::cast(price, &DataType::Int64).unwrap();
    let price = price.as_any().downcast_ref::<Int64Array>().unwrap();
    ints(batch, "event_time")
        .into_iter()
        .zip(strings(batch, "city"))
        .zip(ints(batch, "amount"))
        .enumerate()
        .map(|(i, ((t, city), amount))| {
            (t, city, amount, price.is_valid(i).then(|| price.value(i)))
        })
        .collect()
}

fn row(t: i64, city: &str, amount: i64, price: Option<i64>) -> (i64, String, i64, Option<i64>) {
    (t, city.to_owned(), amount, price)
}

#[tokio::test]
async fn each_order_is_enriched_with_the_price_as_of_its_event_time() {
    let fx = Fixture::new();
    let prices = [
        record(0, APPEND, 1000, "A", 10),
        record(1, APPEND, 1000, "B", 20),
        record(2, APPEND, 5000, "A", 11),
    ];
    let orders = [
        record(0, APPEND, 2000, "A", 1),
        record(1, APPEND, 3000, "B", 2),
        record(2, APPEND, 6000, "A", 3),
    ];
    let tx = Tx {
        orders: &orders,
        prices: &prices,
        orders_watermark: Some(10),
        prices_watermark: Some(10),
    };
    let request = request(&fx, "t", ENRICH, &tx, 100, None);
    let outcome = transform_ok(&request).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval {
            start: 100,
            end: 102
        })
    );
    assert_eq!(outcome.new_watermark, Some(at(10)));
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        column_names(&out),
        [
            "offset",
            "op",
            "system_time",
            "event_time",
            "city",
            "amount",
            "price"
        ]
    );
    assert_eq!(ints(&out, "offset"), [100, 101, 102]);
    assert_eq!(ints(&out, "op"), [APPEND as i64; 3]);
    assert_eq!(
        rows(&out),
        [
            row(2000, "A", 1, Some(10)),
            row(3000, "B", 2, Some(20)),
            row(6000, "A", 3, Some(11)),
        ]
    );
    assert!(
        Path::new(&request.new_checkpoint_path).is_file(),
        "the table state is checkpointed"
    );
}

#[tokio::test]
async fn a_correction_between_two_orders_changes_the_price_from_its_event_time() {
    let fx = Fixture::new();
    let prices = [
        record(0, APPEND, 1000, "A", 10),
        record(1, CORRECT_FROM, 1000, "A", 10),
        record(2, CORRECT_TO, 4000, "A", 12),
    ];
    let orders = [
        record(0, APPEND, 2000, "A", 1),
        record(1, APPEND, 5000, "A", 2),
    ];
    let tx = Tx {
        orders: &orders,
        prices: &prices,
        orders_watermark: None,
        prices_watermark: Some(10),
    };
    let request = request(&fx, "t", ENRICH, &tx, 0, None);
    transform_ok(&request).await;
    assert_eq!(
        rows(&read_parquet(&request.new_data_path)),
        [row(2000, "A", 1, Some(10)), row(5000, "A", 2, Some(12))]
    );
}

#[tokio::test]
async fn a_retracted_key_has_no_row_from_the_retraction_on() {
    let fx = Fixture::new();
    let prices = [
        record(0, APPEND, 1000, "A", 10),
        record(1, APPEND, 1000, "B", 20),
        record(2, APPEND, 3000, "B", 21),
        record(3, RETRACT, 3000, "B", 21),
    ];
    let orders = [
        record(0, APPEND, 2000, "B", 1),
        record(1, APPEND, 4000, "B", 2),
        record(2, APPEND, 4000, "A", 3),
    ];
    let tx = Tx {
        orders: &orders,
        prices: &prices,
        orders_watermark: None,
        prices_watermark: Some(10),
    };
    let inner = request(&fx, "inner", ENRICH, &tx, 0, None);
    transform_ok(&inner).await;
    assert_eq!(
        rows(&read_parquet(&inner.new_data_path)),
        [row(2000, "B", 1, Some(20)), row(4000, "A", 3, Some(10))],
        "the order of B at 4 s finds no price"
    );
    let left = request(&fx, "left", ENRICH_LEFT, &tx, 0, None);
    transform_ok(&left).await;
    assert_eq!(
        rows(&read_parquet(&left.new_data_path)),
        [
            row(2000, "B", 1, Some(20)),
            row(4000, "B", 2, None),
            row(4000, "A", 3, Some(10)),
        ]
    );
}

#[tokio::test]
async fn an_order_before_any_price_of_its_key_is_dropped_by_a_join_and_kept_with_nulls_by_a_left_join()
 {
    let fx = Fixture::new();
    let prices = [record(0, APPEND, 5000, "A", 10)];
    let orders = [
        record(0, APPEND, 1000, "A", 1),
        record(1, APPEND, 6000, "A", 2),
        record(2, APPEND, 6000, "Z", 3),
    ];
    let tx = Tx {
        orders: &orders,
        prices: &prices,
        orders_watermark: None,
        prices_watermark: Some(10),
    };
    let inner = request(&fx, "inner", ENRICH, &tx, 0, None);
    transform_ok(&inner).await;
    assert_eq!(
        rows(&read_parquet(&inner.new_data_path)),
        [row(6000, "A", 2, Some(10))]
    );
    let left = request(&fx, "left", ENRICH_LEFT, &tx, 0, None);
    transform_ok(&left).await;
    assert_eq!(
        rows(&read_parquet(&left.new_data_path)),
        [
            row(1000, "A", 1, None),
            row(6000, "A", 2, Some(10)),
            row(6000, "Z", 3, None),
        ]
    );
}

/// Prices and orders over two transactions; the second half of the prices arrives with the second one.
fn two_transactions() -> ([Record; 2], [Record; 3], [Record; 3], [Record; 2]) {
    (
        [
            record(0, APPEND, 1000, "A", 10),
            record(1, APPEND, 1000, "B", 20),
        ],
        [
            record(0, APPEND, 2000, "A", 1),
            record(1, APPEND, 4500, "A", 2),
            record(2, APPEND, 6000, "B", 3),
        ],
        [
            record(2, APPEND, 4000, "A", 11),
            record(3, CORRECT_FROM, 1000, "B", 20),
            record(4, CORRECT_TO, 5000, "B", 21),
        ],
        [
            record(3, APPEND, 3000, "A", 4),
            record(4, APPEND, 7000, "B", 5),
        ],
    )
}

#[tokio::test]
async fn orders_wait_for_the_table_watermark_and_two_transactions_give_what_one_gives() {
    let fx = Fixture::new();
    let (prices_1, orders_1, prices_2, orders_2) = two_transactions();
    let all_prices: Vec<Record> = prices_1.iter().chain(&prices_2).cloned().collect();
    let all_orders: Vec<Record> = orders_1.iter().chain(&orders_2).cloned().collect();

    let whole = request(
        &fx,
        "whole",
        ENRICH,
        &Tx {
            orders: &all_orders,
            prices: &all_prices,
            orders_watermark: Some(10),
            prices_watermark: Some(10),
        },
        0,
        None,
    );
    transform_ok(&whole).await;
    let expected = read_parquet(&whole.new_data_path);
    assert_eq!(
        rows(&expected),
        [
            row(2000, "A", 1, Some(10)),
            row(3000, "A", 4, Some(10)),
            row(4500, "A", 2, Some(11)),
            row(6000, "B", 3, Some(21)),
            row(7000, "B", 5, Some(21)),
        ],
        "ordered by event time, each with the price in force then"
    );

    // The prices are complete up to 3 s only: the orders at 4.5 s and 6 s wait in the checkpoint.
    let first = request(
        &fx,
        "t1",
        ENRICH,
        &Tx {
            orders: &orders_1,
            prices: &prices_1,
            orders_watermark: Some(6),
            prices_watermark: Some(3),
        },
        0,
        None,
    );
    let outcome = transform_ok(&first).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 0, end: 0 })
    );
    assert_eq!(
        outcome.new_watermark,
        Some(at(3)),
        "no further than the table's watermark"
    );
    assert_eq!(
        rows(&read_parquet(&first.new_data_path)),
        [row(2000, "A", 1, Some(10))]
    );

    let second = request(
        &fx,
        "t2",
        ENRICH,
        &Tx {
            orders: &orders_2,
            prices: &prices_2,
            orders_watermark: Some(10),
            prices_watermark: Some(10),
        },
        1,
        Some(&first),
    );
    let outcome = transform_ok(&second).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 1, end: 4 })
    );
    assert_eq!(outcome.new_watermark, Some(at(10)));
    let split = concat_batches(
        &expected.schema(),
        &[
            read_parquet(&first.new_data_path),
            read_parquet(&second.new_data_path),
        ],
    )
    .unwrap();
    assert_eq!(split, expected);
}

#[tokio::test]
async fn without_a_table_watermark_orders_wait_and_a_later_transaction_joins_them() {
    let fx = Fixture::new();
    let prices = [record(0, APPEND, 1000, "A", 10)];
    let orders = [record(0, APPEND, 2000, "A", 1)];
    let first = request(
        &fx,
        "t1",
        ENRICH,
        &Tx {
            orders: &orders,
            prices: &prices,
            orders_watermark: Some(10),
            prices_watermark: None,
        },
        0,
        None,
    );
    let outcome = transform_ok(&first).await;
    assert_eq!(outcome.new_offset_interval, None);
    assert_eq!(outcome.new_watermark, None);
    assert_eq!(
        read_parquet(&first.new_data_path).num_rows(),
        0,
        "the data file is still written"
    );

    // Nothing new but the table's watermark.
    let second = request(
        &fx,
        "t2",
        ENRICH,
        &Tx {
            orders: &[],
            prices: &[],
            orders_watermark: None,
            prices_watermark: Some(5),
        },
        0,
        Some(&first),
    );
    transform_ok(&second).await;
    assert_eq!(
        rows(&read_parquet(&second.new_data_path)),
        [row(2000, "A", 1, Some(10))]
    );
}

/// The coordinator stages an input without new records with a schema file that is one of its data
/// slices (ODF's `schema_file` need not be empty): none of its records are this transaction's.
#[tokio::test]
async fn a_transaction_with_only_table_changes_joins_the_waiting_orders_only() {
    let fx = Fixture::new();
    let prices_1 = [
        record(0, APPEND, 1000, "A", 10),
        record(1, APPEND, 1000, "B", 20),
        record(2, APPEND, 1000, "C", 30),
        record(3, CORRECT_FROM, 1000, "A", 10),
        record(4, CORRECT_TO, 4000, "A", 11),
    ];
    let orders_1 = [
        record(0, APPEND, 2000, "A", 1),
        record(1, APPEND, 2000, "B", 2),
        record(2, APPEND, 3000, "C", 3),
        record(3, APPEND, 5000, "A", 4),
        record(4, APPEND, 6000, "B", 5),
        record(5, APPEND, 7000, "C", 6),
    ];
    let first = request(
        &fx,
        "t1",
        ENRICH,
        &Tx {
            orders: &orders_1,
            prices: &prices_1,
            orders_watermark: None,
            prices_watermark: Some(4),
        },
        0,
        None,
    );
    transform_ok(&first).await;
    assert_eq!(
        rows(&read_parquet(&first.new_data_path)),
        [
            row(2000, "A", 1, Some(10)),
            row(2000, "B", 2, Some(20)),
            row(3000, "C", 3, Some(30)),
        ]
    );

    // Only the table changes: B corrected from 6 s on, C retracted (from 1 s on).
    let prices_2 = [
        record(5, CORRECT_FROM, 1000, "B", 20),
        record(6, CORRECT_TO, 6000, "B", 21),
        record(7, RETRACT, 1000, "C", 30),
    ];
    let mut second = request(
        &fx,
        "t2",
        ENRICH,
        &Tx {
            orders: &[],
            prices: &prices_2,
            orders_watermark: None,
            prices_watermark: Some(10),
        },
        3,
        Some(&first),
    );
    second.query_inputs[0].schema_file = fx
        .slice(&orders_1, SystemTypes::Compatible)
        .display()
        .to_string();
    let outcome = transform_ok(&second).await;
    assert_eq!(
        rows(&read_parquet(&second.new_data_path)),
        [row(5000, "A", 4, Some(11)), row(6000, "B", 5, Some(21))],
        "the orders still waiting, C's retracted; none of those already joined again"
    );
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 3, end: 4 })
    );

    // And the table without new records, seen through one of its slices: nothing re-applied.
    let orders_3 = [record(6, APPEND, 11000, "B", 7)];
    let mut third = request(
        &fx,
        "t3",
        ENRICH,
        &Tx {
            orders: &orders_3,
            prices: &[],
            orders_watermark: None,
            prices_watermark: Some(12),
        },
        5,
        Some(&second),
    );
    third.query_inputs[1].schema_file = fx
        .slice(&prices_1, SystemTypes::Compatible)
        .display()
        .to_string();
    transform_ok(&third).await;
    assert_eq!(
        rows(&read_parquet(&third.new_data_path)),
        [row(11000, "B", 7, Some(21))]
    );
}

fn validate_request(fx: &Fixture, query: &str) -> ValidateQueryRequest {
    let input = |alias: &str, key: u8| ValidateQueryInput {
        dataset_id: DatasetId::from_key([key; 32]),
        dataset_alias: alias.into(),
        query_alias: alias.into(),
        vocab: DatasetVocabulary::default(),
        schema_file: fx.schema_file(SystemTypes::Spec).display().to_string(),
    };
    ValidateQueryRequest {
        dataset_id: DatasetId::from_key([9; 32]),
        dataset_alias: "enriched".into(),
        vocab: DatasetVocabulary::default(),
        transform: temporal(query),
        query_inputs: vec![input("orders", 1), input("prices", 2)],
        output_schema_path: fx.path("validate/schema.parquet").display().to_string(),
    }
}

#[tokio::test]
async fn validate_gives_the_output_schema_of_a_temporal_join() {
    let fx = Fixture::new();
    for (query, price_nullable) in [(ENRICH, false), (ENRICH_LEFT, true)] {
        let request = validate_request(&fx, query);
        let outcome = terminal(ReferenceEngine::new().validate_query(&request).await).success();
        let columns: Vec<(String, String, bool)> = outcome
            .output_columns
            .iter()
            .map(|c| (c.name.clone(), c.data_type.clone(), c.nullable))
            .collect();
        assert_eq!(
            columns,
            [
                ("offset".to_owned(), "Int64".to_owned(), false),
                ("op".to_owned(), "Int32".to_owned(), false),
                (
                    "system_time".to_owned(),
                    r#"Timestamp(ms, "UTC")"#.to_owned(),
                    false
                ),
                (
                    "event_time".to_owned(),
                    r#"Timestamp(ms, "UTC")"#.to_owned(),
                    false
                ),
                ("city".to_owned(), "Utf8".to_owned(), false),
                ("amount".to_owned(), "Int64".to_owned(), false),
                ("price".to_owned(), "Int64".to_owned(), price_nullable),
            ],
            "{query}"
        );
        assert_eq!(read_parquet(&request.output_schema_path).num_rows(), 0);
    }
}

#[tokio::test]
async fn a_join_of_two_streams_is_refused_and_says_to_declare_a_temporal_table() {
    let fx = Fixture::new();
    let orders = [record(0, APPEND, 2000, "A", 1)];
    let prices = [record(0, APPEND, 1000, "A", 10)];
    let inputs = vec![
        input(&fx, "orders", &orders, None),
        input(&fx, "prices", &prices, None),
    ];
    let request = fx.request(
        "SELECT s.event_time, s.city, t.population FROM orders AS s JOIN prices AS t ON s.city = t.city",
        inputs,
        0,
    );
    let message = transform(&request).await.0.invalid_query();
    assert!(
        message.contains("declare that input in `temporal_tables`")
            && message.contains("FOR SYSTEM_TIME AS OF"),
        "{message}"
    );
    assert!(!Path::new(&request.new_data_path).exists());
}

#[tokio::test]
async fn for_system_time_as_of_an_undeclared_table_or_not_the_stream_event_time_is_refused() {
    let fx = Fixture::new();
    let tx = Tx {
        orders: &[],
        prices: &[],
        orders_watermark: None,
        prices_watermark: None,
    };
    let mut undeclared = request(&fx, "t", ENRICH, &tx, 0, None);
    undeclared.transform = sql(ENRICH);
    let message = transform(&undeclared).await.0.invalid_query();
    assert!(
        message.contains("not declared in `temporal_tables`"),
        "{message}"
    );

    let other_time = ENRICH.replace("AS OF s.event_time", "AS OF s.system_time");
    let message = transform(&request(&fx, "t", &other_time, &tx, 0, None))
        .await
        .0
        .invalid_query();
    assert!(
        message.contains("as of the stream's event time"),
        "{message}"
    );

    let scanned = "SELECT event_time, city FROM prices";
    let message = transform(&request(&fx, "t", scanned, &tx, 0, None))
        .await
        .0
        .invalid_query();
    assert!(message.contains("FOR SYSTEM_TIME AS OF"), "{message}");
}

fn migrate_request(
    fx: &Fixture,
    name: &str,
    prev: Transform,
    next: Transform,
    next_offset: u64,
    prev_checkpoint: Option<&TransformRequest>,
) -> MigrateQueryRequest {
    MigrateQueryRequest {
        dataset_id: DatasetId::from_key([9; 32]),
        dataset_alias: "enriched".into(),
        system_time: system_time(),
        vocab: DatasetVocabulary::default(),
        prev_transform: prev,
        next_transform: next,
        query_inputs: vec![
            fx.input("orders", vec![], None),
            fx.input("prices", vec![], None),
        ],
        next_offset,
        prev_checkpoint_path: prev_checkpoint.map(|r| r.new_checkpoint_path.clone()),
        new_checkpoint_path: fx.path(&format!("{name}/checkpoint")).display().to_string(),
        new_data_path: fx.path(&format!("{name}/data")).display().to_string(),
    }
}

async fn migrate(request: &MigrateQueryRequest) -> MigrateQuerySuccess {
    terminal(
        ReferenceEngine::new()
            .migrate_query(request, &NoProgress)
            .await,
    )
    .success()
}

#[tokio::test]
async fn migrate_joins_the_waiting_orders_and_the_next_temporal_query_keeps_the_table() {
    let fx = Fixture::new();
    let prices = [
        record(0, APPEND, 1000, "A", 10),
        record(1, APPEND, 8000, "A", 12),
    ];
    let orders = [
        record(0, APPEND, 2000, "A", 1),
        record(1, APPEND, 9000, "A", 2),
    ];
    // The prices are complete up to 5 s: the order at 9 s waits.
    let first = request(
        &fx,
        "t1",
        ENRICH,
        &Tx {
            orders: &orders,
            prices: &prices,
            orders_watermark: None,
            prices_watermark: Some(5),
        },
        0,
        None,
    );
    transform_ok(&first).await;
    assert_eq!(
        rows(&read_parquet(&first.new_data_path)),
        [row(2000, "A", 1, Some(10))]
    );

    let next_query = "SELECT s.event_time, s.city, s.population AS amount, \
        s.population * t.population AS price \
        FROM orders AS s JOIN prices FOR SYSTEM_TIME AS OF s.event_time AS t ON s.city = t.city";
    let request = migrate_request(
        &fx,
        "m",
        temporal(ENRICH),
        temporal(next_query),
        1,
        Some(&first),
    );
    let outcome = migrate(&request).await;
    assert!(outcome.new_checkpoint_written);
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 1, end: 1 })
    );
    assert_eq!(
        rows(&read_parquet(&request.new_data_path)),
        [row(9000, "A", 2, Some(12))],
        "the waiting order is joined by the previous query with the table as it is"
    );

    // The next query starts with the prices it did not read itself.
    let later = [record(2, APPEND, 10_000, "A", 3)];
    let mut next = request_for(&fx, "t2", next_query, &later, Some(20), 2);
    next.prev_checkpoint_path = Some(request.new_checkpoint_path.clone());
    transform_ok(&next).await;
    assert_eq!(
        rows(&read_parquet(&next.new_data_path)),
        [row(10_000, "A", 3, Some(36))]
    );
}

/// A transaction with new orders only, the prices' watermark at `prices_watermark` seconds.
fn request_for(
    fx: &Fixture,
    name: &str,
    query: &str,
    orders: &[Record],
    prices_watermark: Option<i64>,
    next_offset: u64,
) -> TransformRequest {
    request(
        fx,
        name,
        query,
        &Tx {
            orders,
            prices: &[],
            orders_watermark: None,
            prices_watermark,
        },
        next_offset,
        None,
    )
}

#[tokio::test]
async fn migrate_from_a_temporal_join_to_a_stateless_query_and_back() {
    let fx = Fixture::new();
    let prices = [record(0, APPEND, 1000, "A", 10)];
    let orders = [record(0, APPEND, 2000, "A", 1)];
    let first = request(
        &fx,
        "t1",
        ENRICH,
        &Tx {
            orders: &orders,
            prices: &prices,
            orders_watermark: None,
            prices_watermark: None,
        },
        0,
        None,
    );
    transform_ok(&first).await;
    let stateless = sql("SELECT event_time, city FROM orders");
    let to_stateless = migrate_request(
        &fx,
        "m1",
        temporal(ENRICH),
        stateless.clone(),
        0,
        Some(&first),
    );
    let outcome = migrate(&to_stateless).await;
    assert!(!outcome.new_checkpoint_written);
    assert_eq!(
        rows(&read_parquet(&to_stateless.new_data_path)),
        [row(2000, "A", 1, Some(10))]
    );

    // A stateless query refuses the temporal join's checkpoint: that takes MigrateQuery.
    let mut stale = fx.request(
        "SELECT event_time, city FROM orders",
        vec![fx.input("orders", vec![], None)],
        1,
    );
    stale.prev_checkpoint_path = Some(first.new_checkpoint_path.clone());
    let message = transform(&stale).await.0.invalid_query();
    assert!(message.contains("temporal join state"), "{message}");

    // Back to a temporal join: it starts with an empty table.
    let back = migrate_request(&fx, "m2", stateless, temporal(ENRICH), 1, None);
    let outcome = migrate(&back).await;
    assert!(outcome.new_checkpoint_written);
    assert_eq!(outcome.new_offset_interval, None);
    let mut next = request_for(
        &fx,
        "t2",
        ENRICH,
        &[record(1, APPEND, 3000, "A", 2)],
        Some(10),
        1,
    );
    next.prev_checkpoint_path = Some(back.new_checkpoint_path.clone());
    transform_ok(&next).await;
    assert_eq!(
        read_parquet(&next.new_data_path).num_rows(),
        0,
        "the prices read before the migration are not in the new query's table"
    );
}

#[tokio::test]
async fn a_stream_joins_two_temporal_tables_and_a_later_step_computes_over_the_join() {
    let fx = Fixture::new();
    let prices = [
        record(0, APPEND, 1000, "A", 10),
        record(1, APPEND, 1000, "B", 20),
    ];
    let discounts = [
        record(0, APPEND, 1000, "A", 1),
        record(1, APPEND, 3000, "A", 2),
    ];
    let orders = [
        record(0, APPEND, 2000, "A", 1),
        record(1, APPEND, 4000, "A", 2),
        record(2, APPEND, 4000, "B", 3),
    ];
    let inputs = vec![
        input(&fx, "orders", &orders, None),
        input(&fx, "prices", &prices, Some(10)),
        input(&fx, "discounts", &discounts, Some(10)),
    ];
    let joined = "SELECT s.event_time, s.city, s.population AS amount, p.population AS price, \
        d.population AS discount \
        FROM orders AS s \
        JOIN prices FOR SYSTEM_TIME AS OF s.event_time AS p ON s.city = p.city \
        LEFT JOIN discounts FOR SYSTEM_TIME AS OF s.event_time AS d ON s.city = d.city";
    let mut request = fx.request(joined, inputs, 0);
    let table = |name: &str| TemporalTable {
        name: name.into(),
        primary_key: vec!["city".into()],
    };
    request.transform = Transform::Sql(TransformSql {
        queries: Some(vec![
            weir_reference_engine::SqlQueryStep {
                alias: Some("enriched".into()),
                query: joined.into(),
            },
            weir_reference_engine::SqlQueryStep {
                alias: None,
                query: "SELECT event_time, city, amount * price - coalesce(discount, 0) AS total \
                        FROM enriched WHERE amount > 1"
                    .into(),
            },
        ]),
        temporal_tables: Some(vec![table("prices"), table("discounts")]),
        ..TransformSql::new("datafusion", "")
    });
    let outcome = transform_ok(&request).await;
    assert_eq!(outcome.new_watermark, Some(at(10)));
    let out = read_parquet(&request.new_data_path);
    assert_eq!(ints(&out, "event_time"), [4000, 4000]);
    assert_eq!(strings(&out, "city"), ["A", "B"]);
    assert_eq!(
        ints(&out, "total"),
        [2 * 10 - 2, 3 * 20],
        "A's discount changed at 3 s; B has none"
    );
}

#[tokio::test]
async fn a_retraction_in_the_stream_retracts_its_enriched_record() {
    let fx = Fixture::new();
    let prices = [record(0, APPEND, 1000, "A", 10)];
    let orders = [
        record(0, APPEND, 2000, "A", 1),
        record(1, APPEND, 2000, "A", 2),
        record(2, RETRACT, 2000, "A", 1),
    ];
    let tx = Tx {
        orders: &orders,
        prices: &prices,
        orders_watermark: None,
        prices_watermark: Some(10),
    };
    let request = request(&fx, "t", ENRICH, &tx, 0, None);
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        ints(&out, "op"),
        [APPEND as i64, APPEND as i64, RETRACT as i64]
    );
    assert_eq!(
        rows(&out),
        [
            row(2000, "A", 1, Some(10)),
            row(2000, "A", 2, Some(10)),
            row(2000, "A", 1, Some(10)),
        ]
    );
}

#[tokio::test]
async fn a_checkpoint_of_another_query_is_refused() {
    let fx = Fixture::new();
    let tx = Tx {
        orders: &[],
        prices: &[],
        orders_watermark: None,
        prices_watermark: None,
    };
    let first = request(&fx, "t1", ENRICH, &tx, 0, None);
    transform_ok(&first).await;
    let second = request(&fx, "t2", ENRICH_LEFT, &tx, 0, Some(&first));
    let message = transform(&second).await.0.invalid_query();
    assert!(
        message.contains("query fingerprint differs") && message.contains("MigrateQuery"),
        "{message}"
    );
}

#[tokio::test]
async fn five_transactions_with_checkpoints_give_what_one_gives() {
    let cities = ["A", "B", "C"];
    // Prices: a new price or a correction of the current one every 5 s, in event-time order.
    let mut prices = Vec::new();
    let mut current: [Option<Record>; 3] = [None, None, None];
    for i in 0..40i64 {
        let (t, c) = (i * 5000, (i % 3) as usize);
        let price = 100 + (i * 37) % 50;
        let offset = prices.len() as i64;
        let new = record(offset, APPEND, t, cities[c], price);
        match current[c].take() {
            Some(old) if i % 4 == 1 => {
                prices.push(record(
                    offset,
                    CORRECT_FROM,
                    old.event_time_ms,
                    cities[c],
                    old.population,
                ));
                let to = record(offset + 1, CORRECT_TO, t, cities[c], price);
                prices.push(to.clone());
                current[c] = Some(to);
            }
            _ => {
                prices.push(new.clone());
                current[c] = Some(new);
            }
        }
    }
    // Orders every 3 s, a little out of order.
    let orders: Vec<Record> = (0..60i64)
        .map(|j| {
            let t = j * 3000 + if j % 5 == 2 { -2500 } else { 500 };
            record(j, APPEND, t, cities[(j % 3) as usize], j)
        })
        .collect();
    let fx = Fixture::new();
    let whole = request(
        &fx,
        "whole",
        ENRICH_LEFT,
        &Tx {
            orders: &orders,
            prices: &prices,
            orders_watermark: Some(200),
            prices_watermark: Some(200),
        },
        0,
        None,
    );
    transform_ok(&whole).await;
    let expected = read_parquet(&whole.new_data_path);
    assert_eq!(expected.num_rows(), 60);

    let mut outputs = Vec::new();
    let mut prev: Option<TransformRequest> = None;
    let mut next_offset = 0;
    for k in 0..5i64 {
        let (from, to) = (k * 40_000, (k + 1) * 40_000);
        let in_range = |records: &[Record]| -> Vec<Record> {
            records
                .iter()
                .filter(|r| {
                    // A correction goes with its CorrectTo.
                    let t = if r.op == CORRECT_FROM {
                        prices[(r.offset + 1) as usize].event_time_ms
                    } else {
                        r.event_time_ms
                    };
                    from <= t && t < to
                })
                .cloned()
                .collect()
        };
        let (p, o) = (in_range(&prices), in_range(&orders));
        let request = request(
            &fx,
            &format!("t{k}"),
            ENRICH_LEFT,
            &Tx {
                orders: &o,
                prices: &p,
                orders_watermark: Some(to / 1000),
                prices_watermark: Some(to / 1000 - 1),
            },
            next_offset,
            prev.as_ref(),
        );
        let outcome = transform_ok(&request).await;
        if let Some(interval) = outcome.new_offset_interval {
            next_offset = interval.end + 1;
        }
        outputs.push(read_parquet(&request.new_data_path));
        prev = Some(request);
    }
    // The last orders wait for a watermark past them; one more transaction with nothing new.
    let last = request(
        &fx,
        "t5",
        ENRICH_LEFT,
        &Tx {
            orders: &[],
            prices: &[],
            orders_watermark: Some(200),
            prices_watermark: Some(200),
        },
        next_offset,
        prev.as_ref(),
    );
    transform_ok(&last).await;
    outputs.push(read_parquet(&last.new_data_path));
    let split = concat_batches(&expected.schema(), &outputs).unwrap();
    assert_eq!(split, expected);
}
