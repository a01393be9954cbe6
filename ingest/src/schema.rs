//! A root dataset's schema, fixed by its first committed data, and the check of every new file against it.
//!
//! Columns are compared by name and by ODF logical type: `Utf8`, `LargeUtf8` and `Utf8View` are one type
//! (so are the binary forms), as kamu compares them; nullability does not count. A file that passes is
//! reordered and cast to the dataset's physical types, so every slice of a dataset has one Arrow schema.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{BadData, ChangedType, IngestError};
use weir_dataset::chain::store::{Chain, DatasetStore, FileKind};
use weir_dataset::data::{DataError, arrow_err, parquet_err};
use weir_odf::{DataSlice, DatasetVocabulary};

/// The data columns (all but offset, op and system time) a root dataset's records have, or `None` before
/// its first data. Today that is the schema of its first data slice; it is the one place to read it from
/// a `SetDataSchema` event instead.
pub async fn dataset_schema(
    store: &DatasetStore,
    chain: &Chain,
    vocab: &DatasetVocabulary,
) -> Result<Option<SchemaRef>, IngestError> {
    let Some(first) = chain.data_slices().next() else {
        return Ok(None);
    };
    let schema = slice_schema(store, first).await?;
    let system = [
        &vocab.offset_column,
        &vocab.operation_type_column,
        &vocab.system_time_column,
    ];
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .filter(|f| !system.contains(&f.name()))
        .map(|f| f.as_ref().clone())
        .collect();
    Ok(Some(Arc::new(Schema::new(fields))))
}

/// The Arrow schema of a stored slice, from its Parquet footer alone: on a local disk only the footer is
/// read, on an object store only the footer is fetched (two range reads, whatever the slice's size).
/// Records are neither read nor hashed: nothing of the file is handed on, and a footer that does not parse
/// is an error.
pub async fn slice_schema(
    store: &DatasetStore,
    slice: &DataSlice,
) -> Result<SchemaRef, IngestError> {
    let context = "reading the schema of a stored slice";
    let schema = match store.local_path(FileKind::Data, &slice.physical_hash) {
        Some(path) => {
            let file = std::fs::File::open(&path).map_err(|e| {
                IngestError::Data(DataError::Column {
                    message: format!("{context}: {}: {e}", path.display()),
                })
            })?;
            ParquetRecordBatchReaderBuilder::try_new(file)
                .map_err(parquet_err(context))?
                .schema()
                .clone()
        }
        None => Arc::new(
            remote_footer_schema(store, slice)
                .await
                .map_err(|message| {
                    IngestError::Data(DataError::Column {
                        message: format!(
                            "{context}: {}: {message}",
                            store.display_file(FileKind::Data, &slice.physical_hash)
                        ),
                    })
                })?,
        ),
    };
    Ok(schema)
}

/// The Arrow schema in the footer of a slice on an object store, fetched by range (the slice's recorded
/// size locates the footer).
async fn remote_footer_schema(store: &DatasetStore, slice: &DataSlice) -> Result<Schema, String> {
    use object_store::ObjectStoreExt;
    use parquet::file::metadata::{FooterTail, ParquetMetaDataReader};
    const TAIL: u64 = 8;
    let size = slice.size;
    if size < 12 {
        return Err(format!("{size} bytes is too short for Parquet"));
    }
    let objects = store.storage().object_store();
    let path = store.object_path(FileKind::Data, &slice.physical_hash);
    let tail = objects
        .get_range(&path, size - TAIL..size)
        .await
        .map_err(|e| e.to_string())?;
    let footer = FooterTail::try_from(tail.as_ref()).map_err(|e| e.to_string())?;
    let length = footer.metadata_length() as u64;
    if length + TAIL + 4 > size {
        return Err(format!(
            "the footer claims {length} bytes of metadata in a file of {size} bytes"
        ));
    }
    let metadata = objects
        .get_range(&path, size - TAIL - length..size - TAIL)
        .await
        .map_err(|e| e.to_string())?;
    let metadata = ParquetMetaDataReader::decode_metadata(&metadata).map_err(|e| e.to_string())?;
    let file = metadata.file_metadata();
    parquet::arrow::parquet_to_arrow_schema(file.schema_descr(), file.key_value_metadata())
        .map_err(|e| e.to_string())
}

