//! Carrying each input record's operation type and offset through a map/filter query.
//!
//! A map/filter query (projections, filters and aliases over inputs, and `UNION ALL` of such queries)
//! turns each input record into at most one output record. The engine rewrites such a plan so that
//! every projection also passes on three hidden columns, [`OP_CARRIER`], [`OFFSET_CARRIER`] and
//! [`INPUT_CARRIER`]: the operation type, offset and input of the record behind each output record.
//! That is what lets retractions and corrections flow through the query without the user selecting
//! `op`, and what answers provenance questions. Output records follow (input, offset) order: the
//! branches of a `UNION ALL` one after the other, each in offset order.
//!
//! One join goes through: a stream joined with a temporal table (`crate::temporal`), where the stream
//! (left) side carries the lineage and the table adds columns. Any other operator is refused with an
//! explanation: it would merge, duplicate or reorder records, and a changelog cannot go through it
//! unchanged.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Column, TableReference};
use datafusion::logical_expr::{
    Expr, ExprSchemable, Filter, Join, JoinType, LogicalPlan, LogicalPlanBuilder, Projection,
    SubqueryAlias, lit,
};

use crate::error::EngineError;
use crate::inputs::RegisteredInput;

/// Hidden column carrying the input record's operation type.
pub(crate) const OP_CARRIER: &str = "__weir_op";
/// Hidden column carrying the input record's offset.
pub(crate) const OFFSET_CARRIER: &str = "__weir_offset";
/// Hidden column carrying the index of the input the record comes from.
pub(crate) const INPUT_CARRIER: &str = "__weir_input";
/// Hidden column carrying the input record's event time (temporal joins).
pub(crate) const TIME_CARRIER: &str = "__weir_time";
/// Prefix of every column name the engine reserves.
pub(crate) const RESERVED_PREFIX: &str = "__weir_";

/// A plan rewritten to carry the input record's operation type and offset.
#[derive(Debug, Clone)]
pub(crate) struct Carried {
    /// The rewritten plan: the original columns, then (where a projection added them) the carriers.
    pub plan: LogicalPlan,
    /// Expression of the input operation type in `plan`'s schema.
    pub op: Expr,
    /// Expression of the input offset in `plan`'s schema.
    pub offset: Expr,
    /// Expression of the input index (Int32) in `plan`'s schema.
    pub input: Expr,
    /// Indices of the inputs records come from, in output order (one unless there is a UNION ALL).
    pub inputs: Vec<usize>,
    /// Expression of the input record's event time, when carried ([`carry_lineage_with_time`]).
    pub time: Option<Expr>,
}

impl Carried {
    /// The carrier expressions, aliased to their hidden names: operation type, offset, input, and the
    /// event time when it is carried.
    pub(crate) fn carrier_exprs(&self) -> Vec<Expr> {
        let mut exprs = vec![
            self.op.clone().alias(OP_CARRIER),
            self.offset.clone().alias(OFFSET_CARRIER),
            self.input.clone().alias(INPUT_CARRIER),
        ];
        if let Some(time) = &self.time {
            exprs.push(time.clone().alias(TIME_CARRIER));
        }
        exprs
    }

    /// The output order: input offset, preceded by the input when records come from several, or by
    /// the event time when it is carried.
    pub(crate) fn order(&self) -> Vec<datafusion::logical_expr::SortExpr> {
        let offset = Expr::Column(Column::new_unqualified(OFFSET_CARRIER)).sort(true, false);
        if self.time.is_some() {
            vec![
                Expr::Column(Column::new_unqualified(TIME_CARRIER)).sort(true, true),
                offset,
            ]
        } else if self.inputs.len() > 1 {
            vec![
                Expr::Column(Column::new_unqualified(INPUT_CARRIER)).sort(true, false),
                offset,
            ]
        } else {
            vec![offset]
        }
    }
}

/// Rewrites a map/filter plan to carry lineage, or explains why the plan is not one.
pub(crate) fn carry_lineage(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
) -> Result<Carried, EngineError> {
    carry(plan, inputs, false).map_err(|explanation| EngineError::ChangelogUnsafe { explanation })
}

/// [`carry_lineage`], also carrying the stream record's event time (a temporal join's output is ordered
/// by it).
pub(crate) fn carry_lineage_with_time(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
) -> Result<Carried, EngineError> {
    carry(plan, inputs, true).map_err(|explanation| EngineError::ChangelogUnsafe { explanation })
}

/// The carrier columns as a projection outputs them.
fn carriers() -> Carried {
    let column = |name: &str| Expr::Column(Column::new_unqualified(name));
    Carried {
        plan: LogicalPlan::EmptyRelation(datafusion::logical_expr::EmptyRelation {
            produce_one_row: false,
            schema: Arc::new(datafusion::common::DFSchema::empty()),
        }),
        op: column(OP_CARRIER),
        offset: column(OFFSET_CARRIER),
        input: column(INPUT_CARRIER),
        inputs: Vec::new(),
        time: None,
    }
}

