//! `ORDER BY` in a transform: at the top of the last step it orders each transaction's output records
//! (what kamu's DataFusion engine does, and kamu's covid manifests rely on), ties in input offset
//! order; a correction pair the order separates is written as Retract + Append. Everywhere else it has
//! no meaning for a changelog and is an InvalidQuery saying why.
use crate::common;

use common::*;

#[tokio::test]
async fn order_by_at_the_top_orders_the_transactions_output_and_splits_separated_corrections() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 0, "B", 5),
        record(1, APPEND, 1000, "A", 3),
        record(2, CORRECT_FROM, 0, "B", 5),
        record(3, CORRECT_TO, 0, "B", 9),
        record(4, APPEND, 2000, "C", 2),
        record(5, RETRACT, 1000, "A", 3),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let request = fx.request(
        "SELECT event_time, city, population FROM foo ORDER BY city, population DESC",
        vec![fx.input("foo", vec![slice], Some((0, 5)))],
        100,
    );
    let outcome = transform_ok(&request).await;
    assert_eq!(
        outcome.new_offset_interval.map(|i| (i.start, i.end)),
        Some((100, 105))
    );
    let out = read_parquet(&request.new_data_path);
    assert_eq!(ints(&out, "offset"), (100..106).collect::<Vec<_>>());
    assert_eq!(strings(&out, "city"), ["A", "A", "B", "B", "B", "C"]);
    assert_eq!(ints(&out, "population"), [3, 3, 9, 5, 5, 2]);
    // The retraction of A follows the record it retracts (ties keep input order); the correction of
    // B 5 -> 9 was separated by the order: its new image enters (Append), its old one leaves (Retract).
    assert_eq!(
        ints(&out, "op"),
        [APPEND, RETRACT, APPEND, APPEND, RETRACT, APPEND].map(i64::from)
    );
}

#[tokio::test]
async fn kamus_covid_union_all_with_order_by_orders_records_of_all_inputs() {
    // The shape of examples/covid/canada.case-details.yaml: a UNION ALL of inputs under `select * from
    // (...) order by ...`.
    let fx = Fixture::new();
    let foo = fx.slice(
        &[
            record(0, APPEND, 2000, "x", 1),
            record(1, APPEND, 1000, "y", 2),
        ],
        SystemTypes::Compatible,
    );
    let bar = fx.slice(
        &[
            record(0, APPEND, 1000, "z", 3),
            record(1, APPEND, 3000, "w", 4),
        ],
        SystemTypes::Compatible,
    );
    let query = "select * from (
            select 'AB' as province, event_time, city, population from foo
            union all
            select 'BC' as province, event_time, city, population from bar
        ) order by event_time, province, city";
    let request = fx.request(
        query,
        vec![
            fx.input("foo", vec![foo], Some((0, 1))),
            fx.input("bar", vec![bar], Some((0, 1))),
        ],
        0,
    );
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(ints(&out, "event_time"), [1000, 1000, 2000, 3000]);
    assert_eq!(strings(&out, "province"), ["AB", "BC", "AB", "BC"]);
    assert_eq!(strings(&out, "city"), ["y", "z", "x", "w"]);
    assert_eq!(ints(&out, "op"), [APPEND; 4].map(i64::from));
}

#[tokio::test]
async fn order_by_where_it_has_no_meaning_is_an_invalid_query_saying_why() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1), ("B", 2)]), SystemTypes::Compatible);
    for (query, expected) in [
        (
            "SELECT event_time, city FROM foo ORDER BY city LIMIT 1",
            "keeps a number of records that depends on how the input is split",
        ),
        (
            "SELECT event_time, city FROM foo ORDER BY population",
            "may only name columns the query outputs",
        ),
        (
            "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, count(*) AS n FROM foo \
             GROUP BY 1 ORDER BY 1",
            "window aggregation emits each window once it closes",
        ),
    ] {
        let request = fx.request(
            query,
            vec![fx.input("foo", vec![slice.clone()], Some((0, 1)))],
            0,
        );
        let message = transform(&request).await.0.invalid_query();
        assert!(message.contains(expected), "{query}: {message}");
    }
}
