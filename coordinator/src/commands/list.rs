//! `weir list`: datasets with kind, head, record count and last update.

use serde_json::json;

use super::{Output, table};
use crate::error::CommandError;
use crate::transaction::Context;

/// Runs `list`.
pub async fn run(ctx: &Context) -> Result<Output, CommandError> {
    let mut rows = Vec::new();
    let mut items = Vec::new();
    for name in ctx.workspace.topological_order()? {
        let m = &ctx.workspace.datasets[&name];
        let chain = ctx.storage.dataset(&name).chain().await?;
        let s = &chain.summary;
        rows.push(vec![
            name.clone(),
            format!("{:?}", m.kind),
            s.head.map_or("-".into(), |h| crate::chain::short(&h)),
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
    Ok(Output {
        text: table(
            &["DATASET", "KIND", "HEAD", "RECORDS", "UPDATED", "WATERMARK"],
            &rows,
        ),
        json: json!({ "datasets": items }),
    })
}
