//! Live sessions (a snapshot per statement over tables that change) and query parameters, on real Parquet
//! files.

use crate::common;

use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{
    Array, Float64Array, Int64Array, RecordBatch, StringArray, UnionArray,
};
use datafusion::arrow::buffer::ScalarBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Schema, UnionFields};
use weir_sql::{LiveSession, SourceError, SqlError, Table, Tables};

async fn count(session: &weir_sql::SqlSession) -> i64 {
    let batches = session
        .query(r#"SELECT count(*) AS n FROM "readings.clean""#)
        .await
        .expect("counts");
    batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("an int64 count")
        .value(0)
}

/// A source over tables the test changes, counting how often it is asked.
fn shared_source(tables: Tables) -> (LiveSession, Arc<Mutex<Tables>>, Arc<Mutex<usize>>) {
    let shared = Arc::new(Mutex::new(tables));
    let asked = Arc::new(Mutex::new(0usize));
    let (s, a) = (shared.clone(), asked.clone());
    let live = LiveSession::new(move || {
        let tables = s.lock().expect("the tables").clone();
        *a.lock().expect("the count") += 1;
        async move { Ok::<_, SourceError>(tables) }
    });
    (live, shared, asked)
}

#[tokio::test]
async fn a_snapshot_keeps_its_files_and_the_next_snapshot_sees_a_new_slice() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (live, shared, asked) = shared_source(common::tables(dir.path()));
    let before = live.snapshot().await.expect("a snapshot");
    assert_eq!(count(&before).await, 5);

    // A pull commits a third slice.
    let third = common::write_slice(
        dir.path(),
        "f1620aa03",
        &common::readings_slice(5, &["Oslo", "Oslo"], &[Some(1.0), Some(2.0)]),
    );
    shared.lock().expect("the tables")[0].files.push(third);

    // The statement that started before it still reads what was there when it started.
    assert_eq!(count(&before).await, 5);
    let after = live.snapshot().await.expect("a snapshot");
    assert_eq!(count(&after).await, 7);
    assert_eq!(*asked.lock().expect("the count"), 2);
}

#[tokio::test]
async fn new_renamed_and_deleted_datasets_show_in_the_next_snapshot() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (live, shared, _) = shared_source(common::tables(dir.path()));
    {
        let mut tables = shared.lock().expect("the tables");
        let stations = tables.remove(1);
        tables.push(Table {
            name: "stations".into(),
            ..stations
        });
    }
    let session = live.snapshot().await.expect("a snapshot");
    let names: Vec<&str> = session.table_names().collect();
    assert_eq!(names, ["readings.clean", "readings.empty", "stations"]);
    let err = session
        .query(r#"SELECT * FROM "weather-stations""#)
        .await
        .expect_err("renamed away");
    assert!(err.is_query_error(), "{err}");
}

#[tokio::test]
async fn a_source_that_fails_fails_the_snapshot_with_its_reason() {
    let live = LiveSession::new(|| async {
        Err::<Tables, SourceError>("the head of `readings` cannot be read".into())
    });
    let err = live.snapshot().await.expect_err("fails");
    assert!(matches!(err, SqlError::Source { .. }), "{err:?}");
    assert!(err.to_string().contains("head of `readings`"), "{err}");
    assert!(!err.is_query_error());
}

fn one_row(fields: Vec<(&str, Arc<dyn Array>)>) -> RecordBatch {
    let schema = Schema::new(
        fields
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(
        Arc::new(schema),
        fields.into_iter().map(|(_, a)| a).collect(),
    )
    .expect("a batch")
}

#[tokio::test]
async fn question_marks_are_numbered_in_text_order_and_typed_from_their_columns() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    let query = session
        .prepare(r#"SELECT "offset", city FROM "readings.clean" WHERE temp > ? AND city = ? ORDER BY "offset""#)
        .await
        .expect("prepares");
    let params = query.parameter_schema();
    let described: Vec<(String, DataType)> = params
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    assert_eq!(
        described,
        [
            ("$1".to_owned(), DataType::Float64),
            ("$2".to_owned(), DataType::Utf8)
        ]
    );
    assert!(query.needs_parameters());
    let err = query.clone().collect().await.expect_err("unbound");
    assert!(matches!(err, SqlError::Parameters { .. }), "{err:?}");

    // An int where a double is expected is coerced; the order is the text's.
    let values = one_row(vec![
        ("a", Arc::new(Int64Array::from(vec![18]))),
        ("b", Arc::new(StringArray::from(vec!["Lima"]))),
    ]);
    let rows = query
        .clone()
        .bind(&values, 0)
        .expect("binds")
        .collect()
        .await
        .expect("runs");
    let offsets: Vec<i64> = rows
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("int64")
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(offsets, [3]);

    let too_few = one_row(vec![("a", Arc::new(Float64Array::from(vec![1.0])))]);
    let err = query.bind(&too_few, 0).expect_err("one missing");
    assert!(err.to_string().contains("2 parameter(s), 1 bound"), "{err}");
}

#[tokio::test]
async fn a_union_value_binds_as_its_member_and_mixed_styles_are_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let session = common::session(dir.path()).await;
    // What flightsql-dbapi sends: each value a one-row dense union of int64, float64, utf8.
    let fields = UnionFields::try_new(
        [0, 1, 2],
        [
            Field::new("int", DataType::Int64, true),
            Field::new("float", DataType::Float64, true),
            Field::new("str", DataType::Utf8, true),
        ],
    )
    .expect("union fields");
    let union = UnionArray::try_new(
        fields,
        ScalarBuffer::from(vec![2i8]),
        Some(ScalarBuffer::from(vec![0i32])),
        vec![
            Arc::new(Int64Array::from(Vec::<i64>::new())),
            Arc::new(Float64Array::from(Vec::<f64>::new())),
            Arc::new(StringArray::from(vec!["Pune"])),
        ],
    )
    .expect("a union");
    let values = one_row(vec![("param_0", Arc::new(union))]);
    let rows = session
        .prepare(r#"SELECT count(*) AS n FROM "readings.clean" WHERE city = ?"#)
        .await
        .expect("prepares")
        .bind(&values, 0)
        .expect("binds")
        .collect()
        .await
        .expect("runs");
    let n = rows[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("int64")
        .value(0);
    assert_eq!(n, 1);

    let err = session.prepare("SELECT ? + $1").await.expect_err("mixed");
    assert!(err.to_string().contains("mixes"), "{err}");
}
