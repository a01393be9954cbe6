//! The datasets Weir writes are ODF datasets as kamu reads them: every block decodes with `odf`, encodes
//! back to the identical bytes (kamu re-serialises blocks and checks the hash), is named by its hash, and
//! the chains keep kamu's rules; every slice's logical hash is ODF's, recomputed from the stored file.
use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use weir_dataset::chain::validate::{ChainValidator, check_input_against_chain};
use weir_odf::{DatasetId, MetadataBlock, MetadataEvent, Multicodec, Multihash};

/// A dataset's blocks read straight from its folder, oldest first, each checked byte for byte.
fn blocks(dir: &Path) -> Vec<(Multihash, MetadataBlock)> {
    let head: Multihash = std::fs::read_to_string(dir.join("refs/head"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut out = Vec::new();
    let mut next = Some(head);
    while let Some(h) = next {
        let bytes = std::fs::read(dir.join("blocks").join(h.to_string())).unwrap();
        assert_eq!(
            MetadataBlock::hash(&bytes),
            h,
            "block file named by its hash"
        );
        let block = MetadataBlock::decode(&bytes).unwrap();
        assert_eq!(
            block.encode(),
            bytes,
            "block {h} re-encodes to identical bytes"
        );
        next = block.prev_block_hash;
        out.push((h, block));
    }
    out.reverse();
    out
}

#[test]
fn every_block_and_slice_of_the_pulled_example_is_odf_as_kamu_reads_it() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let root = ws.path().join(".weir/datasets");
    let mut chains: HashMap<DatasetId, Vec<(Multihash, MetadataBlock)>> = HashMap::new();
    let mut all = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let chain = blocks(&dir);
        let mut v = ChainValidator::default();
        for (h, b) in &chain {
            v.push(*h, b).unwrap();
        }
        chains.insert(v.summary().dataset_id.unwrap(), chain.clone());
        all.push((dir, chain));
    }
    assert_eq!(all.len(), 5);
    let mut slices = 0;
    for (dir, chain) in &all {
        let mut schema_seen = false;
        for (_, b) in chain {
            match &b.event {
                MetadataEvent::SetDataSchema(s) => {
                    schema_seen = true;
                    assert!(s.schema.is_some() && s.raw_arrow_schema.is_none());
                }
                MetadataEvent::SetTransform(t) => {
                    for i in &t.inputs {
                        assert!(i.dataset_ref.starts_with("did:odf:"), "{}", i.dataset_ref);
                        assert!(i.dataset_id().is_some() && i.alias.is_some());
                    }
                    let version = t.transform.sql().version.as_deref().unwrap();
                    assert!(
                        version.starts_with("embedded:reference-engine@"),
                        "{version}"
                    );
                }
                MetadataEvent::ExecuteTransform(e) => {
                    for (k, input) in e.query_inputs.iter().enumerate() {
                        check_input_against_chain(
                            b.sequence_number,
                            k,
                            input,
                            &chains[&input.dataset_id],
                        )
                        .unwrap();
                    }
                }
                _ => {}
            }
            if let Some(d) = b.event.new_data() {
                assert!(
                    schema_seen,
                    "SetDataSchema precedes the first data of {}",
                    dir.display()
                );
                let bytes =
                    std::fs::read(dir.join("data").join(d.physical_hash.to_string())).unwrap();
                assert_eq!(bytes.len() as u64, d.size);
                assert_eq!(Multihash::sha3_256(&bytes), d.physical_hash);
                let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
                    .unwrap()
                    .with_batch_size(10_000)
                    .build()
                    .unwrap();
                let batches: Vec<_> = reader.map(Result::unwrap).collect();
                let logical =
                    weir_odf::logical_hash::of_batches(&batches[0].schema(), &batches).unwrap();
                assert_eq!(logical.codec(), Multicodec::Arrow0_Sha3_256);
                assert_eq!(
                    logical, d.logical_hash,
                    "logical hash of {}",
                    d.physical_hash
                );
                slices += 1;
            }
        }
    }
    assert_eq!(slices, 8, "slices checked");
}
