//! MigrateQuery: finalise the previous query's state, then start the next query.
//!
//! - The next query is planned first (against its inputs' schemas): an invalid next query changes
//!   nothing.
//! - If the previous query left window state, every open window is emitted now (whatever the
//!   watermark) as Append records to `new_data_path`, offsets from `next_offset`; the file is written
//!   even when nothing was open. A stateless previous query has nothing to finalise.
//! - If the previous query was a temporal join, every stream record still waiting for the tables'
//!   watermark is joined now with the tables as they are (as if their watermark had passed it), with
//!   the previous query, as records to `new_data_path`.
//! - If the next query is a window aggregation, an empty checkpoint is written for it, remembering how
//!   far the previous query had closed windows. If it is a temporal join, its checkpoint keeps the
//!   previous query's state of each table it joins too (same input, primary key and columns): a
//!   table's history is the table's, not the query's. A stateless next query gets no checkpoint.

use chrono::{DateTime, Utc};

use crate::error::EngineError;
use crate::execute::Reporter;
use crate::inputs::{InputSource, register_inputs};
use crate::output::layout::OutputLayout;
use crate::prepare::{QueryShape, prepare, transform_fingerprint};
use crate::progress::{Phase, ProgressSink};
use std::path::{Path, PathBuf};

use crate::request::{MigrateQueryRequest, MigrateQuerySuccess};
use crate::session::new_session;
use crate::temporal;
use crate::temporal::checkpoint::TableHeader;
use crate::temporal::run::{Emit, TemporalState, emit, register_from_checkpoint};
use crate::transform::create_output;
use crate::transform::{first_offset, offset_interval, write_appends};
use crate::window::WindowState;
use crate::window::checkpoint;

/// Joins the stream records a temporal join's checkpoint holds, with the previous query, and writes
/// them to `new_data_path`. Returns the rows written and the tables' kept records.
async fn finalise_temporal(
    request: &MigrateQueryRequest,
    path: &Path,
    first_offset: i64,
    reporter: &mut Reporter<'_>,
) -> Result<
    (
        u64,
        Vec<(TableHeader, datafusion::arrow::array::RecordBatch)>,
    ),
    EngineError,
