//! Bad queries and bad inputs: each ends in the right terminal message with a specific message.
use crate::common;

use common::*;

const MAP: &str = "SELECT event_time, city FROM foo";

async fn run(query: &str) -> Terminal<weir_reference_engine::TransformSuccess> {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 0)))], 0);
    transform(&request).await.0
}

#[tokio::test]
async fn sql_that_does_not_parse_is_an_invalid_query_with_the_parser_message() {
    let message = run("SELEC event_time FROM foo").await.invalid_query();
    assert!(
        message.contains("SQL error") && message.contains("SELEC"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unknown_column_is_an_invalid_query_naming_it() {
    let message = run("SELECT event_time, nope FROM foo")
        .await
        .invalid_query();
    assert!(message.contains("No field named nope"), "{message}");
}

#[tokio::test]
async fn an_output_without_event_time_is_an_invalid_query() {
    let message = run("SELECT city FROM foo").await.invalid_query();
    assert!(message.contains("has no `event_time` column"), "{message}");
}

#[tokio::test]
async fn a_naive_event_time_is_an_invalid_query() {
    let message = run("SELECT CAST(event_time AS TIMESTAMP) AS event_time, city FROM foo")
        .await
        .invalid_query();
    assert!(
        message.contains("naive timestamp without time zone"),
        "{message}"
    );
}

#[tokio::test]
async fn an_output_with_offset_is_an_invalid_query() {
    let message = run(r#"SELECT "offset", event_time, city FROM foo"#)
        .await
        .invalid_query();
    assert!(message.contains("system column `offset`"), "{message}");
}

#[tokio::test]
async fn an_output_with_system_time_is_an_invalid_query() {
    let message = run("SELECT system_time, event_time, city FROM foo")
        .await
        .invalid_query();
    assert!(message.contains("system column `system_time`"), "{message}");
}

#[tokio::test]
async fn a_missing_input_file_is_an_internal_error_naming_it() {
    let fx = Fixture::new();
    let missing = fx.path("no-such-slice");
    let request = fx.request(MAP, vec![fx.input("foo", vec![missing], Some((0, 0)))], 0);
    let message = transform(&request).await.0.internal_error();
    assert!(
        message.contains("no-such-slice") && message.contains("does not exist"),
        "{message}"
    );
}

#[tokio::test]
async fn a_corrupt_parquet_file_is_an_internal_error() {
    let fx = Fixture::new();
    let corrupt = fx.path("corrupt-slice");
    std::fs::write(&corrupt, b"PAR1 this is not a parquet file PAR1").unwrap();
    let request = fx.request(MAP, vec![fx.input("foo", vec![corrupt], Some((0, 0)))], 0);
    let message = transform(&request).await.0.internal_error();
    assert!(
        message.contains("cannot read") && message.contains("as Parquet"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unwritable_output_path_is_an_internal_error() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let mut request = fx.request(MAP, vec![fx.input("foo", vec![slice], Some((0, 0)))], 0);
    // A regular file where a directory should be: not writable even as root.
    let blocker = fx.path("blocker");
    std::fs::write(&blocker, b"").unwrap();
    request.new_data_path = blocker.join("data").display().to_string();
    let message = transform(&request).await.0.internal_error();
    assert!(message.contains("cannot write output file"), "{message}");
}

#[tokio::test]
async fn an_empty_offset_interval_is_a_malformed_request() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let request = fx.request(MAP, vec![fx.input("foo", vec![slice], Some((3, 1)))], 0);
    let message = transform(&request).await.0.invalid_query();
    assert!(
        message.contains("empty offset interval [3, 1]"),
        "{message}"
    );
}

#[tokio::test]
async fn a_statement_other_than_select_is_an_invalid_query() {
    let message = run("CREATE TABLE t AS SELECT * FROM foo")
        .await
        .invalid_query();
    assert!(message.contains("not supported"), "{message}");
}
