//! [`crate`]: the reference engine with its stateless work run as Ballista jobs.

use std::num::NonZeroUsize;
use std::sync::Arc;

use ballista_core::extension::SessionStateExt;
use weir_reference_engine::ReferenceEngine;
use weir_reference_engine::datafusion::execution::session_state::SessionState;

use crate::cluster::SchedulerAddress;

/// How the distributed engine uses its cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The Ballista scheduler jobs are submitted to.
    pub scheduler: SchedulerAddress,
    /// How many partitions a job's scans are split into (DataFusion's `target_partitions`): the
    /// tasks of a job's first stage, spread over the executors. More than the cluster's vcores keeps
    /// every executor busy while one is slow.
    pub partitions: NonZeroUsize,
}

impl ClusterConfig {
    /// Jobs to `scheduler`, split into [`Self::DEFAULT_PARTITIONS`] partitions.
    pub fn new(scheduler: SchedulerAddress) -> Self {
        Self {
            scheduler,
            partitions: Self::DEFAULT_PARTITIONS,
        }
    }

    /// The default number of partitions of a job.
    pub const DEFAULT_PARTITIONS: NonZeroUsize = match NonZeroUsize::new(8) {
        Some(partitions) => partitions,
        None => NonZeroUsize::MIN,
    };
}

/// The distributed engine: [`ReferenceEngine`] whose map/filter transforms and raw queries are
/// Ballista jobs on `cluster`'s scheduler.
///
/// Everything else runs in this process exactly as in the embedded engine: planning and its
/// InvalidQuery answers, window aggregations and temporal joins (their state is a checkpoint read
/// and written here), ValidateQuery, MigrateQuery, DeriveProvenance. A job's records come back
/// through the scheduler's Flight proxy merged into input offset order; this process gives them
/// their offsets, operation types and system time and writes the output file, so it is the one the
/// embedded engine writes, with the same logical hash.
///
/// No connection is made here: the scheduler is first reached when a job is submitted, and an
/// unreachable one is that operation's InternalError.
pub fn distributed_engine(cluster: &ClusterConfig) -> ReferenceEngine {
    let url = cluster.scheduler.url();
    let partitions = cluster.partitions.get();
    ReferenceEngine::with_session_upgrade(Arc::new(move |mut state: SessionState| {
        state.config_mut().options_mut().execution.target_partitions = partitions;
        // Read per operation: an engine started for one transaction has that transaction's
        // credentials in its environment.
        crate::job_store::with_job_store_settings(state.config_mut())?;
        state.upgrade_for_ballista(url.clone())
    }))
}
