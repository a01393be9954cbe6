//! `weir tail DATASET`: the last records as a table.

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use serde_json::json;

use super::{Output, known};
use crate::chain::store::FileKind;
use crate::data;
use crate::error::CommandError;
use crate::transaction::Context;

/// Runs `tail`.
pub async fn run(ctx: &Context, dataset: &str, n: usize) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let store = ctx.storage.dataset(dataset);
    let chain = store.chain().await?;
    let slices: Vec<_> = chain.data_slices().cloned().collect();
    let mut batches: Vec<RecordBatch> = Vec::new();
    let mut have = 0usize;
    for s in slices.iter().rev() {
        if have >= n {
            break;
        }
        let b = data::read_parquet(store.get_file(FileKind::Data, &s.physical_hash).await?)?;
        have += b.num_rows();
        batches.insert(0, b);
    }
    let Some(first) = batches.first() else {
        return Ok(Output {
            text: format!("dataset `{dataset}` has no records"),
            json: json!({ "records": [] }),
        });
    };
    let all = concat_batches(&first.schema(), &batches).map_err(data::arrow_err("tail"))?;
    let skip = all.num_rows().saturating_sub(n);
    let last = all.slice(skip, all.num_rows() - skip);
    let text = arrow::util::pretty::pretty_format_batches(std::slice::from_ref(&last))
        .map_err(data::arrow_err("tail"))?
        .to_string();
    Ok(Output {
        text,
        json: json!({ "dataset": dataset, "records": to_json_rows(&last)? }),
    })
}

/// Rows as JSON objects, values in their display form (numbers as numbers when they parse).
pub fn to_json_rows(b: &RecordBatch) -> Result<Vec<serde_json::Value>, CommandError> {
    let opts = FormatOptions::default();
    let formatters = b
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
        .collect::<Result<Vec<_>, _>>()
        .map_err(data::arrow_err("formatting"))?;
    let schema = b.schema();
    Ok((0..b.num_rows())
        .map(|r| {
            let mut obj = serde_json::Map::new();
            for (i, f) in schema.fields().iter().enumerate() {
                let text = formatters[i].value(r).to_string();
                let v = if b.column(i).is_null(r) {
                    serde_json::Value::Null
                } else if f.data_type().is_numeric() {
                    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
                } else {
                    serde_json::Value::String(text)
                };
                obj.insert(f.name().clone(), v);
            }
            serde_json::Value::Object(obj)
        })
        .collect())
}
