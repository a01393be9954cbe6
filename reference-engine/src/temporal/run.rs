//! Running a temporal join: one transaction of ExecuteTransform, or MigrateQuery's finalisation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Column, TableReference};
use datafusion::datasource::{MemTable, ViewTable, provider_as_source};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder};

use super::checkpoint::{
    self, StreamHeader, TableHeader, TemporalHeader, TemporalRecords, Vocabulary, conform,
};
use super::query::{TemporalQuery, bind};
use super::state::{PendingStream, TableColumns, VersionedTable, retained_schema};
use crate::error::EngineError;
use crate::execute::Reporter;
use crate::inputs::{INPUT_SCAN_PREFIX, RegisteredInput};
use crate::output::writer::ParquetOutput;
use crate::prepare::{PreparedQuery, QueryShape, lineage_plan};
use crate::progress::Phase;
use crate::request::{DatasetVocabulary, TransformRequest};
use crate::transform::watermark::latest_watermark;
use crate::transform::{MapFilterRun, create_output, run_map_filter};

/// A temporal join's state between transactions.
#[derive(Debug)]
pub(crate) struct TemporalState {
    /// Stream records waiting for the tables' watermark.
    pub stream: PendingStream,
    /// The stream's latest explicit watermark so far.
    pub stream_watermark_ms: Option<i64>,
    /// Each joined table (input index, state), in the query's table order.
    pub tables: Vec<(usize, VersionedTable)>,
}

impl TemporalState {
    /// Nothing waiting, empty tables (their records as the session's inputs have them).
    pub(crate) async fn empty(
        ctx: &SessionContext,
        query: &TemporalQuery,
    ) -> Result<Self, EngineError> {
        let stream = &query.inputs[query.stream];
        let schema = input_schema(ctx, stream).await?;
        let event_time = event_time_index(&schema, stream)?;
        let mut tables = Vec::new();
        for &t in &query.tables {
            let input = &query.inputs[t];
            let schema = input_schema(ctx, input).await?;
            tables.push((t, new_table(schema, input, None)?));
        }
        Ok(Self {
            stream: PendingStream::new(schema, event_time),
            stream_watermark_ms: None,
            tables,
        })
    }

    /// The state a checkpoint holds, checked against `query` (same fingerprint, inputs and columns).
    pub(crate) async fn restore(
        ctx: &SessionContext,
        path: &Path,
        query: &TemporalQuery,
        fingerprint: &str,
    ) -> Result<Self, EngineError> {
        let mismatch = |reason: String| EngineError::CheckpointMismatch {
            path: path.to_path_buf(),
            reason,
        };
        let (header, records) = read_checked(path)?;
        if header.query_fingerprint != fingerprint {
            return Err(mismatch("its query fingerprint differs".to_owned()));
        }
        let fresh = Self::empty(ctx, query).await?;
        let stream_input = &query.inputs[query.stream];
        if header.stream.alias != stream_input.query_alias {
            return Err(mismatch(format!(
                "it joins the stream `{}`, not `{}`",
                header.stream.alias, stream_input.query_alias
            )));
        }
        let waiting = conform(&records.stream, &fresh.stream.schema()).ok_or_else(|| {
            mismatch(format!(
                "the columns of the stream `{}` changed",
                stream_input.query_alias
            ))
        })?;
        let mut stream = fresh.stream;
        stream.push(waiting)?;
        let mut tables = Vec::new();
        for (t, table) in fresh.tables {
            let input = &query.inputs[t];
            let Some(k) = header
                .tables
                .iter()
                .position(|h| h.alias == input.query_alias)
            else {
                return Err(mismatch(format!(
                    "it has no state of the table `{}`",
                    input.query_alias
                )));
            };
            let kept = records
                .tables
                .get(k)
                .and_then(|r| conform(r, &retained_schema(&table.schema())))
                .ok_or_else(|| {
                    mismatch(format!(
                        "the columns of the table `{}` changed",
                        input.query_alias
                    ))
                })?;
            let mut table = new_table(table.schema(), input, header.tables[k].watermark_ms)?;
            table.restore(&kept)?;
            tables.push((t, table));
        }
        Ok(Self {
            stream,
            stream_watermark_ms: header.stream.watermark_ms,
            tables,
        })
    }

