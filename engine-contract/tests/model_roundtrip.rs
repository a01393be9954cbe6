//! Every root of the typed model round-trips through bytes, with optional
//! fields set and unset; vocabulary defaults and Weir's Progress fields
//! behave as documented.
use chrono::{TimeZone, Utc};
use weir_engine_contract::generated as fb;
use weir_engine_contract::model::*;

fn id(byte: u8) -> DatasetId {
    DatasetId::from_key([byte; 32])
}

fn full_sql() -> Transform {
    Transform::Sql(TransformSql {
        engine: "flink".into(),
        version: Some("1.17".into()),
        query: Some("select 1".into()),
        queries: Some(vec![
            SqlQueryStep {
                alias: Some("step1".into()),
                query: "select * from a".into(),
            },
            SqlQueryStep {
                alias: None,
                query: "select * from step1".into(),
            },
        ]),
        temporal_tables: Some(vec![TemporalTable {
            name: "a".into(),
            primary_key: vec!["k1".into(), "k2".into()],
        }]),
    })
}

fn vocab() -> DatasetVocabulary {
    DatasetVocabulary {
        offset_column: "o".into(),
        operation_type_column: "kind".into(),
        system_time_column: "st".into(),
        event_time_column: "et".into(),
    }
}

fn input(byte: u8, interval: Option<OffsetInterval>) -> TransformRequestInput {
    TransformRequestInput {
        dataset_id: id(byte),
        dataset_alias: format!("in{byte}"),
        query_alias: format!("alias{byte}"),
        vocab: vocab(),
        offset_interval: interval,
        data_paths: vec!["/a".into(), "/b".into()],
        schema_file: "/schema".into(),
        explicit_watermarks: vec![Watermark {
            system_time: Utc.timestamp_opt(1_700_000_000, 5).unwrap(),
            event_time: Utc.timestamp_opt(1_600_000_000, 999_999_999).unwrap(),
        }],
    }
}

fn round_trip<M: WireMessage + PartialEq + std::fmt::Debug>(value: M) {
    assert_eq!(M::decode(&value.encode()).unwrap(), value);
}

#[test]
fn transform_request_with_every_field_round_trips() {
    round_trip(TransformRequest {
        dataset_id: id(1),
        dataset_alias: "out".into(),
        system_time: Utc.timestamp_opt(1_700_000_000, 123_000_000).unwrap(),
        vocab: vocab(),
        transform: full_sql(),
        query_inputs: vec![input(2, OffsetInterval::new(0, u64::MAX)), input(3, None)],
        next_offset: u64::MAX,
        prev_checkpoint_path: Some("/prev".into()),
        new_checkpoint_path: "/new".into(),
        new_data_path: "/data".into(),
    });
}

#[test]
fn responses_of_every_operation_round_trip() {
    let progress = Progress {
        phase: Some("writing".into()),
        rows_read: Some(0),
        rows_written: Some(u64::MAX),
    };
    let internal = |bt: Option<&str>| EngineResponse::InternalError {
        message: "boom".into(),
        backtrace: bt.map(Into::into),
    };
    for response in [
        TransformResponse::Progress(progress.clone()),
        TransformResponse::Progress(Progress::default()),
        TransformResponse::Success(TransformSuccess {
            new_offset_interval: OffsetInterval::new(3, 3),
            new_watermark: Some(Utc.timestamp_opt(0, 0).unwrap()),
        }),
        TransformResponse::invalid_query("bad"),
        internal(None),
        internal(Some("bt")),
    ] {
        round_trip(response);
    }
    round_trip(RawQueryResponse::Progress(progress.clone()));
    round_trip(RawQueryResponse::Success(RawQuerySuccess {
        num_records: 0,
    }));
    round_trip(ValidateQueryResponse::Success(ValidateQuerySuccess {
        output_columns: vec![OutputColumn {
            name: "city".into(),
            data_type: "Utf8".into(),
            nullable: true,
        }],
    }));
    round_trip(ValidateQueryResponse::InvalidQuery {
        message: "2 problems".into(),
        errors: vec![
            ValidationError {
                query_alias: Some("step1".into()),
                message: "no column x".into(),
            },
            ValidationError {
                query_alias: None,
                message: "ambiguous".into(),
            },
        ],
    });
    round_trip(MigrateQueryResponse::Success(MigrateQuerySuccess {
        new_checkpoint_written: true,
        new_offset_interval: OffsetInterval::new(10, 20),
        new_watermark: None,
    }));
    round_trip(MigrateQueryResponse::Progress(progress.clone()));
    round_trip(DeriveProvenanceResponse::Success(DeriveProvenanceSuccess {
        inputs: vec![InputProvenance {
            dataset_id: id(9),
            query_alias: "a".into(),
            offset_intervals: vec![
                OffsetInterval::new(0, 4).unwrap(),
                OffsetInterval::new(9, 9).unwrap(),
            ],
        }],
    }));
    round_trip(DeriveProvenanceResponse::Progress(progress));
}

