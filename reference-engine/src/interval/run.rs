//! Running an interval join: one transaction of ExecuteTransform.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{concat_batches, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::collect;

use super::checkpoint::{self, IntervalHeader, SideHeader};
use super::query::{Binding, IntervalQuery, NEW_COLUMN, bind, matched_offsets};
use super::state::{JoinSide, int64};
use crate::changelog::{APPEND, CORRECT_FROM, CORRECT_TO, RETRACT};
use crate::error::EngineError;
use crate::execute::Reporter;
use crate::inputs::RegisteredInput;
use crate::prepare::{PreparedQuery, lineage_plan};
use crate::progress::Phase;
use crate::request::TransformRequest;
use crate::temporal::checkpoint::Vocabulary;
use crate::temporal::run::{input_schema, read_input};
use crate::transform::watermark::latest_watermark;
use crate::transform::write_appends;

/// Both sides' state between transactions.
#[derive(Debug)]
pub(crate) struct IntervalState {
    pub preserved: JoinSide,
    pub other: JoinSide,
}

fn column_index(
    schema: &SchemaRef,
    input: &RegisteredInput,
    name: &str,
    what: &str,
) -> Result<usize, EngineError> {
    schema.index_of(name).map_err(|_| EngineError::InputSchema {
        alias: input.query_alias.clone(),
        reason: format!("it has no {what} column `{name}` to join on"),
    })
}

async fn empty_side(
    ctx: &SessionContext,
    input: &RegisteredInput,
) -> Result<JoinSide, EngineError> {
    let schema = input_schema(ctx, input).await?;
    let event_time = column_index(&schema, input, &input.vocab.event_time_column, "event time")?;
    let offset = column_index(&schema, input, &input.vocab.offset_column, "offset")?;
    Ok(JoinSide::new(schema, event_time, offset, None))
}

impl IntervalState {
    /// Nothing kept.
    pub(crate) async fn empty(
        ctx: &SessionContext,
        query: &IntervalQuery,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            preserved: empty_side(ctx, &query.inputs[query.preserved]).await?,
            other: empty_side(ctx, &query.inputs[query.other]).await?,
        })
    }

    /// The state a checkpoint holds, checked against `query` (same fingerprint, inputs and columns).
    pub(crate) async fn restore(
        ctx: &SessionContext,
        path: &Path,
        query: &IntervalQuery,
        fingerprint: &str,
    ) -> Result<Self, EngineError> {
        let mismatch = |reason: String| EngineError::CheckpointMismatch {
            path: path.to_path_buf(),
            reason,
        };
        let kind = crate::window::checkpoint::kind_of(path)?;
        if kind.kind != checkpoint::KIND {
            return Err(mismatch(format!(
                "it holds {} state, and this query is an interval join",
                kind.kind
            )));
        }
        let (header, preserved, other) = checkpoint::read(path)?;
        if header.query_fingerprint != fingerprint {
            return Err(mismatch("its query fingerprint differs".to_owned()));
        }
        let mut state = Self::empty(ctx, query).await?;
        for (side, kept, side_header, input) in [
            (
                &mut state.preserved,
                preserved,
                &header.preserved,
                &query.inputs[query.preserved],
            ),
            (
                &mut state.other,
                other,
                &header.other,
                &query.inputs[query.other],
            ),
        ] {
            if side_header.alias != input.query_alias {
                return Err(mismatch(format!(
                    "it joins `{}`, not `{}`",
                    side_header.alias, input.query_alias
                )));
            }
            let records = crate::temporal::checkpoint::conform(&kept.records, &side.schema())
                .ok_or_else(|| {
                    mismatch(format!("the columns of `{}` changed", input.query_alias))
                })?;
            side.restore(&records, &kept.matched)?;
            if let Some(watermark) = side_header.watermark_ms {
                side.advance(watermark);
            }
        }
        Ok(state)
    }

    fn write(
        &self,
        path: &Path,
        query: &IntervalQuery,
        fingerprint: &str,
    ) -> Result<(), EngineError> {
        let side = |input: usize, state: &JoinSide| SideHeader {
            alias: query.inputs[input].query_alias.clone(),
            vocab: Vocabulary::from(&query.inputs[input].vocab),
            watermark_ms: state.watermark_ms(),
        };
        let header = IntervalHeader {
            format: checkpoint::FORMAT,
            kind: checkpoint::KIND.to_owned(),
            query_fingerprint: fingerprint.to_owned(),
            join: query.kind,
            lower_ms: query.lower_ms,
            upper_ms: query.upper_ms,
            preserved: side(query.preserved, &self.preserved),
            other: side(query.other, &self.other),
        };
        checkpoint::write(
            path,
            &header,
            &self.preserved.with_matched()?,
            &self.other.with_matched()?,
        )
    }
}

