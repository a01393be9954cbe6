//! Changelogs through queries: retractions and corrections without passing `op` by hand, repaired
//! correction pairs, and queries that cannot keep changelog semantics refused with an explanation.
use crate::common;

use common::*;

#[tokio::test]
async fn retractions_and_corrections_flow_through_a_map_without_selecting_op() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 0, "A", 10),
        record(1, APPEND, 1000, "B", 20),
        record(2, RETRACT, 0, "A", 10),
        record(3, CORRECT_FROM, 1000, "B", 20),
        record(4, CORRECT_TO, 1000, "B", 25),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let query = "SELECT event_time, city, population * 2 AS population FROM foo";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 4)))], 100);
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        ints(&out, "op"),
        [APPEND, APPEND, RETRACT, CORRECT_FROM, CORRECT_TO].map(i64::from)
    );
    assert_eq!(ints(&out, "population"), [20, 40, 20, 40, 50]);
    assert_eq!(
        ints(&out, "offset"),
        [100, 101, 102, 103, 104],
        "the correction pair stays adjacent"
    );
}

#[tokio::test]
async fn a_filter_dropping_half_a_correction_pair_turns_the_other_half_into_a_retraction_or_an_append()
 {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 0, "X", 50),
        record(1, APPEND, 0, "Y", 150),
        // X goes from 50 to 150: it enters the filtered result.
        record(2, CORRECT_FROM, 0, "X", 50),
        record(3, CORRECT_TO, 0, "X", 150),
        // Y goes from 150 to 60: it leaves the filtered result.
        record(4, CORRECT_FROM, 0, "Y", 150),
        record(5, CORRECT_TO, 0, "Y", 60),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let query = "SELECT event_time, city, population FROM foo WHERE population > 100";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 5)))], 0);
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(strings(&out, "city"), ["Y", "X", "Y"]);
    assert_eq!(ints(&out, "op"), [APPEND, APPEND, RETRACT].map(i64::from));
}

#[tokio::test]
async fn a_correction_pair_split_across_transactions_becomes_a_retraction_then_an_append() {
    let fx = Fixture::new();
    let records = vec![
        record(0, APPEND, 0, "X", 1),
        record(1, CORRECT_FROM, 0, "X", 1),
        record(2, CORRECT_TO, 0, "X", 2),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let query = "SELECT event_time, city, population FROM foo";
    let first = fx.request(
        query,
        vec![fx.input("foo", vec![slice.clone()], Some((0, 1)))],
        0,
    );
    transform_ok(&first).await;
    assert_eq!(
        ints(&read_parquet(&first.new_data_path), "op"),
        [APPEND, RETRACT].map(i64::from)
    );
    let second = fx.request(query, vec![fx.input("foo", vec![slice], Some((2, 2)))], 2);
    transform_ok(&second).await;
    assert_eq!(
        ints(&read_parquet(&second.new_data_path), "op"),
        [i64::from(APPEND)]
    );
}

#[tokio::test]
async fn an_aggregation_without_the_window_form_is_refused_with_an_explanation() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let query = "SELECT max(event_time) AS event_time, city, sum(population) AS population FROM foo GROUP BY city";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 0)))], 0);
    let message = transform(&request).await.0.invalid_query();
    assert!(
        message.contains("cannot preserve changelog semantics"),
        "{message}"
    );
    assert!(message.contains("GROUP BY date_bin(INTERVAL"), "{message}");
}

#[tokio::test]
async fn a_join_is_refused_with_an_explanation() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let query = "SELECT a.event_time, a.city FROM foo a JOIN bar b ON a.city = b.city";
    let request = fx.request(
        query,
        vec![
            fx.input("foo", vec![slice.clone()], Some((0, 0))),
            fx.input("bar", vec![slice.clone()], Some((0, 0))),
        ],
        0,
    );
    let message = transform(&request).await.0.invalid_query();
    assert!(
        message.contains("bound one side's event time by the other's"),
        "{message}"
    );
    let query = "SELECT a.event_time, a.city FROM foo a JOIN foo b ON a.city = b.city";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 0)))], 0);
    let message = transform(&request).await.0.invalid_query();
    assert!(message.contains("joined with itself"), "{message}");
}

#[tokio::test]
async fn order_by_in_a_subquery_or_an_earlier_step_has_no_meaning_and_input_order_is_kept() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &appends(0, &[("B", 1), ("A", 2), ("C", 3)]),
        SystemTypes::Compatible,
    );
    let mut request = fx.request(
        "",
        vec![fx.input("foo", vec![slice.clone()], Some((0, 2)))],
        0,
    );
    request.transform =
        weir_reference_engine::Transform::Sql(weir_reference_engine::TransformSql {
            queries: Some(vec![
                weir_reference_engine::SqlQueryStep {
                    alias: Some("sorted".into()),
                    query: "SELECT event_time, city FROM foo ORDER BY city".into(),
                },
                weir_reference_engine::SqlQueryStep {
                    alias: None,
                    query: "SELECT * FROM sorted".into(),
                },
            ]),
            ..weir_reference_engine::TransformSql::new("datafusion", "")
        });
    transform_ok(&request).await;
    assert_eq!(
        strings(&read_parquet(&request.new_data_path), "city"),
        ["B", "A", "C"]
    );
    let request = fx.request(
        "SELECT * FROM (SELECT event_time, city FROM foo ORDER BY city) AS sorted",
        vec![fx.input("foo", vec![slice], Some((0, 2)))],
        0,
    );
    transform_ok(&request).await;
    assert_eq!(
        strings(&read_parquet(&request.new_data_path), "city"),
        ["B", "A", "C"]
    );
}

#[tokio::test]
async fn union_all_keeps_each_inputs_changelog_in_order() {
    let fx = Fixture::new();
    let a = fx.slice(
        &[
            record(0, APPEND, 0, "A", 1),
            record(1, CORRECT_FROM, 0, "A", 1),
            record(2, CORRECT_TO, 0, "A", 2),
        ],
        SystemTypes::Compatible,
    );
    let b = fx.slice(
        &[record(0, APPEND, 0, "B", 1), record(1, RETRACT, 0, "B", 1)],
        SystemTypes::Spec,
    );
    let mut input_b = fx.input("b", vec![b], Some((0, 1)));
    input_b.schema_file = fx.schema_file(SystemTypes::Spec).display().to_string();
    let query = "SELECT event_time, city FROM a UNION ALL SELECT event_time, city FROM b";
    let request = fx.request(
        query,
        vec![fx.input("a", vec![a], Some((0, 2))), input_b],
        0,
    );
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(strings(&out, "city"), ["A", "A", "A", "B", "B"]);
    assert_eq!(
        ints(&out, "op"),
        [APPEND, CORRECT_FROM, CORRECT_TO, APPEND, RETRACT].map(i64::from)
    );
}
