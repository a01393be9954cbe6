//! `weir provenance DATASET --offset N`: the block that wrote a record and what it was computed from.

use serde_json::json;

use super::{Output, known};
use crate::error::CommandError;
use crate::transaction::Context;
use odf::MetadataEvent;

/// Runs `provenance`.
pub async fn run(ctx: &Context, dataset: &str, offset: u64) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let chain = ctx.storage.dataset(dataset).chain().await?;
    let found = chain.blocks.iter().position(|(_, b)| {
        b.event
            .new_data()
            .is_some_and(|d| d.offset_interval.start <= offset && offset <= d.offset_interval.end)
    });
    let Some(index) = found else {
        return Err(CommandError::NoSuchOffset {
            dataset: dataset.to_string(),
            offset,
        });
    };
    let (hash, block) = &chain.blocks[index];
    let mut lines = vec![format!(
        "{dataset} offset {offset} was written by block #{} {} at {}",
        block.sequence_number,
        hash,
        block.system_time.to_rfc3339()
    )];
    let mut inputs_json = Vec::new();
    match &block.event {
        MetadataEvent::AddData(a) => {
            let src = a
                .new_source_state
                .as_ref()
                .map_or("-".into(), |s| s.value.clone());
            lines.push(format!("  ingested from source `{src}`"));
            inputs_json.push(json!({ "source": src }));
        }
        MetadataEvent::ExecuteTransform(t) => {
            let names = id_names(ctx).await?;
            if let Some(e) = crate::engine::identity::in_force(&chain.blocks[..index]) {
                lines.push(format!(
                    "  computed by engine {} ({} {})",
                    e.name, e.runtime, e.reference
                ));
            }
            for i in &t.query_inputs {
                let name = names
                    .iter()
                    .find(|(id, _)| *id == i.dataset_id)
                    .map_or("?".to_string(), |(_, n)| n.clone());
                let range = match (i.prev_offset, i.new_offset) {
                    (p, Some(n)) if Some(n) > p => {
                        format!("offsets [{}, {n}]", p.map_or(0, |p| p + 1))
                    }
                    _ => "no new records".into(),
                };
                lines.push(format!(
                    "  from input `{name}` {range} (blocks up to {})",
                    i.new_block_hash.map_or("-".into(), |h| h.to_string())
                ));
                inputs_json.push(json!({
                    "dataset": name,
                    "prevOffset": i.prev_offset,
                    "newOffset": i.new_offset,
                    "newBlockHash": i.new_block_hash,
                }));
            }
        }
        _ => {}
    }
    Ok(Output {
        text: lines.join("\n"),
        json: json!({
            "dataset": dataset,
            "offset": offset,
            "block": { "hash": hash, "sequenceNumber": block.sequence_number, "event": block.event.name() },
            "inputs": inputs_json,
        }),
    })
}

async fn id_names(ctx: &Context) -> Result<Vec<(odf::DatasetId, String)>, CommandError> {
    let mut out = Vec::new();
    for name in ctx.workspace.datasets.keys() {
        let chain = ctx.storage.dataset(name).chain().await?;
        if let Some(id) = chain.summary.dataset_id {
            out.push((id, name.clone()));
        }
    }
    Ok(out)
}