/// An input's new records, checked to be appends only.
async fn new_records(
    ctx: &SessionContext,
    request: &TransformRequest,
    input: &RegisteredInput,
) -> Result<Vec<RecordBatch>, EngineError> {
    let batches = read_input(ctx, request, input).await?;
    if input.has_operation_type {
        for batch in &batches {
            let (Ok(ops), Ok(offsets)) = (
                batch
                    .column_by_name(&input.vocab.operation_type_column)
                    .map(int64)
                    .transpose(),
                batch
                    .column_by_name(&input.vocab.offset_column)
                    .map(int64)
                    .transpose(),
            ) else {
                continue;
            };
            let (Some(ops), Some(offsets)) = (ops, offsets) else {
                continue;
            };
            if let Some(i) =
                (0..ops.len()).find(|&i| ops.is_valid(i) && ops.value(i) != i64::from(APPEND))
            {
                return Err(EngineError::UnsupportedIntervalJoin {
                    reason: format!(
                        "input `{}` has a {} at offset {}: interval joins read append-only inputs \
                         (retractions and corrections are not supported yet)",
                        input.query_alias,
                        op_name(ops.value(i)),
                        offsets.value(i)
                    ),
                });
            }
        }
    }
    Ok(batches)
}

fn op_name(op: i64) -> &'static str {
    match i32::try_from(op) {
        Ok(RETRACT) => "retraction",
        Ok(CORRECT_FROM) | Ok(CORRECT_TO) => "correction",
        _ => "record of unknown operation type",
    }
}

/// `batch` with [`NEW_COLUMN`] set to `new`.
fn flagged(batch: &RecordBatch, new: bool) -> Result<RecordBatch, EngineError> {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(NEW_COLUMN, DataType::Boolean, false));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(BooleanArray::from(vec![new; batch.num_rows()])));
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// Runs a logical plan of this session to completion.
async fn run_plan(
    ctx: &SessionContext,
    plan: &LogicalPlan,
) -> Result<Vec<RecordBatch>, EngineError> {
    let mut state = ctx.state();
    state.config_mut().options_mut().execution.target_partitions = 1;
    let physical = state
        .create_physical_plan(plan)
        .await
        .map_err(|e| EngineError::sql(None, e))?;
    collect(physical, ctx.task_ctx())
        .await
        .map_err(EngineError::execution)
}

/// The output rows (query columns, then the carriers) of a bound plan.
async fn output_rows(
    ctx: &SessionContext,
    query: &IntervalQuery,
    bound: &LogicalPlan,
) -> Result<(Vec<RecordBatch>, usize, SchemaRef), EngineError> {
    let (physical, query_columns) = lineage_plan(ctx, bound, &query.inputs, false, &[]).await?;
    let schema = physical.schema();
    let batches = collect(physical, ctx.task_ctx())
        .await
        .map_err(EngineError::execution)?;
    Ok((batches, query_columns, schema))
}

/// The query's columns of `rows`, ordered by the preserved record's offset, then by every column (so a
/// transaction's output does not depend on how DataFusion ordered the matches).
fn ordered(rows: &RecordBatch, query_columns: usize) -> Result<RecordBatch, EngineError> {
    let offset_carrier = query_columns + 1;
    let mut keys: Vec<ArrayRef> = vec![Arc::clone(rows.column(offset_carrier))];
    keys.extend(rows.columns()[..query_columns].iter().cloned());
    let converter = RowConverter::new(
        keys.iter()
            .map(|k| SortField::new(k.data_type().clone()))
            .collect(),
    )?;
    let converted = converter.convert_columns(&keys)?;
    let mut order: Vec<u32> = (0..rows.num_rows() as u32).collect();
    order.sort_by(|&a, &b| converted.row(a as usize).cmp(&converted.row(b as usize)));
    let indices = UInt32Array::from(order);
    let schema = Arc::new(Schema::new(
        rows.schema().fields()[..query_columns].to_vec(),
    ));
    let columns = rows.columns()[..query_columns]
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema,
        columns,
        &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.num_rows())),
    )?)
}

