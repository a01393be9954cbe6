//! Carrying each input record's operation type and offset through a map/filter query.
//!
//! A map/filter query (projections, filters and aliases over one input) turns each input record into at
//! most one output record. The engine rewrites such a plan so that every projection also passes on two
//! hidden columns, [`OP_CARRIER`] and [`OFFSET_CARRIER`]: the operation type and the offset of the input
//! record behind each output record. That is what lets retractions and corrections flow through the
//! query without the user selecting `op`, and what answers provenance questions.
//!
//! Any other operator is refused with an explanation: it would merge, duplicate or reorder records, and
//! a changelog cannot go through it unchanged.

use std::sync::Arc;

use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Column, TableReference};
use datafusion::logical_expr::{Expr, Filter, LogicalPlan, Projection, SubqueryAlias};

use crate::error::EngineError;
use crate::inputs::RegisteredInput;

/// Hidden column carrying the input record's operation type.
pub(crate) const OP_CARRIER: &str = "__weir_op";
/// Hidden column carrying the input record's offset.
pub(crate) const OFFSET_CARRIER: &str = "__weir_offset";
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
    /// Index of the one input the records come from.
    pub input: usize,
}

/// Rewrites a map/filter plan to carry lineage, or explains why the plan is not one.
pub(crate) fn carry_lineage(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
) -> Result<Carried, EngineError> {
    carry(plan, inputs).map_err(|explanation| EngineError::ChangelogUnsafe { explanation })
}

fn carry(plan: &LogicalPlan, inputs: &[RegisteredInput]) -> Result<Carried, String> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let Some(input) = inputs
                .iter()
                .find(|input| scan.table_name == TableReference::bare(input.scan_name.clone()))
            else {
                return Err(format!("it reads `{}`, which is not an input", scan.table_name));
            };
            Ok(Carried {
                plan: plan.clone(),
                op: input.operation_type_expr(),
                offset: Expr::Column(input.offset_column()),
                input: input.index,
            })
        }
        LogicalPlan::Filter(filter) => {
            refuse_subqueries(std::slice::from_ref(&filter.predicate))?;
            let inner = carry(&filter.input, inputs)?;
            let plan = Filter::try_new(filter.predicate.clone(), Arc::new(inner.plan))
                .map(LogicalPlan::Filter)
                .map_err(|e| e.strip_backtrace())?;
            Ok(Carried { plan, ..inner })
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let inner = carry(&alias.input, inputs)?;
            let plan = SubqueryAlias::try_new(Arc::new(inner.plan), alias.alias.clone())
                .map(LogicalPlan::SubqueryAlias)
                .map_err(|e| e.strip_backtrace())?;
            Ok(Carried {
                plan,
                op: requalify(inner.op, &alias.alias),
                offset: requalify(inner.offset, &alias.alias),
                input: inner.input,
            })
        }
        LogicalPlan::Projection(projection) => {
            refuse_subqueries(&projection.expr)?;
            let inner = carry(&projection.input, inputs)?;
            let mut exprs = projection.expr.clone();
            exprs.push(inner.op.alias(OP_CARRIER));
            exprs.push(inner.offset.alias(OFFSET_CARRIER));
            let plan = Projection::try_new(exprs, Arc::new(inner.plan))
                .map(LogicalPlan::Projection)
                .map_err(|e| e.strip_backtrace())?;
            Ok(Carried {
                plan,
                op: Expr::Column(Column::new_unqualified(OP_CARRIER)),
                offset: Expr::Column(Column::new_unqualified(OFFSET_CARRIER)),
                input: inner.input,
            })
        }
        LogicalPlan::Aggregate(_) => Err("it aggregates records, and a retraction or correction of an \
             aggregated record would need the previous aggregate. Aggregate with the stateful tumbling-window \
             form instead: `SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, <keys>, <count/sum/avg/min/max>(...) \
             FROM <input> GROUP BY 1, <keys>`"
            .to_owned()),
        LogicalPlan::Distinct(_) => Err("DISTINCT merges records, so a later retraction of one of them \
             could not be applied; remove DISTINCT"
            .to_owned()),
        LogicalPlan::Window(_) => Err("window functions (OVER ...) compute each record from other records \
             of the same transaction, so a retraction would change other output records; use the \
             tumbling-window aggregation form instead"
            .to_owned()),
        LogicalPlan::Join(_) => Err("it joins records, and the engine keeps no state of earlier records \
             to join retractions and corrections against; transform each input separately"
            .to_owned()),
        LogicalPlan::Union(_) => Err("UNION interleaves records of several inputs, so offsets and \
             correction pairs would lose their order; transform each input separately"
            .to_owned()),
        LogicalPlan::Sort(_) => Err("ORDER BY reorders the changelog (a retraction could move before the \
             record it retracts); output records always follow input offset order, so remove ORDER BY"
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
