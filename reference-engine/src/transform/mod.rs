//! ExecuteTransform: input slices in, one output data file (and a checkpoint for stateful queries) out.

mod map_filter;
pub(crate) mod watermark;

use chrono::{DateTime, Utc};
use datafusion::arrow::array::RecordBatch;
use futures::StreamExt;

use crate::changelog::APPEND;
use crate::error::EngineError;
use crate::execute::{Reporter, execute, rows_read};
use crate::inputs::{InputSource, register_inputs};
use crate::output::layout::OutputLayout;
use crate::output::writer::ParquetOutput;
use crate::prepare::{PreparedQuery, QueryShape, prepare};
use crate::progress::{Phase, ProgressSink};
use std::path::{Path, PathBuf};

use crate::request::{OffsetInterval, TransformRequest, TransformSuccess};
use crate::session::{Sessions, new_session};
use crate::window::WindowState;
use crate::window::checkpoint;
use crate::window::future::FutureEventTimes;
use crate::window::query::WindowQuery;

pub(crate) use map_filter::{MapFilterRun, run_map_filter};

/// Runs one transaction of a transform.
pub(crate) async fn execute_transform(
    sessions: &Sessions,
    request: &TransformRequest,
    progress: &dyn ProgressSink,
) -> Result<TransformSuccess, EngineError> {
    let mut reporter = Reporter::new(progress);
    reporter.report(Phase::Planning, None, None);
    let first_offset = first_offset(request.next_offset)?;
    let sources = request
        .query_inputs
        .iter()
        .map(InputSource::for_transform)
        .collect::<Result<Vec<_>, _>>()?;
    let mut ctx = new_session();
    let inputs = register_inputs(&ctx, &sources).await?;
    let mut prepared = match prepare(&ctx, &request.transform, &inputs, &request.vocab).await {
        Ok(prepared) => prepared,
        // No single operator runs it: chained stateful steps run stage by stage.
        Err(error) => {
            match crate::chain::split(&request.transform, &sources, &request.vocab).await? {
                Some(split) => {
                    tracing::debug!(step = %split.alias, "query steps chained after a stateful step");
                    return crate::chain::run_transform(sessions, request, &split, progress).await;
                }
                None => return Err(error),
            }
        }
    };
    // A map/filter query is planned again in the stateless session, where it runs wherever that
    // session's planner puts it; stateful queries stay in this session, exactly as without an upgrade.
    if sessions.is_upgraded() && matches!(prepared.shape, QueryShape::MapFilter { .. }) {
        ctx = sessions.stateless()?;
        let inputs = register_inputs(&ctx, &sources).await?;
        prepared = prepare(&ctx, &request.transform, &inputs, &request.vocab).await?;
    }
    let mut new_watermark = watermark::output_watermark(&request.query_inputs);

    let new_data_path = Path::new(&request.new_data_path);
    let rows = match &prepared.shape {
        QueryShape::Temporal(query) => {
            let (rows, watermark) = crate::temporal::run::run_transform(
                &ctx,
                request,
                &prepared,
                query,
                first_offset,
                &mut reporter,
            )
            .await?;
            new_watermark = watermark;
            rows
        }
        QueryShape::Interval(query) => {
            let (rows, watermark) = crate::interval::run::run_transform(
                &ctx,
                request,
                &prepared,
                query,
                first_offset,
                &mut reporter,
            )
            .await?;
            new_watermark = watermark;
            rows
        }
        QueryShape::TopN(query) => {
            crate::top_n::run::run_transform(
                &ctx,
                request,
                &prepared,
                query,
                first_offset,
                &mut reporter,
            )
            .await?
        }
        QueryShape::MapFilter { query_columns, .. } => {
            refuse_window_checkpoint(request)?;
            let mut output = create_output(new_data_path, &prepared.layout)?;
            let run = MapFilterRun {
                ctx: &ctx,
                prepared: &prepared,
                query_columns: *query_columns,
                first_offset,
                system_time_ms: request.system_time.timestamp_millis(),
            };
            run_map_filter(&run, Some(&mut output), &mut reporter, |_, _| {}).await?;
            reporter.report(
                Phase::Writing,
                Some(rows_read(&prepared.physical)),
                Some(output.rows()),
            );
            output
                .finish()
                .await
                .map_err(|reason| EngineError::OutputWrite {
                    path: new_data_path.to_path_buf(),
                    reason,
                })?
        }
        QueryShape::Window(window) => {
            run_window(
                &ctx,
                request,
                &prepared,
                window,
                first_offset,
                new_watermark,
                &mut reporter,
            )
            .await?
        }
    };
    let new_offset_interval = offset_interval(request.next_offset, rows)?;
    tracing::info!(
        dataset = %request.dataset_alias,
        rows,
        interval = ?new_offset_interval,
        watermark = ?new_watermark,
        "transform finished"
    );
    Ok(TransformSuccess {
        new_offset_interval,
        new_watermark,
    })
}

