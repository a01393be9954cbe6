//! The reference DataFusion engine, in this process.

use std::path::Path;

use reference_engine::{
    DatasetId as RefId, DatasetVocabulary, EngineError, ErrorKind, NoProgress,
    OffsetInterval as RefInterval, RawQueryRequest, ReferenceEngine, SqlQueryStep as RefStep,
    Transform as RefTransform, TransformRequest, TransformRequestInput, TransformSql as RefSql,
    Watermark,
};

use super::EngineFailure;
use super::identity::EngineIdentity;
use super::job::{RawQueryJob, TransformJob, TransformReport};
use odf::{OffsetInterval, TransformSql};

/// The embedded engine.
#[derive(Debug, Clone, Default)]
pub struct Embedded {
    engine: ReferenceEngine,
}

/// The identity recorded for the embedded engine: the reference engine's exact crate version.
pub fn identity(name: &str) -> EngineIdentity {
    EngineIdentity {
        name: name.to_string(),
        runtime: "embedded".into(),
        reference: format!("reference-engine@{}", env!("CARGO_PKG_VERSION")),
    }
}

fn vocab(v: &odf::DatasetVocabulary) -> DatasetVocabulary {
    DatasetVocabulary {
        offset_column: v.offset_column.clone(),
        operation_type_column: v.operation_type_column.clone(),
        system_time_column: v.system_time_column.clone(),
        event_time_column: v.event_time_column.clone(),
    }
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn sql(t: &TransformSql) -> RefTransform {
    // The engine gets the queries alone: `version` holds the engine identity Weir records, not something
    // the engine is asked to be.
    let n = t.clone().normalize();
    RefTransform::Sql(RefSql {
        engine: n.engine,
        version: None,
        query: None,
        queries: n
            .queries
            .unwrap_or_default()
            .into_iter()
            .map(|q| RefStep {
                alias: q.alias,
                query: q.query,
            })
            .collect(),
        temporal_tables: vec![],
    })
}

fn failure(engine: &str, e: EngineError) -> EngineFailure {
    match e.kind() {
        ErrorKind::InvalidQuery => EngineFailure::InvalidQuery {
            engine: engine.to_string(),
            message: e.to_string(),
        },
        ErrorKind::Internal => EngineFailure::Internal {
            engine: engine.to_string(),
            message: e.to_string(),
        },
    }
}

impl Embedded {
    pub(super) async fn transform(
        &self,
        engine: &str,
        job: &TransformJob,
    ) -> Result<TransformReport, EngineFailure> {
        let request = TransformRequest {
            dataset_id: RefId::from_public_key(*job.dataset_id.key()),
            dataset_alias: job.dataset_alias.clone(),
            system_time: job.system_time,
            vocab: vocab(&job.vocab),
            transform: sql(&job.transform),
            query_inputs: job
                .inputs
                .iter()
                .map(|i| TransformRequestInput {
                    dataset_id: RefId::from_public_key(*i.dataset_id.key()),
                    dataset_alias: i.dataset_alias.clone(),
                    query_alias: i.query_alias.clone(),
                    vocab: vocab(&i.vocab),
                    offset_interval: i.offset_interval.map(|o| RefInterval {
                        start: o.start,
                        end: o.end,
                    }),
                    data_paths: i.data_paths.iter().map(|p| path(p)).collect(),
                    schema_file: path(&i.schema_file),
                    explicit_watermarks: i
                        .explicit_watermarks
                        .iter()
                        .map(|(s, e)| Watermark {
                            system_time: *s,
                            event_time: *e,
                        })
                        .collect(),
                })
                .collect(),
            next_offset: job.next_offset,
            prev_checkpoint_path: job.prev_checkpoint_path.as_deref().map(path),
            new_checkpoint_path: path(&job.new_checkpoint_path),
            new_data_path: path(&job.new_data_path),
        };
        let outcome = self
            .engine
            .execute_transform(&request, &NoProgress)
            .await
            .map_err(|e| failure(engine, e))?;
        Ok(TransformReport {
            new_offset_interval: outcome.new_offset_interval.map(|o| OffsetInterval {
                start: o.start,
                end: o.end,
            }),
            new_watermark: outcome.new_watermark,
        })
    }

    pub(super) async fn raw_query(
        &self,
        engine: &str,
        job: &RawQueryJob,
    ) -> Result<u64, EngineFailure> {
        let request = RawQueryRequest {
            input_data_paths: job.input_data_paths.iter().map(|p| path(p)).collect(),
            transform: sql(&job.transform),
            output_data_path: path(&job.output_data_path),
        };
        let outcome = self
            .engine
            .execute_raw_query(&request, &NoProgress)
            .await
            .map_err(|e| failure(engine, e))?;
        Ok(outcome.num_records)
    }
}
