//! Running a top-N: one transaction of ExecuteTransform.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int32Array, RecordBatch};
use datafusion::arrow::compute::{cast, concat_batches, filter_record_batch};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::collect;

use super::checkpoint::{self, TopNHeader};
use super::query::{TopNQuery, bind};
use super::state::{LiveRecords, RankedColumns, changelog};
use crate::error::EngineError;
use crate::execute::Reporter;
use crate::interval::checkpoint::SideHeader;
use crate::interval::state::int64;
use crate::output::layout::OutputLayout;
use crate::prepare::PreparedQuery;
use crate::progress::Phase;
use crate::request::TransformRequest;
use crate::temporal::checkpoint::Vocabulary;
use crate::temporal::run::{input_schema, read_input};
use crate::transform::create_output;
use crate::transform::watermark::latest_watermark;

/// The live records and the input's watermark between transactions.
#[derive(Debug)]
pub(crate) struct TopNState {
    pub live: LiveRecords,
    pub watermark_ms: Option<i64>,
}

impl TopNState {
    /// Nothing live.
    pub(crate) async fn empty(
        ctx: &SessionContext,
        query: &TopNQuery,
    ) -> Result<Self, EngineError> {
        let input = &query.inputs[query.input];
        let schema = input_schema(ctx, input).await?;
        let system = [
            &input.vocab.offset_column,
            &input.vocab.operation_type_column,
            &input.vocab.system_time_column,
        ];
        let data_columns = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| !system.contains(&f.name()))
            .map(|(i, _)| i)
            .collect();
        Ok(Self {
            live: LiveRecords::new(schema, data_columns),
            watermark_ms: None,
        })
    }

    /// The state a checkpoint holds, checked against `query`.
    pub(crate) async fn restore(
        ctx: &SessionContext,
        path: &Path,
        query: &TopNQuery,
        fingerprint: &str,
    ) -> Result<Self, EngineError> {
        let mismatch = |reason: String| EngineError::CheckpointMismatch {
            path: path.to_path_buf(),
            reason,
        };
        let kind = crate::window::checkpoint::kind_of(path)?;
        if kind.kind != checkpoint::KIND {
            return Err(mismatch(format!(
                "it holds {} state, and this query is a top-N",
                kind.kind
            )));
        }
        let (header, records) = checkpoint::read(path)?;
        if header.query_fingerprint != fingerprint {
            return Err(mismatch("its query fingerprint differs".to_owned()));
        }
        let input = &query.inputs[query.input];
        if header.input.alias != input.query_alias {
            return Err(mismatch(format!(
                "it ranks `{}`, not `{}`",
                header.input.alias, input.query_alias
            )));
        }
        let mut state = Self::empty(ctx, query).await?;
        let records = crate::temporal::checkpoint::conform(&records, &state.live.schema())
            .ok_or_else(|| mismatch(format!("the columns of `{}` changed", input.query_alias)))?;
        state.live.restore(&records)?;
        state.watermark_ms = header.input.watermark_ms;
        Ok(state)
    }

    fn write(&self, path: &Path, query: &TopNQuery, fingerprint: &str) -> Result<(), EngineError> {
        let input = &query.inputs[query.input];
        let header = TopNHeader {
            format: checkpoint::FORMAT,
            kind: checkpoint::KIND.to_owned(),
            query_fingerprint: fingerprint.to_owned(),
            function: query.function,
            bound: query.bound,
            input: SideHeader {
                alias: input.query_alias.clone(),
                vocab: Vocabulary::from(&input.vocab),
                watermark_ms: self.watermark_ms,
            },
        };
        checkpoint::write(path, &header, self.live.records())
    }
}

/// Runs a logical plan of this session to completion, as one batch.
async fn run_plan(ctx: &SessionContext, plan: &LogicalPlan) -> Result<RecordBatch, EngineError> {
    let mut state = ctx.state();
    state.config_mut().options_mut().execution.target_partitions = 1;
    let physical = state
        .create_physical_plan(plan)
        .await
        .map_err(|e| EngineError::sql(None, e))?;
    let schema = physical.schema();
    let batches = collect(physical, ctx.task_ctx())
        .await
        .map_err(EngineError::execution)?;
    Ok(concat_batches(&schema, &batches)?)
}

/// The operation type of each record of `batch` (Append when the input has no such column), checked.
fn operation_types(
    batch: &RecordBatch,
    column: &str,
    alias: &str,
) -> Result<Vec<i32>, EngineError> {
    let Some(ops) = batch.column_by_name(column) else {
        return Ok(vec![crate::changelog::APPEND; batch.num_rows()]);
    };
    let ops = cast(ops, &DataType::Int32)?;
    let ops =
        ops.as_any()
            .downcast_ref::<Int32Array>()
            .ok_or_else(|| EngineError::InputSchema {
                alias: alias.to_owned(),
                reason: format!("its operation type column `{column}` is not an integer"),
            })?;
    (0..ops.len())
        .map(|i| {
            if ops.is_valid(i) && (0..=3).contains(&ops.value(i)) {
                Ok(ops.value(i))
            } else {
                Err(EngineError::InvalidOperationType {
                    column: column.to_owned(),
                    value: if ops.is_valid(i) {
                        ops.value(i).to_string()
                    } else {
                        "null".to_owned()
                    },
                })
            }
        })
        .collect()
}

