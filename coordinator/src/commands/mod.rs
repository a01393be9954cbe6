//! The commands of `weir`, each in its own file, over a loaded workspace.

pub mod conformance;
pub mod delete;
pub mod deprecate;
pub mod error;
pub mod ingest;
pub mod init;
pub mod inspect;
pub mod intent;
pub mod lineage;
pub mod list;
pub mod log;
pub mod provenance;
pub mod pull;
pub mod rename;
pub mod reset;
pub mod sql;
pub mod tail;
pub mod upgrade;
pub mod validate;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use crate::commands::error::CommandError;
use weir_dataset::chain::store::Storage;
use weir_engines::EngineResolver;
use weir_engines::EngineRuntimeKind;
use weir_manifest::snapshot::ManifestError;
use weir_manifest::workspace::{Workspace, WorkspaceError};
use weir_transaction::Context;

/// What a command prints: text for people, JSON for programs.
#[derive(Debug, Clone)]
pub struct Output {
    /// The text form.
    pub text: String,
    /// The JSON form.
    pub json: serde_json::Value,
}

impl Output {
    /// Renders for `format`.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => serde_json::to_string_pretty(&self.json).unwrap_or_default(),
            Format::Text | Format::Dot => self.text.clone(),
        }
    }
}

/// Loads the workspace and opens its storage.
pub fn open(
    root: &std::path::Path,
    runtime: EngineRuntimeKind,
    deadline: Duration,
) -> Result<Context, CommandError> {
    let workspace = match Workspace::load(root) {
        Ok(w) => w,
        Err(WorkspaceError::Manifest(e)) => {
            // Also what the manifests that parsed ask of the engines, so one run reports everything.
            let mut all: Vec<ManifestError> = e.all().into_iter().cloned().collect();
            if let Ok((config, manifests, _)) = Workspace::read(root) {
                let engines = EngineResolver {
                    runtime,
                    config: config.engines.clone(),
                    deadline,
                    root: root.to_path_buf(),
                };
                let (more, _) = validate::static_problems(
                    &engines,
                    root,
                    &manifests,
                    validate::EngineCheck::AnyRuntime,
                );
                all.extend(more);
            }
            return Err(WorkspaceError::Manifest(ManifestError::from_all(all).unwrap_or(e)).into());
        }
        Err(e) => return Err(e.into()),
    };
    let storage = Storage::open(&workspace.storage_location())?;
    let engines = EngineResolver {
        runtime,
        config: workspace.config.engines.clone(),
        deadline,
        root: workspace.root.clone(),
    };
    Ok(Context {
        workspace: Arc::new(workspace),
        storage,
        engines,
        progress: weir_dataset::progress::Progress::none(),
        source_settle: None,
    })
}

/// The workspace folder and its storage, from `weir.yaml` alone (no manifest is read): what a command needs
/// to take the workspace lock before it reads anything the lock protects.
pub fn open_storage(root: &std::path::Path) -> Result<(std::path::PathBuf, Storage), CommandError> {
    let config = weir_manifest::workspace::WorkspaceConfig::load(root)?;
    let storage = Storage::open(&config.storage_location(root))?;
    Ok((root.to_path_buf(), storage))
}

/// Fails with the list of known datasets when `name` is unknown.
pub fn known(ctx: &Context, name: &str) -> Result<(), CommandError> {
    if ctx.workspace.datasets.contains_key(name) {
        return Ok(());
    }
    Err(CommandError::UnknownDataset {
        name: name.to_string(),
        known: ctx
            .workspace
            .datasets
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The datasets `patterns` name, in the order given and each once: a name, or a pattern where `%` matches
/// any characters (kamu's wildcard: `readings.%` is every dataset whose name starts with `readings.`). A
/// name that is no dataset, or a pattern that matches none, is an error naming it.
pub fn select(ctx: &Context, patterns: &[String]) -> Result<Vec<String>, CommandError> {
    let mut chosen: Vec<String> = Vec::new();
    for pattern in patterns {
        let matched: Vec<String> = if pattern.contains('%') {
            ctx.workspace
                .datasets
                .keys()
                .filter(|name| matches_pattern(pattern, name))
                .cloned()
                .collect()
        } else {
            known(ctx, pattern)?;
            vec![pattern.clone()]
        };
        if matched.is_empty() {
            return Err(CommandError::NoMatch {
                pattern: pattern.clone(),
                known: ctx
                    .workspace
                    .datasets
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        for name in matched {
            if !chosen.contains(&name) {
                chosen.push(name);
            }
        }
    }
    Ok(chosen)
}

/// Whether `name` matches `pattern`, where `%` stands for any characters (none included) and every
/// other character for itself.
///
/// ```
/// use weir_cli::commands::matches_pattern;
/// assert!(matches_pattern("readings.%", "readings.daily"));
/// assert!(matches_pattern("%.daily", "readings.daily"));
/// assert!(matches_pattern("%", "stations"));
/// assert!(!matches_pattern("readings.%", "readings"));
/// assert!(matches_pattern("r%s", "readings"));
/// assert!(!matches_pattern("r%x", "readings"));
/// ```
pub fn matches_pattern(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('%').collect();
    let (first, rest) = match parts.split_first() {
        Some(split) => split,
        None => return name.is_empty(),
    };
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// Left-aligned columns.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(header.iter().map(|s| s.to_string()).collect())];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// For programs: one JSON document on stdout.
    Json,
    /// Graphviz (only `lineage`).
    Dot,
}
