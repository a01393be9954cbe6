//! `weir delete DATASET... | --all [--recursive] [--yes]`: remove datasets from the workspace: their
//! manifests and every file of them in storage. Names may be `%` patterns (kamu's wildcard). Refused while
//! other datasets read one of them, unless `--recursive`, which deletes those too (downstream first). The
//! removal cannot be undone (`weir reset` keeps a dataset and its id), so it is confirmed first: asked on a
//! terminal, refused elsewhere unless `--yes`.

use std::io::IsTerminal as _;

use serde_json::json;

use super::Output;
use super::intent::{Intent, Journal};
use crate::commands::error::CommandError;
use weir_transaction::{Context, TxError};

/// Options of `weir delete`.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Every dataset of the workspace.
    pub all: bool,
    /// The datasets reading the chosen ones too, all the way down.
    pub recursive: bool,
    /// Do not ask for confirmation.
    pub yes: bool,
}

/// The datasets a delete of `chosen` removes, downstream first; without `recursive`, an error naming a
/// dataset outside `chosen` that reads one of them.
pub fn plan(
    ctx: &Context,
    chosen: &[String],
    recursive: bool,
) -> Result<Vec<String>, CommandError> {
    let mut doomed: Vec<String> = chosen.to_vec();
    let mut pending: Vec<String> = chosen.to_vec();
    while let Some(name) = pending.pop() {
        let outside: Vec<String> = ctx
            .workspace
            .dependents_of(&name)
            .into_iter()
            .filter(|d| !doomed.contains(d))
            .collect();
        if outside.is_empty() {
            continue;
        }
        if !recursive {
            let names: Vec<String> = outside.iter().map(|d| format!("`{d}`")).collect();
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
        doomed.extend(outside.iter().cloned());
        pending.extend(outside);
    }
    // Downstream first: the reverse of the dependency order.
    let mut order: Vec<String> = ctx
        .workspace
        .topological_order()?
        .into_iter()
        .filter(|d| doomed.contains(d))
        .collect();
    order.reverse();
    Ok(order)
}

/// One line per dataset a delete removes: its manifest and its folder in storage.
pub fn describe(ctx: &Context, order: &[String]) -> Vec<String> {
    order
        .iter()
        .map(|name| {
            format!(
                "`{name}`: its manifest {} and its chain and data in {}",
                ctx.workspace.datasets[name].file.display(),
                ctx.storage.dataset(name).display_root()
            )
        })
        .collect()
}

/// Runs `delete`.
pub async fn run(
    ctx: &Context,
    datasets: &[String],
    opts: &DeleteOptions,
) -> Result<Output, CommandError> {
    let chosen = if opts.all {
        ctx.workspace.datasets.keys().cloned().collect()
    } else {
        super::select(ctx, datasets)?
    };
    let order = plan(ctx, &chosen, opts.recursive)?;
    let removes = describe(ctx, &order);
    if !opts.yes {
        confirm(&removes).await?;
    }
    // Recorded first, then carried out: a delete killed at any point is completed by the next command.
    let files = order
        .iter()
        .map(|name| (name.clone(), ctx.workspace.datasets[name].file.clone()))
        .collect();
    Journal::for_workspace(&ctx.storage, &ctx.workspace.root)
        .run(&ctx.storage, &Intent::Delete { datasets: files })
        .await?;
    for name in &order {
        tracing::info!(dataset = %name, "dataset deleted");
    }
    Ok(Output {
        text: removes
            .iter()
            .map(|line| format!("deleted {line}"))
            .collect::<Vec<_>>()
            .join("\n"),
        json: json!({ "deleted": order }),
    })
}

/// Asks on the terminal (stderr, so that stdout keeps only the command's output) whether to delete what
/// `removes` lists; without a terminal on stdin nobody can answer, so the delete is refused.
async fn confirm(removes: &[String]) -> Result<(), CommandError> {
    if !std::io::stdin().is_terminal() {
        return Err(CommandError::NotConfirmed {
            what: format!("deleting {} dataset(s)", removes.len()),
            why: "standard input is not a terminal to ask on".into(),
        });
    }
    let mut question = format!(
        "weir delete removes {} dataset(s), which cannot be undone:\n",
        removes.len()
    );
    for line in removes {
        question.push_str(&format!("  - {line}\n"));
    }
    question.push_str("Delete? [y/N] ");
    // Read on a blocking thread: a signal (Ctrl-C) still stops weir while it waits for an answer.
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(question.as_bytes());
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))
    .and_then(|r| r);
    match answer {
        Ok(line) if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") => Ok(()),
        Ok(_) => Err(CommandError::NotConfirmed {
            what: format!("deleting {} dataset(s)", removes.len()),
            why: "the answer was not yes".into(),
        }),
        Err(e) => Err(CommandError::NotConfirmed {
            what: format!("deleting {} dataset(s)", removes.len()),
            why: format!("no answer could be read: {e}"),
        }),
    }
}
