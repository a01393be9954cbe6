//! The ODF transform semantics existing coordinators rely on (WIRE.md §4-5), one test per rule.
use crate::common;

use common::*;
use weir_reference_engine::arrow::datatypes::DataType;
use weir_reference_engine::{OffsetInterval, Phase, SqlQueryStep, Transform, TransformSql};

const MAP: &str = "SELECT event_time, city, population * 2 AS population FROM foo";

#[tokio::test]
async fn output_offsets_start_at_next_offset_and_system_time_comes_from_the_request() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &appends(0, &[("A", 1), ("B", 2), ("C", 3)]),
        SystemTypes::Compatible,
    );
    let request = fx.request(MAP, vec![fx.input("foo", vec![slice], Some((0, 2)))], 10);
    let outcome = transform_ok(&request).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 10, end: 12 })
    );
    assert!(
        !std::path::Path::new(&request.new_checkpoint_path).exists(),
        "a stateless query writes no checkpoint"
    );

    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        column_names(&out),
        [
            "offset",
            "op",
            "system_time",
            "event_time",
            "city",
            "population"
        ]
    );
    assert_eq!(ints(&out, "offset"), [10, 11, 12]);
    assert_eq!(ints(&out, "op"), [APPEND, APPEND, APPEND].map(i64::from));
    assert_eq!(
        ints(&out, "system_time"),
        [system_time().timestamp_millis(); 3]
    );
    assert_eq!(
        ints(&out, "event_time"),
        [0, 1000, 2000],
        "event_time is kept"
    );
    assert_eq!(ints(&out, "population"), [2, 4, 6]);
}

#[tokio::test]
async fn compatible_system_column_types_are_written() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let request = fx.request(MAP, vec![fx.input("foo", vec![slice], Some((0, 0)))], 0);
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    let schema = out.schema();
    assert_eq!(schema.field(0).data_type(), &DataType::Int64);
    assert_eq!(schema.field(1).data_type(), &DataType::Int32);
    assert_eq!(schema.field(2).data_type(), &utc_ms());
    assert_eq!(schema.field(3).data_type(), &utc_ms());
}

#[tokio::test]
async fn spec_typed_inputs_uint64_offset_and_uint8_op_are_read() {
    let fx = Fixture::new();
    let records = vec![record(0, APPEND, 0, "A", 1), record(1, RETRACT, 0, "A", 1)];
    let slice = fx.slice(&records, SystemTypes::Spec);
    let mut input = fx.input("foo", vec![slice], Some((0, 1)));
    input.schema_file = fx.schema_file(SystemTypes::Spec).display().to_string();
    let request = fx.request(MAP, vec![input], 5);
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(out.schema().field(1).data_type(), &DataType::Int32);
    assert_eq!(ints(&out, "op"), [APPEND, RETRACT].map(i64::from));
    assert_eq!(ints(&out, "offset"), [5, 6]);
}

#[tokio::test]
async fn only_records_inside_the_input_offset_interval_are_read() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &appends(0, &[("A", 1), ("B", 2), ("C", 3), ("D", 4), ("E", 5)]),
        SystemTypes::Compatible,
    );
    let request = fx.request(MAP, vec![fx.input("foo", vec![slice], Some((1, 3)))], 0);
    transform_ok(&request).await;
    assert_eq!(
        strings(&read_parquet(&request.new_data_path), "city"),
        ["B", "C", "D"]
    );
}

#[tokio::test]
async fn slices_are_read_in_offset_order_whatever_their_file_names() {
    let fx = Fixture::new();
    // slice-001 holds the later offsets, slice-002 the earlier ones.
    let later = fx.slice(&appends(3, &[("D", 4), ("E", 5)]), SystemTypes::Compatible);
    let earlier = fx.slice(
        &appends(0, &[("A", 1), ("B", 2), ("C", 3)]),
        SystemTypes::Compatible,
    );
    let request = fx.request(
        MAP,
        vec![fx.input("foo", vec![later, earlier], Some((0, 4)))],
        0,
    );
    transform_ok(&request).await;
    assert_eq!(
        strings(&read_parquet(&request.new_data_path), "city"),
        ["A", "B", "C", "D", "E"]
    );
}