#[test]
fn weir_requests_round_trip() {
    round_trip(RawQueryRequest {
        input_data_paths: vec![],
        transform: full_sql(),
        output_data_path: "/out".into(),
    });
    round_trip(ValidateQueryRequest {
        dataset_id: id(1),
        dataset_alias: "out".into(),
        vocab: vocab(),
        transform: full_sql(),
        query_inputs: vec![ValidateQueryInput {
            dataset_id: id(2),
            dataset_alias: "a".into(),
            query_alias: "a".into(),
            vocab: DatasetVocabulary::default(),
            schema_file: "/s".into(),
        }],
        output_schema_path: "/o".into(),
    });
    round_trip(MigrateQueryRequest {
        dataset_id: id(1),
        dataset_alias: "out".into(),
        system_time: Utc.timestamp_opt(1, 0).unwrap(),
        vocab: vocab(),
        prev_transform: full_sql(),
        next_transform: Transform::Sql(TransformSql::new("flink", "select 2")),
        query_inputs: vec![input(2, None)],
        next_offset: 7,
        prev_checkpoint_path: Some("/cp".into()),
        new_checkpoint_path: "/cp2".into(),
        new_data_path: "/d".into(),
    });
    round_trip(DeriveProvenanceRequest {
        dataset_id: id(1),
        dataset_alias: "out".into(),
        system_time: Utc.timestamp_opt(1, 0).unwrap(),
        vocab: vocab(),
        transform: full_sql(),
        query_inputs: vec![input(2, OffsetInterval::new(0, 9))],
        next_offset: 100,
        prev_checkpoint_path: None,
        output_offsets: vec![100, 105, 107],
    });
}

#[test]
fn errors_fold_into_the_message_where_the_wire_has_no_room() {
    let response = TransformResponse::InvalidQuery {
        message: "invalid".into(),
        errors: vec![ValidationError {
            query_alias: Some("s".into()),
            message: "no column x".into(),
        }],
    };
    assert_eq!(
        TransformResponse::decode(&response.encode()).unwrap(),
        TransformResponse::invalid_query("invalid\ns: no column x")
    );
}

fn request_with_vocab(vocab: Option<fb::DatasetVocabularyArgs<'_>>) -> Vec<u8> {
    // Built with the generated builder, the way another implementation might.
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let dataset_id = fbb.create_vector(&id(1).to_bytes());
    let alias = fbb.create_string("out");
    let vocab = vocab.map(|args| {
        let args = fb::DatasetVocabularyArgs {
            offset_column: args.offset_column.map(|_| fbb.create_string("o")),
            event_time_column: args.event_time_column.map(|_| fbb.create_string("et")),
            ..Default::default()
        };
        fb::DatasetVocabulary::create(&mut fbb, &args)
    });
    let engine = fbb.create_string("datafusion");
    let sql = fb::TransformSql::create(
        &mut fbb,
        &fb::TransformSqlArgs {
            engine: Some(engine),
            ..Default::default()
        },
    );
    let checkpoint = fbb.create_string("/cp");
    let data = fbb.create_string("/data");
    let time = fb::Timestamp::new(2023, 60, 0, 0);
    let root = fb::TransformRequest::create(
        &mut fbb,
        &fb::TransformRequestArgs {
            dataset_id: Some(dataset_id),
            dataset_alias: Some(alias),
            system_time: Some(&time),
            vocab,
            transform_type: fb::Transform::TransformSql,
            transform: Some(sql.as_union_value()),
            new_checkpoint_path: Some(checkpoint),
            new_data_path: Some(data),
            ..Default::default()
        },
    );
    fbb.finish_minimal(root);
    fbb.finished_data().to_vec()
}

#[test]
fn missing_vocabulary_strings_take_their_defaults() {
    let some = request_with_vocab(Some(fb::DatasetVocabularyArgs {
        offset_column: Some(flatbuffers::WIPOffset::new(0)),
        event_time_column: Some(flatbuffers::WIPOffset::new(0)),
        ..Default::default()
    }));
    let request = TransformRequest::decode(&some).unwrap();
    assert_eq!(
        request.vocab,
        DatasetVocabulary {
            offset_column: "o".into(),
            operation_type_column: "op".into(),
            system_time_column: "system_time".into(),
            event_time_column: "et".into(),
        }
    );
    let none = TransformRequest::decode(&request_with_vocab(None)).unwrap();
    assert_eq!(none.vocab, DatasetVocabulary::default());
    // Absent vectors read as empty; the single `query` form has no steps.
    assert!(none.query_inputs.is_empty());
    assert_eq!(none.next_offset, 0);
}

