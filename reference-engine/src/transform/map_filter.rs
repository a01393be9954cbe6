//! Running a map/filter query: output records in input offset order, `op` from lineage, correction
//! pairs repaired, system columns added.

use datafusion::arrow::array::{Array, Int32Array, Int64Array, RecordBatch};
use datafusion::arrow::compute::{cast, concat_batches};
use datafusion::arrow::datatypes::DataType;
use datafusion::execution::context::SessionContext;
use futures::StreamExt;

use crate::changelog::repair::{ChangelogRepair, InputRecord};
use crate::error::EngineError;
use crate::execute::{Reporter, execute};
use crate::output::writer::ParquetOutput;
use crate::prepare::PreparedQuery;
use crate::progress::Phase;

/// What a map/filter run needs.
#[allow(missing_debug_implementations)]
pub(crate) struct MapFilterRun<'a> {
    pub ctx: &'a SessionContext,
    pub prepared: &'a PreparedQuery,
    /// Number of the query's own columns; the op, offset and input carriers follow.
    pub query_columns: usize,
    /// Offset of the first output record.
    pub first_offset: i64,
    /// System time written to every record.
    pub system_time_ms: i64,
}

/// Runs the query, writing to `output` when given, and calls `on_records(first output offset, input
/// records)` for each group of output records. Returns the number of output records.
pub(crate) async fn run_map_filter(
    run: &MapFilterRun<'_>,
    mut output: Option<&mut ParquetOutput>,
    reporter: &mut Reporter<'_>,
    mut on_records: impl FnMut(i64, &[InputRecord]),
) -> Result<u64, EngineError> {
    let physical = &run.prepared.physical;
    reporter.report(Phase::Executing, Some(0), Some(0));
    let mut stream = execute(run.ctx, physical)?;
    let mut repair = ChangelogRepair::default();
    let mut held: Option<RecordBatch> = None;
    let mut written: i64 = 0;
    let schema = physical.schema();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(EngineError::execution)?;
        let batch = match held.take() {
            Some(held) => concat_batches(&schema, [&held, &batch])?,
            None => batch,
        };
        if batch.num_rows() == 0 {
            continue;
        }
        let records = input_records(&batch, run.query_columns)?;
        let rows = records.len();
        let wait = records
            .last()
            .is_some_and(|last| ChangelogRepair::must_wait(*last));
        let ready = if wait { rows - 1 } else { rows };
        let next = if wait { records.last().copied() } else { None };
        let part = batch.slice(0, ready);
        written += emit(
            run,
            &mut output,
            &mut repair,
            &part,
            &records[..ready],
            next,
            written,
            &mut on_records,
        )
        .await?;
        if wait {
            held = Some(batch.slice(ready, 1));
        }
        reporter.tick(Phase::Executing, physical, Some(written as u64));
    }
    if let Some(last) = held {
        let records = input_records(&last, run.query_columns)?;
        written += emit(
            run,
            &mut output,
            &mut repair,
            &last,
            &records,
            None,
            written,
            &mut on_records,
        )
        .await?;
    }
    Ok(written as u64)
}

#[allow(clippy::too_many_arguments)]
async fn emit(
    run: &MapFilterRun<'_>,
    output: &mut Option<&mut ParquetOutput>,
    repair: &mut ChangelogRepair,
    batch: &RecordBatch,
    records: &[InputRecord],
    next: Option<InputRecord>,
    written: i64,
    on_records: &mut impl FnMut(i64, &[InputRecord]),
) -> Result<i64, EngineError> {
    if records.is_empty() {
        return Ok(0);
    }
    let layout = &run.prepared.layout;
    let mut ops = match layout.query_op(batch)? {
        Some(ops) => ops,
        None => records.iter().map(|r| r.op).collect(),
    };
    repair.repair(records, &mut ops, next);
    let first = run
        .first_offset
        .checked_add(written)
        .ok_or_else(|| EngineError::Overflow {
            what: "output offset".to_owned(),
        })?;
    on_records(first, records);
    if let Some(output) = output.as_deref_mut() {
        let out = layout.assemble(batch, ops, first, run.system_time_ms)?;
        let path = output.path().to_path_buf();
        output
            .write(out)
            .await
            .map_err(|reason| EngineError::OutputWrite { path, reason })?;
    }
    Ok(records.len() as i64)
}

/// The input record (operation type, offset) behind each row, from the carrier columns.
fn input_records(
    batch: &RecordBatch,
    query_columns: usize,
) -> Result<Vec<InputRecord>, EngineError> {
    let ops = cast(batch.column(query_columns), &DataType::Int32)?;
    let offsets = cast(batch.column(query_columns + 1), &DataType::Int64)?;
    let inputs = cast(batch.column(query_columns + 2), &DataType::Int32)?;
    let (Some(ops), Some(offsets), Some(inputs)) = (
        ops.as_any().downcast_ref::<Int32Array>(),
        offsets.as_any().downcast_ref::<Int64Array>(),
        inputs.as_any().downcast_ref::<Int32Array>(),
    ) else {
        return Err(EngineError::MalformedRequest {
            reason: "input operation types, offsets or inputs are not integers".to_owned(),
        });
    };
    Ok((0..ops.len())
        .map(|i| InputRecord {
            op: if ops.is_null(i) { 0 } else { ops.value(i) },
            offset: offsets.value(i),
            input: inputs.value(i),
        })
        .collect())
}
