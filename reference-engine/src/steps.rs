//! Planning multi-step queries: every step but the last is registered as a view under its alias, and the
//! last step's plan is the query's plan (the views are inlined into it). Each step's
//! `FOR SYSTEM_TIME AS OF` clauses are taken out first (`temporal::syntax`) and returned beside the plan.

use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::datasource::ViewTable;
use datafusion::execution::context::{SQLOptions, SessionContext};
use datafusion::logical_expr::LogicalPlan;

use crate::error::EngineError;
use crate::request::TransformSql;
use crate::temporal::syntax::{TemporalReference, rewrite};
use weir_query_depth::check_query_depth;

/// A transform's plan and the temporal clauses its steps had.
#[derive(Debug)]
pub(crate) struct PlannedSteps {
    /// The final step's logical plan, with the earlier steps inlined.
    pub plan: LogicalPlan,
    /// Every `FOR SYSTEM_TIME AS OF` of every step, taken out of the SQL before planning.
    pub temporal: Vec<TemporalReference>,
}

/// The final step's logical plan, with the earlier steps inlined.
pub(crate) async fn plan_steps(
    ctx: &SessionContext,
    transform: &TransformSql,
    taken_names: &[String],
) -> Result<PlannedSteps, EngineError> {
    let steps = transform.steps();
    let mut temporal = Vec::new();
    let Some((last, earlier)) = steps.split_last() else {
        return Err(EngineError::NoQuery);
    };
    let mut names: Vec<String> = taken_names.to_vec();
    for (position, step) in earlier.iter().enumerate() {
        let Some(alias) = step.alias.as_deref() else {
            return Err(EngineError::MalformedRequest {
                reason: format!(
                    "query step {} of {} has no alias: only the last step may be unnamed",
                    position + 1,
                    steps.len()
                ),
            });
        };
        if names.iter().any(|name| name == alias) {
            return Err(EngineError::DuplicateAlias {
                alias: alias.to_owned(),
            });
        }
        let query = without_temporal_clauses(Some(alias), &step.query, &mut temporal)?;
        let plan = plan_sql(ctx, Some(alias), &query).await?;
        ctx.register_table(
            TableReference::bare(alias.to_owned()),
            Arc::new(ViewTable::new(plan, Some(query))),
        )
        .map_err(|e| EngineError::sql(Some(alias), e))?;
        names.push(alias.to_owned());
        tracing::debug!(step = alias, "query step planned");
    }
    let query = without_temporal_clauses(last.alias.as_deref(), &last.query, &mut temporal)?;
    let plan = plan_sql(ctx, last.alias.as_deref(), &query).await?;
    Ok(PlannedSteps { plan, temporal })
}

/// `sql` checked for depth, with its window syntax rewritten onto `date_bin` and without its
/// `FOR SYSTEM_TIME AS OF` clauses, which are added to `found`.
fn without_temporal_clauses(
    step: Option<&str>,
    sql: &str,
    found: &mut Vec<TemporalReference>,
) -> Result<String, EngineError> {
    // First of all: nothing may parse a query that nests too deep to plan.
    check_query_depth(sql).map_err(|source| EngineError::QueryTooDeep {
        step: step.map(str::to_owned),
        source,
    })?;
    // Flink's and RisingWave's window syntax onto date_bin.
    let sql = &crate::window::syntax::rewrite(sql).map_err(|reason| {
        EngineError::UnsupportedWindowAggregation {
            reason: match step {
                Some(alias) => format!("in query step `{alias}`: {reason}"),
                None => reason,
            },
        }
    })?;
    let rewritten = rewrite(sql).map_err(|reason| EngineError::UnsupportedTemporalJoin {
        reason: match step {
            Some(alias) => format!("in query step `{alias}`: {reason}"),
            None => reason,
        },
    })?;
    found.extend(rewritten.references);
    Ok(rewritten.sql)
}

/// Plans one SELECT; DDL, DML and other statements are refused.
async fn plan_sql(
    ctx: &SessionContext,
    step: Option<&str>,
    sql: &str,
) -> Result<LogicalPlan, EngineError> {
    let state = ctx.state();
    let plan = state
        .create_logical_plan(sql)
        .await
        .map_err(|e| EngineError::sql(step, e))?;
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
        .verify_plan(&plan)
        .map_err(|e| EngineError::sql(step, e))?;
    Ok(plan)
}
