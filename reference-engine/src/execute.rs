//! Running a physical plan as a stream, with progress reports (phase, rows read, rows written).

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::context::SessionContext;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};

use crate::error::EngineError;
use crate::progress::{Phase, Progress, ProgressSink};

/// How often progress is reported while records flow.
const REPORT_EVERY: Duration = Duration::from_millis(250);

/// Starts executing `plan`.
pub(crate) fn execute(
    ctx: &SessionContext,
    plan: &Arc<dyn ExecutionPlan>,
) -> Result<SendableRecordBatchStream, EngineError> {
    execute_stream(Arc::clone(plan), ctx.task_ctx()).map_err(EngineError::execution)
}

/// Records read from input files so far: the output of the plan's leaves (the Parquet scans).
pub(crate) fn rows_read(plan: &Arc<dyn ExecutionPlan>) -> u64 {
    let children = plan.children();
    if children.is_empty() {
        return plan
            .metrics()
            .and_then(|metrics| metrics.output_rows())
            .unwrap_or(0) as u64;
    }
    children.into_iter().map(rows_read).sum()
}

/// Sends progress reports to a sink: every phase change, and every [`REPORT_EVERY`] in between.
pub(crate) struct Reporter<'a> {
    sink: &'a dyn ProgressSink,
    last: Instant,
}

impl std::fmt::Debug for Reporter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("last", &self.last)
            .finish()
    }
}

impl<'a> Reporter<'a> {
    pub(crate) fn new(sink: &'a dyn ProgressSink) -> Self {
        Self {
            sink,
            last: Instant::now(),
        }
    }

    /// Reports now.
    pub(crate) fn report(
        &mut self,
        phase: Phase,
        rows_read: Option<u64>,
        rows_written: Option<u64>,
    ) {
        self.last = Instant::now();
        tracing::debug!(%phase, rows_read, rows_written, "progress");
        self.sink.report(Progress {
            phase,
            rows_read,
            rows_written,
        });
    }

    /// Reports if the last report is old enough.
    pub(crate) fn tick(
        &mut self,
        phase: Phase,
        plan: &Arc<dyn ExecutionPlan>,
        rows_written: Option<u64>,
    ) {
        if self.last.elapsed() >= REPORT_EVERY {
            self.report(phase, Some(rows_read(plan)), rows_written);
        }
    }
}
