//! Turning a transform's SQL into something runnable: a map/filter plan carrying lineage, or a window
//! aggregation, with its output layout checked. Every planning error surfaces here, before any data is
//! read (ValidateQuery is this step alone).

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Column;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, SortExpr};
use datafusion::physical_plan::ExecutionPlan;

use crate::changelog::lineage::{carry_lineage, carry_lineage_with_time};
use crate::error::EngineError;
use crate::inputs::RegisteredInput;
use crate::interval::query::{IntervalQuery, recognise as recognise_interval};
use crate::output::layout::OutputLayout;
use crate::request::{DatasetVocabulary, Transform, sql};
use crate::steps::plan_steps;
use crate::temporal::query::{TemporalQuery, mark_temporal, recognise as recognise_temporal};
use crate::top_n::query::{TopNQuery, recognise as recognise_top_n};
use crate::window::checkpoint::fingerprint;
use crate::window::query::{WindowQuery, buffered_schema, recognise};

/// What kind of query this is.
#[derive(Debug)]
pub(crate) enum QueryShape {
    /// Projections and filters (and UNION ALL): records flow one to one, lineage is carried.
    MapFilter {
        /// Number of the query's own columns (the two carriers follow them).
        query_columns: usize,
    },
    /// A tumbling-window aggregation.
    Window(Box<WindowQuery>),
    /// A stream joined with temporal tables as of its records' event time.
    Temporal(Box<TemporalQuery>),
    /// Two streams joined within a bound in event time.
    Interval(Box<IntervalQuery>),
    /// The top ranks of each partition (`row_number()` / `rank()` / `dense_rank()` with a bound).
    TopN(Box<TopNQuery>),
}

/// A planned query, ready to execute.
#[derive(Debug)]
pub(crate) struct PreparedQuery {
    /// Its kind.
    pub shape: QueryShape,
    /// The physical plan: map/filter output with carriers, or pre-aggregation records.
    pub physical: Arc<dyn ExecutionPlan>,
    /// How results become output records.
    pub layout: OutputLayout,
    /// Fingerprint of the SQL (checkpoints remember it).
    pub fingerprint: String,
}

impl PreparedQuery {
    /// The buffered-record schema of a window aggregation's state.
    pub(crate) fn buffered_schema(&self) -> SchemaRef {
        buffered_schema(&self.physical.schema())
    }
}

/// Fingerprint of a transform's SQL (and of its temporal tables, when it declares any: a transform
/// without them keeps the fingerprint it always had).
pub(crate) fn transform_fingerprint(transform: &Transform) -> String {
    let sql = sql(transform);
    let mut steps: Vec<(Option<String>, String)> = sql
        .steps()
        .into_iter()
        .map(|step| (step.alias, step.query))
        .collect();
    for table in sql.temporal_tables.iter().flatten() {
        steps.push((
            Some(format!("temporal table {}", table.name)),
            table.primary_key.join("\u{0}"),
        ));
    }
    fingerprint(&steps)
}

