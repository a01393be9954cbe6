//! ExecuteRawQuery: SQL over Parquet files seen as the table `input`, result written with the types
//! ODF engines write.
//!
//! No system columns are added or checked: this is for ad-hoc queries. The output's types are those
//! of ODF data: every timestamp Timestamp(ms, "UTC") (DataFusion's own literals and casts give
//! Timestamp(ns) without a zone), strings as `Utf8`.

use datafusion::common::TableReference;
use futures::StreamExt;

use crate::error::EngineError;
use crate::execute::{Reporter, execute, rows_read};
use crate::inputs::open_parquet;
use crate::output::layout::{cast_to_schema, raw_query_schema};
use crate::output::writer::ParquetOutput;
use crate::progress::{Phase, ProgressSink};
use std::path::Path;
use std::sync::Arc;

use crate::request::{RawQueryRequest, RawQuerySuccess, sql};
use crate::session::Sessions;
use crate::steps::plan_steps;

/// Name of the table the raw query reads.
pub(crate) const RAW_INPUT_TABLE: &str = "input";

pub(crate) async fn execute_raw_query(
    sessions: &Sessions,
    request: &RawQueryRequest,
    progress: &dyn ProgressSink,
) -> Result<RawQuerySuccess, EngineError> {
    let mut reporter = Reporter::new(progress);
    reporter.report(Phase::Planning, None, None);
    // Planned in the stateless session: with an upgraded one, the query runs where its planner says.
    let ctx = sessions.stateless()?;
    // Without input files there is no `input` table: the query may still read none (`SELECT 1`).
    if !request.input_data_paths.is_empty() {
        let table = open_parquet(&ctx, RAW_INPUT_TABLE, &request.input_data_paths, None).await?;
        ctx.register_table(TableReference::bare(RAW_INPUT_TABLE), table)
            .map_err(|e| EngineError::sql(None, e))?;
    }
    let transform = sql(&request.transform);
    if let Some(table) = transform.temporal_tables.iter().flatten().next() {
        return Err(EngineError::UnsupportedTemporalJoin {
            reason: format!(
                "a raw query has one input, `{RAW_INPUT_TABLE}`, and no temporal table (`{}`)",
                table.name
            ),
        });
    }
    let plan = plan_steps(&ctx, transform, &[RAW_INPUT_TABLE.to_owned()])
        .await?
        .plan;
    let frame = ctx
        .execute_logical_plan(plan)
        .await
        .map_err(|e| EngineError::sql(None, e))?;
    let physical = frame
        .create_physical_plan()
        .await
        .map_err(|e| EngineError::sql(None, e))?;

    let path = Path::new(&request.output_data_path);
    let failed = |reason| EngineError::OutputWrite {
        path: path.to_path_buf(),
        reason,
    };
    let schema = raw_query_schema(&physical.schema());
    let mut output = ParquetOutput::create(path, Arc::clone(&schema), &[]).map_err(failed)?;
    reporter.report(Phase::Executing, Some(0), Some(0));
    let mut stream = execute(&ctx, &physical)?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(EngineError::execution)?;
        output
            .write(cast_to_schema(&batch, &schema)?)
            .await
            .map_err(failed)?;
        reporter.tick(Phase::Executing, &physical, Some(output.rows()));
    }
    reporter.report(
        Phase::Writing,
        Some(rows_read(&physical)),
        Some(output.rows()),
    );
    let num_records = output.finish().await.map_err(failed)?;
    tracing::info!(num_records, "raw query finished");
    Ok(RawQuerySuccess { num_records })
}
