//! Recognising a top-N query in a plan, rewriting it to expose each output row's rank and partition,
//! and binding it to in-memory records.
//!
//! The supported form: map/filter operators (projections, filters, aliases, further query steps) over
//! one `row_number()`, `rank()` or `dense_rank()` `OVER (PARTITION BY ... ORDER BY ...)`, computed over
//! map/filter operators over one input, with a filter above it that bounds the rank from above
//! (`WHERE place <= 2`, `< 3`, `= 1`, `BETWEEN 1 AND 3`).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, ScalarValue, TableReference};
use datafusion::datasource::{MemTable, provider_as_source};
use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    Between, BinaryExpr, Expr, ExprSchemable, Filter, LogicalPlan, LogicalPlanBuilder, Operator,
    Projection, SubqueryAlias, Window,
};

use crate::changelog::lineage::carry_lineage;
use crate::error::EngineError;
use crate::inputs::RegisteredInput;

/// Hidden column of the ranked plan: each output row's rank (Int64).
pub(crate) const RANK_COLUMN: &str = "__weir_rank";
/// Hidden column of the ranked plan: the offset of the input record behind each output row.
pub(crate) const RANKED_OFFSET_COLUMN: &str = "__weir_ranked_offset";
/// Prefix of the hidden partition key columns (`__weir_partition_<i>`).
pub(crate) const PARTITION_PREFIX: &str = "__weir_partition_";

fn unsupported(reason: impl Into<String>) -> EngineError {
    EngineError::UnsupportedTopN {
        reason: reason.into(),
    }
}

/// The ranking function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RankFunction {
    /// `row_number()`: 1, 2, 3, ... (ties in ORDER BY broken by input offset).
    RowNumber,
    /// `rank()`: peers share a rank, gaps follow.
    Rank,
    /// `dense_rank()`: peers share a rank, no gaps.
    DenseRank,
}

/// A recognised top-N query.
#[derive(Debug, Clone)]
pub(crate) struct TopNQuery {
    /// The query's columns, then [`RANK_COLUMN`], [`RANKED_OFFSET_COLUMN`] and the partition keys.
    pub ranked: LogicalPlan,
    /// Each passing input record's partition keys and offset (the map/filter below the ranking):
    /// `__weir_partition_<i>`..., then [`RANKED_OFFSET_COLUMN`].
    pub keyed: LogicalPlan,
    /// The inputs as registered.
    pub inputs: Vec<RegisteredInput>,
    /// The input ranked.
    pub input: usize,
    /// The ranking function.
    pub function: RankFunction,
    /// The largest rank the query keeps.
    pub bound: i64,
    /// Number of the query's own columns.
    pub query_columns: usize,
    /// Number of partition keys.
    pub partition_keys: usize,
}

/// The top-N query in `plan`: `None` when the plan computes no window function.
pub(crate) fn recognise(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
) -> Result<Option<TopNQuery>, EngineError> {
    if !has_window(plan) {
        return Ok(None);
    }
    let mut found = None;
    let mut bounds = Vec::new();
    let (ranked, hidden, _) = rebuild(plan, inputs, &mut found, &mut bounds)?;
    let Some(found) = found else {
        return Err(unsupported(
            "a window function must be computed under projections and filters only, with \
             projections, filters and aliases above it (no aggregation, join or sort over it)",
        ));
    };
    let Some(bound) = bounds.into_iter().min() else {
        return Err(unsupported(format!(
            "`{}()` needs a bound on the rank in a filter above it, e.g. `SELECT * FROM (SELECT \
             {}() OVER (PARTITION BY k ORDER BY x DESC) AS place, ... FROM t) WHERE place <= 10` \
             (a top-N, or `= 1` to deduplicate): without one every new record would change the \
             rank of every record after it",
            found.function_name, found.function_name
        )));
    };
    if bound < 1 {
        return Err(unsupported(format!(
            "the rank bound keeps no rank (ranks start at 1, the filter keeps ranks up to {bound})"
        )));
    }
    let query_columns = plan.schema().fields().len();
    let failed = |e: datafusion::error::DataFusionError| unsupported(e.strip_backtrace());
    let mut exprs: Vec<Expr> = (0..query_columns)
        .map(|i| Expr::Column(Column::from(ranked.schema().qualified_field(i))))
        .collect();
    exprs.extend(hidden);
    let ranked = LogicalPlanBuilder::from(ranked)
        .project(exprs)
        .and_then(LogicalPlanBuilder::build)
        .map_err(failed)?;
    Ok(Some(TopNQuery {
        ranked,
        keyed: found.keyed,
        inputs: inputs.to_vec(),
        input: found.input,
        function: found.function,
        bound,
        query_columns,
        partition_keys: found.partition_keys,
    }))
}

