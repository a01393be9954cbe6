//! `weir delete DATASET [--recursive]`: remove a dataset from the workspace: its manifest and every file of
//! it in storage. Refused while other datasets read it, unless `--recursive`, which deletes them too
//! (downstream first). The removal cannot be undone; `weir reset` keeps the dataset and its id.

use serde_json::json;

use super::intent::{Intent, Journal};
use super::{Output, known};
use crate::commands::error::CommandError;
use crate::transaction::{Context, TxError};

/// The datasets a delete of `dataset` removes, downstream first; without `recursive`, an error naming
/// the datasets that read it.
pub fn plan(ctx: &Context, dataset: &str, recursive: bool) -> Result<Vec<String>, CommandError> {
    let mut order = Vec::new();
    let mut pending = vec![dataset.to_string()];
    while let Some(name) = pending.pop() {
        order.retain(|n| n != &name);
        order.push(name.clone());
        let dependents = ctx.workspace.dependents_of(&name);
        if !recursive && !dependents.is_empty() {
            let names: Vec<String> = dependents.iter().map(|d| format!("`{d}`")).collect();
            return Err(TxError::Refused {
                dataset: name,
                reason: format!(
                    "{} read{} it; pass --recursive to delete {} too",
                    names.join(", "),
                    if names.len() == 1 { "s" } else { "" },
                    if names.len() == 1 { "it" } else { "them" }
                ),
            }
            .into());
        }
        pending.extend(dependents);
    }
    order.reverse();
    Ok(order)
}

/// Runs `delete`.
pub async fn run(ctx: &Context, dataset: &str, recursive: bool) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let order = plan(ctx, dataset, recursive)?;
    // Recorded first, then carried out: a delete killed at any point is completed by the next command.
    let datasets = order
        .iter()
        .map(|name| (name.clone(), ctx.workspace.datasets[name].file.clone()))
        .collect();
    Journal::for_workspace(&ctx.storage, &ctx.workspace.root)
        .run(&ctx.storage, &Intent::Delete { datasets })
        .await?;
    for name in &order {
        tracing::info!(dataset = %name, "dataset deleted");
    }
    Ok(Output {
        text: order
            .iter()
            .map(|n| format!("deleted `{n}`: its manifest and its stored chain and data"))
            .collect::<Vec<_>>()
            .join("\n"),
        json: json!({ "deleted": order }),
    })
}
