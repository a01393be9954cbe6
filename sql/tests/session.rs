//! Queries over real Parquet slices: table names, read-only refusals, datasets without data, errors.

use crate::common;

use datafusion::arrow::array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::compute::concat_batches;
use weir_sql::{SqlError, SqlSession, Table};

async fn one_batch(session: &SqlSession, sql: &str) -> RecordBatch {
    let result = session.run(sql).await.expect("the query runs");
    concat_batches(&result.schema, &result.batches).expect("one batch")
}

fn strings(batch: &RecordBatch, column: &str) -> Vec<String> {
    let array = batch.column_by_name(column).expect("the column");
    let array = array
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("strings");
    array
        .iter()
        .map(|v| v.unwrap_or("NULL").to_owned())
        .collect()
}

fn ints(batch: &RecordBatch, column: &str) -> Vec<i64> {
    let array = batch.column_by_name(column).expect("the column");
    let array = array.as_any().downcast_ref::<Int64Array>().expect("int64");
    array.values().to_vec()
}

#[tokio::test]
async fn a_dataset_with_two_slices_reads_as_one_table_of_all_its_records() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let batch = one_batch(
        &session,
        r#"SELECT "offset", city, temp FROM "readings.clean" ORDER BY "offset""#,
    )
    .await;
    assert_eq!(ints(&batch, "offset"), [0, 1, 2, 3, 4]);
    assert_eq!(
        strings(&batch, "city"),
        ["Oslo", "Lima", "Oslo", "Lima", "Pune"]
    );
    let temp = batch.column_by_name("temp").expect("temp");
    let temp = temp
        .as_any()
        .downcast_ref::<Float64Array>()
        .expect("float64");
    assert!(temp.is_null(2));
    assert_eq!(temp.value(4), 31.0);
}

#[tokio::test]
async fn a_dotted_name_works_quoted_and_unquoted_and_a_dashed_one_quoted() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let quoted = one_batch(&session, r#"SELECT count(*) AS n FROM "readings.clean""#).await;
    let unquoted = one_batch(&session, "SELECT count(*) AS n FROM readings.clean").await;
    assert_eq!(ints(&quoted, "n"), [5]);
    assert_eq!(ints(&unquoted, "n"), [5]);
    let joined = one_batch(
        &session,
        r#"SELECT r.city, s.elevation FROM readings.clean r
           JOIN "weather-stations" s ON r.city = s.id
           WHERE r."offset" = 4"#,
    )
    .await;
    assert_eq!(strings(&joined, "city"), ["Pune"]);
    assert_eq!(ints(&joined, "elevation"), [560]);
}

#[tokio::test]
async fn identifiers_are_case_sensitive() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let err = session
        .query(r#"SELECT CITY FROM "readings.clean""#)
        .await
        .expect_err("CITY is not city");
    assert!(matches!(err, SqlError::Plan { .. }), "{err:?}");
}

#[tokio::test]
async fn statements_that_change_anything_are_refused_as_read_only() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let out = dir.path().join("out.parquet");
    let copy = format!(r#"COPY "readings.clean" TO '{}'"#, out.display());
    let external = format!(
        "CREATE EXTERNAL TABLE x STORED AS PARQUET LOCATION '{}'",
        dir.path().display()
    );
    let refused = [
        r#"CREATE TABLE t AS SELECT * FROM "readings.clean""#,
        r#"CREATE VIEW v AS SELECT * FROM "readings.clean""#,
        r#"INSERT INTO "readings.clean" SELECT * FROM "readings.clean""#,
        r#"DELETE FROM "readings.clean""#,
        r#"DROP TABLE "readings.clean""#,
        external.as_str(),
        copy.as_str(),
        "SET datafusion.execution.batch_size = 1",
        "RESET datafusion.execution.batch_size",
        r#"EXPLAIN ANALYZE INSERT INTO "readings.clean" SELECT * FROM "readings.clean""#,
    ];
    for sql in refused {
        match session.query(sql).await {
            Err(e @ SqlError::ReadOnly { .. }) => {
                assert!(e.to_string().contains("read-only"), "{e}");
                assert!(e.is_query_error());
            }
            other => panic!("{sql}: expected a read-only refusal, got {other:?}"),
        }
    }
    // DataFusion has no transactions: refused too, as a query error.
    let begin = session
        .query("BEGIN TRANSACTION")
        .await
        .expect_err("no transactions");
    assert!(begin.is_query_error(), "{begin:?}");
    // Nothing was created or changed.
    let batch = one_batch(&session, r#"SELECT count(*) AS n FROM "readings.clean""#).await;
    assert_eq!(ints(&batch, "n"), [5]);
    assert!(!out.exists());
}

#[tokio::test]
async fn queries_explain_describe_and_show_are_allowed() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    for sql in [
        "VALUES (1), (2)",
        r#"WITH x AS (SELECT * FROM "readings.clean") SELECT count(*) FROM x"#,
        r#"EXPLAIN SELECT * FROM "readings.clean""#,
        r#"DESCRIBE "readings.clean""#,
        r#"SHOW COLUMNS FROM "readings.clean""#,
    ] {
        session
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let tables = one_batch(
        &session,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    )
    .await;
    assert_eq!(
        strings(&tables, "table_name"),
        ["readings.clean", "readings.empty", "weather-stations"]
    );
}

#[tokio::test]
async fn a_dataset_with_a_schema_and_no_data_is_an_empty_table() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let result = session
        .run(r#"SELECT city, temp FROM "readings.empty""#)
        .await
        .expect("the query runs");
    assert_eq!(result.num_rows(), 0);
    let names: Vec<_> = result
        .schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["city", "temp"]);
}