fn has_window(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Window(_)) || plan.inputs().into_iter().any(has_window)
}

/// What the window node gave.
struct Found {
    keyed: LogicalPlan,
    input: usize,
    function: RankFunction,
    function_name: String,
    partition_keys: usize,
}

/// `plan` rebuilt to pass the hidden columns up from the window: the new plan, the hidden columns as
/// its output names them, and the positions in the *original* plan's schema of the columns that are
/// the rank.
fn rebuild(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
    found: &mut Option<Found>,
    bounds: &mut Vec<i64>,
) -> Result<(LogicalPlan, Vec<Expr>, Vec<usize>), EngineError> {
    let failed = |e: datafusion::error::DataFusionError| unsupported(e.strip_backtrace());
    match plan {
        LogicalPlan::Window(window) => {
            if found.is_some() {
                return Err(unsupported(
                    "one window function per query is supported (a ranking over a ranking is not)",
                ));
            }
            let (rebuilt, hidden, found_here) = rank_window(window, inputs)?;
            *found = Some(found_here);
            Ok((rebuilt, hidden, vec![window.schema.fields().len() - 1]))
        }
        LogicalPlan::Projection(projection) => {
            let (inner, hidden, ranks) = rebuild(&projection.input, inputs, found, bounds)?;
            let input_schema = projection.input.schema();
            let mut out_ranks = Vec::new();
            for (i, expr) in projection.expr.iter().enumerate() {
                if let Expr::Column(column) = strip(expr)
                    && input_schema
                        .index_of_column(column)
                        .is_ok_and(|index| ranks.contains(&index))
                {
                    out_ranks.push(i);
                }
            }
            let mut exprs = projection.expr.clone();
            exprs.extend(hidden.iter().map(|h| h.clone().alias(hidden_name(h))));
            let hidden = hidden
                .iter()
                .map(|h| Expr::Column(Column::new_unqualified(hidden_name(h))))
                .collect();
            let plan = Projection::try_new(exprs, Arc::new(inner))
                .map(LogicalPlan::Projection)
                .map_err(failed)?;
            Ok((plan, hidden, out_ranks))
        }
        LogicalPlan::Filter(filter) => {
            let (inner, hidden, ranks) = rebuild(&filter.input, inputs, found, bounds)?;
            if !ranks.is_empty() {
                let schema = filter.input.schema();
                for conjunct in split_conjunction(&filter.predicate) {
                    if let Some(bound) = rank_bound(conjunct, &|c: &Column| {
                        schema
                            .index_of_column(c)
                            .is_ok_and(|index| ranks.contains(&index))
                    }) {
                        bounds.push(bound);
                    }
                }
            }
            let plan = Filter::try_new(filter.predicate.clone(), Arc::new(inner))
                .map(LogicalPlan::Filter)
                .map_err(failed)?;
            Ok((plan, hidden, ranks))
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let (inner, hidden, ranks) = rebuild(&alias.input, inputs, found, bounds)?;
            let hidden = hidden
                .iter()
                .map(|h| Expr::Column(Column::new(Some(alias.alias.clone()), hidden_name(h))))
                .collect();
            let plan = SubqueryAlias::try_new(Arc::new(inner), alias.alias.clone())
                .map(LogicalPlan::SubqueryAlias)
                .map_err(failed)?;
            Ok((plan, hidden, ranks))
        }
        other => {
            if has_window(other) {
                Err(unsupported(format!(
                    "the operator `{}` over a window function is not supported; only projections, \
                     filters and aliases may be above the ranking",
                    other.display()
                )))
            } else {
                // Below no window: the caller refuses (a window must be reached through
                // projections, filters and aliases).
                Ok((other.clone(), Vec::new(), Vec::new()))
            }
        }
    }
}

