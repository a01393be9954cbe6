//! Requests for the test engine, with paths as the engine sees them.

use std::path::Path;

use weir_engine_contract::model::{
    DatasetId, DatasetVocabulary, OffsetInterval, RawQueryRequest, Transform, TransformRequest,
    TransformRequestInput, TransformSql,
};
use weir_engine_runtime::EngineHandle;

fn engine_path(engine: &EngineHandle, host: &Path) -> String {
    engine.engine_path(host).unwrap().display().to_string()
}

/// A raw query whose SQL text picks the test engine's hook.
pub fn raw_query(
    engine: &EngineHandle,
    sql: &str,
    inputs: &[&Path],
    output: &Path,
) -> RawQueryRequest {
    RawQueryRequest {
        input_data_paths: inputs.iter().map(|i| engine_path(engine, i)).collect(),
        transform: Transform::Sql(TransformSql::new("test", sql)),
        output_data_path: engine_path(engine, output),
    }
}

/// A transform of one input slice into `<output>/data` and `<output>/checkpoint`.
pub fn transform(
    engine: &EngineHandle,
    sql: &str,
    slice: &Path,
    output: &Path,
    next_offset: u64,
) -> TransformRequest {
    TransformRequest {
        dataset_id: DatasetId::from_key([7; 32]),
        dataset_alias: "derived".into(),
        system_time: Default::default(),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new("test", sql)),
        query_inputs: vec![TransformRequestInput {
            dataset_id: DatasetId::from_key([1; 32]),
            dataset_alias: "source".into(),
            query_alias: "source".into(),
            vocab: DatasetVocabulary::default(),
            offset_interval: OffsetInterval::new(0, 2),
            data_paths: vec![engine_path(engine, slice)],
            schema_file: engine_path(engine, slice),
            explicit_watermarks: Vec::new(),
        }],
        next_offset,
        prev_checkpoint_path: None,
        new_checkpoint_path: engine_path(engine, &output.join("checkpoint")),
        new_data_path: engine_path(engine, &output.join("data")),
    }
}
