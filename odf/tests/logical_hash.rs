//! The logical hash and the Arrow schema conversion against kamu's vectors (feature `arrow`).
#![cfg(feature = "arrow")]

use std::fs::File;
use std::path::PathBuf;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use weir_odf::logical_hash::LogicalHasher;
use weir_odf::{MetadataEvent, Multicodec, Multihash};

fn vectors_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/odf/vectors/chain");
    assert!(
        dir.join("vectors.json").is_file(),
        "the ODF chain vectors are missing: expected {}",
        dir.display()
    );
    dir
}

/// The file's schema and its record batches, read as kamu reads them: 10 000 rows per batch.
fn read_parquet(name: &str) -> (Schema, Vec<RecordBatch>) {
    let file = File::open(vectors_dir().join(name)).expect("the data file opens");
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("a Parquet file")
        .with_batch_size(10_000)
        .build()
        .expect("a reader");
    let schema = arrow::record_batch::RecordBatchReader::schema(&reader)
        .as_ref()
        .clone();
    let batches = reader.collect::<Result<Vec<_>, _>>().expect("batches");
    (schema, batches)
}

fn recorded_logical_hash(name: &str) -> Multihash {
    let text = std::fs::read_to_string(vectors_dir().join("vectors.json")).expect("vectors.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let file = v["data_files"]
        .as_array()
        .expect("data files")
        .iter()
        .find(|f| f["file"] == name)
        .expect("recorded");
    assert_eq!(file["logical_hash_codec"], "0x300016");
    file["logical_hash"]
        .as_str()
        .expect("text")
        .parse()
        .expect("a multihash")
}

#[test]
fn logical_hashes_of_both_parquet_files_equal_the_recorded_ones() {
    for name in ["data_root.parquet", "data_deriv.parquet"] {
        let (schema, batches) = read_parquet(name);
        let mut hasher = LogicalHasher::new(&schema).expect("a supported schema");
        for batch in &batches {
            hasher.update(batch).expect("the file's own schema");
        }
        let hash = hasher.finish();
        assert_eq!(hash.codec(), Multicodec::Arrow0_Sha3_256);
        assert_eq!(hash, recorded_logical_hash(name), "{name}");
        assert_eq!(
            weir_odf::logical_hash::of_batches(&schema, &batches),
            Ok(hash)
        );
    }
}

#[test]
fn the_logical_hash_does_not_depend_on_batch_boundaries() {
    let (schema, batches) = read_parquet("data_root.parquet");
    let whole = weir_odf::logical_hash::of_batches(&schema, &batches).expect("hashes");
    let rows: Vec<RecordBatch> = batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(move |i| b.slice(i, 1)))
        .collect();
    assert_eq!(
        weir_odf::logical_hash::of_batches(&schema, &rows),
        Ok(whole)
    );
}

#[test]
fn a_batch_of_another_schema_is_a_schema_mismatch() {
    let (root, _) = read_parquet("data_root.parquet");
    let (_, batches) = read_parquet("data_root.parquet");
    let projected = batches[0].project(&[0, 1]).expect("columns 0 and 1");
    let mut hasher = LogicalHasher::new(&root).expect("supported");
    assert!(matches!(
        hasher.update(&projected),
        Err(weir_odf::logical_hash::LogicalHashError::SchemaMismatch { .. })
    ));
}

#[test]
fn a_null_column_is_unsupported_rather_than_a_panic() {
    let schema = Schema::new(vec![arrow::datatypes::Field::new(
        "n",
        arrow::datatypes::DataType::Null,
        true,
    )]);
    assert!(matches!(
        LogicalHasher::new(&schema),
        Err(weir_odf::logical_hash::LogicalHashError::UnsupportedType { .. })
    ));
}

#[test]
fn the_arrow_schema_of_each_data_file_converts_to_its_set_data_schema() {
    for (data, block) in [
        ("data_root.parquet", "root/03_SetDataSchema.bin"),
        ("data_deriv.parquet", "deriv/03_SetDataSchema.bin"),
    ] {
        let (schema, _) = read_parquet(data);
        let converted =
            weir_odf::arrow_schema::data_schema_from_arrow(&schema).expect("convertible");
        let bytes = std::fs::read(vectors_dir().join(block)).expect("the block");
        let MetadataEvent::SetDataSchema(e) =
            weir_odf::decode_block(&bytes).expect("decodes").event
        else {
            panic!("{block} is not a SetDataSchema");
        };
        assert_eq!(e.raw_arrow_schema, None);
        assert_eq!(e.schema, Some(converted), "{data} vs {block}");
    }
}

#[test]
fn string_and_binary_encodings_are_one_logical_type_even_when_nested() {
    use arrow::datatypes::{DataType as A, Field};
    use std::sync::Arc;
    let nested = |s: A, b: A| {
        Schema::new(vec![
            Field::new("s", s.clone(), true),
            Field::new("b", b, false),
            Field::new(
                "l",
                A::List(Arc::new(Field::new("item", s.clone(), true))),
                true,
            ),
            Field::new(
                "st",
                A::Struct(vec![Field::new("x", s, false)].into()),
                true,
            ),
        ])
    };
    let a = nested(A::Utf8, A::Binary);
    assert!(weir_odf::arrow_schema::same_logical_schema(
        &a,
        &nested(A::Utf8View, A::LargeBinary)
    ));
    assert!(weir_odf::arrow_schema::same_logical_schema(
        &a,
        &nested(A::LargeUtf8, A::BinaryView)
    ));
    assert!(!weir_odf::arrow_schema::same_logical_schema(
        &a,
        &nested(A::Binary, A::Binary)
    ));
    let (root, _) = read_parquet("data_root.parquet");
    let (deriv, _) = read_parquet("data_deriv.parquet");
    assert!(weir_odf::arrow_schema::same_logical_schema(&root, &deriv));
}
