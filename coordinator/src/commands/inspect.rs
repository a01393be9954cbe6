//! `weir inspect schema|query|lineage DATASET`, as kamu's `inspect`: a dataset's schema, the transforms a
//! derivative has used, and its lineage (`weir lineage`).

use serde_json::json;

use super::{Output, known};
use crate::commands::error::CommandError;
use weir_odf::MetadataEvent;
use weir_transaction::{Context, stored_slice_schema};

/// `inspect schema`: the columns of the dataset's data, as its latest `SetDataSchema` records them (`--format
/// json`: that ODF schema, and the Arrow types of its newest data slice).
pub async fn schema(ctx: &Context, dataset: &str) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let store = ctx.storage.dataset(dataset);
    let chain = store.chain().await?;
    let Some(recorded) = chain.summary.schema.clone() else {
        return Ok(Output {
            text: format!(
                "dataset `{dataset}` has no schema yet: its first data fixes it (`weir pull {dataset}`)"
            ),
            json: json!({ "dataset": dataset, "schema": null, "columns": [] }),
        });
    };
    // The physical types, from the footer of the newest slice (the recorded schema is the logical one).
    let physical = match chain.data_slices().last() {
        Some(slice) => Some(stored_slice_schema(&store, slice, dataset).await?),
        None => None,
    };
    let columns: Vec<(String, String)> = recorded
        .fields
        .iter()
        .map(|f| {
            let arrow = physical
                .as_ref()
                .and_then(|s| s.field_with_name(&f.name).ok())
                .map(|a| weir_ingest::schema::type_name(a.data_type()));
            let shown = arrow.unwrap_or_else(|| {
                serde_json::to_value(&f.data_type)
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            });
            (f.name.clone(), shown)
        })
        .collect();
    let rows: Vec<Vec<String>> = columns
        .iter()
        .map(|(name, ty)| vec![name.clone(), ty.clone()])
        .collect();
    Ok(Output {
        text: super::table(&["column", "type"], &rows),
        json: json!({
            "dataset": dataset,
            "schema": recorded,
            "columns": columns
                .iter()
                .map(|(name, ty)| json!({ "name": name, "type": ty }))
                .collect::<Vec<_>>(),
        }),
    })
}

/// `inspect query`: every `SetTransform` of the dataset's chain, oldest first, with its block, time,
/// engine, inputs and SQL: how the derivative's records were computed over time.
pub async fn query(ctx: &Context, dataset: &str) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let chain = ctx.storage.dataset(dataset).chain().await?;
    let mut text = Vec::new();
    let mut transforms = Vec::new();
    for (hash, block) in &chain.blocks {
        if let MetadataEvent::SetTransform(t) = &block.event {
            text.push(format!(
                "block {hash}  #{}  {}",
                block.sequence_number,
                block.system_time.to_rfc3339()
            ));
            text.push(format!("  {}", super::log::describe(&block.event, None)));
            transforms.push(json!({
                "blockHash": hash,
                "sequenceNumber": block.sequence_number,
                "systemTime": block.system_time,
                "setTransform": t,
            }));
        }
    }
    if transforms.is_empty() {
        let manifest = &ctx.workspace.datasets[dataset];
        text.push(if manifest.kind == weir_odf::DatasetKind::Root {
            format!("dataset `{dataset}` is a root dataset: it ingests files and has no transform")
        } else {
            format!(
                "dataset `{dataset}` has no transform recorded yet: `weir pull {dataset}` records its manifest's"
            )
        });
    }
    Ok(Output {
        text: text.join("\n"),
        json: json!({ "dataset": dataset, "transforms": transforms }),
    })
}
