//! Recognising a temporal join in a plan, and binding it to one transaction's state.
//!
//! The supported form: map/filter operators (projections, filters, aliases) over a chain of joins
//! `<stream> [LEFT] JOIN <table> FOR SYSTEM_TIME AS OF <stream>.<event time> [AS alias] ON ...`, where
//! the stream and each table are inputs as they are (possibly aliased) and each table is declared in
//! `temporal_tables`. Binding replaces the stream's scan with the records whose time has come and each
//! table's scan with its versions, and adds to each join's condition that the table row holds at the
//! stream record's event time.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, TableReference};
use datafusion::datasource::{MemTable, provider_as_source};
use datafusion::logical_expr::{
    Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder, Projection, SubqueryAlias, cast,
};

use super::state::{VALID_FROM, VALID_TO};
use super::syntax::TemporalReference;
use crate::changelog::lineage::input_relation;
use crate::error::EngineError;
use crate::inputs::RegisteredInput;
use crate::request::TransformSql;

fn unsupported(reason: impl Into<String>) -> EngineError {
    EngineError::UnsupportedTemporalJoin {
        reason: reason.into(),
    }
}

/// A recognised temporal join query.
#[derive(Debug, Clone)]
pub(crate) struct TemporalQuery {
    /// The query's plan as DataFusion planned it (temporal clauses taken out).
    pub plan: LogicalPlan,
    /// The inputs, with the temporal tables marked.
    pub inputs: Vec<RegisteredInput>,
    /// The stream input.
    pub stream: usize,
    /// The name the stream goes by in the joins (the qualifier of its event time).
    pub stream_relation: TableReference,
    /// The temporal table inputs joined, each once, in input order.
    pub tables: Vec<usize>,
}

/// The inputs with the transform's temporal tables marked (their primary key set).
pub(crate) fn mark_temporal(
    inputs: &[RegisteredInput],
    sql: &TransformSql,
) -> Result<Vec<RegisteredInput>, EngineError> {
    let mut marked = inputs.to_vec();
    for table in sql.temporal_tables.iter().flatten() {
        let Some(input) = marked.iter_mut().find(|i| i.query_alias == table.name) else {
            let names: Vec<&str> = inputs.iter().map(|i| i.query_alias.as_str()).collect();
            return Err(unsupported(format!(
                "the temporal table `{}` is not an input of this transform (its inputs: {})",
                table.name,
                names.join(", ")
            )));
        };
        if input.temporal.is_some() {
            return Err(unsupported(format!(
                "the temporal table `{}` is declared twice",
                table.name
            )));
        }
        if table.primary_key.is_empty() {
            return Err(unsupported(format!(
                "the temporal table `{}` declares no primary key",
                table.name
            )));
        }
        input.temporal = Some(table.primary_key.clone());
    }
    Ok(marked)
}

/// The temporal join in `plan`, `None` when the query has no `FOR SYSTEM_TIME AS OF`.
pub(crate) fn recognise(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
    references: &[TemporalReference],
) -> Result<Option<TemporalQuery>, EngineError> {
    if references.is_empty() {
        return Ok(None);
    }
    for reference in references {
        match inputs.iter().find(|i| i.query_alias == reference.table) {
            None => {
                return Err(unsupported(format!(
                    "`{}` is joined FOR SYSTEM_TIME AS OF but is not an input of this transform",
                    reference.table
                )));
            }
            Some(input) if input.temporal.is_none() => {
                return Err(unsupported(format!(
                    "`{0}` is joined FOR SYSTEM_TIME AS OF but is not declared in `temporal_tables`: \
                     add `{{name: {0}, primaryKey: [<key columns>]}}`",
                    reference.table
                )));
            }
            Some(_) => {}
        }
    }
    let mut walk = Walk {
        inputs,
        references,
        matched: vec![false; references.len()],
        stream: None,
        tables: Vec::new(),
    };
    walk.visit(plan)?;
    if let Some(position) = walk.matched.iter().position(|m| !m) {
        let reference = &references[position];
        return Err(unsupported(format!(
            "`{}` FOR SYSTEM_TIME AS OF is not the right side of a join of a stream input: write \
             `FROM <stream> JOIN {} FOR SYSTEM_TIME AS OF <stream>.event_time AS {} ON ...`",
            reference.table,
            reference.table,
            reference.relation_name()
        )));
    }
    let Some((stream, stream_relation)) = walk.stream else {
        return Err(unsupported("the query joins no temporal table"));
    };
    let mut tables = walk.tables;
    tables.sort_unstable();
    tables.dedup();
    Ok(Some(TemporalQuery {
        plan: plan.clone(),
        inputs: inputs.to_vec(),
        stream,
        stream_relation,
        tables,
    }))
}

struct Walk<'a> {
    inputs: &'a [RegisteredInput],
    references: &'a [TemporalReference],
    matched: Vec<bool>,
    stream: Option<(usize, TableReference)>,
    tables: Vec<usize>,
}

