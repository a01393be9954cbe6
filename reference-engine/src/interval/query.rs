//! Recognising a stream-to-stream interval join in a plan, and binding it to one transaction's records.
//!
//! The supported form: map/filter operators (projections, filters, aliases, further query steps) over one
//! `<input a> [INNER | LEFT | RIGHT] JOIN <input b> ON <condition>`, both sides inputs as they are
//! (aliased or not), where the condition bounds one side's event time by the other's with constant
//! intervals, below and above: `b.event_time BETWEEN a.event_time AND a.event_time + INTERVAL '2' DAY`,
//! or `b.event_time >= a.event_time - INTERVAL '1' HOUR AND b.event_time < a.event_time + ...`. The rest
//! of the condition (keys, other filters) is any condition.
//!
//! A RIGHT join is run as the LEFT join with its sides swapped (columns are referred to by name, so the
//! query's output is the same). Binding replaces both sides' scans with in-memory records and, for the
//! matches of a transaction, turns the join into an inner join of the records where at least one side
//! is new.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, TableReference};
use datafusion::datasource::{MemTable, provider_as_source};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    Between, BinaryExpr, Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder, Operator,
    Projection, SubqueryAlias,
};

use crate::changelog::lineage::input_relation;
use crate::error::EngineError;
use crate::inputs::RegisteredInput;
use crate::window::query::interval_ms;

/// Column added to both sides' records when binding matches: whether the record is new in this
/// transaction.
pub(crate) const NEW_COLUMN: &str = "__weir_new";

fn unsupported(reason: impl Into<String>) -> EngineError {
    EngineError::UnsupportedIntervalJoin {
        reason: reason.into(),
    }
}

/// How the join treats records without a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IntervalJoinKind {
    /// Only matches.
    Inner,
    /// Matches, and every record of the preserved side without a match, with nulls.
    Outer,
}

/// A recognised interval join.
#[derive(Debug, Clone)]
pub(crate) struct IntervalQuery {
    /// The query's plan as DataFusion planned it.
    pub plan: LogicalPlan,
    /// The inputs, the side bound on the right marked `interval_joined`.
    pub inputs: Vec<RegisteredInput>,
    /// The input bound on the left: the preserved side of an outer join, the left side otherwise.
    pub preserved: usize,
    /// The input bound on the right.
    pub other: usize,
    /// Inner, or outer on the preserved side.
    pub kind: IntervalJoinKind,
    /// The other side's event time minus the preserved side's lies in `[lower_ms, upper_ms]` for every
    /// match (the bound the condition states, widened to whole milliseconds).
    pub lower_ms: i64,
    /// See `lower_ms`.
    pub upper_ms: i64,
}

/// The interval join in `plan`: `None` when the plan has no join of two inputs (other operators decide).
pub(crate) fn recognise(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
) -> Result<Option<IntervalQuery>, EngineError> {
    let Some(join) = find_join(plan) else {
        return Ok(None);
    };
    let (Some((left, left_name)), Some((right, right_name))) = (
        input_relation(&join.left, inputs),
        input_relation(&join.right, inputs),
    ) else {
        return Ok(None);
    };
    if inputs[left].temporal.is_some() || inputs[right].temporal.is_some() {
        // A temporal join (declared tables) is the temporal operator's.
        return Ok(None);
    }
    if left == right {
        return Err(unsupported(
            "a stream joined with itself is not supported; join two different inputs",
        ));
    }
    let (preserved, other, kind) = match join.join_type {
        JoinType::Inner => (left, right, IntervalJoinKind::Inner),
        JoinType::Left => (left, right, IntervalJoinKind::Outer),
        JoinType::Right => (right, left, IntervalJoinKind::Outer),
        other => {
            return Err(unsupported(format!(
                "a {other} join of two streams is not supported; use JOIN, LEFT JOIN or RIGHT JOIN"
            )));
        }
    };
    let names = |input: usize| {
        if input == left {
            &left_name
        } else {
            &right_name
        }
    };
    let sides = Sides {
        preserved: (
            names(preserved),
            inputs[preserved].vocab.event_time_column.as_str(),
        ),
        other: (names(other), inputs[other].vocab.event_time_column.as_str()),
    };
    let mut lower: Option<i64> = None;
    let mut upper: Option<i64> = None;
    for conjunct in join.filter.iter().flat_map(split_conjunction) {
        for (low, high) in sides.bounds(conjunct)? {
            if let Some(low) = low {
                lower = Some(lower.map_or(low, |l| l.max(low)));
            }
            if let Some(high) = high {
                upper = Some(upper.map_or(high, |u| u.min(high)));
            }
        }
    }
    let (Some(lower_ms), Some(upper_ms)) = (lower, upper) else {
        let (a, b) = (left_name.table(), right_name.table());
        return Err(unsupported(format!(
            "a join of two streams needs its condition to bound one side's event time by the other's, \
             below and above, so that records can be dropped once no record still to come can match \
             them: e.g. `ON {a}.k = {b}.k AND {b}.{} BETWEEN {a}.{} AND {a}.{} + INTERVAL '1' DAY`; or, \
             to enrich a stream with another input's state as of each record's event time, declare \
             that input in `temporal_tables` with its primary key and join it `FOR SYSTEM_TIME AS OF \
             <stream>.event_time`",
            inputs[right].vocab.event_time_column,
            inputs[left].vocab.event_time_column,
            inputs[left].vocab.event_time_column,
        )));
    };
    if lower_ms > upper_ms {
        return Err(unsupported(format!(
            "the join's time bound is empty (the lower bound {lower_ms} ms is above the upper bound \
             {upper_ms} ms): no records could match"
        )));
    }
    let mut inputs = inputs.to_vec();
    inputs[other].interval_joined = true;
    Ok(Some(IntervalQuery {
        plan: plan.clone(),
        inputs,
        preserved,
        other,
        kind,
        lower_ms,
        upper_ms,
    }))
}