/// A stateless query cannot continue a stateful query's checkpoint: that needs MigrateQuery.
fn refuse_window_checkpoint(request: &TransformRequest) -> Result<(), EngineError> {
    if let Some(path) = &request.prev_checkpoint_path
        && let Ok(kind) = checkpoint::kind_of(Path::new(path))
    {
        let state = match kind.kind.as_str() {
            "tumbling_window" | "cumulating_window" | "session_window" => "window aggregation",
            "temporal_join" => "temporal join",
            "interval_join" => "interval join",
            "top_n" => "top-N",
            "chain" => "chained stateful steps'",
            other => other,
        };
        return Err(EngineError::CheckpointMismatch {
            path: PathBuf::from(path),
            reason: format!("it holds {state} state, and this query has none"),
        });
    }
    Ok(())
}

async fn run_window(
    ctx: &datafusion::execution::context::SessionContext,
    request: &TransformRequest,
    prepared: &PreparedQuery,
    window: &WindowQuery,
    first_offset: i64,
    watermark: Option<DateTime<Utc>>,
    reporter: &mut Reporter<'_>,
) -> Result<u64, EngineError> {
    let buffered_schema = prepared.buffered_schema();
    let mut state = match &request.prev_checkpoint_path {
        Some(path) => {
            let path = PathBuf::from(path);
            let kind = checkpoint::kind_of(&path)?;
            if !checkpoint::is_window_kind(&kind.kind) {
                return Err(EngineError::CheckpointMismatch {
                    path,
                    reason: format!(
                        "it holds {} state, and this query is a window aggregation",
                        kind.kind
                    ),
                });
            }
            let (header, state) = checkpoint::read(&path)?;
            let mismatch = |reason: &str| EngineError::CheckpointMismatch {
                path: path.clone(),
                reason: reason.to_owned(),
            };
            if header.query_fingerprint != prepared.fingerprint {
                return Err(mismatch("its query fingerprint differs"));
            }
            if header.spec != window.spec {
                return Err(mismatch("its window aggregation differs"));
            }
            let types = |s: &datafusion::arrow::datatypes::Schema| -> Vec<_> {
                s.fields().iter().map(|f| f.data_type().clone()).collect()
            };
            if types(&state.buffered_schema()) != types(&buffered_schema) {
                return Err(mismatch("its buffered columns have other types"));
            }
            state
        }
        None => WindowState::new(
            window.spec.clone(),
            buffered_schema,
            std::sync::Arc::clone(&window.result_schema),
            None,
        ),
    };
    let restored = state.buffered_records();

    // With one input whose files carry offset and event-time statistics, windows are emitted as the stream
    // passes them (see `window::future`); otherwise all at the end, as the bound would be unknown.
    let future = match (watermark, request.query_inputs.as_slice()) {
        (Some(_), [input]) => FutureEventTimes::read(
            &input.data_paths,
            &input.vocab.offset_column,
            &input.vocab.event_time_column,
        ),
        _ => None,
    };
    let width = window.spec.width_ms;
    let mut emitted = Vec::new();

    reporter.report(Phase::Executing, Some(0), Some(0));
    let mut stream = execute(ctx, &prepared.physical)?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(EngineError::execution)?;
        state.push(&batch)?;
        if let (Some(future), Some(watermark)) = (&future, watermark)
            && let Some(last) = last_offset(&batch)
        {
            let watermark = watermark.timestamp_millis();
            let safe = future
                .after(last)
                .map_or(watermark, |t| t.saturating_sub(width).min(watermark));
            // Only once a whole window more is safe: each advance looks at every buffered record.
            if state
                .closed_through_ms()
                .is_none_or(|closed| safe >= closed.saturating_add(width))
            {
                emitted.push(state.advance(safe)?);
            }
        }
        reporter.tick(Phase::Executing, &prepared.physical, Some(0));
    }
    let read = rows_read(&prepared.physical);
    if let Some(watermark) = watermark {
        emitted.push(state.advance(watermark.timestamp_millis())?);
    }
    let results = datafusion::arrow::compute::concat_batches(&state.result_schema(), &emitted)?;
    tracing::debug!(
        restored,
        read,
        emitted = results.num_rows(),
        open = state.buffered_records(),
        "window aggregation advanced"
    );

    reporter.report(Phase::Writing, Some(read), Some(0));
    let rows = write_appends(
        Path::new(&request.new_data_path),
        &prepared.layout,
        &results,
        first_offset,
        request.system_time,
    )
    .await?;
    reporter.report(Phase::Checkpointing, Some(read), Some(rows));
    checkpoint::write(
        Path::new(&request.new_checkpoint_path),
        &state,
        &prepared.fingerprint,
    )?;
    Ok(rows)
}