/// The carriers as a projection outputs them, with the event time when `inner` carries it.
fn projected(inner: &Carried) -> Carried {
    Carried {
        time: inner
            .time
            .as_ref()
            .map(|_| Expr::Column(Column::new_unqualified(TIME_CARRIER))),
        ..carriers()
    }
}

fn carry(
    plan: &LogicalPlan,
    registered: &[RegisteredInput],
    time: bool,
) -> Result<Carried, String> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let Some(input) = registered
                .iter()
                .find(|input| scan.table_name == TableReference::bare(input.scan_name.clone()))
            else {
                return Err(format!("it reads `{}`, which is not an input", scan.table_name));
            };
            if input.temporal.is_some() {
                return Err(format!(
                    "it reads the temporal table `{}` as a stream of records; join it as of each \
                     stream record's event time instead: `JOIN {} FOR SYSTEM_TIME AS OF <stream>.{} AS t ON ...`",
                    input.query_alias, input.query_alias, input.vocab.event_time_column
                ));
            }
            Ok(Carried {
                plan: plan.clone(),
                op: input.operation_type_expr(),
                offset: Expr::Column(input.offset_column()),
                input: lit(input.index as i32),
                inputs: vec![input.index],
                time: time.then(|| Expr::Column(input.event_time_column())),
            })
        }
        LogicalPlan::Filter(filter) => {
            refuse_subqueries(std::slice::from_ref(&filter.predicate))?;
            let inner = carry(&filter.input, registered, time)?;
            let plan = Filter::try_new(filter.predicate.clone(), Arc::new(inner.plan))
                .map(LogicalPlan::Filter)
                .map_err(|e| e.strip_backtrace())?;
            Ok(Carried { plan, ..inner })
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let inner = carry(&alias.input, registered, time)?;
            let plan = SubqueryAlias::try_new(Arc::new(inner.plan), alias.alias.clone())
                .map(LogicalPlan::SubqueryAlias)
                .map_err(|e| e.strip_backtrace())?;
            Ok(Carried {
                plan,
                op: requalify(inner.op, &alias.alias),
                offset: requalify(inner.offset, &alias.alias),
                input: requalify(inner.input, &alias.alias),
                inputs: inner.inputs,
                time: inner.time.map(|t| requalify(t, &alias.alias)),
            })
        }
        LogicalPlan::Projection(projection) => {
            refuse_subqueries(&projection.expr)?;
            let inner = carry(&projection.input, registered, time)?;
            let mut exprs = projection.expr.clone();
            exprs.extend(inner.carrier_exprs());
            let carried = projected(&inner);
            let plan = Projection::try_new(exprs, Arc::new(inner.plan))
                .map(LogicalPlan::Projection)
                .map_err(|e| e.strip_backtrace())?;
            Ok(Carried {
                plan,
                inputs: inner.inputs,
                ..carried
            })
        }
        LogicalPlan::Union(union) => {
            // Each branch carries its own lineage, with uniform carrier types.
            let mut branches = Vec::with_capacity(union.inputs.len());
            let mut inputs = Vec::new();
            for branch in &union.inputs {
                let inner = carry(branch, registered, time)?;
                if inner.time.is_some() {
                    return Err("UNION ALL is not supported in a temporal join query; union the \
                         inputs in an earlier dataset"
                        .to_owned());
                }
                let schema = inner.plan.schema();
                let mut exprs: Vec<Expr> = schema
                    .iter()
                    .take(branch.schema().fields().len())
                    .map(|field| Expr::Column(Column::from(field)))
                    .collect();
                let cast = |expr: &Expr, to: &DataType| -> Result<Expr, String> {
                    expr.clone().cast_to(to, schema.as_ref()).map_err(|e| e.strip_backtrace())
                };
                exprs.push(cast(&inner.op, &DataType::Int32)?.alias(OP_CARRIER));
                exprs.push(cast(&inner.offset, &DataType::Int64)?.alias(OFFSET_CARRIER));
                exprs.push(cast(&inner.input, &DataType::Int32)?.alias(INPUT_CARRIER));
                branches.push(
                    LogicalPlanBuilder::from(inner.plan)
                        .project(exprs)
                        .and_then(LogicalPlanBuilder::build)
                        .map_err(|e| e.strip_backtrace())?,
                );
                for input in inner.inputs {
                    if !inputs.contains(&input) {
                        inputs.push(input);
                    }
                }
            }
            let mut branches = branches.into_iter();
            let Some(first) = branches.next() else {
                return Err("an empty UNION reads no input".to_owned());
            };
            let mut builder = LogicalPlanBuilder::from(first);
            for branch in branches {
                builder = builder.union(branch).map_err(|e| e.strip_backtrace())?;
            }
            let plan = builder.build().map_err(|e| e.strip_backtrace())?;
            Ok(Carried {
                plan,
                inputs,
                ..carriers()
            })
        }
        LogicalPlan::Aggregate(_) => Err("it aggregates records, and a retraction or correction of an \
             aggregated record would need the previous aggregate. Aggregate with the stateful tumbling-window \
             form instead: `SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, <keys>, <count/sum/avg/min/max>(...) \
             FROM <input> GROUP BY 1, <keys>`. Steps over a window's output read it as a stream when the \
             window is a query step of its own, with an alias"
            .to_owned()),
        LogicalPlan::Distinct(_) => Err("DISTINCT (or UNION without ALL) merges records, so a later \
             retraction of one of them could not be applied; remove DISTINCT or use UNION ALL"
            .to_owned()),
        LogicalPlan::Window(_) => Err("window functions (OVER ...) compute each record from other records, \
             so a retraction would change other output records; rank with row_number(), rank() or \
             dense_rank() under a bound on the rank (a top-N), or aggregate in a tumbling window"
            .to_owned()),
        LogicalPlan::Join(join) => {
            if !is_temporal_join(join, registered) {
                return Err("it joins two streams of records where the engine cannot keep their state: \
                     a join of two streams is supported at the top of a query (under projections and \
                     filters) when bounded in event time (an interval join: `ON a.k = b.k AND \
                     b.event_time BETWEEN a.event_time AND a.event_time + INTERVAL '1' DAY`); a window \
                     or a join over a join's output reads it as a stream when the join is a query \
                     step of its own, with an alias. To enrich a stream with another \
                     input's state as of each record's event time, declare that input in \
                     `temporal_tables` with its primary key and join it `FOR SYSTEM_TIME AS OF \
                     <stream>.event_time`"
                    .to_owned());
            }
            // The stream (left) side carries lineage; the table side adds columns to each record.
            let inner = carry(&join.left, registered, time)?;
            let plan = Join::try_new(
                Arc::new(inner.plan),
                Arc::clone(&join.right),
                join.on.clone(),
                join.filter.clone(),
                join.join_type,
                join.join_constraint,
                join.null_equality,
                join.null_aware,
            )
            .map(LogicalPlan::Join)
            .map_err(|e| e.strip_backtrace())?;
            Ok(Carried { plan, ..inner })
        }
        LogicalPlan::Sort(_) => Err("ORDER BY here has no meaning for a changelog (SQL does not keep a \
             subquery's order); order the output with ORDER BY at the end of the last step"
            .to_owned()),
        LogicalPlan::Limit(_) => Err("LIMIT/OFFSET keeps a number of records that depends on how the input \
             is split into transactions; filter with WHERE instead"
            .to_owned()),
        LogicalPlan::EmptyRelation(_) | LogicalPlan::Values(_) => {
            Err("it reads no input: every output record must come from an input record".to_owned())
        }
        LogicalPlan::Unnest(_) => Err("UNNEST turns one record into several, so a retraction of the \
             record could not name the records it produced"
            .to_owned()),
        other => Err(format!(
            "the operator `{}` is not a projection or a filter",
            other.display()
        )),
    }
}

