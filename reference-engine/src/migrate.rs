//! MigrateQuery: finalise the previous query's state, then start the next query.
//!
//! - The next query is planned first (against its inputs' schemas): an invalid next query changes
//!   nothing.
//! - If the previous query left window state, every open window is emitted now (whatever the
//!   watermark) as Append records to `new_data_path`, offsets from `next_offset`; the file is written
//!   even when nothing was open. A stateless previous query has nothing to finalise.
//! - If the next query is a window aggregation, an empty checkpoint is written for it, remembering how
//!   far the previous query had closed windows; a stateless next query gets no checkpoint.

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
use crate::transform::{first_offset, offset_interval, write_appends};
use crate::window::WindowState;
use crate::window::checkpoint;

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
    let next = prepare(&ctx, &request.next_transform, &inputs, &request.vocab).await?;

    reporter.report(Phase::Finalising, None, None);
    let mut closed_through_ms = None;
    let mut rows = 0;
    if let Some(path) = &request.prev_checkpoint_path {
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
        QueryShape::MapFilter { .. } => false,
    };
    let new_watermark = closed_through_ms.and_then(DateTime::<Utc>::from_timestamp_millis);
    tracing::info!(rows, new_checkpoint_written, "migration finished");
    Ok(MigrateQuerySuccess {
        new_checkpoint_written,
        new_offset_interval: offset_interval(request.next_offset, rows)?,
        new_watermark,
    })
}