/// The offset of the last record of a pre-aggregation batch (its offset carrier, second to last column).
fn last_offset(batch: &RecordBatch) -> Option<i64> {
    let columns = batch.num_columns();
    let offsets = batch.column(columns.checked_sub(2)?);
    let offsets =
        datafusion::arrow::compute::cast(offsets, &datafusion::arrow::datatypes::DataType::Int64)
            .ok()?;
    let offsets = offsets
        .as_any()
        .downcast_ref::<datafusion::arrow::array::Int64Array>()?;
    (0..offsets.len())
        .rev()
        .find(|&i| datafusion::arrow::array::Array::is_valid(offsets, i))
        .map(|i| offsets.value(i))
}

/// Writes aggregation results as Append records; the file is written even with zero rows.
pub(crate) async fn write_appends(
    path: &std::path::Path,
    layout: &OutputLayout,
    results: &RecordBatch,
    first_offset: i64,
    system_time: DateTime<Utc>,
) -> Result<u64, EngineError> {
    let mut output = create_output(path, layout)?;
    let ops = vec![APPEND; results.num_rows()];
    let batch = layout.assemble(results, ops, first_offset, system_time.timestamp_millis())?;
    let failed = |reason| EngineError::OutputWrite {
        path: path.to_path_buf(),
        reason,
    };
    output.write(batch).await.map_err(failed)?;
    output.finish().await.map_err(failed)
}

pub(crate) fn create_output(
    path: &std::path::Path,
    layout: &OutputLayout,
) -> Result<ParquetOutput, EngineError> {
    // The system columns lead: offset, operation type, system time.
    let schema = layout.schema();
    let system: Vec<&str> = schema
        .fields()
        .iter()
        .take(3)
        .map(|f| f.name().as_str())
        .collect();
    ParquetOutput::create(path, layout.schema(), &system).map_err(|reason| {
        EngineError::OutputWrite {
            path: path.to_path_buf(),
            reason,
        }
    })
}

/// `next_offset` as the Int64 written in the offset column.
pub(crate) fn first_offset(next_offset: u64) -> Result<i64, EngineError> {
    i64::try_from(next_offset).map_err(|_| EngineError::MalformedRequest {
        reason: format!("next_offset {next_offset} does not fit the Int64 offset column"),
    })
}

/// `[next_offset, next_offset + rows - 1]`, or `None` without rows.
pub(crate) fn offset_interval(
    next_offset: u64,
    rows: u64,
) -> Result<Option<OffsetInterval>, EngineError> {
    if rows == 0 {
        return Ok(None);
    }
    let end = next_offset
        .checked_add(rows - 1)
        .ok_or_else(|| EngineError::Overflow {
            what: format!("output offsets from {next_offset} for {rows} records"),
        })?;
    Ok(Some(OffsetInterval {
        start: next_offset,
        end,
    }))
}