fn hidden_name(expr: &Expr) -> String {
    match expr {
        Expr::Column(column) => column.name.clone(),
        Expr::Alias(alias) => alias.name.clone(),
        other => other.schema_name().to_string(),
    }
}

/// The window node rebuilt over its input carrying lineage (ties of `row_number` broken by offset),
/// followed by a projection adding the hidden columns.
fn rank_window(
    window: &Window,
    inputs: &[RegisteredInput],
) -> Result<(LogicalPlan, Vec<Expr>, Found), EngineError> {
    let failed = |e: datafusion::error::DataFusionError| unsupported(e.strip_backtrace());
    let [expr] = window.window_expr.as_slice() else {
        return Err(unsupported(
            "one window function per query is supported; compute further ones in another dataset",
        ));
    };
    let Expr::WindowFunction(function) = strip(expr) else {
        return Err(unsupported(format!(
            "`{expr}` is not a window function call"
        )));
    };
    let WindowFunction { fun, params } = function.as_ref();
    let name = fun.name().to_owned();
    let kind = match name.as_str() {
        "row_number" => RankFunction::RowNumber,
        "rank" => RankFunction::Rank,
        "dense_rank" => RankFunction::DenseRank,
        other => {
            return Err(unsupported(format!(
                "the window function `{other}` is not supported over a stream: a retraction would \
                 change other records' results without a bound on how many; rank with \
                 row_number(), rank() or dense_rank() and keep the top ranks (`WHERE place <= N`), \
                 or aggregate in a tumbling window"
            )));
        }
    };
    if params.order_by.is_empty() {
        return Err(unsupported(format!(
            "`{name}()` needs an ORDER BY in its OVER clause: the rank of a record must follow \
             from its values, not from the order records arrive in"
        )));
    }
    if params.filter.is_some() || params.distinct {
        return Err(unsupported(format!(
            "`{name}()` with FILTER or DISTINCT is not supported"
        )));
    }
    let carried = carry_lineage(&window.input, inputs).map_err(|e| match e {
        EngineError::ChangelogUnsafe { explanation } => {
            unsupported(format!("below the window function: {explanation}"))
        }
        other => other,
    })?;
    let [input] = carried.inputs.as_slice() else {
        return Err(unsupported(
            "the records ranked must come from one input (no UNION ALL below the ranking)",
        ));
    };
    let input = *input;
    let mut params = params.clone();
    if kind == RankFunction::RowNumber {
        params
            .order_by
            .push(carried.offset.clone().sort(true, false));
    }
    let ranked = Expr::WindowFunction(Box::new(WindowFunction {
        fun: fun.clone(),
        params: params.clone(),
    }));
    let original_name = window.schema.field(window.schema.fields().len() - 1).name();
    let carried_plan = Arc::new(carried.plan);
    let new_window = Window::try_new(vec![ranked], Arc::clone(&carried_plan))
        .map(LogicalPlan::Window)
        .map_err(failed)?;
    let window_schema = new_window.schema();
    let last = window_schema.fields().len() - 1;
    let new_column = Expr::Column(Column::from(window_schema.qualified_field(last)));
    // The window's original columns (and the carriers below them), then the rank under its
    // original name, then the hidden columns.
    let mut exprs: Vec<Expr> = (0..last)
        .map(|i| Expr::Column(Column::from(window_schema.qualified_field(i))))
        .collect();
    exprs.push(new_column.clone().alias(original_name));
    let rank = new_column
        .cast_to(&DataType::Int64, window_schema.as_ref())
        .map_err(failed)?
        .alias(RANK_COLUMN);
    let offset = carried
        .offset
        .clone()
        .cast_to(&DataType::Int64, carried_plan.schema().as_ref())
        .map_err(failed)?
        .alias(RANKED_OFFSET_COLUMN);
    let partitions: Vec<Expr> = params
        .partition_by
        .iter()
        .enumerate()
        .map(|(i, key)| key.clone().alias(format!("{PARTITION_PREFIX}{i}")))
        .collect();
    exprs.push(rank.clone());
    exprs.push(offset.clone());
    exprs.extend(partitions.iter().cloned());
    let plan = Projection::try_new(exprs, Arc::new(new_window))
        .map(LogicalPlan::Projection)
        .map_err(failed)?;
    let hidden: Vec<Expr> = std::iter::once(RANK_COLUMN.to_owned())
        .chain(std::iter::once(RANKED_OFFSET_COLUMN.to_owned()))
        .chain((0..partitions.len()).map(|i| format!("{PARTITION_PREFIX}{i}")))
        .map(|name| Expr::Column(Column::new_unqualified(name)))
        .collect();
    // Each passing record's partition keys and offset.
    let mut keyed_exprs = partitions.clone();
    keyed_exprs.push(offset);
    let keyed = Projection::try_new(keyed_exprs, carried_plan)
        .map(LogicalPlan::Projection)
        .map_err(failed)?;
    Ok((
        plan,
        hidden,
        Found {
            keyed,
            input,
            function: kind,
            function_name: name,
            partition_keys: partitions.len(),
        },
    ))
}