/// Whether `join` joins a temporal table (its right side) as of the left side's records: an inner or
/// left join whose right side is a temporal table input, as `temporal::query` recognised it.
///
/// A bound stream-to-stream interval join (`interval::query`) is carried the same way: its right side
/// is marked `interval_joined`.
fn is_temporal_join(join: &Join, registered: &[RegisteredInput]) -> bool {
    matches!(join.join_type, JoinType::Inner | JoinType::Left)
        && input_relation(&join.right, registered).is_some_and(|(input, _)| {
            registered[input].temporal.is_some() || registered[input].interval_joined
        })
}

/// The input a relation reads when it is an input as registered (its view: aliases over the scan,
/// with the offset filter), and the name it goes by (its outermost alias).
pub(crate) fn input_relation(
    plan: &LogicalPlan,
    registered: &[RegisteredInput],
) -> Option<(usize, TableReference)> {
    fn scan(plan: &LogicalPlan, registered: &[RegisteredInput]) -> Option<usize> {
        match plan {
            LogicalPlan::SubqueryAlias(alias) => scan(&alias.input, registered),
            LogicalPlan::Filter(filter)
                if matches!(filter.input.as_ref(), LogicalPlan::TableScan(_)) =>
            {
                scan(&filter.input, registered)
            }
            LogicalPlan::TableScan(table) => registered.iter().position(|input| {
                table.table_name == TableReference::bare(input.scan_name.clone())
            }),
            _ => None,
        }
    }
    let LogicalPlan::SubqueryAlias(alias) = plan else {
        return None;
    };
    scan(plan, registered).map(|input| (input, alias.alias.clone()))
}

/// Subqueries read other relations; a changelog cannot flow through them.
fn refuse_subqueries(exprs: &[Expr]) -> Result<(), String> {
    for expr in exprs {
        let has_subquery = expr
            .exists(|e| {
                Ok(matches!(
                    e,
                    Expr::ScalarSubquery(_) | Expr::InSubquery(_) | Expr::Exists(_)
                ))
            })
            .unwrap_or(true);
        if has_subquery {
            return Err(format!(
                "the expression `{expr}` uses a subquery, which reads records of another relation \
                 whose retractions would not reach this output"
            ));
        }
    }
    Ok(())
}

/// A carrier column seen through `SELECT ... FROM (...) AS alias`.
fn requalify(expr: Expr, alias: &TableReference) -> Expr {
    match expr {
        Expr::Column(column) => Expr::Column(Column::new(Some(alias.clone()), column.name)),
        other => other,
    }
}
