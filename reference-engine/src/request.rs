//! The operations' inputs and outcomes: the engine contract's own model, re-exported.

pub use weir_engine_contract::model::{
    DatasetId, DatasetVocabulary, DeriveProvenanceRequest, DeriveProvenanceSuccess,
    InputProvenance, MigrateQueryRequest, MigrateQuerySuccess, OffsetInterval, OutputColumn,
    RawQueryRequest, RawQuerySuccess, SqlQueryStep, TemporalTable, Transform, TransformRequest,
    TransformRequestInput, TransformSql, TransformSuccess, ValidateQueryInput,
    ValidateQueryRequest, ValidateQuerySuccess, Watermark,
};

/// The SQL of a transform (the only kind of transform there is).
pub(crate) fn sql(transform: &Transform) -> &TransformSql {
    let Transform::Sql(sql) = transform;
    sql
}