    /// Replaces each table's state by the one `carried` from another query's checkpoint, when that
    /// one is of the same input, primary key and columns.
    pub(crate) fn carry_tables(
        &mut self,
        query: &TemporalQuery,
        carried: &[(TableHeader, RecordBatch)],
    ) -> Result<(), EngineError> {
        for (t, table) in &mut self.tables {
            let input = &query.inputs[*t];
            let Some((header, kept)) = carried.iter().find(|(header, _)| {
                header.alias == input.query_alias
                    && input.temporal.as_ref() == Some(&header.primary_key)
            }) else {
                continue;
            };
            let Some(kept) = conform(kept, &retained_schema(&table.schema())) else {
                tracing::warn!(table = %input.query_alias, "table state not carried over: its columns changed");
                continue;
            };
            let mut state = new_table(table.schema(), input, header.watermark_ms)?;
            state.restore(&kept)?;
            *table = state;
        }
        Ok(())
    }

    /// How far every table is complete: the smallest of their watermarks (`None` while one has none).
    pub(crate) fn threshold_ms(&self) -> Option<i64> {
        self.tables
            .iter()
            .map(|(_, t)| t.watermark_ms())
            .try_fold(i64::MAX, |low, w| w.map(|w| low.min(w)))
    }

    /// Writes the state (pruned first) as a checkpoint.
    pub(crate) fn write(
        &mut self,
        path: &Path,
        query: &TemporalQuery,
        fingerprint: &str,
    ) -> Result<(), EngineError> {
        for (_, table) in &mut self.tables {
            table.prune();
        }
        let stream_input = &query.inputs[query.stream];
        let header = TemporalHeader {
            format: checkpoint::FORMAT,
            kind: checkpoint::KIND.to_owned(),
            query_fingerprint: fingerprint.to_owned(),
            stream: StreamHeader {
                alias: stream_input.query_alias.clone(),
                vocab: Vocabulary::from(&stream_input.vocab),
                watermark_ms: self.stream_watermark_ms,
            },
            tables: self
                .tables
                .iter()
                .map(|(t, table)| {
                    let input = &query.inputs[*t];
                    TableHeader {
                        alias: input.query_alias.clone(),
                        primary_key: input.temporal.clone().unwrap_or_default(),
                        vocab: Vocabulary::from(&input.vocab),
                        watermark_ms: table.watermark_ms(),
                    }
                })
                .collect(),
        };
        let records = TemporalRecords {
            stream: datafusion::arrow::compute::concat_batches(
                &self.stream.schema(),
                self.stream.batches(),
            )?,
            tables: self
                .tables
                .iter()
                .map(|(_, t)| t.retained())
                .collect::<Result<_, _>>()?,
        };
        checkpoint::write(path, &header, &records)
    }
}

fn new_table(
    schema: SchemaRef,
    input: &RegisteredInput,
    watermark_ms: Option<i64>,
) -> Result<VersionedTable, EngineError> {
    let primary_key = input.temporal.clone().unwrap_or_default();
    let columns = TableColumns::find(&schema, &input.query_alias, &primary_key, &input.vocab)?;
    VersionedTable::new(schema, columns, watermark_ms)
}

fn event_time_index(schema: &SchemaRef, input: &RegisteredInput) -> Result<usize, EngineError> {
    schema
        .index_of(&input.vocab.event_time_column)
        .map_err(|_| EngineError::InputSchema {
            alias: input.query_alias.clone(),
            reason: format!(
                "it has no event time column `{}` to join as of",
                input.vocab.event_time_column
            ),
        })
}

/// Reads a temporal join checkpoint; one of another kind is a mismatch.
fn read_checked(path: &Path) -> Result<(TemporalHeader, TemporalRecords), EngineError> {
    let kind = crate::window::checkpoint::kind_of(path)?;
    if kind.kind != checkpoint::KIND {
        return Err(EngineError::CheckpointMismatch {
            path: path.to_path_buf(),
            reason: format!(
                "it holds {} state, and this query joins temporal tables",
                kind.kind
            ),
        });
    }
    checkpoint::read(path)
}