/// Plans `transform` over the registered inputs and checks its output.
pub(crate) async fn prepare(
    ctx: &SessionContext,
    transform: &Transform,
    inputs: &[RegisteredInput],
    vocab: &DatasetVocabulary,
) -> Result<PreparedQuery, EngineError> {
    let names: Vec<String> = inputs.iter().map(|i| i.query_alias.clone()).collect();
    let inputs = &mark_temporal(inputs, sql(transform))?;
    let planned = plan_steps(ctx, sql(transform), &names).await?;
    let (plan, order) = split_order_by(planned.plan)?;
    let fingerprint = transform_fingerprint(transform);

    if let Some(temporal) = recognise_temporal(&plan, inputs, &planned.temporal)? {
        refuse_order_by(
            &order,
            "a temporal join's output follows its stream records' event time",
        )?;
        let layout = OutputLayout::new(plan.schema().as_arrow(), vocab)?;
        // Planned over the inputs as they are, for the checks; each transaction binds it to its records.
        let (physical, _) = lineage_plan(ctx, &plan, inputs, true, &[]).await?;
        return Ok(PreparedQuery {
            shape: QueryShape::Temporal(Box::new(temporal)),
            physical,
            layout,
            fingerprint,
        });
    }

    if let Some(interval) = recognise_interval(&plan, inputs)? {
        refuse_order_by(
            &order,
            "an interval join emits matches as their second record arrives",
        )?;
        let layout = OutputLayout::new(plan.schema().as_arrow(), vocab)?;
        // Planned bound to no records, for the checks (a RIGHT join is bound as the swapped LEFT
        // join); each transaction binds it to its records.
        let mut empty = Vec::new();
        for input in [interval.preserved, interval.other] {
            let schema = crate::temporal::run::input_schema(ctx, &interval.inputs[input]).await?;
            empty.push(datafusion::arrow::array::RecordBatch::new_empty(schema));
        }
        let other = empty.pop().ok_or(EngineError::NoQuery)?;
        let preserved = empty.pop().ok_or(EngineError::NoQuery)?;
        let bound = crate::interval::query::bind(
            &interval,
            preserved,
            other,
            crate::interval::query::Binding::Unmatched,
        )?;
        let (physical, _) = lineage_plan(ctx, &bound, &interval.inputs, false, &[]).await?;
        return Ok(PreparedQuery {
            shape: QueryShape::Interval(Box::new(interval)),
            physical,
            layout,
            fingerprint,
        });
    }

    if let Some(top_n) = recognise_top_n(&plan, inputs)? {
        refuse_order_by(
            &order,
            "a top-N emits the changes of its result in partition then rank order",
        )?;
        let layout = OutputLayout::new(plan.schema().as_arrow(), vocab)?;
        // Planned bound to no records, for the checks; each transaction binds it to its records.
        let schema = crate::temporal::run::input_schema(ctx, &top_n.inputs[top_n.input]).await?;
        let bound = crate::top_n::query::bind(
            &top_n,
            &top_n.ranked,
            datafusion::arrow::array::RecordBatch::new_empty(schema),
        )?;
        let physical = physical_plan(ctx, bound, Partitions::One).await?;
        return Ok(PreparedQuery {
            shape: QueryShape::TopN(Box::new(top_n)),
            physical,
            layout,
            fingerprint,
        });
    }

    if let Some(window) = recognise(&plan, inputs)? {
        refuse_order_by(
            &order,
            "a window aggregation emits each window once it closes, in window then key order",
        )?;
        let layout = OutputLayout::new(&window.result_schema, vocab)?;
        let physical =
            physical_plan(ctx, window.pre_aggregation.clone(), Partitions::Session).await?;
        return Ok(PreparedQuery {
            shape: QueryShape::Window(Box::new(window)),
            physical,
            layout,
            fingerprint,
        });
    }

    if let Some(window) = crate::window::functions::multi_window_function(&plan) {
        return Err(EngineError::UnsupportedWindowAggregation {
            reason: format!(
                "a {window} window puts a record in several windows or in a session that only a window \
                 aggregation makes; aggregate it: GROUP BY window_start, window_end[, keys]"
            ),
        });
    }
    let layout = OutputLayout::new(plan.schema().as_arrow(), vocab)?;
    let (physical, query_columns) = lineage_plan(ctx, &plan, inputs, false, &order).await?;
    Ok(PreparedQuery {
        shape: QueryShape::MapFilter { query_columns },
        physical,
        layout,
        fingerprint,
    })
}

/// A top-level `ORDER BY` of the last step taken off `plan`: the plan below it and its sort keys (none
/// without one). `ORDER BY` with `LIMIT` is refused, and so is one naming columns the query does not
/// output (DataFusion plans it below a projection).
fn split_order_by(plan: LogicalPlan) -> Result<(LogicalPlan, Vec<SortExpr>), EngineError> {
    match plan {
        LogicalPlan::Sort(sort) if sort.fetch.is_none() => {
            Ok((Arc::unwrap_or_clone(sort.input), sort.expr))
        }
        LogicalPlan::Sort(_) => Err(EngineError::ChangelogUnsafe {
            explanation:
                "ORDER BY ... LIMIT keeps a number of records that depends on how the input is \
                 split into transactions; filter with WHERE instead"
                    .to_owned(),
        }),
        LogicalPlan::Projection(projection)
            if matches!(projection.input.as_ref(), LogicalPlan::Sort(_)) =>
        {
            Err(EngineError::ChangelogUnsafe {
                explanation:
                    "ORDER BY at the top of a query may only name columns the query outputs \
                     (or their positions)"
                        .to_owned(),
            })
        }
        other => Ok((other, Vec::new())),
    }
}

