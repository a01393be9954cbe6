//! `weir provenance DATASET --offset N`: the block that wrote a record and what it was computed from: the
//! exact input records, by DeriveProvenance on the recorded engine, where the engine can tell them (a
//! map/filter step); the input ranges the step read otherwise (a window's record summarises its window).

use serde_json::json;

use super::{Output, known, verify};
use crate::commands::error::CommandError;
use weir_dataset::identity::EngineIdentity;
use weir_engines::job::{InputRecords, ProvenanceJob};
use weir_engines::{EngineFailure, compat};
use weir_odf::MetadataEvent;
use weir_transaction::Context;

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
            // What the ingest recorded about the file it read (a polled or pushed file).
            let file = a
                .extra
                .as_ref()
                .and_then(weir_ingest::source_file::RecordedFile::from_extra);
            let src = a
                .new_source_state
                .as_ref()
                .map(|s| s.value.clone())
                .or_else(|| file.as_ref().map(|f| f.path.clone()))
                .unwrap_or_else(|| "-".into());
            lines.push(format!("  ingested from source `{src}`"));
            if let Some(f) = &file {
                lines.push(format!(
                    "  as read: {} bytes, modified {}, content {}",
                    f.size, f.modified, f.sha3_256
                ));
            }
            inputs_json.push(json!({ "source": src, "sourceFile": file }));
        }
        MetadataEvent::ExecuteTransform(t) => {
            let names = id_names(ctx).await?;
            match record_level(ctx, dataset, &chain, index, offset, &names).await? {
                Ok((engine, found)) => {
                    lines.push(format!(
                        "  computed by engine {} ({} {}) from these input records:",
                        engine.name, engine.runtime, engine.reference
                    ));
                    for input in &found {
                        let name = names
                            .iter()
                            .find(|(id, _)| *id == input.dataset_id)
                            .map_or("?".to_string(), |(_, n)| n.clone());
                        let ranges: Vec<String> = input
                            .offset_intervals
                            .iter()
                            .map(|iv| {
                                if iv.start == iv.end {
                                    format!("{}", iv.start)
                                } else {
                                    format!("[{}, {}]", iv.start, iv.end)
                                }
                            })
                            .collect();
                        lines.push(format!(
                            "  input `{name}` (as {}) offsets {}",
                            input.query_alias,
                            ranges.join(", ")
                        ));
                        inputs_json.push(json!({
                            "dataset": name,
                            "queryAlias": input.query_alias,
                            "offsets": input.offset_intervals.iter().map(|iv| [iv.start, iv.end]).collect::<Vec<_>>(),
                        }));
                    }
                    return Ok(Output {
                        text: lines.join("\n"),
                        json: json!({
                            "dataset": dataset,
                            "offset": offset,
                            "block": { "hash": hash, "sequenceNumber": block.sequence_number, "event": block.event.name() },
                            "recordLevel": true,
                            "inputs": inputs_json,
                        }),
                    });
                }
                Err(why) => {
                    lines.push(format!("  ({why}; showing the input ranges the step read)"))
                }
            }
            if let Some(e) = weir_dataset::identity::in_force(&chain.blocks[..index]) {
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
                    i.last_block_hash().map_or("-".into(), |h| h.to_string())
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
            "recordLevel": false,
            "inputs": inputs_json,
        }),
    })
}

/// The input records behind output `offset` of the step in block `index`, by DeriveProvenance on the
/// engine that recorded the step; `Err` with the reason when the engine cannot say (a window, an engine
/// without DeriveProvenance, a migration step).
async fn record_level(
    ctx: &Context,
    dataset: &str,
    chain: &weir_dataset::chain::store::Chain,
    index: usize,
    offset: u64,
    ids: &[(weir_odf::DatasetId, String)],
) -> Result<Result<(EngineIdentity, Vec<InputRecords>), String>, CommandError> {
    let Some(step) = verify::recorded_step(ctx, dataset, chain, index, ids).await? else {
        return Ok(Err(
            "a migration step: it finalised the previous query's windows".into(),
        ));
    };
    let compat = compat::load(&ctx.storage).await?;
    let engine = verify::recorded_engine(
        ctx,
        &compat,
        step.recorded_engine.as_ref(),
        &step.plan.transform.engine,
    )?;
    let store = ctx.storage.dataset(dataset);
    let dir = ctx.scratch(dataset)?;
    let id = chain
        .summary
        .dataset_id
        .unwrap_or(weir_odf::DatasetId::from_key([0; 32]));
    let system_time = chain.blocks[index].1.system_time;
    let job = ctx
        .stage_step(
            &store,
            dataset,
            id,
            &step.plan,
            &step.vocab,
            system_time,
            dir.path(),
        )
        .await?;
    match engine
        .derive_provenance(&ProvenanceJob {
            step: job,
            output_offsets: vec![offset],
        })
        .await
    {
        Ok(found) => Ok(Ok((engine.identity().clone(), found))),
        Err(EngineFailure::InvalidQuery { message, .. }) => Ok(Err(message)),
        Err(e @ EngineFailure::NotSupported { .. }) => Ok(Err(e.to_string())),
        Err(e) => Err(e.into()),
    }
}

async fn id_names(ctx: &Context) -> Result<Vec<(weir_odf::DatasetId, String)>, CommandError> {
    let mut out = Vec::new();
    for name in ctx.workspace.datasets.keys() {
        let chain = ctx.storage.dataset(name).chain().await?;
        if let Some(id) = chain.summary.dataset_id {
            out.push((id, name.clone()));
        }
    }
    Ok(out)
}