/// The largest rank a conjunct keeps, when it bounds the rank from above by a constant.
fn rank_bound(conjunct: &Expr, is_rank: &dyn Fn(&Column) -> bool) -> Option<i64> {
    let rank = |e: &Expr| matches!(strip(e), Expr::Column(c) if is_rank(c));
    match strip(conjunct) {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (op, constant) = if rank(left) {
                (*op, integer(right)?)
            } else if rank(right) {
                (op.swap()?, integer(left)?)
            } else {
                return None;
            };
            match op {
                Operator::LtEq | Operator::Eq => Some(constant),
                Operator::Lt => Some(constant.saturating_sub(1)),
                _ => None,
            }
        }
        Expr::Between(Between {
            expr,
            negated: false,
            high,
            ..
        }) if rank(expr) => integer(high),
        _ => None,
    }
}

fn integer(expr: &Expr) -> Option<i64> {
    match strip(expr) {
        Expr::Literal(value, _) => match value.cast_to(&DataType::Int64).ok()? {
            ScalarValue::Int64(Some(v)) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Cast(cast) => strip(&cast.expr),
        Expr::TryCast(cast) => strip(&cast.expr),
        Expr::Alias(alias) => strip(&alias.expr),
        other => other,
    }
}

/// `plan` (the ranked or the keyed plan) reading `records` as the ranked input.
pub(crate) fn bind(
    query: &TopNQuery,
    plan: &LogicalPlan,
    records: RecordBatch,
) -> Result<LogicalPlan, EngineError> {
    let failed = |e: datafusion::error::DataFusionError| EngineError::sql(None, e);
    let table = MemTable::try_new(records.schema(), vec![vec![records]]).map_err(failed)?;
    let source = provider_as_source(Arc::new(table));
    let name = TableReference::bare(query.inputs[query.input].scan_name.clone());
    let is_bound_scan = |plan: &LogicalPlan| matches!(plan, LogicalPlan::TableScan(scan) if scan.table_name == name);
    let bound = plan
        .clone()
        .transform_up(|node| match node {
            LogicalPlan::TableScan(scan) if scan.table_name == name => {
                LogicalPlanBuilder::scan(name.clone(), Arc::clone(&source), None)?
                    .build()
                    .map(Transformed::yes)
            }
            // The offset filter of the input's view: the bound records are exactly the ones to read.
            LogicalPlan::Filter(filter) if is_bound_scan(&filter.input) => {
                Ok(Transformed::yes(filter.input.as_ref().clone()))
            }
            LogicalPlan::SubqueryAlias(alias) => SubqueryAlias::try_new(alias.input, alias.alias)
                .map(|a| Transformed::yes(LogicalPlan::SubqueryAlias(a))),
            other => Ok(Transformed::no(other)),
        })
        .map_err(failed)?;
    Ok(bound.data)
}