/// Checks `batch` (data columns with the event time) against the dataset's schema and returns it with the
/// dataset's column order and physical types.
pub fn conform(batch: &RecordBatch, dataset: &Schema, file: &str) -> Result<RecordBatch, BadData> {
    let schema = batch.schema();
    let missing: Vec<String> = dataset
        .fields()
        .iter()
        .filter(|f| schema.field_with_name(f.name()).is_err())
        .map(|f| f.name().clone())
        .collect();
    let extra: Vec<String> = schema
        .fields()
        .iter()
        .filter(|f| dataset.field_with_name(f.name()).is_err())
        .map(|f| f.name().clone())
        .collect();
    let changed: Vec<ChangedType> = dataset
        .fields()
        .iter()
        .filter_map(|old| {
            let new = schema.field_with_name(old.name()).ok()?;
            (!same_logical_type(old.data_type(), new.data_type())).then(|| ChangedType {
                column: old.name().clone(),
                old: type_name(old.data_type()),
                new: type_name(new.data_type()),
            })
        })
        .collect();
    if !missing.is_empty() || !extra.is_empty() || !changed.is_empty() {
        return Err(BadData::SchemaChanged {
            file: file.to_string(),
            missing,
            extra,
            changed,
        });
    }
    let unreadable = |e: arrow::error::ArrowError| BadData::Unreadable {
        file: file.to_string(),
        message: e.to_string(),
    };
    let columns = dataset
        .fields()
        .iter()
        .map(|f| {
            let c = batch
                .column_by_name(f.name())
                .ok_or_else(|| BadData::SchemaChanged {
                    file: file.to_string(),
                    missing: vec![f.name().clone()],
                    extra: vec![],
                    changed: vec![],
                })?;
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                // Only between forms of one logical type (Utf8View -> Utf8, ...): lossless.
                cast(c, f.data_type()).map_err(unreadable)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let fields: Vec<Field> = dataset
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(unreadable)
}

/// Whether two Arrow types are one ODF logical type.
pub fn same_logical_type(a: &DataType, b: &DataType) -> bool {
    use DataType::*;
    match (a, b) {
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (List(x) | LargeList(x) | ListView(x), List(y) | LargeList(y) | ListView(y)) => {
            same_logical_type(x.data_type(), y.data_type())
        }
        (Struct(x), Struct(y)) => {
            x.len() == y.len()
                && x.iter().zip(y.iter()).all(|(x, y)| {
                    x.name() == y.name() && same_logical_type(x.data_type(), y.data_type())
                })
        }
        _ => a == b,
    }
}

/// A type as users write it in a DDL schema (`BIGINT`, `STRING`, ...), Arrow's name for the others.
pub fn type_name(t: &DataType) -> String {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Date32 => "DATE".into(),
        DataType::Timestamp(TimeUnit::Millisecond, Some(tz)) if tz.as_ref() == "UTC" => {
            "TIMESTAMP".into()
        }
        other => other.to_string(),
    }
}

/// Arrow failed on a batch that passed the checks.
pub(crate) fn arrow(context: &str) -> impl FnOnce(arrow::error::ArrowError) -> IngestError {
    let f = arrow_err(context);
    move |e| IngestError::Data(f(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray, StringViewArray};

    #[tokio::test]
    async fn a_slice_schema_read_by_range_from_an_object_store_is_the_readers_and_a_wrong_size_is_an_error()
     {
        let schema = Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new(
                "event_time",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
            Field::new("name", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![0, 1])),
                Arc::new(
                    arrow::array::TimestampMillisecondArray::from(vec![Some(1), None])
                        .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            ],
        )
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let expected = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes.clone()))
            .unwrap()
            .schema()
            .clone();

        let storage = weir_dataset::chain::store::Storage::open("memory:///ws").unwrap();
        let store = storage.dataset("d");
        let size = bytes.len() as u64;
        let hash = store.put_file(FileKind::Data, bytes.into()).await.unwrap();
        let slice = DataSlice {
            logical_hash: hash,
            physical_hash: hash,
            offset_interval: weir_odf::OffsetInterval { start: 0, end: 1 },
            size,
        };
        assert_eq!(slice_schema(&store, &slice).await.unwrap(), expected);
        let wrong = DataSlice {
            size: size - 3,
            ..slice
        };
        assert!(slice_schema(&store, &wrong).await.is_err());
    }

    fn dataset() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ])
    }

    #[test]
    fn a_utf8_view_column_is_the_same_string_type_and_is_stored_as_the_dataset_has_it() {
        let batch = RecordBatch::try_from_iter(vec![
            (
                "name",
                Arc::new(StringViewArray::from(vec!["a"])) as arrow::array::ArrayRef,
            ),
            ("id", Arc::new(Int64Array::from(vec![1]))),
        ])
        .unwrap();
        let out = conform(&batch, &dataset(), "f.parquet").unwrap();
        assert_eq!(out.schema().field(0).name(), "id");
        assert_eq!(out.schema().field(1).data_type(), &DataType::Utf8);
    }

    #[test]
    fn missing_extra_and_changed_columns_are_all_named() {
        let batch = RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(StringArray::from(vec!["1"])) as arrow::array::ArrayRef,
            ),
            ("extra", Arc::new(Int64Array::from(vec![1]))),
        ])
        .unwrap();
        let err = conform(&batch, &dataset(), "f.csv")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "f.csv: the columns differ from the dataset's (missing: \"name\"; extra: \"extra\"; \
             changed type: \"id\" BIGINT -> STRING)"
        );
    }
}
