//! ODF's YAML spelling through serde (feature `serde`), checked with serde_json against kamu's YAML of the
//! vectors (`kamu_yaml` in vectors.json, transcribed).
#![cfg(feature = "serde")]

use serde_json::json;
use weir_odf::{DatasetSnapshot, MetadataBlock, MetadataEvent};

fn block(file: &str) -> MetadataBlock {
    let path = format!(
        "{}/../../shared/odf/vectors/chain/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("the ODF chain vectors are missing ({path}): {e}"));
    weir_odf::decode_block(&bytes).expect("decodes")
}

#[test]
fn set_polling_source_and_set_data_schema_serialize_as_kamu_spells_them() {
    let polling =
        serde_json::to_value(block("root/01_SetPollingSource.bin").event).expect("serializes");
    assert_eq!(
        polling,
        json!({
            "kind": "SetPollingSource",
            "fetch": {"kind": "Url", "url": "https://example.org/population.csv"},
            "read": {
                "kind": "Csv",
                "schema": ["event_time TIMESTAMP", "city STRING", "population BIGINT"],
                "header": true
            },
            "merge": {"kind": "Ledger", "primaryKey": ["event_time", "city"]}
        })
    );
    let schema =
        serde_json::to_value(block("root/03_SetDataSchema.bin").event).expect("serializes");
    let ts = json!({"kind": "Timestamp", "unit": "Millisecond", "timezone": "UTC"});
    assert_eq!(
        schema,
        json!({
            "kind": "SetDataSchema",
            "schema": {"fields": [
                {"name": "offset", "type": {"kind": "Int64"}},
                {"name": "op", "type": {"kind": "Int32"}},
                {"name": "system_time", "type": ts},
                {"name": "event_time", "type": ts},
                {"name": "city", "type": {"kind": "Option", "inner": {"kind": "String"}}},
                {"name": "population", "type": {"kind": "Option", "inner": {"kind": "Int64"}}}
            ]}
        })
    );
}

#[test]
fn every_vector_block_round_trips_through_serde() {
    for file in [
        "root/00_Seed.bin",
        "root/01_SetPollingSource.bin",
        "root/02_SetVocab.bin",
        "root/03_SetDataSchema.bin",
        "root/04_AddData.bin",
        "deriv/00_Seed.bin",
        "deriv/01_SetTransform.bin",
        "deriv/02_SetVocab.bin",
        "deriv/03_SetDataSchema.bin",
        "deriv/04_ExecuteTransform.bin",
    ] {
        let b = block(file);
        let value = serde_json::to_value(&b).expect("serializes");
        let back: MetadataBlock = serde_json::from_value(value).expect("deserializes");
        assert_eq!(back, b, "{file}");
    }
}

#[test]
fn a_dataset_snapshot_manifest_reads_into_the_model() {
    let snapshot: DatasetSnapshot = serde_json::from_value(json!({
        "name": "population.doubled",
        "kind": "Derivative",
        "metadata": [
            {
                "kind": "SetTransform",
                "inputs": [{"datasetRef": "population"}],
                "transform": {"kind": "Sql", "engine": "datafusion", "query": "select * from population"}
            },
            {"kind": "SetInfo", "description": "doubled", "keywords": ["demo"]},
            {"kind": "SetAttachments", "attachments": {"kind": "Embedded", "items": [{"path": "README.md", "content": "hi"}]}},
            {"kind": "DisablePollingSource"},
            {
                "kind": "AddPushSource",
                "sourceName": "push",
                "read": {"kind": "NdJson"},
                "merge": {"kind": "Append"}
            },
            {"kind": "SetDataSchema", "schema": {
                "fields": [{"name": "x", "type": {"kind": "Int64"}, "extra": {"weir.dev/note": {"b": 1, "a": 2}}}]
            }}
        ]
    }))
    .expect("a snapshot");
    assert_eq!(snapshot.kind, weir_odf::DatasetKind::Derivative);
    let MetadataEvent::SetTransform(t) = &snapshot.metadata[0] else {
        panic!("SetTransform first")
    };
    assert_eq!(t.inputs[0].query_alias(), "population");
    let sql = t.transform.sql().clone().normalize();
    assert_eq!(sql.query, None);
    assert_eq!(sql.queries.map(|q| q.len()), Some(1));
    let MetadataEvent::SetDataSchema(s) = &snapshot.metadata[5] else {
        panic!("SetDataSchema last")
    };
    let extra = s
        .schema
        .as_ref()
        .and_then(|s| s.fields[0].extra.as_ref())
        .expect("extra");
    assert_eq!(
        extra.as_json(),
        r#"{"weir.dev/note":{"a":2,"b":1}}"#,
        "kamu's form: compact, keys sorted"
    );
}

#[test]
fn unknown_fields_and_keys_that_are_not_domain_paths_are_rejected() {
    assert!(
        serde_json::from_value::<MetadataEvent>(json!({"kind": "SetVocab", "offsetColum": "o"}))
            .is_err()
    );
    assert!(
        serde_json::from_value::<weir_odf::ExtraAttributes>(json!({"engine": "datafusion"}))
            .is_err(),
        "a key without a domain"
    );
}
