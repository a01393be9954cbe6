//! [`ReferenceEngine`]: the five engine operations.

use tracing::Instrument;

use crate::error::EngineError;
use crate::exchange::Exchange;
use crate::progress::ProgressSink;
use crate::request::{
    DeriveProvenanceRequest, DeriveProvenanceSuccess, MigrateQueryRequest, MigrateQuerySuccess,
    RawQueryRequest, RawQuerySuccess, TransformRequest, TransformSuccess, ValidateQueryRequest,
    ValidateQuerySuccess,
};
use crate::session::{SessionUpgrade, Sessions};

/// The reference ODF engine: SQL transforms on DataFusion.
///
/// Each operation runs in a fresh DataFusion session, reads the files named in the request and writes
/// the files it names; the engine itself holds no state between operations (stateful queries keep
/// theirs in checkpoint files).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReferenceEngine {
    sessions: Sessions,
}

impl ReferenceEngine {
    /// The engine, running everything in this process.
    pub fn new() -> Self {
        Self::default()
    }

    /// The engine, with its stateless work planned and run in sessions made by `upgrade` from the
    /// engine's own session: map/filter transforms and raw queries. Where their plans run is the
    /// upgraded session's query planner's choice (`distributed-engine` makes them Ballista jobs);
    /// the records still come back to this process in offset order, which gives them their offsets,
    /// operation types and system time and writes them, so the output is the one [`Self::new`]
    /// writes.
    ///
    /// Stateful queries (window aggregations, temporal joins, whose state is a checkpoint read and
    /// written here), ValidateQuery, MigrateQuery and DeriveProvenance always run in this process.
    ///
    /// The engine stays `Copy`: `upgrade` is kept until the process ends (make such an engine once
    /// per process, as a server does, not once per operation).
    pub fn with_session_upgrade(upgrade: SessionUpgrade) -> Self {
        Self {
            sessions: Sessions::upgraded(upgrade),
        }
    }

    /// ExecuteTransform: one transaction of a derivative dataset's transform.
    pub async fn execute_transform(
        &self,
        request: &TransformRequest,
        progress: &dyn ProgressSink,
    ) -> Result<TransformSuccess, EngineError> {
        let span = tracing::info_span!("execute_transform", dataset = %request.dataset_alias, next_offset = request.next_offset, upgraded = self.sessions.is_upgraded());
        async {
            let (exchange, local) = Exchange::for_transform(request).await?;
            let success =
                crate::transform::execute_transform(&self.sessions, &local, progress).await?;
            exchange.publish().await?;
            Ok(success)
        }
        .instrument(span)
        .await
    }

    /// ExecuteRawQuery: SQL over Parquet files seen as the table `input`.
    pub async fn execute_raw_query(
        &self,
        request: &RawQueryRequest,
        progress: &dyn ProgressSink,
    ) -> Result<RawQuerySuccess, EngineError> {
        let span = tracing::info_span!(
            "execute_raw_query",
            inputs = request.input_data_paths.len(),
            upgraded = self.sessions.is_upgraded()
        );
        async {
            let (exchange, local) = Exchange::for_raw_query(request)?;
            let success =
                crate::raw_query::execute_raw_query(&self.sessions, &local, progress).await?;
            exchange.publish().await?;
            Ok(success)
        }
        .instrument(span)
        .await
    }

    /// ValidateQuery: the output schema for the inputs' schemas, without reading data.
    pub async fn validate_query(
        &self,
        request: &ValidateQueryRequest,
    ) -> Result<ValidateQuerySuccess, EngineError> {
        let span = tracing::info_span!("validate_query", dataset = %request.dataset_alias);
        crate::validate::validate_query(request)
            .instrument(span)
            .await
    }

    /// MigrateQuery: finalise the previous query's state and start the next query.
    pub async fn migrate_query(
        &self,
        request: &MigrateQueryRequest,
        progress: &dyn ProgressSink,
    ) -> Result<MigrateQuerySuccess, EngineError> {
        let span = tracing::info_span!("migrate_query", dataset = %request.dataset_alias);
        async {
            let (exchange, local) = Exchange::for_migrate(request).await?;
            let success = crate::migrate::migrate_query(&local, progress).await?;
            exchange.publish().await?;
            Ok(success)
        }
        .instrument(span)
        .await
    }

    /// DeriveProvenance: the input offsets behind given output offsets of a map/filter step.
    pub async fn derive_provenance(
        &self,
        request: &DeriveProvenanceRequest,
        progress: &dyn ProgressSink,
    ) -> Result<DeriveProvenanceSuccess, EngineError> {
        let span = tracing::info_span!("derive_provenance", dataset = %request.dataset_alias);
        crate::provenance::derive_provenance(request, progress)
            .instrument(span)
            .await
    }
}
