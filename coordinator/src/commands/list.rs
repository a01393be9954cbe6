//! `weir list`: datasets with kind, head, record count and last update.

use serde_json::json;

use super::{Output, table};
use crate::commands::error::CommandError;
use weir_transaction::Context;

/// Runs `list`.
pub async fn run(ctx: &Context) -> Result<Output, CommandError> {
    let mut rows = Vec::new();
    let mut items = Vec::new();
    let mut problems = Vec::new();
    for name in ctx.workspace.topological_order()? {
        let m = &ctx.workspace.datasets[&name];
        // One unreadable chain does not hide the others: it is listed as unreadable, with why.
        let chain = match ctx.storage.dataset(&name).chain().await {
            Ok(chain) => chain,
            // A workspace of the old format is one problem with one fix (`weir upgrade`), not one per row.
            Err(e @ weir_dataset::chain::store::StoreError::OldFormat { .. }) => {
                return Err(e.into());
            }
            Err(e) => {
                let why = e.to_string();
                rows.push(vec![
                    name.clone(),
                    format!("{:?}", m.kind),
                    "UNREADABLE".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]);
                items.push(json!({ "name": name, "kind": m.kind, "error": why }));
                problems.push(format!("{name}: {why}"));
                continue;
            }
        };
        let s = &chain.summary;
        rows.push(vec![
            name.clone(),
            format!("{:?}", m.kind),
            s.head
                .map_or("-".into(), |h| weir_dataset::chain::short(&h)),
            s.num_records.to_string(),
            s.last_updated.map_or("never".into(), |t| {
                t.format("%Y-%m-%d %H:%M:%S").to_string()
            }),
            s.watermark.map_or("-".into(), |t| t.to_rfc3339()),
        ]);
        items.push(json!({
            "name": name,
            "kind": m.kind,
            "head": s.head,
            "blocks": s.last_sequence_number.map_or(0, |n| n + 1),
            "records": s.num_records,
            "lastUpdated": s.last_updated,
            "watermark": s.watermark,
        }));
    }
    let mut text = table(
        &["DATASET", "KIND", "HEAD", "RECORDS", "UPDATED", "WATERMARK"],
        &rows,
    );
    if !problems.is_empty() {
        text.push_str(&format!(
            "\n{} dataset(s) could not be read (`weir validate` checks every chain):\n  {}",
            problems.len(),
            problems.join("\n  ")
        ));
    }
    Ok(Output {
        text,
        json: json!({ "datasets": items }),
    })
}
