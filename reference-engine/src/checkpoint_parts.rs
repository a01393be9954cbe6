//! A checkpoint of several parts in one Parquet file: each part is a record batch of its own columns,
//! kept as one nullable struct column named after the part, with `__weir_part` (Int32) telling the
//! rows of each part apart; a JSON header in the key-value metadata `weir.checkpoint`. Temporal joins
//! (format 2), interval joins (format 6, and 3 before it) and top-N (format 4) keep their state so.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int32Array, RecordBatch, StructArray, new_null_array,
};
use datafusion::arrow::compute::{concat, concat_batches, filter};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::file::metadata::KeyValue;

use crate::error::EngineError;
use crate::output::writer::write_parquet_file;
use crate::window::checkpoint::{HEADER_KEY, metadata_value};

const PART_COLUMN: &str = "__weir_part";

fn nullable(schema: &Schema) -> Fields {
    schema
        .fields()
        .iter()
        .map(|f| Arc::new(f.as_ref().clone().with_nullable(true)))
        .collect()
}

/// Writes `parts` (named `names`, in order) and the JSON `header` to `path`.
pub(crate) fn write_parts(
    path: &Path,
    header: &str,
    names: &[String],
    parts: &[&RecordBatch],
) -> Result<(), EngineError> {
    let failed = |reason: String| EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason,
    };
    let total: usize = parts.iter().map(|b| b.num_rows()).sum();
    let mut fields = vec![Field::new(PART_COLUMN, DataType::Int32, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int32Array::from_iter_values(
        parts
            .iter()
            .enumerate()
            .flat_map(|(i, b)| std::iter::repeat_n(i as i32, b.num_rows())),
    ))];
    let mut before = 0;
    for (part, name) in parts.iter().zip(names) {
        let children = nullable(&part.schema());
        let struct_type = DataType::Struct(children.clone());
        let values = StructArray::try_new(children, part.columns().to_vec(), None)?;
        let rows = part.num_rows();
        let pieces: Vec<ArrayRef> = vec![
            new_null_array(&struct_type, before),
            Arc::new(values),
            new_null_array(&struct_type, total - before - rows),
        ];
        let refs: Vec<&dyn Array> = pieces.iter().map(|a| a.as_ref()).collect();
        columns.push(concat(&refs)?);
        fields.push(Field::new(name, struct_type, true));
        before += rows;
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    write_parquet_file(
        path,
        schema,
        &[batch],
        vec![KeyValue::new(HEADER_KEY.to_owned(), header.to_owned())],
    )
    .map_err(failed)
}

/// Reads the JSON header and the parts `names` (each with its columns, nullable) of `path`.
pub(crate) fn read_parts(
    path: &Path,
    names: impl Fn(&str) -> Vec<String>,
) -> Result<(String, Vec<RecordBatch>), EngineError> {
    let failed = |reason: String| EngineError::CheckpointRead {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|e| failed(e.to_string()))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| failed(e.to_string()))?;
    let header = metadata_value(&builder, HEADER_KEY).map_err(failed)?;
    let names = names(&header);
    let schema: SchemaRef = Arc::clone(builder.schema());
    let reader = builder.build().map_err(|e| failed(e.to_string()))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.to_string()))?;
    let all = concat_batches(&schema, &batches)?;
    let parts = all
        .column_by_name(PART_COLUMN)
        .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
        .ok_or_else(|| failed(format!("it has no `{PART_COLUMN}` column")))?
        .clone();
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let column = all
            .column_by_name(name)
            .ok_or_else(|| failed(format!("it has no `{name}` column")))?;
        let keep: BooleanArray = parts.iter().map(|p| Some(p == Some(i as i32))).collect();
        let kept = filter(column.as_ref(), &keep)?;
        let values = kept
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| failed(format!("`{name}` is not a struct column")))?;
        out.push(RecordBatch::from(values));
    }
    Ok((header, out))
}
