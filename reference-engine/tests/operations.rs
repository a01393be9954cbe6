//! ExecuteRawQuery, ValidateQuery, MigrateQuery and DeriveProvenance.
use crate::common;

use std::path::Path;

use common::*;
use weir_reference_engine::{
    DatasetId, DatasetVocabulary, DeriveProvenanceRequest, MigrateQueryRequest, NoProgress,
    OffsetInterval, RawQueryRequest, ReferenceEngine, ValidateQueryInput, ValidateQueryRequest,
};

const WINDOWED: &str = "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, city, \
    sum(population) AS population FROM foo GROUP BY 1, city";

#[tokio::test]
async fn raw_query_writes_the_result_of_sql_over_the_input_table() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &appends(0, &[("A", 1), ("B", 2), ("A", 3)]),
        SystemTypes::Compatible,
    );
    let request = RawQueryRequest {
        input_data_paths: vec![slice.display().to_string()],
        transform: sql(
            "SELECT city, sum(population) AS total FROM input GROUP BY city ORDER BY city",
        ),
        output_data_path: fx.path("raw/output.parquet").display().to_string(),
    };
    let outcome = terminal(
        ReferenceEngine::new()
            .execute_raw_query(&request, &NoProgress)
            .await,
    )
    .success();
    assert_eq!(outcome.num_records, 2);
    let out = read_parquet(&request.output_data_path);
    assert_eq!(strings(&out, "city"), ["A", "B"]);
    assert_eq!(ints(&out, "total"), [4, 2]);
}

#[tokio::test]
async fn raw_query_writes_timestamps_as_utc_milliseconds_like_odf_engines() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let request = RawQueryRequest {
        input_data_paths: vec![slice.display().to_string()],
        // DataFusion types the cast Timestamp(ns) without a zone, `now()` Timestamp(ns, "+00:00").
        transform: sql(
            "SELECT *, CAST('2023-01-01 00:00:00.123456' AS TIMESTAMP) AS computed, \
             arrow_cast(event_time, 'Timestamp(Nanosecond, Some(\"+00:00\"))') AS zoned FROM input",
        ),
        output_data_path: fx.path("raw/output.parquet").display().to_string(),
    };
    terminal(
        ReferenceEngine::new()
            .execute_raw_query(&request, &NoProgress)
            .await,
    )
    .success();
    let out = read_parquet(&request.output_data_path);
    let type_of = |name: &str| {
        out.schema()
            .field_with_name(name)
            .unwrap()
            .data_type()
            .clone()
    };
    for name in ["system_time", "event_time", "computed", "zoned"] {
        assert_eq!(type_of(name), utc_ms(), "{name}");
    }
    assert_eq!(
        type_of("offset"),
        weir_reference_engine::arrow::datatypes::DataType::Int64
    );
    assert_eq!(
        type_of("op"),
        weir_reference_engine::arrow::datatypes::DataType::Int32
    );
    assert_eq!(
        ints(&out, "computed"),
        [1_672_531_200_123],
        "a naive timestamp is UTC"
    );
    assert_eq!(ints(&out, "zoned"), ints(&out, "event_time"));
}

#[tokio::test]
async fn raw_query_with_bad_sql_is_an_invalid_query() {
    let fx = Fixture::new();
    let slice = fx.slice(&appends(0, &[("A", 1)]), SystemTypes::Compatible);
    let request = RawQueryRequest {
        input_data_paths: vec![slice.display().to_string()],
        transform: sql("SELECT nope FROM input"),
        output_data_path: fx.path("out.parquet").display().to_string(),
    };
    let message = terminal(
        ReferenceEngine::new()
            .execute_raw_query(&request, &NoProgress)
            .await,
    )
    .invalid_query();
    assert!(message.contains("No field named nope"), "{message}");
}

fn validate_request(fx: &Fixture, query: &str) -> ValidateQueryRequest {
    ValidateQueryRequest {
        dataset_id: DatasetId::from_key([9; 32]),
        dataset_alias: "bar".into(),
        vocab: DatasetVocabulary::default(),
        transform: sql(query),
        query_inputs: vec![ValidateQueryInput {
            dataset_id: DatasetId::from_key([1; 32]),
            dataset_alias: "foo".into(),
            query_alias: "foo".into(),
            vocab: DatasetVocabulary::default(),
            schema_file: fx.schema_file(SystemTypes::Spec).display().to_string(),
        }],
        output_schema_path: fx.path("validate/schema.parquet").display().to_string(),
    }
}