/// The columns of an input as the session reads it.
pub(crate) async fn input_schema(
    ctx: &SessionContext,
    input: &RegisteredInput,
) -> Result<SchemaRef, EngineError> {
    let frame = ctx
        .table(TableReference::bare(input.query_alias.clone()))
        .await
        .map_err(|e| EngineError::sql(None, e))?;
    Ok(Arc::new(frame.schema().as_arrow().clone()))
}

/// An input's records of this transaction, in offset order: none when the request gives it no new
/// records. Such an input is registered through its `schema_file`, which a coordinator may stage as one
/// of the input's data slices (kamu's and Weir's do): its records were read in an earlier transaction
/// and must not be pushed or applied again.
pub(crate) async fn read_input(
    ctx: &SessionContext,
    request: &TransformRequest,
    input: &RegisteredInput,
) -> Result<Vec<RecordBatch>, EngineError> {
    let has_data = request
        .query_inputs
        .get(input.index)
        .is_some_and(|i| i.offset_interval.is_some() && !i.data_paths.is_empty());
    if !has_data {
        return Ok(Vec::new());
    }
    let frame = ctx
        .table(TableReference::bare(input.query_alias.clone()))
        .await
        .map_err(|e| EngineError::sql(None, e))?
        .sort(vec![
            Expr::Column(Column::new_unqualified(input.vocab.offset_column.clone()))
                .sort(true, false),
        ])
        .map_err(|e| EngineError::sql(None, e))?;
    frame.collect().await.map_err(EngineError::execution)
}

/// What one emission needs.
#[allow(missing_debug_implementations)]
pub(crate) struct Emit<'a> {
    pub ctx: &'a SessionContext,
    pub prepared: &'a PreparedQuery,
    pub query: &'a TemporalQuery,
    pub first_offset: i64,
    pub system_time_ms: i64,
}

/// Joins the stream records whose time has come (event time at or before `threshold_ms`) with the
/// tables as of their event time, and writes the results to `output`.
pub(crate) async fn emit(
    emit: &Emit<'_>,
    state: &mut TemporalState,
    threshold_ms: Option<i64>,
    output: &mut ParquetOutput,
    reporter: &mut Reporter<'_>,
) -> Result<u64, EngineError> {
    let ready = state.stream.take_ready(threshold_ms)?;
    let joined = ready.num_rows();
    let versions = state
        .tables
        .iter()
        .map(|(t, table)| Ok((*t, table.versions()?)))
        .collect::<Result<Vec<_>, EngineError>>()?;
    let bound = bind(emit.query, ready, versions)?;
    let (physical, query_columns) =
        lineage_plan(emit.ctx, &bound, &emit.query.inputs, true, &[]).await?;
    let prepared = PreparedQuery {
        shape: QueryShape::MapFilter { query_columns },
        physical,
        layout: emit.prepared.layout.clone(),
        fingerprint: emit.prepared.fingerprint.clone(),
    };
    let run = MapFilterRun {
        ctx: emit.ctx,
        prepared: &prepared,
        query_columns,
        first_offset: emit.first_offset,
        system_time_ms: emit.system_time_ms,
    };
    let rows = run_map_filter(&run, Some(output), reporter, |_, _| {}).await?;
    tracing::debug!(
        joined,
        rows,
        waiting = state.stream.records(),
        threshold_ms,
        "temporal join emitted"
    );
    Ok(rows)
}