#[tokio::test]
async fn a_dataset_without_data_or_schema_is_named_in_the_error() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    for sql in [
        r#"SELECT * FROM "readings.raw""#,
        "SELECT * FROM readings.raw",
    ] {
        match session.query(sql).await {
            Err(SqlError::NoData { dataset }) => assert_eq!(dataset, "readings.raw"),
            other => panic!("{sql}: expected NoData, got {other:?}"),
        }
    }
    assert_eq!(
        session.datasets_without_data().collect::<Vec<_>>(),
        ["readings.raw"]
    );
    assert_eq!(
        session.table_names().collect::<Vec<_>>(),
        ["readings.clean", "readings.empty", "weather-stations"]
    );
}

#[tokio::test]
async fn bad_sql_an_unknown_table_and_two_statements_are_query_errors() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let parse = session.query("SELEC 1").await.expect_err("does not parse");
    assert!(matches!(parse, SqlError::Parse { .. }), "{parse:?}");
    let unknown = session
        .query("SELECT * FROM nope")
        .await
        .expect_err("no table");
    assert!(matches!(unknown, SqlError::Plan { .. }), "{unknown:?}");
    assert!(unknown.to_string().contains("nope"), "{unknown}");
    let two = session
        .query("SELECT 1; SELECT 2")
        .await
        .expect_err("two statements");
    assert!(
        matches!(two, SqlError::StatementCount { count: 2 }),
        "{two:?}"
    );
    for e in [parse, unknown, two] {
        assert!(e.is_query_error(), "{e:?}");
    }
}

#[tokio::test]
async fn a_missing_slice_or_a_file_that_is_not_parquet_fails_opening_its_table() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let missing = SqlSession::new(vec![Table::new("a", [dir.path().join("gone")])])
        .await
        .expect_err("the file is missing");
    assert!(
        matches!(&missing, SqlError::OpenTable { table, .. } if table == "a"),
        "{missing:?}"
    );

    let not_parquet = dir.path().join("f16notparquet");
    std::fs::write(&not_parquet, b"just text, not Parquet at all").expect("write");
    let bad = SqlSession::new(vec![Table::new("b", [not_parquet])])
        .await
        .expect_err("not Parquet");
    assert!(
        matches!(&bad, SqlError::OpenTable { table, .. } if table == "b"),
        "{bad:?}"
    );
    assert!(!bad.is_query_error());
}

#[tokio::test]
async fn a_name_given_twice_is_refused() {
    let err = SqlSession::new(vec![Table::empty("a", None), Table::empty("a", None)])
        .await
        .expect_err("twice");
    assert!(matches!(err, SqlError::DuplicateTable { table } if table == "a"));
}

/// A statement nested past the reference engine's bound is refused before DataFusion parses or plans it
/// (which would exhaust the stack and abort the process), as a query error naming where; the session
/// goes on answering, and a statement within the bound runs.
#[tokio::test]
async fn a_deeply_nested_statement_is_refused_and_the_session_keeps_answering() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let sum = |terms: usize| vec!["1"; terms].join(" + ");
    let ors = (0..5_000)
        .map(|i| format!("temp = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    for sql in [
        format!("SELECT {} AS x", sum(20_000)),
        format!(r#"SELECT count(*) AS n FROM "readings.clean" WHERE {ors}"#),
    ] {
        match session.query(&sql).await {
            Err(e @ SqlError::TooDeep { .. }) => {
                assert!(e.is_query_error());
                let message = e.to_string();
                assert!(message.contains("levels deep at line 1"), "{message}");
                assert!(message.contains("IN (...)"), "{message}");
            }
            other => panic!("expected a too-deep refusal, got {other:?}"),
        }
    }
    let batch = one_batch(&session, &format!("SELECT {} AS x", sum(150))).await;
    assert_eq!(ints(&batch, "x"), [150]);
}

/// The JSON functions kamu's sessions and the reference engine offer work here too, so a transform's
/// query can be tried with `weir sql` as written.
#[tokio::test]
async fn kamus_json_functions_are_there() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let batch = one_batch(
        &session,
        r#"SELECT json_get_str('{"city": "Oslo", "n": 3}', 'city') AS city,
                  json_get_int('{"city": "Oslo", "n": 3}', 'n') AS n"#,
    )
    .await;
    assert_eq!(strings(&batch, "city"), ["Oslo"]);
    assert_eq!(ints(&batch, "n"), [3]);
}
