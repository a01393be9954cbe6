//! `weir log DATASET`: the metadata chain, newest block first.

use serde_json::json;

use super::{Output, known};
use crate::commands::error::CommandError;
use weir_dataset::identity::{self, EngineIdentity};
use weir_manifest::support;
use weir_odf::MetadataEvent;
use weir_transaction::Context;

/// Runs `log`: at most `limit` blocks, the newest.
pub async fn run(ctx: &Context, dataset: &str, limit: usize) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let chain = ctx.storage.dataset(dataset).chain().await?;
    let mut text = Vec::new();
    let mut blocks = Vec::new();
    for (k, (hash, b)) in chain.blocks.iter().enumerate().rev().take(limit) {
        text.push(format!(
            "block {}  #{}  {}",
            hash,
            b.sequence_number,
            b.system_time.to_rfc3339()
        ));
        let engine = match &b.event {
            MetadataEvent::ExecuteTransform(_) => identity::in_force(&chain.blocks[..k]),
            _ => None,
        };
        text.push(format!("  {}", describe(&b.event, engine.as_ref())));
        blocks.push(json!({ "hash": hash, "block": b, "engine": engine }));
    }
    let hidden = chain.blocks.len().saturating_sub(limit);
    if chain.blocks.is_empty() {
        text.push(format!(
            "dataset `{dataset}` has no blocks yet: run `weir pull {dataset}`"
        ));
    } else if hidden > 0 {
        text.push(format!(
            "... {hidden} older block(s) not shown (`--limit {}` shows them all)",
            chain.blocks.len()
        ));
    }
    Ok(Output {
        text: text.join("\n"),
        json: json!({ "dataset": dataset, "blocks": blocks, "totalBlocks": chain.blocks.len() }),
    })
}

/// One line describing an event; `engine` is the engine recorded for an ExecuteTransform (by the
/// SetTransform in force).
pub fn describe(e: &MetadataEvent, engine: Option<&EngineIdentity>) -> String {
    match e {
        MetadataEvent::Seed(s) => format!(
            "Seed {} {}",
            match s.dataset_kind {
                weir_odf::DatasetKind::Root => "Root",
                weir_odf::DatasetKind::Derivative => "Derivative",
            },
            s.dataset_id
        ),
        MetadataEvent::SetPollingSource(p) => {
            let fetch = match &p.fetch {
                weir_odf::FetchStep::Url(u) => format!("Url({})", u.url),
                weir_odf::FetchStep::FilesGlob(g) => format!("FilesGlob({})", g.path),
                other => support::fetch_kind(other).to_owned(),
            };
            format!(
                "SetPollingSource fetch={fetch} read={} merge={}",
                support::read_kind(&p.read),
                support::merge_kind(&p.merge)
            )
        }
        MetadataEvent::SetTransform(t) => {
            let sql = t.transform.sql().clone().normalize();
            let mut text = format!(
                "SetTransform engine={} version={} inputs=[{}]",
                sql.engine,
                sql.version.as_deref().unwrap_or("-"),
                t.inputs
                    .iter()
                    .map(|i| format!("{} as {}", i.dataset_ref, i.query_alias()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for step in sql.queries.iter().flatten() {
                let query = step.query.trim().replace('\n', "\n      ");
                match &step.alias {
                    Some(alias) => text.push_str(&format!("\n    {alias} = {query}")),
                    None => text.push_str(&format!("\n    {query}")),
                }
            }
            for table in sql.temporal_tables.iter().flatten() {
                text.push_str(&format!(
                    "\n    temporal table {} (primary key {})",
                    table.name,
                    table.primary_key.join(", ")
                ));
            }
            text
        }
        MetadataEvent::SetVocab(v) => {
            let v = weir_odf::DatasetVocabulary::from(v);
            format!(
                "SetVocab offset={} op={} system_time={} event_time={}",
                v.offset_column, v.operation_type_column, v.system_time_column, v.event_time_column
            )
        }
        MetadataEvent::SetDataSchema(s) => format!(
            "SetDataSchema [{}]",
            s.schema
                .as_ref()
                .map(|s| s
                    .fields
                    .iter()
                    .map(|f| f.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        ),
        MetadataEvent::SetInfo(i) => format!(
            "SetInfo description={} keywords=[{}]",
            i.description.as_deref().unwrap_or("-"),
            i.keywords.clone().unwrap_or_default().join(", ")
        ),
        MetadataEvent::SetLicense(l) => format!("SetLicense {} ({})", l.short_name, l.website_url),
        MetadataEvent::SetAttachments(_) => "SetAttachments".to_owned(),
        MetadataEvent::AddPushSource(p) => format!(
            "AddPushSource {} read={} merge={} (fed by `weir ingest`)",
            p.source_name,
            p.read.kind_name(),
            p.merge.kind_name()
        ),
        MetadataEvent::DisablePushSource(p) => format!("DisablePushSource {}", p.source_name),
        MetadataEvent::DisablePollingSource(_) => "DisablePollingSource".to_owned(),
        MetadataEvent::AddData(a) => format!(
            "AddData {} watermark={} source={}",
            slice(a.new_data.as_ref()),
            a.new_watermark.map_or("-".into(), |w| w.to_rfc3339()),
            a.new_source_state
                .as_ref()
                .map(|s| s.value.clone())
                // A pushed file: what the ingest recorded about it.
                .or_else(|| a
                    .extra
                    .as_ref()
                    .and_then(weir_ingest::source_file::RecordedFile::from_extra)
                    .map(|r| r.path))
                .unwrap_or_else(|| "-".into())
        ),
        MetadataEvent::ExecuteTransform(t) => format!(
            "ExecuteTransform {} inputs=[{}] watermark={} engine={}",
            slice(t.new_data.as_ref()),
            t.query_inputs
                .iter()
                .map(|q| match (q.prev_offset, q.new_offset) {
                    (p, n) if p == n =>
                        format!("{}: none", weir_dataset::chain::short_id(&q.dataset_id)),
                    (p, Some(n)) => format!(
                        "{}: [{}, {n}]",
                        weir_dataset::chain::short_id(&q.dataset_id),
                        p.map_or(0, |p| p + 1)
                    ),
                    (_, None) => format!("{}: none", weir_dataset::chain::short_id(&q.dataset_id)),
                })
                .collect::<Vec<_>>()
                .join(", "),
            t.new_watermark.map_or("-".into(), |w| w.to_rfc3339()),
            engine.map_or("-".into(), |e| format!(
                "{} ({} {})",
                e.name, e.runtime, e.reference
            ))
        ),
    }
}

fn slice(d: Option<&weir_odf::DataSlice>) -> String {
    match d {
        Some(d) => format!(
            "records=[{}, {}] data={}",
            d.offset_interval.start,
            d.offset_interval.end,
            weir_dataset::chain::short(&d.physical_hash)
        ),
        None => "records=none".into(),
    }
}
