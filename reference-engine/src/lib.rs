#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! Weir's reference ODF engine: SQL transforms on DataFusion, Arrow and Parquet.
//!
//! It serves the whole engine contract (ExecuteTransform, ExecuteRawQuery, ValidateQuery,
//! MigrateQuery, DeriveProvenance) and follows the semantics existing ODF coordinators rely on:
//! output offsets from `next_offset`, `system_time` from the request, a required UTC `event_time`,
//! only input records inside each input's offset interval, multi-step queries with aliases,
//! case-sensitive identifiers, the watermark rule, a data file even with zero records. Beyond existing
//! engines it streams progress, carries changelogs (retractions and corrections) through map/filter
//! queries without the user passing `op` ([`changelog`]), runs tumbling-window aggregations whose
//! open windows live in a checkpoint file between transactions ([`window`]), and joins a stream with
//! temporal tables as of each record's event time (`temporal_tables` and `FOR SYSTEM_TIME AS OF`,
//! [`temporal`]), joins two streams within a bound in event time ([`interval`]), keeps the top ranks
//! of each partition current as records arrive and are retracted ([`top_n`]), and chains such
//! stateful operators across query steps.
//!
//! It is a library (the coordinator's embedded engine) and the `weir-engine` binary (an OCI image).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use chrono::{TimeZone, Utc};
//! use weir_reference_engine::arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
//! use weir_reference_engine::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
//! use weir_reference_engine::parquet::arrow::ArrowWriter;
//! use weir_reference_engine::{DatasetId, DatasetVocabulary, NoProgress, OffsetInterval, ReferenceEngine,
//!                        Transform, TransformRequest, TransformRequestInput, TransformSql};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("weir-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! // An input slice: offsets 0..=2.
//! let time = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("offset", DataType::Int64, false),
//!     Field::new("event_time", time, false),
//!     Field::new("city", DataType::Utf8, false),
//!     Field::new("population", DataType::Int64, false),
//! ]));
//! let batch = RecordBatch::try_new(schema.clone(), vec![
//!     Arc::new(Int64Array::from(vec![0, 1, 2])),
//!     Arc::new(TimestampMillisecondArray::from(vec![0, 1, 2]).with_timezone("UTC")),
//!     Arc::new(StringArray::from(vec!["A", "B", "C"])),
//!     Arc::new(Int64Array::from(vec![10, 20, 30])),
//! ])?;
//! let input_file = dir.join("slice");
//! let mut writer = ArrowWriter::try_new(std::fs::File::create(&input_file)?, schema, None)?;
//! writer.write(&batch)?;
//! writer.close()?;
//!
//! let input_file = input_file.display().to_string();
//! let request = TransformRequest {
//!     dataset_id: DatasetId::from_key([1; 32]),
//!     dataset_alias: "bar".into(),
//!     system_time: Utc.with_ymd_and_hms(2023, 3, 1, 0, 0, 0).unwrap(),
//!     vocab: DatasetVocabulary::default(),
//!     transform: Transform::Sql(TransformSql::new("datafusion",
//!         "SELECT event_time, city, population * 2 AS population FROM foo WHERE population > 10")),
//!     query_inputs: vec![TransformRequestInput {
//!         dataset_id: DatasetId::from_key([2; 32]),
//!         dataset_alias: "foo".into(),
//!         query_alias: "foo".into(),
//!         vocab: DatasetVocabulary::default(),
//!         offset_interval: Some(OffsetInterval { start: 0, end: 2 }),
//!         data_paths: vec![input_file.clone()],
//!         schema_file: input_file,
//!         explicit_watermarks: vec![],
//!     }],
//!     next_offset: 10,
//!     prev_checkpoint_path: None,
//!     new_checkpoint_path: dir.join("checkpoint").display().to_string(),
//!     new_data_path: dir.join("data").display().to_string(),
//! };
//! let outcome = ReferenceEngine::new().execute_transform(&request, &NoProgress).await?;
//! assert_eq!(outcome.new_offset_interval, Some(OffsetInterval { start: 10, end: 11 }));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod chain;
pub mod changelog;
mod checkpoint_parts;
mod engine;
mod error;
mod exchange;
mod execute;
mod inputs;
pub mod interval;
mod migrate;
mod output;
mod prepare;
mod progress;
mod provenance;
mod raw_query;
pub mod request;
mod server;
mod session;
mod steps;
pub mod temporal;
pub mod top_n;
mod transform;
mod validate;
pub mod window;

pub use engine::ReferenceEngine;
pub use error::{EngineError, ErrorKind};
pub use progress::{NoProgress, Phase, Progress, ProgressSink};
pub use request::{
    DatasetId, DatasetVocabulary, DeriveProvenanceRequest, DeriveProvenanceSuccess,
    InputProvenance, MigrateQueryRequest, MigrateQuerySuccess, OffsetInterval, OutputColumn,
    RawQueryRequest, RawQuerySuccess, SqlQueryStep, TemporalTable, Transform, TransformRequest,
    TransformRequestInput, TransformSql, TransformSuccess, ValidateQueryInput,
    ValidateQueryRequest, ValidateQuerySuccess, Watermark,
};
pub use server::to_wire_error;
pub use session::SessionUpgrade;
/// The conformance kit's Parquet fixtures (from `engine-conformance`, on arrow/parquet alone).
pub use weir_engine_conformance::ParquetFixtures;
pub use weir_query_depth::{MAX_EXPRESSION_DEPTH, QueryTooDeep, check_query_depth};

/// The DataFusion this engine runs on.
pub use datafusion;
/// The Arrow crate DataFusion uses (use it to build inputs and read outputs without version skew).
pub use datafusion::arrow;
/// The Parquet crate DataFusion uses.
pub use datafusion::parquet;