#[tokio::test]
async fn a_query_that_outputs_op_has_it_passed_through() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1), ("B", 2)]), SystemTypes::Compatible);
    let query = "SELECT CAST(1 AS INT) AS op, event_time, city FROM foo";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 1)))], 0);
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        column_names(&out),
        ["offset", "op", "system_time", "event_time", "city"]
    );
    assert_eq!(ints(&out, "op"), [RETRACT, RETRACT].map(i64::from));
}

#[tokio::test]
async fn the_reference_vector_query_selecting_op_keeps_input_ops() {
    let fx = Fixture::new();
    let records = vec![
        record(1, APPEND, 0, "A", 10),
        record(2, RETRACT, 0, "A", 10),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let query = "select op, event_time, city, population * 2 as population from foo";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((1, 2)))], 10);
    let outcome = transform_ok(&request).await;
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 10, end: 11 })
    );
    let out = read_parquet(&request.new_data_path);
    assert_eq!(ints(&out, "op"), [APPEND, RETRACT].map(i64::from));
    assert_eq!(ints(&out, "population"), [20, 20]);
}

#[tokio::test]
async fn zero_output_records_still_write_a_file_and_give_no_offset_interval() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let query = "SELECT event_time, city FROM foo WHERE population > 100";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 0)))], 7);
    let outcome = transform_ok(&request).await;
    assert_eq!(outcome.new_offset_interval, None);
    let out = read_parquet(&request.new_data_path);
    assert_eq!(out.num_rows(), 0);
    assert_eq!(
        column_names(&out),
        ["offset", "op", "system_time", "event_time", "city"]
    );
}

#[tokio::test]
async fn an_input_without_new_data_is_seen_through_its_schema_file() {
    let fx = Fixture::new();
    let request = fx.request(MAP, vec![fx.input("foo", vec![], None)], 3);
    let outcome = transform_ok(&request).await;
    assert_eq!(outcome.new_offset_interval, None);
    assert_eq!(read_parquet(&request.new_data_path).num_rows(), 0);
}

#[tokio::test]
async fn new_watermark_is_the_minimum_over_inputs_of_their_latest_explicit_watermark() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let mut foo = fx.input("foo", vec![slice], Some((0, 0)));
    foo.explicit_watermarks = vec![watermark(1, 100), watermark(2, 300)];
    let mut baz = fx.input("baz", vec![], None);
    baz.explicit_watermarks = vec![watermark(5, 200)];
    let quiet = fx.input("quiet", vec![], None);
    let request = fx.request(MAP, vec![foo, baz, quiet], 0);
    let outcome = transform_ok(&request).await;
    assert_eq!(outcome.new_watermark, Some(at(200)));

    let request = fx.request(MAP, vec![fx.input("foo", vec![], None)], 0);
    assert_eq!(
        transform_ok(&request).await.new_watermark,
        None,
        "no explicit watermark, no output watermark"
    );
}

#[tokio::test]
async fn multi_step_queries_see_earlier_steps_by_their_alias() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &appends(0, &[("A", 5), ("B", 20), ("C", 30)]),
        SystemTypes::Compatible,
    );
    let mut request = fx.request(MAP, vec![fx.input("foo", vec![slice], Some((0, 2)))], 0);
    request.transform = Transform::Sql(TransformSql {
        engine: "datafusion".into(),
        version: None,
        query: None,
        queries: Some(vec![
            SqlQueryStep {
                alias: Some("doubled".into()),
                query: "SELECT event_time, city, population * 2 AS p2 FROM foo".into(),
            },
            SqlQueryStep {
                alias: None,
                query: "SELECT event_time, city, p2 + 1 AS p FROM doubled WHERE p2 > 20".into(),
            },
        ]),
        temporal_tables: None,
    });
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(strings(&out, "city"), ["B", "C"]);
    assert_eq!(ints(&out, "p"), [41, 61]);
}

