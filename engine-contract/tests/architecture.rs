//! The engine protocol's model defines no ODF vocabulary of its own: the dataset id, offset interval,
//! vocabulary, transform and watermark it carries are `odf`'s types, so a value read from a metadata block
//! goes into a request unconverted (ARCHITECTURE.md, `engine-contract/`).

use weir_engine_contract::model;

/// Binding the result to a `model::` type compiles only if it is the same type as the `weir_odf::` one.
fn same<T>(value: T) -> T {
    value
}

#[test]
fn the_model_s_vocabulary_types_are_odf_s() {
    let id: model::DatasetId = same::<weir_odf::DatasetId>(weir_odf::DatasetId::from_key([1; 32]));
    assert_eq!(
        id.to_string(),
        weir_odf::DatasetId::from_key([1; 32]).to_string()
    );

    let interval: model::OffsetInterval =
        same::<weir_odf::OffsetInterval>(weir_odf::OffsetInterval { start: 0, end: 9 });
    assert_eq!(interval.len(), 10);

    let vocab: model::DatasetVocabulary = same::<weir_odf::DatasetVocabulary>(Default::default());
    assert_eq!(vocab.offset_column, "offset");

    let sql: model::TransformSql =
        same::<weir_odf::TransformSql>(weir_odf::TransformSql::new("datafusion", "select 1"));
    let transform: model::Transform =
        same::<weir_odf::Transform>(weir_odf::Transform::Sql(sql.clone()));
    assert_eq!(transform.sql(), &sql);
    let _: model::SqlQueryStep = same::<weir_odf::SqlQueryStep>(sql.steps().remove(0));

    let time = chrono::DateTime::UNIX_EPOCH;
    let watermark: model::Watermark = same::<weir_odf::Watermark>(weir_odf::Watermark {
        system_time: time,
        event_time: time,
    });
    assert_eq!(watermark.event_time, time);
}

#[test]
fn the_model_declares_no_type_named_after_an_odf_one() {
    // The crate's own source holds no struct or enum named after an `odf` type.
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model");
    for entry in std::fs::read_dir(&model).expect("src/model") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("source");
        for name in [
            "DatasetId",
            "OffsetInterval",
            "DatasetVocabulary",
            "Transform",
            "TransformSql",
            "SqlQueryStep",
            "TemporalTable",
            "Watermark",
        ] {
            for item in ["struct", "enum"] {
                let declaration = format!("pub {item} {name} ");
                assert!(
                    !text.contains(&declaration),
                    "{} declares `{declaration}`: use odf's type",
                    path.display()
                );
            }
        }
    }
}
