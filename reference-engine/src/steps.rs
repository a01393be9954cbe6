//! Planning multi-step queries: every step but the last is registered as a view under its alias, and the
//! last step's plan is the query's plan (the views are inlined into it).

use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::datasource::ViewTable;
use datafusion::execution::context::{SQLOptions, SessionContext};
use datafusion::logical_expr::LogicalPlan;

use crate::error::EngineError;
use crate::request::TransformSql;

/// The final step's logical plan, with the earlier steps inlined.
pub(crate) async fn plan_steps(
    ctx: &SessionContext,
    transform: &TransformSql,
    taken_names: &[String],
) -> Result<LogicalPlan, EngineError> {
    if let Some(table) = transform.temporal_tables.iter().flatten().next() {
        return Err(EngineError::TemporalTablesUnsupported {
            name: table.name.clone(),
        });
    }
    let steps = transform.steps();
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
        let plan = plan_sql(ctx, Some(alias), &step.query).await?;
        ctx.register_table(
            TableReference::bare(alias.to_owned()),
            Arc::new(ViewTable::new(plan, Some(step.query.clone()))),
        )
        .map_err(|e| EngineError::sql(Some(alias), e))?;
        names.push(alias.to_owned());
        tracing::debug!(step = alias, "query step planned");
    }
    plan_sql(ctx, last.alias.as_deref(), &last.query).await
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