#[tokio::test]
async fn validate_gives_the_output_schema_from_schema_files_alone() {
    let fx = Fixture::new();
    let request = validate_request(
        &fx,
        "SELECT event_time, city, population * 2 AS doubled FROM foo",
    );
    let outcome = terminal(ReferenceEngine::new().validate_query(&request).await).success();
    let columns: Vec<(String, String)> = outcome
        .output_columns
        .iter()
        .map(|c| (c.name.clone(), c.data_type.clone()))
        .collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "offset",
            "op",
            "system_time",
            "event_time",
            "city",
            "doubled"
        ]
    );
    assert_eq!(columns[0].1, "Int64");
    assert_eq!(columns[1].1, "Int32");
    let schema_file = read_parquet(&request.output_schema_path);
    assert_eq!(schema_file.num_rows(), 0);
    assert_eq!(column_names(&schema_file), names);
}

#[tokio::test]
async fn validate_reports_precise_errors() {
    let fx = Fixture::new();
    let request = validate_request(&fx, "SELECT event_time, nope FROM foo");
    let message = terminal(ReferenceEngine::new().validate_query(&request).await).invalid_query();
    assert!(message.contains("No field named nope"), "{message}");
    let request = validate_request(&fx, "SELECT city FROM foo");
    let message = terminal(ReferenceEngine::new().validate_query(&request).await).invalid_query();
    assert!(message.contains("has no `event_time` column"), "{message}");
}

#[tokio::test]
async fn migrate_finalises_open_windows_and_starts_the_next_query() {
    let fx = Fixture::new();
    let slice = fx.slice(
        &[
            record(0, APPEND, 10, "A", 5),
            record(1, APPEND, 3_600_000 + 10, "B", 7),
        ],
        SystemTypes::Compatible,
    );
    // One transaction with no watermark: both windows stay open in the checkpoint.
    let mut first = fx.request(
        WINDOWED,
        vec![fx.input("foo", vec![slice], Some((0, 1)))],
        0,
    );
    first.new_checkpoint_path = fx.path("t0/checkpoint").display().to_string();
    transform_ok(&first).await;

    let next_query = WINDOWED.replace("1 hour", "1 day");
    let request = MigrateQueryRequest {
        dataset_id: DatasetId::from_key([9; 32]),
        dataset_alias: "bar".into(),
        system_time: system_time(),
        vocab: DatasetVocabulary::default(),
        prev_transform: sql(WINDOWED),
        next_transform: sql(&next_query),
        query_inputs: vec![fx.input("foo", vec![], None)],
        next_offset: 0,
        prev_checkpoint_path: Some(first.new_checkpoint_path.clone()),
        new_checkpoint_path: fx.path("migrate/checkpoint").display().to_string(),
        new_data_path: fx.path("migrate/data").display().to_string(),
    };
    let outcome = terminal(
        ReferenceEngine::new()
            .migrate_query(&request, &NoProgress)
            .await,
    )
    .success();
    assert!(outcome.new_checkpoint_written);
    assert_eq!(
        outcome.new_offset_interval,
        Some(OffsetInterval { start: 0, end: 1 })
    );
    let out = read_parquet(&request.new_data_path);
    assert_eq!(strings(&out, "city"), ["A", "B"]);
    assert_eq!(ints(&out, "population"), [5, 7]);
    assert_eq!(
        read_parquet(&request.new_checkpoint_path).num_rows(),
        0,
        "the next query starts empty"
    );

    // The next query continues from the new checkpoint.
    let slice = fx.slice(&[record(2, APPEND, 10, "C", 1)], SystemTypes::Compatible);
    let mut next = fx.request(
        &next_query,
        vec![fx.input("foo", vec![slice], Some((2, 2)))],
        2,
    );
    next.prev_checkpoint_path = Some(request.new_checkpoint_path.clone());
    next.query_inputs[0].explicit_watermarks = vec![watermark(0, 2 * 86_400)];
    transform_ok(&next).await;
    assert_eq!(strings(&read_parquet(&next.new_data_path), "city"), ["C"]);
}

