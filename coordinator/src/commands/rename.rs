//! `weir rename OLD NEW`: a dataset takes a new name and keeps its id, its chain and every reference to it.
//!
//! Datasets are recorded by id (a derivative's `SetTransform` and steps name their inputs by dataset id),
//! so the chains do not change at all: the dataset's folder in storage moves, its manifest gets the new
//! `name` (and, named `OLD.yaml`, the file name `NEW.yaml`), and every manifest that reads it names the new
//! name, with `alias: OLD` added where the input had no alias, so the queries that name the table `OLD`
//! read the same records and nothing is recomputed. Every edited manifest is parsed back before any file is
//! written; comments and layout are kept. The rename is recorded before its first change and completed by
//! the next command if it is killed ([`super::intent`]).

use serde_json::json;

use super::intent::{Intent, Journal, ManifestText};
use super::{Output, known};
use crate::commands::error::CommandError;
use weir_manifest::edit;
use weir_manifest::snapshot::is_dataset_name;
use weir_manifest::workspace::WorkspaceError;
use weir_transaction::{Context, TxError};

/// Runs `rename`.
pub async fn run(ctx: &Context, old: &str, new: &str) -> Result<Output, CommandError> {
    known(ctx, old)?;
    let refused = |reason: String| TxError::Refused {
        dataset: old.to_string(),
        reason,
    };
    if !is_dataset_name(new) {
        return Err(refused(format!(
            "`{new}` is not a dataset name (letters, digits and `-`, `_`, `.` between them, as ODF names are)"
        ))
        .into());
    }
    if ctx.workspace.datasets.contains_key(new) {
        return Err(refused(format!("the workspace has a dataset `{new}` already")).into());
    }
    let manifest = &ctx.workspace.datasets[old];
    let root = ctx.workspace.root.as_path();
    // Every edit first, so a manifest that cannot be edited stops the rename before anything changes.
    let own_text = edit::renamed(root, &manifest.file, new).map_err(WorkspaceError::from)?;
    let own_file = match manifest.file.file_stem().and_then(|s| s.to_str()) {
        Some(stem) if stem == old => manifest
            .file
            .with_file_name(format!("{new}.{}", extension(&manifest.file))),
        _ => manifest.file.clone(),
    };
    if own_file != manifest.file && root.join(&own_file).exists() {
        return Err(refused(format!("{} exists already", own_file.display())).into());
    }
    let mut dependents = Vec::new();
    for name in ctx.workspace.dependents_of(old) {
        let file = ctx.workspace.datasets[&name].file.clone();
        let text = edit::input_renamed(root, &file, old, new).map_err(WorkspaceError::from)?;
        dependents.push((name, file, text));
    }
    // Recorded first, then carried out: a rename killed at any point is completed by the next command.
    let mut manifests = vec![ManifestText {
        file: own_file.clone(),
        text: own_text,
    }];
    manifests.extend(dependents.iter().map(|(_, file, text)| ManifestText {
        file: file.clone(),
        text: text.clone(),
    }));
    let intent = Intent::Rename {
        old: old.to_owned(),
        new: new.to_owned(),
        manifests,
        remove: (own_file != manifest.file).then(|| manifest.file.clone()),
    };
    Journal::for_workspace(&ctx.storage, root)
        .run(&ctx.storage, &intent)
        .await?;
    tracing::info!(%old, %new, dependents = dependents.len(), "dataset renamed");
    let names: Vec<&str> = dependents.iter().map(|(n, _, _)| n.as_str()).collect();
    let mut text = format!(
        "renamed `{old}` to `{new}` (same id, same chain); manifest {}",
        own_file.display()
    );
    if !names.is_empty() {
        text.push_str(&format!(
            "\nupdated the inputs of {} (their queries still call it `{old}`)",
            names.join(", ")
        ));
    }
    Ok(Output {
        text,
        json: json!({
            "renamed": { "from": old, "to": new },
            "manifest": own_file.display().to_string(),
            "dependentsUpdated": names,
        }),
    })
}

fn extension(file: &std::path::Path) -> &str {
    file.extension().and_then(|e| e.to_str()).unwrap_or("yaml")
}
