//! Every reference vector (WIRE.md section 8) decodes into the typed model
//! with every field as documented, and re-encodes to bytes that decode to
//! the same value.
use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};
use weir_engine_contract::generated as fb;
use weir_engine_contract::model::{
    DatasetId, DatasetVocabulary, EngineResponse, OffsetInterval, RawQueryRequest,
    RawQueryResponse, RawQuerySuccess, SqlQueryStep, Transform, TransformRequest,
    TransformResponse, TransformSql, TransformSuccess, Watermark, WireMessage,
};

const QUERY: &str = "select op, event_time, city, population * 2 as population from foo";

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn vector(name: &str) -> Vec<u8> {
    let path = vectors_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn utc(year: i32, month: u32, day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(year, month, day, 0, 0, 0).unwrap()
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn expected_sql() -> Transform {
    Transform::Sql(TransformSql {
        engine: "datafusion".into(),
        version: None,
        query: None,
        queries: Some(vec![SqlQueryStep {
            alias: None,
            query: QUERY.into(),
        }]),
        temporal_tables: None,
    })
}

/// Decodes, checks, re-encodes and decodes again to the same value.
fn round_trips<M: WireMessage + PartialEq + std::fmt::Debug>(value: &M) {
    let bytes = value.encode();
    let again = M::decode(&bytes).unwrap();
    assert_eq!(&again, value);
}

#[test]
fn vector_copies_match_the_shared_originals() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/odf/vectors");
    let Ok(entries) = std::fs::read_dir(&shared) else {
        // The shared facts are beside the repository on developer machines
        // and in CI; a bare crate checkout only has the copies.
        eprintln!("{} not present: comparing nothing", shared.display());
        return;
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".fb"))
        .collect();
    names.sort();
    let mut copies: Vec<String> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".fb"))
        .collect();
    copies.sort();
    assert_eq!(names, copies);
    for name in names {
        assert_eq!(
            std::fs::read(shared.join(&name)).unwrap(),
            vector(&name),
            "{name} differs from the shared original"
        );
    }
}

#[test]
fn transform_request_vector_decodes_field_by_field() {
    let request = TransformRequest::decode(&vector("transform_request.fb")).unwrap();

    let output_id = hex("ed01626172b130390000626172b1303900002016260700000000508ebebd3079f00e");
    assert_eq!(request.dataset_id.to_bytes().to_vec(), output_id);
    assert_eq!(request.dataset_alias, "bar");
    assert_eq!(request.system_time, utc(2023, 3, 1));
    assert_eq!(request.vocab, DatasetVocabulary::default());
    assert_eq!(request.transform, expected_sql());
    assert_eq!(request.next_offset, 10);
    assert_eq!(request.prev_checkpoint_path, None);
    assert_eq!(request.new_checkpoint_path, "/opt/engine/new-checkpoint");
    assert_eq!(request.new_data_path, "/opt/engine/new-data");

    assert_eq!(request.query_inputs.len(), 1);
    let input = &request.query_inputs[0];
    let input_id = hex("ed01666f6fb3b7370000666f6fb3b737000060f6f60600000000895cddbcb7f7b8cc");
    assert_eq!(input.dataset_id.to_bytes().to_vec(), input_id);
    assert_eq!(input.dataset_alias, "foo");
    assert_eq!(input.query_alias, "foo");
    assert_eq!(input.vocab, DatasetVocabulary::default());
    assert_eq!(input.offset_interval, OffsetInterval::new(1, 2));
    assert_eq!(input.data_paths, vec!["/opt/engine/input-slice".to_owned()]);
    assert_eq!(input.schema_file, "/opt/engine/input-slice");
    assert_eq!(
        input.explicit_watermarks,
        vec![Watermark {
            system_time: utc(2023, 2, 1),
            event_time: utc(2023, 1, 15),
        }]
    );

    round_trips(&request);
}

#[test]
fn transform_request_vector_sends_all_four_vocabulary_strings() {
    let bytes = vector("transform_request.fb");
    let root = flatbuffers::root::<fb::TransformRequest<'_>>(&bytes).unwrap();
    let vocab = root.vocab().unwrap();
    assert_eq!(vocab.offset_column(), Some("offset"));
    assert_eq!(vocab.operation_type_column(), Some("op"));
    assert_eq!(vocab.system_time_column(), Some("system_time"));
    assert_eq!(vocab.event_time_column(), Some("event_time"));
}

