//! `weir tail DATASET`: the last records as a table.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use serde_json::json;

use super::{Output, known};
use crate::commands::error::CommandError;
use weir_dataset::chain::store::FileKind;
use weir_dataset::data;
use weir_transaction::Context;

/// The most characters of one value the table shows; longer values end in `…` and their full length.
/// (`--format json` gives every value whole.)
pub const MAX_CELL_CHARS: usize = 200;

/// Runs `tail`: the last `n` records after skipping the `skip` newest (kamu's `tail -s`). Reads the slices
/// from the last backwards, and of each only the rows it needs (a Parquet row selection: other row groups
/// are not decoded). Every slice read is checked against its hash first.
pub async fn run(
    ctx: &Context,
    dataset: &str,
    n: usize,
    skip: usize,
) -> Result<Output, CommandError> {
    let shown = n;
    let n = n.saturating_add(skip);
    known(ctx, dataset)?;
    let store = ctx.storage.dataset(dataset);
    let chain = store.chain().await?;
    let slices: Vec<_> = chain.data_slices().cloned().collect();
    let scratch = ctx.scratch(dataset)?;
    let mut batches: Vec<RecordBatch> = Vec::new();
    let mut have = 0usize;
    for s in slices.iter().rev() {
        if have >= n {
            break;
        }
        let path = store
            .stage_file(
                FileKind::Data,
                &s.physical_hash,
                Some(s.size),
                scratch.path(),
            )
            .await?;
        let mut last = data::read_last_rows(&path, n - have)?;
        have += last.iter().map(RecordBatch::num_rows).sum::<usize>();
        last.append(&mut batches);
        batches = last;
    }
    let Some(first) = batches.first() else {
        return Ok(Output {
            text: format!("dataset `{dataset}` has no records"),
            json: json!({ "dataset": dataset, "records": [] }),
        });
    };
    let all = concat_batches(&first.schema(), &batches).map_err(data::arrow_err("tail"))?;
    // The `skip` newest records go; at most `shown` remain.
    let kept = all.num_rows().saturating_sub(skip);
    let all = all.slice(kept.saturating_sub(shown), kept.min(shown));
    if all.num_rows() == 0 {
        return Ok(Output {
            text: format!("dataset `{dataset}` has no records before the {skip} skipped"),
            json: json!({ "dataset": dataset, "records": [] }),
        });
    }
    let text = arrow::util::pretty::pretty_format_batches(&[shortened(&all)?])
        .map_err(data::arrow_err("tail"))?
        .to_string();
    Ok(Output {
        text,
        json: json!({ "dataset": dataset, "records": to_json_rows(&all)? }),
    })
}

/// The batch as text columns with every value cut to [`MAX_CELL_CHARS`], so the table costs the same
/// whatever the values' size.
fn shortened(b: &RecordBatch) -> Result<RecordBatch, CommandError> {
    let opts = FormatOptions::default().with_null("");
    let mut fields = Vec::with_capacity(b.num_columns());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(b.num_columns());
    for (f, c) in b.schema().fields().iter().zip(b.columns()) {
        let formatter =
            ArrayFormatter::try_new(c.as_ref(), &opts).map_err(data::arrow_err("formatting"))?;
        let values: StringArray = (0..b.num_rows())
            .map(|r| Some(cut(&formatter.value(r).to_string())))
            .collect();
        fields.push(Field::new(f.name(), DataType::Utf8, true));
        columns.push(Arc::new(values));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| data::arrow_err("formatting")(e).into())
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_CELL_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_at_a_character_boundary_with_their_length() {
        let long = "é".repeat(MAX_CELL_CHARS + 5);
        let shown = cut(&long);
        assert!(shown.starts_with(&"é".repeat(MAX_CELL_CHARS)));
        assert!(shown.ends_with(&format!("… ({} bytes)", long.len())));
        assert_eq!(cut("short"), "short");
    }
}