/// One transaction: the tables' new records update their state, the stream's wait, and every stream
/// record the tables are complete for is joined and written. Returns the rows written and the output
/// watermark.
pub(crate) async fn run_transform(
    ctx: &SessionContext,
    request: &TransformRequest,
    prepared: &PreparedQuery,
    query: &TemporalQuery,
    first_offset: i64,
    reporter: &mut Reporter<'_>,
) -> Result<(u64, Option<DateTime<Utc>>), EngineError> {
    let mut state = match &request.prev_checkpoint_path {
        Some(path) => {
            TemporalState::restore(ctx, &PathBuf::from(path), query, &prepared.fingerprint).await?
        }
        None => TemporalState::empty(ctx, query).await?,
    };
    reporter.report(Phase::Executing, Some(0), Some(0));
    let watermark_of = |input: usize| {
        request
            .query_inputs
            .get(input)
            .and_then(|i| latest_watermark(&i.explicit_watermarks))
            .map(|w| w.timestamp_millis())
    };
    let mut read = 0u64;
    for (t, table) in &mut state.tables {
        for batch in read_input(ctx, request, &query.inputs[*t]).await? {
            read += batch.num_rows() as u64;
            table.apply(&batch)?;
        }
        if let Some(watermark) = watermark_of(*t) {
            table.advance(watermark);
        }
    }
    for batch in read_input(ctx, request, &query.inputs[query.stream]).await? {
        read += batch.num_rows() as u64;
        state.stream.push(batch)?;
    }
    if let Some(watermark) = watermark_of(query.stream) {
        state.stream_watermark_ms = Some(
            state
                .stream_watermark_ms
                .map_or(watermark, |w| w.max(watermark)),
        );
    }
    let threshold = state.threshold_ms();

    let path = Path::new(&request.new_data_path);
    let mut output = create_output(path, &prepared.layout)?;
    let step = Emit {
        ctx,
        prepared,
        query,
        first_offset,
        system_time_ms: request.system_time.timestamp_millis(),
    };
    let rows = emit(&step, &mut state, threshold, &mut output, reporter).await?;
    reporter.report(Phase::Writing, Some(read), Some(rows));
    output
        .finish()
        .await
        .map_err(|reason| EngineError::OutputWrite {
            path: path.to_path_buf(),
            reason,
        })?;
    reporter.report(Phase::Checkpointing, Some(read), Some(rows));
    state.write(
        Path::new(&request.new_checkpoint_path),
        query,
        &prepared.fingerprint,
    )?;
    // Nothing at or before the threshold is still to come; the stream's own watermark bounds the rest.
    let watermark = threshold.map(|t| state.stream_watermark_ms.map_or(t, |s| s.min(t)));
    Ok((
        rows,
        watermark.and_then(DateTime::<Utc>::from_timestamp_millis),
    ))
}

/// Registers the inputs a temporal join checkpoint names (empty, with the columns it kept) so the query
/// that wrote it can be planned without them.
pub(crate) fn register_from_checkpoint(
    ctx: &SessionContext,
    header: &TemporalHeader,
    records: &TemporalRecords,
) -> Result<Vec<RegisteredInput>, EngineError> {
    let mut parts: Vec<(&str, &Vocabulary, SchemaRef)> = vec![(
        header.stream.alias.as_str(),
        &header.stream.vocab,
        records.stream.schema(),
    )];
    for (table, kept) in header.tables.iter().zip(&records.tables) {
        // The kept entries' columns, without the entry's time and liveness.
        let fields = kept.schema().fields().iter().cloned().collect::<Vec<_>>();
        let columns = fields.len().saturating_sub(2);
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(
            fields.into_iter().take(columns).collect::<Vec<_>>(),
        ));
        parts.push((table.alias.as_str(), &table.vocab, schema));
    }
    let mut inputs = Vec::new();
    for (index, (alias, vocab, schema)) in parts.into_iter().enumerate() {
        let scan_name = format!("{INPUT_SCAN_PREFIX}{index}");
        let failed = |e: datafusion::error::DataFusionError| EngineError::sql(None, e);
        let table = MemTable::try_new(Arc::clone(&schema), vec![vec![]]).map_err(failed)?;
        let plan = LogicalPlanBuilder::scan(
            TableReference::bare(scan_name.clone()),
            provider_as_source(Arc::new(table)),
            None,
        )
        .and_then(LogicalPlanBuilder::build)
        .map_err(failed)?;
        ctx.register_table(
            TableReference::bare(alias.to_owned()),
            Arc::new(ViewTable::new(plan, None)),
        )
        .map_err(failed)?;
        let vocab = DatasetVocabulary::from(vocab);
        inputs.push(RegisteredInput {
            index,
            query_alias: alias.to_owned(),
            has_operation_type: schema.index_of(&vocab.operation_type_column).is_ok(),
            vocab,
            scan_name,
            temporal: None,
            interval_joined: false,
        });
    }
    Ok(inputs)
}