> {
    let mismatch = |reason: &str| EngineError::CheckpointMismatch {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    let (header, records) = temporal::checkpoint::read(path)?;
    if header.query_fingerprint != transform_fingerprint(&request.prev_transform) {
        return Err(mismatch("it was not written by prev_transform"));
    }
    // The previous query over the inputs the checkpoint names, in a session of its own.
    let ctx = new_session();
    let inputs = register_from_checkpoint(&ctx, &header, &records)?;
    let prev = prepare(&ctx, &request.prev_transform, &inputs, &request.vocab).await?;
    let QueryShape::Temporal(query) = &prev.shape else {
        return Err(mismatch("prev_transform is not a temporal join"));
    };
    let mut state = TemporalState::restore(&ctx, path, query, &prev.fingerprint).await?;
    let data_path = Path::new(&request.new_data_path);
    let mut output = create_output(data_path, &prev.layout)?;
    let step = Emit {
        ctx: &ctx,
        prepared: &prev,
        query,
        first_offset,
        system_time_ms: request.system_time.timestamp_millis(),
    };
    let rows = emit(&step, &mut state, Some(i64::MAX), &mut output, reporter).await?;
    output
        .finish()
        .await
        .map_err(|reason| EngineError::OutputWrite {
            path: data_path.to_path_buf(),
            reason,
        })?;
    reporter.report(Phase::Finalising, None, Some(rows));
    Ok((
        rows,
        header.tables.into_iter().zip(records.tables).collect(),
    ))
}

pub(crate) async fn migrate_query(
    request: &MigrateQueryRequest,
    progress: &dyn ProgressSink,
) -> Result<MigrateQuerySuccess, EngineError> {
    let mut reporter = Reporter::new(progress);
    reporter.report(Phase::Planning, None, None);
    let first_offset = first_offset(request.next_offset)?;
    let ctx = new_session();
    let sources: Vec<InputSource> = request
        .query_inputs
        .iter()
        .map(|input| InputSource::schema_only(&input.query_alias, &input.vocab, &input.schema_file))
        .collect();
    let inputs = register_inputs(&ctx, &sources).await?;
    if let Some(path) = &request.prev_checkpoint_path
        && checkpoint::kind_of(Path::new(path))?.kind == crate::chain::checkpoint::KIND
    {
        return Err(EngineError::MigrationUnsupported {
            reason: "the previous query chains stateful steps, whose state (each step's, and the \
                     stream between them) the next query cannot take over"
                .to_owned(),
        });
    }
    let next = match prepare(&ctx, &request.next_transform, &inputs, &request.vocab).await {
        Ok(next) => next,
        Err(error) => {
            if crate::chain::split(&request.next_transform, &sources, &request.vocab)
                .await?
                .is_some()
            {
                return Err(EngineError::MigrationUnsupported {
                    reason: "the next query chains stateful steps, whose state cannot be rebuilt \
                             from the previous query's"
                        .to_owned(),
                });
            }
            return Err(error);
        }
    };

    if matches!(next.shape, QueryShape::Interval(_)) {
        return Err(EngineError::MigrationUnsupported {
            reason: "the next query is an interval join, whose state (the records of both sides \
                     that records still to come may match) cannot be rebuilt from the previous \
                     query's"
                .to_owned(),
        });
    }
    if matches!(next.shape, QueryShape::TopN(_)) {
        return Err(EngineError::MigrationUnsupported {
            reason: "the next query is a top-N, whose state (every live record of its input) \
                     cannot be rebuilt from the previous query's"
                .to_owned(),
        });
    }
    if let Some(path) = &request.prev_checkpoint_path
        && checkpoint::kind_of(Path::new(path))?.kind == crate::top_n::checkpoint::KIND
    {
        return Err(EngineError::MigrationUnsupported {
            reason: "the previous query is a top-N, whose emitted ranks the next query would \
                     have to retract or correct"
                .to_owned(),
        });
    }
    if let Some(path) = &request.prev_checkpoint_path
        && checkpoint::kind_of(Path::new(path))?.kind == crate::interval::checkpoint::KIND
    {
        return Err(EngineError::MigrationUnsupported {
            reason: "the previous query is an interval join, whose kept records would need the \
                     new query's matches"
                .to_owned(),
        });
    }

    reporter.report(Phase::Finalising, None, None);
    let mut closed_through_ms = None;
    let mut rows = 0;
    let mut tables = Vec::new();
    if let Some(path) = &request.prev_checkpoint_path
        && checkpoint::kind_of(Path::new(path))?.kind == temporal::checkpoint::KIND
    {
        (rows, tables) =
            finalise_temporal(request, Path::new(path), first_offset, &mut reporter).await?;
    } else if let Some(path) = &request.prev_checkpoint_path {
        let path = PathBuf::from(path);
        let (header, mut state) = checkpoint::read(&path)?;
        if header.query_fingerprint != transform_fingerprint(&request.prev_transform) {
            return Err(EngineError::CheckpointMismatch {
                path,
                reason: "it was not written by prev_transform".to_owned(),
            });
        }
        closed_through_ms = state.closed_through_ms();
        let results = state.flush()?;
        let layout = OutputLayout::new(&state.result_schema(), &request.vocab)?;
        rows = write_appends(
            Path::new(&request.new_data_path),
            &layout,
            &results,
            first_offset,
            request.system_time,
        )
        .await?;
        reporter.report(Phase::Finalising, None, Some(rows));
    }

    let new_checkpoint_written = match &next.shape {
        QueryShape::Window(window) => {
            reporter.report(Phase::Checkpointing, None, Some(rows));
            let state = WindowState::new(
                window.spec.clone(),
                next.buffered_schema(),
                std::sync::Arc::clone(&window.result_schema),
                closed_through_ms,
            );
            checkpoint::write(
                Path::new(&request.new_checkpoint_path),
                &state,
                &next.fingerprint,
            )?;
            true
        }
        QueryShape::Temporal(query) => {
            reporter.report(Phase::Checkpointing, None, Some(rows));
            let mut state = TemporalState::empty(&ctx, query).await?;
            state.carry_tables(query, &tables)?;
            state.write(
                Path::new(&request.new_checkpoint_path),
                query,
                &next.fingerprint,
            )?;
            true
        }
        QueryShape::MapFilter { .. } | QueryShape::Interval(_) | QueryShape::TopN(_) => false,
    };
    let new_watermark = closed_through_ms.and_then(DateTime::<Utc>::from_timestamp_millis);
    tracing::info!(rows, new_checkpoint_written, "migration finished");
    Ok(MigrateQuerySuccess {
        new_checkpoint_written,
        new_offset_interval: offset_interval(request.next_offset, rows)?,
        new_watermark,
    })
}
