//! Running an interval join: one transaction of ExecuteTransform.

use std::collections::HashMap;
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
use super::query::{Binding, IntervalJoinKind, IntervalQuery, NEW_COLUMN, bind, matched_offsets};
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
            side.restore(&records, &kept.matches)?;
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
            &self.preserved.with_matches()?,
            &self.other.with_matches()?,
        )
    }
}

/// `batch` split into the records that add (Append, CorrectTo) and those that take out (Retract,
/// CorrectFrom).
fn split_changes(
    batch: &RecordBatch,
    input: &RegisteredInput,
) -> Result<(RecordBatch, RecordBatch), EngineError> {
    let ops = match batch.column_by_name(&input.vocab.operation_type_column) {
        Some(ops) if input.has_operation_type => int64(ops)?,
        _ => return Ok((batch.clone(), batch.slice(0, 0))),
    };
    let mut adds = Vec::with_capacity(ops.len());
    for i in 0..ops.len() {
        let op = ops.is_valid(i).then(|| ops.value(i));
        adds.push(match op.and_then(|op| i32::try_from(op).ok()) {
            Some(APPEND | CORRECT_TO) => true,
            Some(RETRACT | CORRECT_FROM) => false,
            _ => {
                return Err(EngineError::InvalidOperationType {
                    column: input.vocab.operation_type_column.clone(),
                    value: op.map_or_else(|| "null".to_owned(), |op| op.to_string()),
                });
            }
        });
    }
    let adds = BooleanArray::from(adds);
    let removes = datafusion::arrow::compute::not(&adds)?;
    Ok((
        datafusion::arrow::compute::filter_record_batch(batch, &adds)?,
        datafusion::arrow::compute::filter_record_batch(batch, &removes)?,
    ))
}

/// The columns a retraction is matched on: all but offset, operation type and system time.
fn data_columns(schema: &SchemaRef, input: &RegisteredInput) -> Vec<usize> {
    let system = [
        &input.vocab.offset_column,
        &input.vocab.operation_type_column,
        &input.vocab.system_time_column,
    ];
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !system.contains(&f.name()))
        .map(|(i, _)| i)
        .collect()
}

/// The number of matches per preserved offset a bound [`Binding::NewMatches`] plan finds.
async fn match_counts(
    ctx: &SessionContext,
    bound: &LogicalPlan,
    query: &IntervalQuery,
) -> Result<HashMap<i64, u64>, EngineError> {
    let mut counts = HashMap::new();
    if let Some(plan) = matched_offsets(bound, query)? {
        for batch in run_plan(ctx, &plan).await? {
            for offset in int64(batch.column(0))?.iter().flatten() {
                *counts.entry(offset).or_default() += 1;
            }
        }
    }
    Ok(counts)
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
    let mut removed = Vec::new();
    for (input, side) in [
        (query.preserved, &state.preserved),
        (query.other, &state.other),
    ] {
        let batches = read_input(ctx, request, &query.inputs[input]).await?;
        read += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        let all = concat_batches(&side.schema(), &batches)?;
        let (on_time, dropped) = side.split_late(&all)?;
        late += dropped;
        let (adds, removes) = split_changes(&on_time, &query.inputs[input])?;
        arrived.push(adds);
        removed.push(removes);
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
    let outer = query.kind == IntervalJoinKind::Outer;
    let matched = if outer {
        match_counts(ctx, &bound, query).await?
    } else {
        HashMap::new()
    };
    state.preserved.push(&new_preserved)?;
    state.other.push(&new_other)?;
    state.preserved.add_matches(&matched)?;

    // Retractions and corrections: the matches of each record taken out, with the other side as it
    // is now, are retracted; the preserved side's first, so that a match of two records both taken
    // out is retracted once. A preserved record of an outer join without matches that is no longer
    // kept was written with nulls when its bound passed: that record is retracted.
    let mut retracted = Vec::new();
    let mut not_kept = 0;
    let removed_other = removed
        .pop()
        .unwrap_or_else(|| RecordBatch::new_empty(state.other.schema()));
    let removed_preserved = removed
        .pop()
        .unwrap_or_else(|| RecordBatch::new_empty(state.preserved.schema()));
    if removed_preserved.num_rows() > 0 {
        let bound = bind(
            query,
            flagged(&removed_preserved, true)?,
            flagged(state.other.records(), false)?,
            Binding::NewMatches,
        )?;
        retracted.extend(output_rows(ctx, query, &bound).await?.0);
        let with_matches = if outer {
            match_counts(ctx, &bound, query).await?
        } else {
            HashMap::new()
        };
        let columns = data_columns(&state.preserved.schema(), &query.inputs[query.preserved]);
        let found = state
            .preserved
            .remove_matching(&removed_preserved, &columns)?;
        not_kept += found.iter().filter(|f| !**f).count();
        if outer {
            let offsets = int64(removed_preserved.column(state.preserved.offset_index()))?;
            let padded: BooleanArray = (0..removed_preserved.num_rows())
                .map(|i| {
                    let matched =
                        offsets.is_valid(i) && with_matches.contains_key(&offsets.value(i));
                    Some(!found[i] && !matched)
                })
                .collect();
            let padded =
                datafusion::arrow::compute::filter_record_batch(&removed_preserved, &padded)?;
            if padded.num_rows() > 0 {
                let bound = bind(
                    query,
                    padded,
                    RecordBatch::new_empty(state.other.schema()),
                    Binding::Unmatched,
                )?;
                retracted.extend(output_rows(ctx, query, &bound).await?.0);
            }
        }
    }
    if removed_other.num_rows() > 0 {
        let bound = bind(
            query,
            flagged(state.preserved.records(), false)?,
            flagged(&removed_other, true)?,
            Binding::NewMatches,
        )?;
        retracted.extend(output_rows(ctx, query, &bound).await?.0);
        if outer {
            let lost = match_counts(ctx, &bound, query).await?;
            state.preserved.remove_matches(&lost)?;
        }
        let columns = data_columns(&state.other.schema(), &query.inputs[query.other]);
        let found = state.other.remove_matching(&removed_other, &columns)?;
        not_kept += found.iter().filter(|f| !**f).count();
    }
    if not_kept > 0 {
        tracing::debug!(
            not_kept,
            "retractions or corrections of records no longer kept: their matches (or null-padded \
             record) were retracted from their data"
        );
    }

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
    let conform = |rows: &[RecordBatch]| -> Result<RecordBatch, EngineError> {
        let rows = rows
            .iter()
            .map(|b| RecordBatch::try_new(Arc::clone(&schema), b.columns().to_vec()))
            .collect::<Result<Vec<_>, _>>()?;
        ordered(&concat_batches(&schema, &rows)?, query_columns)
    };
    // Appends first: a retraction never comes before what it retracts.
    let appended = conform(&rows)?;
    let retracted = conform(&retracted)?;
    let mut ops = vec![APPEND; appended.num_rows()];
    ops.extend(std::iter::repeat_n(RETRACT, retracted.num_rows()));
    let results = concat_batches(&appended.schema(), [&appended, &retracted])?;
    reporter.report(Phase::Writing, Some(read), Some(0));
    let written = crate::top_n::run::write_changelog(
        Path::new(&request.new_data_path),
        &prepared.layout,
        &results,
        ops,
        first_offset,
        request.system_time.timestamp_millis(),
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
