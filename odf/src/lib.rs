#![doc = include_str!("../README.md")]
#![deny(unsafe_code)]
#![warn(missing_docs)]

// The generated code is the only unsafe code of the crate (flatc's accessors, behind the verifier). It is
// not part of the API (hidden, outside semver): the owned model is; the crate's tests use it to build
// malformed buffers another implementation might send.
#[allow(unsafe_code)]
#[doc(hidden)]
pub mod generated;

mod codec;
mod error;
mod multibase;
mod varint;

#[cfg(feature = "arrow")]
pub mod arrow_schema;
pub mod dataset_id;
#[cfg(feature = "arrow")]
pub mod logical_hash;
pub mod manifest;
pub mod multicodec;
pub mod multihash;
pub mod timestamp;

mod attachments;
mod checkpoint;
mod data_schema;
mod data_slice;
mod data_type;
mod dataset_kind;
mod dataset_snapshot;
mod event_time_source;
mod events;
mod extra_attributes;
mod fetch_step;
mod merge_strategy;
mod metadata_block;
mod offset_interval;
mod prep_step;
mod read_step;
mod source_caching;
mod source_state;
mod transform;
mod vocabulary;
mod watermark;

pub use attachments::{AttachmentEmbedded, Attachments, AttachmentsEmbedded};
pub use checkpoint::Checkpoint;
pub use data_schema::{DataField, DataSchema};
pub use data_slice::DataSlice;
pub use data_type::{
    DataType, DataTypeBinary, DataTypeDecimal, DataTypeDuration, DataTypeList, DataTypeMap,
    DataTypeOption, DataTypeStruct, DataTypeTime, DataTypeTimestamp, TimeUnit,
};
pub use dataset_id::{DatasetId, DatasetIdError};
pub use dataset_kind::DatasetKind;
pub use dataset_snapshot::DatasetSnapshot;
pub use error::Error;
pub use event_time_source::{EventTimeSource, EventTimeSourceFromPath};
pub use events::{
    AddData, AddPushSource, DisablePollingSource, DisablePushSource, ExecuteTransform,
    ExecuteTransformInput, MetadataEvent, Seed, SetAttachments, SetDataSchema, SetInfo, SetLicense,
    SetPollingSource, SetTransform, SetVocab, TransformInput,
};
pub use extra_attributes::ExtraAttributes;
#[cfg(feature = "serde")]
pub use extra_attributes::ExtraAttributesError;
pub use fetch_step::{
    EnvVar, FetchStep, FetchStepContainer, FetchStepEthereumLogs, FetchStepFilesGlob,
    FetchStepMqtt, FetchStepUrl, MqttQos, MqttTopicSubscription, RequestHeader, SourceOrdering,
};
pub use manifest::{Manifest, ManifestVersion};
pub use merge_strategy::{
    MergeStrategy, MergeStrategyChangelogStream, MergeStrategyLedger, MergeStrategySnapshot,
    MergeStrategyUpsertStream,
};
pub use metadata_block::MetadataBlock;
pub use multicodec::Multicodec;
pub use multihash::{Multihash, MultihashError, Sha3Hasher};
pub use offset_interval::OffsetInterval;
pub use prep_step::{CompressionFormat, PrepStep, PrepStepDecompress, PrepStepPipe};
pub use read_step::{
    ReadStep, ReadStepCsv, ReadStepEsriShapefile, ReadStepGeoJson, ReadStepJson, ReadStepNdGeoJson,
    ReadStepNdJson, ReadStepParquet,
};
pub use source_caching::SourceCaching;
pub use source_state::SourceState;
pub use timestamp::TimestampError;
pub use transform::{SqlQueryStep, TemporalTable, Transform, TransformSql};
pub use vocabulary::DatasetVocabulary;
pub use watermark::Watermark;

/// Encodes a block into its file's bytes (manifest version 2), byte for byte as kamu writes it.
pub fn encode_block(block: &MetadataBlock) -> Vec<u8> {
    block.encode()
}

/// Decodes a block file (manifest version 2 or 3) through the FlatBuffers verifier.
pub fn decode_block(bytes: &[u8]) -> Result<MetadataBlock, Error> {
    MetadataBlock::decode(bytes)
}

/// The hash of a block file: the SHA3-256 multihash of its bytes.
pub fn block_hash(bytes: &[u8]) -> Multihash {
    Multihash::sha3_256(bytes)
}