/// One transaction: the new matches, then (outer joins) the preserved records whose bound has passed
/// without a match, with nulls. Returns the rows written and the output watermark.
pub(crate) async fn run_transform(
    ctx: &SessionContext,
    request: &TransformRequest,
    prepared: &PreparedQuery,
    query: &IntervalQuery,
    first_offset: i64,
    reporter: &mut Reporter<'_>,
) -> Result<(u64, Option<DateTime<Utc>>), EngineError> {
    let mut state = match &request.prev_checkpoint_path {
        Some(path) => {
            IntervalState::restore(ctx, &PathBuf::from(path), query, &prepared.fingerprint).await?
        }
        None => IntervalState::empty(ctx, query).await?,
    };
    reporter.report(Phase::Executing, Some(0), Some(0));
    let mut read = 0u64;
    let mut late = 0usize;
    let mut arrived = Vec::new();
    for (input, side) in [
        (query.preserved, &state.preserved),
        (query.other, &state.other),
    ] {
        let batches = new_records(ctx, request, &query.inputs[input]).await?;
        read += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        let all = concat_batches(&side.schema(), &batches)?;
        let (on_time, dropped) = side.split_late(&all)?;
        late += dropped;
        arrived.push(on_time);
    }
    if late > 0 {
        tracing::warn!(
            late,
            "dropped records that arrived after their side's watermark: records of the other side they could match may be gone"
        );
    }
    let new_other = arrived
        .pop()
        .unwrap_or_else(|| RecordBatch::new_empty(state.other.schema()));
    let new_preserved = arrived
        .pop()
        .unwrap_or_else(|| RecordBatch::new_empty(state.preserved.schema()));

    // Matches with at least one new record.
    let both = |kept: &RecordBatch, new: &RecordBatch| -> Result<RecordBatch, EngineError> {
        let kept = flagged(kept, false)?;
        let new = flagged(new, true)?;
        Ok(concat_batches(&kept.schema(), [&kept, &new])?)
    };
    let bound = bind(
        query,
        both(state.preserved.records(), &new_preserved)?,
        both(state.other.records(), &new_other)?,
        Binding::NewMatches,
    )?;
    let (mut rows, query_columns, schema) = output_rows(ctx, query, &bound).await?;
    let matched: HashSet<i64> = match matched_offsets(&bound, query)? {
        Some(plan) if query.kind == super::query::IntervalJoinKind::Outer => {
            let mut offsets = HashSet::new();
            for batch in run_plan(ctx, &plan).await? {
                let column = int64(batch.column(0))?;
                offsets.extend(column.iter().flatten());
            }
            offsets
        }
        _ => HashSet::new(),
    };
    state.preserved.push(&new_preserved)?;
    state.other.push(&new_other)?;
    state.preserved.mark_matched(&matched)?;

    // Watermarks, then the records no record still to come can match.
    let watermark_of = |input: usize| {
        request
            .query_inputs
            .get(input)
            .and_then(|i| latest_watermark(&i.explicit_watermarks))
            .map(|w| w.timestamp_millis())
    };
    if let Some(w) = watermark_of(query.preserved) {
        state.preserved.advance(w);
    }
    if let Some(w) = watermark_of(query.other) {
        state.other.advance(w);
    }
    let (expired, expired_matched) = state
        .preserved
        .expire(query.upper_ms, state.other.watermark_ms())?;
    state.other.expire(
        query.lower_ms.saturating_neg(),
        state.preserved.watermark_ms(),
    )?;
    if query.kind == super::query::IntervalJoinKind::Outer {
        let unmatched: BooleanArray = expired_matched.iter().map(|m| Some(!m)).collect();
        let unmatched = datafusion::arrow::compute::filter_record_batch(&expired, &unmatched)?;
        if unmatched.num_rows() > 0 {
            let bound = bind(
                query,
                unmatched,
                RecordBatch::new_empty(state.other.schema()),
                Binding::Unmatched,
            )?;
            rows.extend(output_rows(ctx, query, &bound).await?.0);
        }
    }

    // Null-padded rows make the other side's columns nullable.
    let schema = Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    let rows = rows
        .iter()
        .map(|b| RecordBatch::try_new(Arc::clone(&schema), b.columns().to_vec()))
        .collect::<Result<Vec<_>, _>>()?;
    let results = ordered(&concat_batches(&schema, &rows)?, query_columns)?;
    reporter.report(Phase::Writing, Some(read), Some(0));
    let written = write_appends(
        Path::new(&request.new_data_path),
        &prepared.layout,
        &results,
        first_offset,
        request.system_time,
    )
    .await?;
    reporter.report(Phase::Checkpointing, Some(read), Some(written));
    state.write(
        Path::new(&request.new_checkpoint_path),
        query,
        &prepared.fingerprint,
    )?;
    tracing::debug!(
        written,
        preserved = state.preserved.len(),
        other = state.other.len(),
        "interval join advanced"
    );
    // Records still to come: at or after each side's watermark, and matches of kept records.
    let watermark = match (state.preserved.watermark_ms(), state.other.watermark_ms()) {
        (Some(p), Some(o)) => Some(
            p.min(o)
                .min(p.saturating_add(query.lower_ms))
                .min(o.saturating_sub(query.upper_ms)),
        ),
        _ => None,
    };
    Ok((
        written,
        watermark.and_then(DateTime::<Utc>::from_timestamp_millis),
    ))
}