/// Refuses a top-level `ORDER BY` on a stateful query, whose output order is `fixed`.
fn refuse_order_by(order: &[SortExpr], fixed: &str) -> Result<(), EngineError> {
    if order.is_empty() {
        return Ok(());
    }
    Err(EngineError::ChangelogUnsafe {
        explanation: format!(
            "ORDER BY at the top of this query has no meaning: {fixed}; remove ORDER BY"
        ),
    })
}

/// The physical plan of a map/filter plan (or a bound temporal join) carrying lineage: the query's
/// columns, then the operation type, offset and input carriers (and the event time with `time`), in
/// output order: by `leading` (a top-level `ORDER BY`) first, when given, then by input offset.
/// Returns it and the number of the query's own columns.
pub(crate) async fn lineage_plan(
    ctx: &SessionContext,
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
    time: bool,
    leading: &[SortExpr],
) -> Result<(Arc<dyn ExecutionPlan>, usize), EngineError> {
    let carried = if time {
        carry_lineage_with_time(plan, inputs)?
    } else {
        carry_lineage(plan, inputs)?
    };
    let query_columns = plan.schema().fields().len();
    let mut exprs: Vec<Expr> = (0..query_columns)
        .map(|i| Expr::Column(Column::from(carried.plan.schema().qualified_field(i))))
        .collect();
    exprs.extend(carried.carrier_exprs());
    let mut order = leading.to_vec();
    order.extend(carried.order());
    let ordered = LogicalPlanBuilder::from(carried.plan)
        .project(exprs)
        .and_then(|b| b.sort(order))
        .and_then(LogicalPlanBuilder::build)
        .map_err(|e| EngineError::sql(None, e))?;
    let physical = physical_plan(ctx, ordered, Partitions::One).await?;
    Ok((physical, query_columns))
}

/// Analyses, optimises and plans physically; errors here are the query's (type errors and the like).
///
/// With `Partitions::One` the plan is one stream. A map/filter query is planned so: its output must keep
/// the inputs' offset order (ODF), and over several partitions DataFusion scans in parallel and then
/// merges back into order, which copies every row of every column once more and compares offsets row by
/// row; on the 10M-row filter/map bench that cost more than the parallel scan gained (engine / DataFusion
/// direct 1.43x with 2 partitions, 1.27x with one; `docs/benchmarks.md`). As one partition the scan,
/// filter and projection run as one ordered stream, while the Parquet writer still encodes columns on
/// other threads.
///
/// `partitions` shapes local plans only: a session whose query planner runs plans elsewhere (an
/// upgraded session, `crate::SessionUpgrade`) gets the optimised logical plan and plans it there with
/// the session's own settings, merging the partitions back into offset order before the records come
/// back (the plan's sort says so).
async fn physical_plan(
    ctx: &SessionContext,
    plan: LogicalPlan,
    partitions: Partitions,
) -> Result<Arc<dyn ExecutionPlan>, EngineError> {
    // `plan` is one SELECT (`plan_steps` refuses statements), so planning it on the session's state is
    // what `SessionContext::execute_logical_plan` + `DataFrame::create_physical_plan` would do.
    let mut state = ctx.state();
    if partitions == Partitions::One {
        state.config_mut().options_mut().execution.target_partitions = 1;
    }
    let physical = state
        .create_physical_plan(&plan)
        .await
        .map_err(|e| EngineError::sql(None, e))?;
    tracing::debug!(
        plan = %datafusion::physical_plan::displayable(physical.as_ref()).indent(false),
        "physical plan"
    );
    Ok(physical)
}

/// How many partitions a physical plan may run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Partitions {
    /// As many as the session's `target_partitions`.
    Session,
    /// One ordered stream.
    One,
}
