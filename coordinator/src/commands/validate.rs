//! `weir validate`: the manifests (already checked on load), every derivative's transform (ValidateQuery on
//! its engine, against its inputs' schemas, so an invalid query is reported at its line in the manifest),
//! and every stored chain, block and file.

use serde_json::json;

use super::Output;
use crate::commands::error::CommandError;
use weir_dataset::chain::store::StoreError;
use weir_dataset::chain::validate::check_input_against_chain;
use weir_dataset::data;
use weir_transaction::Context;

/// What the manifests ask for that this workspace cannot do, found without data: every SQL step's engine
/// must be served (`weir.yaml`, the runtime); a glob that matches no file is a warning (returned as text).
/// Every problem of every dataset in `datasets` is reported together; `pull` runs this first, so it never
/// commits a block for a workspace `validate` refuses.
pub fn static_checks(
    ctx: &Context,
    datasets: &[String],
    runtime: EngineCheck,
) -> Result<Vec<String>, CommandError> {
    let manifests = datasets
        .iter()
        .filter_map(|name| ctx.workspace.datasets.get(name));
    let (errors, warnings) = static_problems(&ctx.engines, &ctx.workspace.root, manifests, runtime);
    match weir_manifest::snapshot::ManifestError::from_all(errors) {
        Some(e) => Err(weir_manifest::workspace::WorkspaceError::Manifest(e).into()),
        None => Ok(warnings),
    }
}

/// Which engines [`static_checks`] requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineCheck {
    /// Served by some runtime (`weir validate`: a step another runtime serves is valid).
    AnyRuntime,
    /// Served by the runtime this command runs with (`weir pull`).
    ThisRuntime,
}

/// The errors and warnings of [`static_checks`] for `manifests`.
pub fn static_problems<'a>(
    engines: &weir_engines::EngineResolver,
    root: &std::path::Path,
    manifests: impl IntoIterator<Item = &'a weir_manifest::snapshot::DatasetManifest>,
    runtime: EngineCheck,
) -> (Vec<weir_manifest::snapshot::ManifestError>, Vec<String>) {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for m in manifests {
        let mut engine = |field: String, engine: &str| {
            let served = match runtime {
                EngineCheck::AnyRuntime => engines.check_served_by_any_runtime(engine),
                EngineCheck::ThisRuntime => engines.check_served(engine),
            };
            if let Err(e) = served {
                errors.push(m.field_error(&field, e.to_string()));
            }
        };
        if let (Some(t), Some(i)) = (&m.transform, m.transform_index) {
            engine(
                format!("content.metadata[{i}].transform.engine"),
                &t.transform.sql().engine,
            );
        }
        if let (Some(src), Some(i)) = (&m.polling_source, m.polling_source_index) {
            if let Some(p) = &src.preprocess {
                engine(
                    format!("content.metadata[{i}].preprocess.engine"),
                    &p.sql().engine,
                );
            }
            if let weir_odf::FetchStep::FilesGlob(g) = &src.fetch {
                let pattern = root.join(&g.path);
                let any = glob::glob(&pattern.to_string_lossy())
                    .map(|mut paths| paths.any(|p| p.is_ok_and(|p| p.is_file())))
                    .unwrap_or(false);
                if !any {
                    let at = m.field_error(
                        &format!("content.metadata[{i}].fetch.path"),
                        format!(
                            "`{}` matches no file yet (paths are relative to the workspace folder)",
                            g.path
                        ),
                    );
                    warnings.push(format!("warning: {at}"));
                }
            }
        }
    }
    (errors, warnings)
}

/// Runs `validate`: every chain is decoded and checked against the chain rules, every `ExecuteTransform`
/// input against the input's chain, and every data slice and checkpoint it references is read and its
/// physical hash, size and (for data) logical hash checked.
pub async fn run(ctx: &Context) -> Result<Output, CommandError> {
    let all: Vec<String> = ctx.workspace.datasets.keys().cloned().collect();
    let warnings = static_checks(ctx, &all, EngineCheck::AnyRuntime)?;
    let mut lines = warnings.clone();
    lines.push(format!(
        "{} manifest(s) valid",
        ctx.workspace.datasets.len()
    ));
    ctx.check_inputs_pinned(&all).await?;
    let mut items = Vec::new();
    let mut chains_by_id: std::collections::HashMap<
        weir_odf::DatasetId,
        weir_dataset::chain::store::Chain,
    > = std::collections::HashMap::new();
    for name in ctx.workspace.topological_order()? {
        let store = ctx.storage.dataset(&name);
        let chain = store.chain().await?;
        let invalid = |source| StoreError::InvalidChain {
            dataset: name.clone(),
            source,
        };
        // Every slice and checkpoint against its hash and size as it is read (on a local disk, in place;
        // from an object store, into this folder), each slice then decoded and logically hashed as a stream.
        let scratch = ctx.scratch(&name)?;
        let files = store
            .check_integrity(&chain, scratch.path(), |_| {})
            .await
            .map_err(CommandError::from)?;
        let files = files.data_files + files.checkpoints;
        for (_, b) in &chain.blocks {
            if let weir_odf::MetadataEvent::ExecuteTransform(t) = &b.event {
                for (index, input) in t.query_inputs.iter().enumerate() {
                    if let Some(in_chain) = chains_by_id.get(&input.dataset_id) {
                        check_input_against_chain(
                            b.sequence_number,
                            index,
                            input,
                            &in_chain.blocks,
                        )
                        .map_err(invalid)?;
                    }
                }
            }
        }
        if let Some(id) = chain.summary.dataset_id {
            chains_by_id.insert(id, chain.clone());
        }
        let manifest = &ctx.workspace.datasets[&name];
        let query = if manifest.transform.is_some() {
            let id = chain
                .summary
                .dataset_id
                .unwrap_or(weir_odf::DatasetId::from_key([0; 32]));
            match ctx.validate_transform(manifest, id).await {
                Ok(Some(schema)) => format!(
                    "; query valid, output [{}]",
                    data::schema_text(&schema)
                ),
                Ok(None) => "; query not checked (an input has no records yet, or the engine cannot validate)"
                    .to_string(),
                // The engine is not served on this runtime: the query is checked where it is.
                Err(weir_transaction::TxError::Engine {
                    source: e @ weir_engines::EngineFailure::NotConfigured { .. },
                    ..
                }) => format!("; query not checked ({e})"),
                Err(e) => return Err(e.into()),
            }
        } else {
            String::new()
        };
        lines.push(format!(
            "{name}: {} block(s), {files} file(s) ok{query}",
            chain.blocks.len()
        ));
        items.push(
            json!({ "dataset": name, "blocks": chain.blocks.len(), "files": files, "ok": true, "queryChecked": !query.is_empty() && !query.contains("not checked") }),
        );
    }
    Ok(Output {
        text: lines.join("\n"),
        json: json!({ "valid": true, "datasets": items, "warnings": warnings }),
    })
}