#[tokio::test]
async fn identifiers_are_case_sensitive() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let input = fx.input("Foo", vec![slice], Some((0, 0)));

    let request = fx.request("SELECT event_time, city FROM Foo", vec![input.clone()], 0);
    transform_ok(&request).await;

    let request = fx.request("SELECT event_time, city FROM foo", vec![input.clone()], 0);
    let message = transform(&request).await.0.invalid_query();
    assert!(
        message.contains("foo") && message.contains("not found"),
        "{message}"
    );

    let request = fx.request("SELECT event_time, City FROM Foo", vec![input], 0);
    let message = transform(&request).await.0.invalid_query();
    assert!(message.contains("City"), "{message}");
}

#[tokio::test]
async fn progress_reports_phases_with_rows_read_and_written() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &appends(0, &[("A", 1), ("B", 200), ("C", 300)]),
        SystemTypes::Compatible,
    );
    let query = "SELECT event_time, city FROM foo WHERE population > 100";
    let request = fx.request(query, vec![fx.input("foo", vec![slice], Some((0, 2)))], 0);
    let (terminal, progress) = transform(&request).await;
    terminal.success();
    let phases: Vec<Phase> = progress.iter().map(|p| p.phase).collect();
    assert_eq!(phases.first(), Some(&Phase::Planning));
    assert!(phases.contains(&Phase::Executing), "{phases:?}");
    let last = progress.last().unwrap();
    assert_eq!(last.phase, Phase::Writing);
    assert_eq!((last.rows_read, last.rows_written), (Some(3), Some(2)));
}

/// kamu's Flink engine cannot read DELTA_BINARY_PACKED (kamu-engine-flink issue 3), so no ODF writer
/// uses it: the system columns are PLAIN, without a dictionary, in every row group.
#[tokio::test]
async fn system_columns_are_written_plain_never_delta_encoded() {
    use weir_reference_engine::parquet::basic::Encoding;
    use weir_reference_engine::parquet::file::reader::{FileReader, SerializedFileReader};

    let fx = Fixture::new();
    let cities: Vec<(String, i64)> = (0..5_000).map(|i| (format!("city {i}"), i)).collect();
    let cities: Vec<(&str, i64)> = cities.iter().map(|(c, p)| (c.as_str(), *p)).collect();
    let slice = fx.slice(&appends(0, &cities), SystemTypes::Compatible);
    let request = fx.request(MAP, vec![fx.input("foo", vec![slice], Some((0, 4_999)))], 0);
    transform_ok(&request).await;

    let file = std::fs::File::open(&request.new_data_path).unwrap();
    let reader = SerializedFileReader::new(file).unwrap();
    let metadata = reader.metadata();
    assert!(metadata.num_row_groups() > 0);
    for row_group in metadata.row_groups() {
        for column in row_group.columns() {
            let name = column.column_path().string();
            let encodings: Vec<Encoding> = column.encodings().collect();
            assert!(
                !encodings.iter().any(|e| matches!(
                    e,
                    Encoding::DELTA_BINARY_PACKED
                        | Encoding::DELTA_LENGTH_BYTE_ARRAY
                        | Encoding::DELTA_BYTE_ARRAY
                )),
                "{name}: {encodings:?}"
            );
            if ["offset", "op", "system_time"].contains(&name.as_str()) {
                assert!(
                    encodings.contains(&Encoding::PLAIN),
                    "{name}: {encodings:?}"
                );
                assert!(
                    !encodings.contains(&Encoding::RLE_DICTIONARY)
                        && column.dictionary_page_offset().is_none(),
                    "{name} has a dictionary: {encodings:?}"
                );
            }
        }
    }
}
