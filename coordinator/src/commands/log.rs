//! `weir log DATASET`: the metadata chain, newest block first.

use serde_json::json;

use super::{Output, known};
use crate::chain::event::MetadataEvent;
use crate::error::CommandError;
use crate::transaction::Context;

/// Runs `log`.
pub async fn run(ctx: &Context, dataset: &str) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let chain = ctx.storage.dataset(dataset).chain().await?;
    let mut text = Vec::new();
    let mut blocks = Vec::new();
    for (hash, b) in chain.blocks.iter().rev() {
        text.push(format!(
            "block {}  #{}  {}",
            hash,
            b.sequence_number,
            b.system_time.to_rfc3339()
        ));
        text.push(format!("  {}", describe(&b.event)));
        blocks.push(json!({ "hash": hash, "block": b }));
    }
    if text.is_empty() {
        text.push(format!(
            "dataset `{dataset}` has no blocks yet: run `weir pull {dataset}`"
        ));
    }
    Ok(Output {
        text: text.join("\n"),
        json: json!({ "dataset": dataset, "blocks": blocks }),
    })
}

/// One line describing an event.
pub fn describe(e: &MetadataEvent) -> String {
    match e {
        MetadataEvent::Seed(s) => format!("Seed {:?} {}", s.dataset_kind, s.dataset_id),
        MetadataEvent::SetPollingSource(p) => {
            format!(
                "SetPollingSource fetch={:?} read={:?} merge={:?}",
                p.fetch, p.read, p.merge
            )
        }
        MetadataEvent::SetTransform(t) => format!(
            "SetTransform engine={} inputs=[{}]",
            t.transform.sql().engine,
            t.inputs
                .iter()
                .map(|i| i.dataset_ref.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        MetadataEvent::SetVocab(v) => format!("SetVocab {v:?}"),
        MetadataEvent::AddData(a) => format!(
            "AddData {} watermark={} source={}",
            slice(a.new_data.as_ref()),
            a.new_watermark.map_or("-".into(), |w| w.to_rfc3339()),
            a.new_source_state
                .as_ref()
                .map_or("-".into(), |s| s.value.clone())
        ),
        MetadataEvent::ExecuteTransform(t) => format!(
            "ExecuteTransform {} watermark={} engine={}",
            slice(t.new_data.as_ref()),
            t.new_watermark.map_or("-".into(), |w| w.to_rfc3339()),
            t.engine.as_ref().map_or("-".into(), |e| format!(
                "{} ({} {})",
                e.name, e.runtime, e.reference
            ))
        ),
    }
}

fn slice(d: Option<&crate::chain::event::DataSlice>) -> String {
    match d {
        Some(d) => format!(
            "records=[{}, {}] data={}",
            d.offset_interval.start,
            d.offset_interval.end,
            d.physical_hash.short()
        ),
        None => "records=none".into(),
    }
}
