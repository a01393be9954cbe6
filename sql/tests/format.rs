//! The CLI's output formats over real query results.

use crate::common;

use weir_sql::{OutputFormat, format_results};

#[tokio::test]
async fn a_result_prints_as_a_table_json_rows_and_csv() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let result = session
        .run(r#"SELECT "offset", city, temp FROM "readings.clean" WHERE "offset" < 3 ORDER BY "offset""#)
        .await
        .expect("the query runs");
    let table =
        format_results(&result.schema, &result.batches, OutputFormat::Table).expect("a table");
    assert_eq!(
        table,
        "+--------+------+------+\n\
         | offset | city | temp |\n\
         +--------+------+------+\n\
         | 0      | Oslo | 3.5  |\n\
         | 1      | Lima | 18.0 |\n\
         | 2      | Oslo |      |\n\
         +--------+------+------+"
    );
    let json = format_results(&result.schema, &result.batches, OutputFormat::Json).expect("json");
    assert_eq!(
        json,
        r#"[{"offset":0,"city":"Oslo","temp":3.5},{"offset":1,"city":"Lima","temp":18.0},{"offset":2,"city":"Oslo","temp":null}]"#
    );
    let csv = format_results(&result.schema, &result.batches, OutputFormat::Csv).expect("csv");
    assert_eq!(csv, "offset,city,temp\n0,Oslo,3.5\n1,Lima,18.0\n2,Oslo,\n");
}

#[tokio::test]
async fn no_rows_still_print_their_columns() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let result = session
        .run(r#"SELECT city, temp FROM "readings.clean" WHERE false"#)
        .await
        .expect("the query runs");
    assert_eq!(result.num_rows(), 0);
    let table =
        format_results(&result.schema, &result.batches, OutputFormat::Table).expect("a table");
    assert!(table.contains("| city | temp |"), "{table}");
    let json = format_results(&result.schema, &result.batches, OutputFormat::Json).expect("json");
    assert_eq!(json, "[]");
    let csv = format_results(&result.schema, &result.batches, OutputFormat::Csv).expect("csv");
    assert_eq!(csv, "city,temp\n");
}