impl Walk<'_> {
    fn visit(&mut self, plan: &LogicalPlan) -> Result<(), EngineError> {
        if let LogicalPlan::Join(join) = plan {
            self.join(join)?;
        }
        for input in plan.inputs() {
            self.visit(input)?;
        }
        Ok(())
    }

    fn join(&mut self, join: &Join) -> Result<(), EngineError> {
        let Some((table, name)) = input_relation(&join.right, self.inputs)
            .filter(|(t, _)| self.inputs[*t].temporal.is_some())
        else {
            return Ok(());
        };
        let input = &self.inputs[table];
        let Some(position) = self
            .references
            .iter()
            .position(|r| r.table == input.query_alias && r.relation_name() == name.table())
        else {
            return Err(unsupported(format!(
                "the temporal table `{}` is joined without FOR SYSTEM_TIME AS OF: write `JOIN {} FOR \
                 SYSTEM_TIME AS OF <stream>.event_time AS {} ON ...`",
                input.query_alias,
                input.query_alias,
                name.table()
            )));
        };
        if !matches!(join.join_type, JoinType::Inner | JoinType::Left) {
            return Err(unsupported(format!(
                "the temporal table `{}` is joined with a {} join; only JOIN (inner) and LEFT JOIN \
                 are supported, with the stream on the left",
                input.query_alias, join.join_type
            )));
        }
        let Some((stream, relation)) = leftmost(&join.left, self.inputs) else {
            return Err(unsupported(format!(
                "the stream joined with `{}` must be an input as it is (filter it in WHERE, compute \
                 in the SELECT list)",
                input.query_alias
            )));
        };
        let stream_input = &self.inputs[stream];
        if stream_input.temporal.is_some() {
            return Err(unsupported(format!(
                "`{}` is joined with the temporal table `{}`, but is itself a temporal table; the left \
                 side of a temporal join is a stream",
                stream_input.query_alias, input.query_alias
            )));
        }
        let event_time = &stream_input.vocab.event_time_column;
        let as_of = &self.references[position].as_of;
        let on_event_time = match as_of.as_slice() {
            [column] => column == event_time,
            [qualifier, column] => column == event_time && qualifier == relation.table(),
            _ => false,
        };
        if !on_event_time {
            return Err(unsupported(format!(
                "`{} FOR SYSTEM_TIME AS OF {}` must be as of the stream's event time: \
                 `FOR SYSTEM_TIME AS OF {}.{event_time}`",
                input.query_alias,
                as_of.join("."),
                relation.table()
            )));
        }
        if let Some((other, _)) = &self.stream
            && *other != stream
        {
            return Err(unsupported(
                "the temporal joins of a query must all join the same stream",
            ));
        }
        self.stream = Some((stream, relation));
        self.tables.push(table);
        self.matched[position] = true;
        Ok(())
    }
}

/// The input relation at the left end of a chain of joins.
fn leftmost(plan: &LogicalPlan, inputs: &[RegisteredInput]) -> Option<(usize, TableReference)> {
    match plan {
        LogicalPlan::Join(join) => leftmost(&join.left, inputs),
        other => input_relation(other, inputs),
    }
}

/// `query`'s plan reading `ready` stream records and the tables' `versions` (by input index).
pub(crate) fn bind(
    query: &TemporalQuery,
    ready: RecordBatch,
    versions: Vec<(usize, RecordBatch)>,
) -> Result<LogicalPlan, EngineError> {
    let failed = |e: datafusion::error::DataFusionError| EngineError::sql(None, e);
    let memory = |batch: RecordBatch| -> Result<_, EngineError> {
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]]).map_err(failed)?;
        Ok(provider_as_source(Arc::new(table)))
    };
    let scan_of = |input: usize| TableReference::bare(query.inputs[input].scan_name.clone());
    let mut sources = vec![(scan_of(query.stream), memory(ready)?)];
    for (input, batch) in versions {
        sources.push((scan_of(input), memory(batch)?));
    }
    let is_bound_scan = |plan: &LogicalPlan| matches!(plan, LogicalPlan::TableScan(scan) if sources.iter().any(|(name, _)| *name == scan.table_name));
    let as_of = cast(
        Expr::Column(Column::new(
            Some(query.stream_relation.clone()),
            query.inputs[query.stream].vocab.event_time_column.clone(),
        )),
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
    );
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
                let temporal = input_relation(&join.right, &query.inputs)
                    .filter(|(t, _)| query.inputs[*t].temporal.is_some());
                let Some((_, relation)) = temporal else {
                    return Ok(Transformed::no(LogicalPlan::Join(join)));
                };
                let column = |name: &str| Expr::Column(Column::new(Some(relation.clone()), name));
                let holds = column(VALID_FROM).lt_eq(as_of.clone()).and(
                    column(VALID_TO)
                        .is_null()
                        .or(as_of.clone().lt(column(VALID_TO))),
                );
                let filter = match join.filter {
                    Some(filter) => filter.and(holds),
                    None => holds,
                };
                let restored: Vec<Expr> = join
                    .schema
                    .columns()
                    .into_iter()
                    .map(Expr::Column)
                    .collect();
                let joined = Join::try_new(
                    join.left,
                    join.right,
                    join.on,
                    Some(filter),
                    join.join_type,
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