/// The join under the query's map/filter operators, if the query is such operators over a join.
fn find_join(plan: &LogicalPlan) -> Option<&Join> {
    match plan {
        LogicalPlan::Join(join) => Some(join),
        LogicalPlan::Projection(p) => find_join(&p.input),
        LogicalPlan::Filter(f) => find_join(&f.input),
        LogicalPlan::SubqueryAlias(a) => find_join(&a.input),
        _ => None,
    }
}

/// The relation names and event time columns of both sides.
struct Sides<'a> {
    preserved: (&'a TableReference, &'a str),
    other: (&'a TableReference, &'a str),
}

/// A lower and an upper bound on `other - preserved`, in milliseconds, each when stated.
type Bound = (Option<i64>, Option<i64>);

/// Which side's event time a term reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Preserved,
    Other,
}

impl Sides<'_> {
    /// `side.event_time + shift` when `expr` is a side's event time plus or minus constant intervals.
    fn term(&self, expr: &Expr) -> Result<Option<(Side, i64)>, EngineError> {
        match strip(expr) {
            Expr::Column(column) => {
                let is = |(name, time): (&TableReference, &str)| {
                    column.name == time && column.relation.as_ref() == Some(name)
                };
                Ok(if is(self.preserved) {
                    Some((Side::Preserved, 0))
                } else if is(self.other) {
                    Some((Side::Other, 0))
                } else {
                    None
                })
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(op, Operator::Plus | Operator::Minus) =>
            {
                let Some((side, shift)) = self.term(left)? else {
                    return Ok(None);
                };
                let Some(ms) = interval_ms(right)? else {
                    return Ok(None);
                };
                let ms = if *op == Operator::Minus { -ms } else { ms };
                Ok(Some((side, shift.saturating_add(ms))))
            }
            _ => Ok(None),
        }
    }

    /// The bounds (lower, upper) on `other - preserved` a conjunct states, if any.
    fn bounds(&self, conjunct: &Expr) -> Result<Vec<Bound>, EngineError> {
        match strip(conjunct) {
            Expr::Between(Between {
                expr,
                negated: false,
                low,
                high,
            }) => Ok(vec![
                self.comparison(expr, Operator::GtEq, low)?,
                self.comparison(expr, Operator::LtEq, high)?,
            ]),
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(
                    op,
                    Operator::Gt | Operator::GtEq | Operator::Lt | Operator::LtEq
                ) =>
            {
                Ok(vec![self.comparison(left, *op, right)?])
            }
            _ => Ok(Vec::new()),
        }
    }

    /// `x op y` as a bound on `other - preserved`.
    fn comparison(&self, x: &Expr, op: Operator, y: &Expr) -> Result<Bound, EngineError> {
        let (Some((x_side, x_shift)), Some((y_side, y_shift))) = (self.term(x)?, self.term(y)?)
        else {
            return Ok((None, None));
        };
        // other + a  op  preserved + b   <=>   other - preserved  op  b - a
        let (bound, op) = match (x_side, y_side) {
            (Side::Other, Side::Preserved) => (y_shift.saturating_sub(x_shift), op),
            (Side::Preserved, Side::Other) => {
                (x_shift.saturating_sub(y_shift), op.swap().unwrap_or(op))
            }
            _ => return Ok((None, None)),
        };
        Ok(match op {
            // Strict bounds widen to the non-strict ones: they only decide how long records are kept.
            Operator::Gt | Operator::GtEq => (Some(bound), None),
            Operator::Lt | Operator::LtEq => (None, Some(bound)),
            _ => (None, None),
        })
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

/// What a bound plan computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    /// The matches with at least one new record (both sides carry [`NEW_COLUMN`]): an inner join.
    NewMatches,
    /// The preserved side's records joined with no records of the other side: each with nulls.
    Unmatched,
}

/// `query`'s plan reading `preserved` and `other` records, the preserved side on the left.
pub(crate) fn bind(
    query: &IntervalQuery,
    preserved: RecordBatch,
    other: RecordBatch,
    binding: Binding,
) -> Result<LogicalPlan, EngineError> {
    let failed = |e: datafusion::error::DataFusionError| EngineError::sql(None, e);
    let memory = |batch: RecordBatch| -> Result<_, EngineError> {
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]]).map_err(failed)?;
        Ok(provider_as_source(Arc::new(table)))
    };
    let scan_of = |input: usize| TableReference::bare(query.inputs[input].scan_name.clone());
    let sources = [
        (scan_of(query.preserved), memory(preserved)?),
        (scan_of(query.other), memory(other)?),
    ];
    let is_bound_scan = |plan: &LogicalPlan| matches!(plan, LogicalPlan::TableScan(scan) if sources.iter().any(|(name, _)| *name == scan.table_name));
    let inputs = &query.inputs;
    let bound = query
        .plan
        .clone()
        .transform_up(|node| match node {
            LogicalPlan::TableScan(scan) => {
                match sources.iter().find(|(name, _)| *name == scan.table_name) {
                    Some((name, source)) => {
                        LogicalPlanBuilder::scan(name.clone(), Arc::clone(source), None)?
                            .build()
                            .map(Transformed::yes)
                    }
                    None => Ok(Transformed::no(LogicalPlan::TableScan(scan))),
                }
            }
            // The offset filter of an input's view: the bound records are exactly the ones to read.
            LogicalPlan::Filter(filter) if is_bound_scan(&filter.input) => {
                Ok(Transformed::yes(filter.input.as_ref().clone()))
            }
            LogicalPlan::SubqueryAlias(alias) => SubqueryAlias::try_new(alias.input, alias.alias)
                .map(|a| Transformed::yes(LogicalPlan::SubqueryAlias(a))),
            LogicalPlan::Join(join) => {
                let (Some((l, l_name)), Some((_, r_name))) = (
                    input_relation(&join.left, inputs),
                    input_relation(&join.right, inputs),
                ) else {
                    return Ok(Transformed::no(LogicalPlan::Join(join)));
                };
                // The preserved side goes left.
                let swap = l != query.preserved;
                let (left, right, on, preserved_name, other_name) = if swap {
                    let on = join
                        .on
                        .iter()
                        .map(|(a, b)| (b.clone(), a.clone()))
                        .collect();
                    (join.right, join.left, on, r_name, l_name)
                } else {
                    (join.left, join.right, join.on, l_name, r_name)
                };
                let (join_type, filter) = match binding {
                    Binding::NewMatches => {
                        let new = |name: TableReference| {
                            Expr::Column(Column::new(Some(name), NEW_COLUMN))
                        };
                        let either = new(preserved_name).or(new(other_name));
                        (
                            JoinType::Inner,
                            Some(match join.filter {
                                Some(filter) => filter.and(either),
                                None => either,
                            }),
                        )
                    }
                    Binding::Unmatched => (JoinType::Left, join.filter),
                };
                let restored: Vec<Expr> = join
                    .schema
                    .columns()
                    .into_iter()
                    .map(Expr::Column)
                    .collect();
                let joined = Join::try_new(
                    left,
                    right,
                    on,
                    filter,
                    join_type,
                    join.join_constraint,
                    join.null_equality,
                    join.null_aware,
                )?;
                Projection::try_new(restored, Arc::new(LogicalPlan::Join(joined)))
                    .map(|p| Transformed::yes(LogicalPlan::Projection(p)))
            }
            other => Ok(Transformed::no(other)),
        })
        .map_err(failed)?;
    Ok(bound.data)
}

/// The preserved side's offset of each match a bound [`Binding::NewMatches`] plan finds (once per
/// match): the join alone (before any filter of the query above it), its preserved offset column.
pub(crate) fn matched_offsets(
    bound: &LogicalPlan,
    query: &IntervalQuery,
) -> Result<Option<LogicalPlan>, EngineError> {
    let Some(join) = find_bound_join(bound) else {
        return Ok(None);
    };
    let input = &query.inputs[query.preserved];
    let Some((_, name)) = input_relation(&join.left, &query.inputs) else {
        return Ok(None);
    };
    let offset = Expr::Column(Column::new(Some(name), input.vocab.offset_column.clone()));
    LogicalPlanBuilder::from(LogicalPlan::Join(join.clone()))
        .project(vec![offset])
        .and_then(LogicalPlanBuilder::build)
        .map(Some)
        .map_err(|e| EngineError::sql(None, e))
}

fn find_bound_join(plan: &LogicalPlan) -> Option<&Join> {
    match plan {
        LogicalPlan::Join(join) => Some(join),
        other => other.inputs().into_iter().find_map(find_bound_join),
    }
}