#[test]
fn dataset_id_of_the_vector_has_a_did_text_form() {
    let request = TransformRequest::decode(&vector("transform_request.fb")).unwrap();
    let text = request.dataset_id.to_string();
    assert_eq!(
        text,
        "did:odf:fed01626172b130390000626172b1303900002016260700000000508ebebd3079f00e"
    );
    assert_eq!(text.parse::<DatasetId>().unwrap(), request.dataset_id);
}

#[test]
fn transform_response_progress_vector_decodes_with_no_progress_fields() {
    let response = TransformResponse::decode(&vector("transform_response_progress.fb")).unwrap();
    assert_eq!(response, EngineResponse::Progress(Default::default()));
    assert!(!response.is_terminal());
    round_trips(&response);
}

#[test]
fn transform_response_success_vector_decodes_field_by_field() {
    let response = TransformResponse::decode(&vector("transform_response_success.fb")).unwrap();
    assert_eq!(
        response,
        EngineResponse::Success(TransformSuccess {
            new_offset_interval: OffsetInterval::new(10, 11),
            new_watermark: Some(utc(2023, 1, 15)),
        })
    );
    round_trips(&response);
}

#[test]
fn transform_response_success_empty_vector_has_neither_field() {
    let response =
        TransformResponse::decode(&vector("transform_response_success_empty.fb")).unwrap();
    assert_eq!(
        response,
        EngineResponse::Success(TransformSuccess {
            new_offset_interval: None,
            new_watermark: None,
        })
    );
    round_trips(&response);
}

#[test]
fn transform_response_invalid_query_vector_carries_the_message() {
    let response =
        TransformResponse::decode(&vector("transform_response_invalid_query.fb")).unwrap();
    assert_eq!(response, EngineResponse::invalid_query("bad sql"));
    round_trips(&response);
}

#[test]
fn transform_response_internal_error_vector_carries_message_and_backtrace() {
    let response =
        TransformResponse::decode(&vector("transform_response_internal_error.fb")).unwrap();
    assert_eq!(
        response,
        EngineResponse::InternalError {
            message: "boom".into(),
            backtrace: Some("bt".into()),
        }
    );
    round_trips(&response);
}

#[test]
fn raw_query_request_vector_decodes_field_by_field() {
    let request = RawQueryRequest::decode(&vector("raw_query_request.fb")).unwrap();
    assert_eq!(
        request,
        RawQueryRequest {
            input_data_paths: vec!["/opt/engine/in/input.parquet".into()],
            transform: expected_sql(),
            output_data_path: "/opt/engine/out/output.parquet".into(),
        }
    );
    round_trips(&request);
}

#[test]
fn raw_query_response_success_vector_carries_num_records() {
    let response = RawQueryResponse::decode(&vector("raw_query_response_success.fb")).unwrap();
    assert_eq!(
        response,
        EngineResponse::Success(RawQuerySuccess { num_records: 3 })
    );
    round_trips(&response);
}

#[test]
fn vectors_decoded_as_the_wrong_root_fail_without_panicking() {
    // A TransformRequest read as a response root has no valid union there.
    assert!(TransformResponse::decode(&vector("transform_request.fb")).is_err());
    assert!(RawQueryRequest::decode(&vector("transform_response_success.fb")).is_err());
}

#[test]
fn every_vector_in_the_directory_decodes_as_its_root() {
    let mut seen = 0;
    for entry in std::fs::read_dir(vectors_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if !name.ends_with(".fb") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let decoded = match name.as_str() {
            "transform_request.fb" => TransformRequest::decode(&bytes).map(|_| ()),
            "raw_query_request.fb" => RawQueryRequest::decode(&bytes).map(|_| ()),
            n if n.starts_with("transform_response_") => {
                TransformResponse::decode(&bytes).map(|_| ())
            }
            n if n.starts_with("raw_query_response_") => {
                RawQueryResponse::decode(&bytes).map(|_| ())
            }
            other => panic!("vector {other} has no known root: add it to this test"),
        };
        decoded.unwrap_or_else(|e| panic!("{name}: {e}"));
        seen += 1;
    }
    assert_eq!(seen, 8);
}