/// Each keyed record's partition (its keys in row format) by offset.
fn partitions_by_offset(
    keyed: &RecordBatch,
    keys: usize,
) -> Result<HashMap<i64, Vec<u8>>, EngineError> {
    let offsets = int64(keyed.column(keys))?;
    let arrays: Vec<ArrayRef> = keyed.columns()[..keys].to_vec();
    let rows = if arrays.is_empty() {
        None
    } else {
        let converter = RowConverter::new(
            arrays
                .iter()
                .map(|a| SortField::new(a.data_type().clone()))
                .collect(),
        )?;
        Some(converter.convert_columns(&arrays)?)
    };
    Ok((0..keyed.num_rows())
        .filter(|&i| offsets.is_valid(i))
        .map(|i| {
            let key = rows
                .as_ref()
                .map(|r| r.row(i).data().to_vec())
                .unwrap_or_default();
            (offsets.value(i), key)
        })
        .collect())
}

/// The records of `batch` (offset at `offset`) whose partition is in `affected`.
fn in_partitions(
    batch: &RecordBatch,
    offset: usize,
    partitions: &HashMap<i64, Vec<u8>>,
    affected: &HashSet<Vec<u8>>,
) -> Result<RecordBatch, EngineError> {
    let offsets = int64(batch.column(offset))?;
    let keep: BooleanArray = (0..batch.num_rows())
        .map(|i| {
            Some(
                offsets.is_valid(i)
                    && partitions
                        .get(&offsets.value(i))
                        .is_some_and(|key| affected.contains(key)),
            )
        })
        .collect();
    Ok(filter_record_batch(batch, &keep)?)
}

/// One transaction: the changes of the ranked result in the partitions this transaction's records
/// fall into. Returns the rows written.
pub(crate) async fn run_transform(
    ctx: &SessionContext,
    request: &TransformRequest,
    prepared: &PreparedQuery,
    query: &TopNQuery,
    first_offset: i64,
    reporter: &mut Reporter<'_>,
) -> Result<u64, EngineError> {
    let mut state = match &request.prev_checkpoint_path {
        Some(path) => {
            TopNState::restore(ctx, Path::new(path), query, &prepared.fingerprint).await?
        }
        None => TopNState::empty(ctx, query).await?,
    };
    reporter.report(Phase::Executing, Some(0), Some(0));
    let input = &query.inputs[query.input];
    let schema = state.live.schema();
    let offset =
        schema
            .index_of(&input.vocab.offset_column)
            .map_err(|_| EngineError::InputSchema {
                alias: input.query_alias.clone(),
                reason: format!("it has no offset column `{}`", input.vocab.offset_column),
            })?;
    let new = concat_batches(&schema, &read_input(ctx, request, input).await?)?;
    let read = new.num_rows() as u64;

    // Partitions of the live and new records that pass the filters below the ranking.
    let everything = concat_batches(&schema, [state.live.records(), &new])?;
    let keyed = run_plan(ctx, &bind(query, &query.keyed, everything)?).await?;
    let partitions = partitions_by_offset(&keyed, query.partition_keys)?;
    let new_offsets = int64(new.column(offset))?;
    let passing: BooleanArray = (0..new.num_rows())
        .map(|i| Some(new_offsets.is_valid(i) && partitions.contains_key(&new_offsets.value(i))))
        .collect();
    let new = filter_record_batch(&new, &passing)?;
    let ops = operation_types(&new, &input.vocab.operation_type_column, &input.query_alias)?;
    let new_offsets = int64(new.column(offset))?;
    let affected: HashSet<Vec<u8>> = new_offsets
        .iter()
        .flatten()
        .filter_map(|o| partitions.get(&o).cloned())
        .collect();

    let before_records = in_partitions(state.live.records(), offset, &partitions, &affected)?;
    let applied = state.live.apply(&new, &ops)?;
    if applied.unmatched > 0 {
        tracing::warn!(
            input = %input.query_alias,
            unmatched = applied.unmatched,
            "retractions or corrections matched no live record of the input and changed nothing"
        );
    }
    let after_records = in_partitions(state.live.records(), offset, &partitions, &affected)?;
    let columns = RankedColumns {
        query_columns: query.query_columns,
        partition_keys: query.partition_keys,
    };
    let (results, ops) = if affected.is_empty() {
        let empty = run_plan(
            ctx,
            &bind(query, &query.ranked, RecordBatch::new_empty(schema))?,
        )
        .await?;
        changelog(&empty, &empty, columns)?
    } else {
        let before = run_plan(ctx, &bind(query, &query.ranked, before_records)?).await?;
        let after = run_plan(ctx, &bind(query, &query.ranked, after_records)?).await?;
        changelog(&before, &after, columns)?
    };

    // The input's watermark.
    if let Some(w) = request
        .query_inputs
        .get(query.input)
        .and_then(|i| latest_watermark(&i.explicit_watermarks))
    {
        let w = w.timestamp_millis();
        state.watermark_ms = Some(state.watermark_ms.map_or(w, |old| old.max(w)));
    }

    reporter.report(Phase::Writing, Some(read), Some(0));
    let written = write_changelog(
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
        live = state.live.len(),
        partitions = affected.len(),
        added = applied.added,
        removed = applied.removed,
        "top-N advanced"
    );
    Ok(written)
}

/// Writes records with their operation types; the file is written even with zero rows.
pub(crate) async fn write_changelog(
    path: &Path,
    layout: &OutputLayout,
    results: &RecordBatch,
    ops: Vec<i32>,
    first_offset: i64,
    system_time_ms: i64,
) -> Result<u64, EngineError> {
    let mut output = create_output(path, layout)?;
    let batch = layout.assemble(results, ops, first_offset, system_time_ms)?;
    let failed = |reason| EngineError::OutputWrite {
        path: path.to_path_buf(),
        reason,
    };
    output.write(batch).await.map_err(failed)?;
    output.finish().await.map_err(failed)
}