#[tokio::test]
async fn migrate_refuses_a_checkpoint_the_previous_query_did_not_write() {
    let fx = Fixture::new();
    let slice = fx.slice(&[record(0, APPEND, 10, "A", 5)], SystemTypes::Compatible);
    let mut first = fx.request(
        WINDOWED,
        vec![fx.input("foo", vec![slice], Some((0, 0)))],
        0,
    );
    first.new_checkpoint_path = fx.path("t0/checkpoint").display().to_string();
    transform_ok(&first).await;
    let request = MigrateQueryRequest {
        dataset_id: DatasetId::from_key([9; 32]),
        dataset_alias: "bar".into(),
        system_time: system_time(),
        vocab: DatasetVocabulary::default(),
        prev_transform: sql("SELECT event_time, city FROM foo"),
        next_transform: sql("SELECT event_time, city FROM foo"),
        query_inputs: vec![fx.input("foo", vec![], None)],
        next_offset: 1,
        prev_checkpoint_path: Some(first.new_checkpoint_path.clone()),
        new_checkpoint_path: fx.path("migrate/checkpoint").display().to_string(),
        new_data_path: fx.path("migrate/data").display().to_string(),
    };
    let message = terminal(
        ReferenceEngine::new()
            .migrate_query(&request, &NoProgress)
            .await,
    )
    .invalid_query();
    assert!(
        message.contains("not written by prev_transform"),
        "{message}"
    );
    assert!(!Path::new(&request.new_data_path).exists());
}

fn provenance_request(
    fx: &Fixture,
    query: &str,
    output_offsets: Vec<u64>,
) -> DeriveProvenanceRequest {
    let records = appends(0, &[("A", 1), ("B", 200), ("C", 3), ("D", 400), ("E", 500)]);
    let slice = fx.slice(&records, SystemTypes::Compatible);
    DeriveProvenanceRequest {
        dataset_id: DatasetId::from_key([9; 32]),
        dataset_alias: "bar".into(),
        system_time: system_time(),
        vocab: DatasetVocabulary::default(),
        transform: sql(query),
        query_inputs: vec![
            fx.input("foo", vec![slice], Some((0, 4))),
            fx.input("other", vec![], None),
        ],
        next_offset: 100,
        prev_checkpoint_path: None,
        output_offsets,
    }
}

#[tokio::test]
async fn provenance_maps_output_offsets_to_the_input_offsets_behind_them() {
    let fx = Fixture::new();
    // Output 100, 101, 102 come from inputs 1, 3, 4.
    let request = provenance_request(
        &fx,
        "SELECT event_time, city FROM foo WHERE population > 100",
        vec![101, 102],
    );
    let outcome = terminal(
        ReferenceEngine::new()
            .derive_provenance(&request, &NoProgress)
            .await,
    )
    .success();
    assert_eq!(outcome.inputs.len(), 2);
    assert_eq!(outcome.inputs[0].query_alias, "foo");
    assert_eq!(
        outcome.inputs[0].offset_intervals,
        [OffsetInterval { start: 3, end: 4 }]
    );
    assert!(outcome.inputs[1].offset_intervals.is_empty());
}

#[tokio::test]
async fn provenance_of_an_offset_the_step_did_not_produce_is_an_invalid_query() {
    let fx = Fixture::new();
    let request = provenance_request(
        &fx,
        "SELECT event_time, city FROM foo WHERE population > 100",
        vec![103],
    );
    let message = terminal(
        ReferenceEngine::new()
            .derive_provenance(&request, &NoProgress)
            .await,
    )
    .invalid_query();
    assert!(
        message.contains("output offset 103 was not produced") && message.contains("100 to 102"),
        "{message}"
    );
}

#[tokio::test]
async fn provenance_of_a_window_aggregation_is_refused() {
    let fx = Fixture::new();
    let request = provenance_request(&fx, WINDOWED, vec![100]);
    let message = terminal(
        ReferenceEngine::new()
            .derive_provenance(&request, &NoProgress)
            .await,
    )
    .invalid_query();
    assert!(message.contains("map/filter queries only"), "{message}");
}
