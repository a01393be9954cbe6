//! `weir engine deprecate ENGINE --to REF`: replay every recorded step of `ENGINE` with the new engine; when
//! all outputs are identical, record that the new engine may serve in place of the old one.

use std::collections::BTreeSet;

use serde_json::json;

use super::Output;
use super::verify::{ReplayedStep, replay};
use crate::commands::error::CommandError;
use weir_dataset::identity::EngineIdentity;
use weir_engines::compat::{self, Compatibility};
use weir_transaction::Context;

/// Runs `engine deprecate`.
pub async fn run(ctx: &Context, engine: &str, to: &str) -> Result<Output, CommandError> {
    // A bare `image@sha256:...` means docker (`image` may hold a registry port, so look for the prefix).
    let to = if to.contains("@sha256:") && !to.starts_with("docker:") && !to.starts_with("podman:")
    {
        format!("docker:{to}")
    } else {
        to.to_string()
    };
    let replacement = ctx.engines.by_reference(engine, &to)?;
    let mut all: Vec<ReplayedStep> = Vec::new();
    let mut datasets = Vec::new();
    for name in ctx.workspace.topological_order()? {
        let uses = ctx.workspace.datasets[&name]
            .transform
            .as_ref()
            .is_some_and(|t| t.transform.sql().engine == engine);
        if !uses {
            continue;
        }
        let steps = replay(ctx, &name, &|_, step_engine| {
            Ok((step_engine == engine).then(|| replacement.clone()))
        })
        .await?;
        if let Some(bad) = steps.iter().find(|s| !s.matches()) {
            return Err(CommandError::Mismatch {
                summary: format!(
                    "engine `{engine}` not deprecated: {}",
                    bad.describe_mismatch()
                ),
            });
        }
        datasets.push(name);
        all.extend(steps);
    }
    let deprecated: BTreeSet<String> = all
        .iter()
        .filter_map(|s| s.recorded_engine.as_ref())
        .filter(|e| *e != replacement.identity())
        .map(|e| serde_json::to_string(e).unwrap_or_default())
        .collect();
    let now = chrono::Utc::now();
    let mut recorded = Vec::new();
    for d in &deprecated {
        let Ok(old) = serde_json::from_str::<EngineIdentity>(d) else {
            continue;
        };
        let entry = Compatibility {
            deprecated: old,
            replacement: replacement.identity().clone(),
            verified_at: now,
            steps_verified: all.len() as u64,
            datasets: datasets.clone(),
        };
        compat::record(&ctx.storage, entry.clone()).await?;
        recorded.push(entry);
    }
    let text = format!(
        "engine `{engine}`: {} step(s) of {} dataset(s) replayed with {} ({}), all outputs identical; {} compatibility record(s) written",
        all.len(),
        datasets.len(),
        replacement.identity().reference,
        replacement.identity().runtime,
        recorded.len()
    );
    Ok(Output {
        text,
        json: json!({ "engine": engine, "replacement": replacement.identity(), "steps": all, "recorded": recorded }),
    })
}

/// Runs `engine list`: the compatibility records.
pub async fn list(ctx: &Context) -> Result<Output, CommandError> {
    let all = compat::load(&ctx.storage).await?;
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|c| {
            vec![
                c.deprecated.name.clone(),
                format!("{} {}", c.deprecated.runtime, c.deprecated.reference),
                format!("{} {}", c.replacement.runtime, c.replacement.reference),
                c.steps_verified.to_string(),
                c.verified_at.to_rfc3339(),
            ]
        })
        .collect();
    Ok(Output {
        text: super::table(
            &[
                "ENGINE",
                "DEPRECATED",
                "REPLACED BY",
                "STEPS",
                "VERIFIED AT",
            ],
            &rows,
        ),
        json: json!({ "compatibility": all }),
    })
}
