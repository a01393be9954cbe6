//! The typed, owned model of the protocol's messages and their FlatBuffers
//! byte form.
//!
//! Every root message implements [`WireMessage`] (and has inherent `encode`
//! / `decode`): decoding verifies untrusted bytes first and returns a
//! specific [`DecodeError`]; it never panics.

pub(crate) mod decode;
mod derive_provenance;
mod migrate_query;
mod offset_interval;
mod operation_type;
mod raw_query;
pub(crate) mod response;
mod timestamp;
mod transform;
mod transform_request;
mod transform_response;
mod validate_query;
mod vocabulary;
mod watermark;

pub use decode::{DecodeError, WireMessage};
pub use derive_provenance::{
    DeriveProvenanceRequest, DeriveProvenanceResponse, DeriveProvenanceSuccess, InputProvenance,
};
pub use migrate_query::{MigrateQueryRequest, MigrateQueryResponse, MigrateQuerySuccess};
pub use offset_interval::OffsetInterval;
pub use operation_type::{OperationType, UnknownOperationType};
pub use raw_query::{RawQueryRequest, RawQueryResponse, RawQuerySuccess};
pub use response::{EngineResponse, Progress, ValidationError};
pub use timestamp::{TimestampError, TimestampRange, WireTimestamp};
pub use transform::{SqlQueryStep, TemporalTable, Transform, TransformSql};
pub use transform_request::{TransformRequest, TransformRequestInput};
pub use transform_response::{TransformResponse, TransformSuccess};
pub use validate_query::{
    OutputColumn, ValidateQueryInput, ValidateQueryRequest, ValidateQueryResponse,
    ValidateQuerySuccess,
};
pub use vocabulary::DatasetVocabulary;
pub use watermark::Watermark;
pub use weir_odf::{DatasetId, DatasetIdError};