#[test]
fn encoding_always_writes_all_four_vocabulary_strings() {
    let decoded = TransformRequest::decode(&request_with_vocab(None)).unwrap();
    let bytes = decoded.encode();
    let root = flatbuffers::root::<fb::TransformRequest<'_>>(&bytes).unwrap();
    let vocab = root.vocab().unwrap();
    assert_eq!(vocab.offset_column(), Some("offset"));
    assert_eq!(vocab.operation_type_column(), Some("op"));
    assert_eq!(vocab.system_time_column(), Some("system_time"));
    assert_eq!(vocab.event_time_column(), Some("event_time"));
    let input_vocab = TransformRequest {
        query_inputs: vec![input(2, None)],
        ..decoded
    }
    .encode();
    let root = flatbuffers::root::<fb::TransformRequest<'_>>(&input_vocab).unwrap();
    let input = root.query_inputs().unwrap().get(0);
    assert!(input.vocab().unwrap().system_time_column().is_some());
}

#[test]
fn missing_required_fields_are_named() {
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let root = fb::TransformRequest::create(&mut fbb, &fb::TransformRequestArgs::default());
    fbb.finish_minimal(root);
    assert_eq!(
        TransformRequest::decode(fbb.finished_data()).unwrap_err(),
        DecodeError::MissingField {
            table: "TransformRequest",
            field: "dataset_id"
        }
    );
}

#[test]
fn unknown_union_tags_and_bad_values_are_specific_errors() {
    // A response root whose union tag is 9.
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let progress = fb::TransformResponseProgress::create(
        &mut fbb,
        &fb::TransformResponseProgressArgs::default(),
    );
    let root = fb::TransformResponseRoot::create(
        &mut fbb,
        &fb::TransformResponseRootArgs {
            value_type: fb::TransformResponse(9),
            value: Some(progress.as_union_value()),
        },
    );
    fbb.finish_minimal(root);
    assert!(matches!(
        TransformResponse::decode(fbb.finished_data()),
        Err(DecodeError::UnknownUnionTag { tag: 9, .. })
    ));

    // A success with start > end and a timestamp on day 0.
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let interval =
        fb::OffsetInterval::create(&mut fbb, &fb::OffsetIntervalArgs { start: 5, end: 4 });
    let success = fb::TransformResponseSuccess::create(
        &mut fbb,
        &fb::TransformResponseSuccessArgs {
            new_offset_interval: Some(interval),
            new_watermark: None,
        },
    );
    let root = fb::TransformResponseRoot::create(
        &mut fbb,
        &fb::TransformResponseRootArgs {
            value_type: fb::TransformResponse::TransformResponseSuccess,
            value: Some(success.as_union_value()),
        },
    );
    fbb.finish_minimal(root);
    assert_eq!(
        TransformResponse::decode(fbb.finished_data()).unwrap_err(),
        DecodeError::InvalidOffsetInterval {
            table: "TransformResponseSuccess",
            start: 5,
            end: 4
        }
    );

    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let day_zero = fb::Timestamp::new(2023, 0, 0, 0);
    let success = fb::TransformResponseSuccess::create(
        &mut fbb,
        &fb::TransformResponseSuccessArgs {
            new_offset_interval: None,
            new_watermark: Some(&day_zero),
        },
    );
    let root = fb::TransformResponseRoot::create(
        &mut fbb,
        &fb::TransformResponseRootArgs {
            value_type: fb::TransformResponse::TransformResponseSuccess,
            value: Some(success.as_union_value()),
        },
    );
    fbb.finish_minimal(root);
    assert!(matches!(
        TransformResponse::decode(fbb.finished_data()),
        Err(DecodeError::InvalidTimestamp {
            field: "new_watermark",
            source: TimestampError {
                reason: TimestampRange::Date,
                ..
            },
            ..
        })
    ));
}

#[test]
fn weir_progress_is_an_odf_progress_with_extra_trailing_fields() {
    let bytes = TransformResponse::Progress(Progress {
        phase: Some("executing".into()),
        rows_read: Some(10),
        rows_written: Some(5),
    })
    .encode();
    let root = flatbuffers::root::<fb::TransformResponseRoot<'_>>(&bytes).unwrap();
    // An ODF reader looks only at the union tag (1 = Progress) and ignores
    // the table's fields.
    assert_eq!(
        root.value_type(),
        fb::TransformResponse::TransformResponseProgress
    );
    let progress = root.value_as_transform_response_progress().unwrap();
    assert_eq!(progress.rows_read(), Some(10));
    // The fields live in the table's first three vtable slots (ODF's table
    // has none, so no existing slot changed meaning).
    assert_eq!(fb::TransformResponseProgress::VT_PHASE, 4);
    assert_eq!(fb::TransformResponseProgress::VT_ROWS_READ, 6);
    assert_eq!(fb::TransformResponseProgress::VT_ROWS_WRITTEN, 8);
}
