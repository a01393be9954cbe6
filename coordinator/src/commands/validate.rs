//! `weir validate`: the manifests (already checked on load) and every stored chain, block and file.

use serde_json::json;

use super::Output;
use crate::chain::store::FileKind;
use crate::error::CommandError;
use crate::transaction::Context;

/// Runs `validate`: every chain is decoded and checked against the chain rules, and every data slice and
/// checkpoint it references is read and its hash checked.
pub async fn run(ctx: &Context) -> Result<Output, CommandError> {
    let mut lines = vec![format!(
        "{} manifest(s) valid",
        ctx.workspace.datasets.len()
    )];
    let mut items = Vec::new();
    for name in ctx.workspace.topological_order()? {
        let store = ctx.storage.dataset(&name);
        let chain = store.chain().await?;
        let mut files = 0;
        for (_, b) in &chain.blocks {
            if let Some(d) = b.event.new_data() {
                store.get_file(FileKind::Data, &d.physical_hash).await?;
                files += 1;
            }
            if let odf::MetadataEvent::ExecuteTransform(t) = &b.event
                && let Some(c) = &t.new_checkpoint
            {
                store
                    .get_file(FileKind::Checkpoint, &c.physical_hash)
                    .await?;
                files += 1;
            }
        }
        lines.push(format!(
            "{name}: {} block(s), {files} file(s) ok",
            chain.blocks.len()
        ));
        items.push(
            json!({ "dataset": name, "blocks": chain.blocks.len(), "files": files, "ok": true }),
        );
    }
    Ok(Output {
        text: lines.join("\n"),
        json: json!({ "valid": true, "datasets": items }),
    })
}
