//! kamu's own chain vectors (`../shared/odf/vectors/chain`, written by kamu-cli ba5878ea): every block decodes,
//! re-encodes to identical bytes, and hashes to what kamu recorded.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde_json::Value;
use weir_odf::{DataSlice, DatasetId, ManifestVersion, MetadataBlock, MetadataEvent, Multihash};

fn vectors_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/odf/vectors/chain");
    assert!(
        dir.join("vectors.json").is_file(),
        "the ODF chain vectors are missing: expected {} (the workspace's ../shared/odf/vectors/chain)",
        dir.display()
    );
    dir
}

fn vectors() -> Value {
    let text = std::fs::read_to_string(vectors_dir().join("vectors.json"))
        .expect("vectors.json is readable");
    serde_json::from_str(&text).expect("vectors.json is JSON")
}

fn entries(v: &Value, chain: &str) -> Vec<Value> {
    v[chain].as_array().expect("a list of blocks").clone()
}

fn all_entries(v: &Value) -> Vec<Value> {
    let mut all = entries(v, "root_blocks");
    all.extend(entries(v, "derivative_blocks"));
    all
}

fn read(file: &str) -> Vec<u8> {
    std::fs::read(vectors_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn text(v: &Value) -> &str {
    v.as_str().expect("a string")
}

#[test]
fn every_block_decodes_as_a_version_2_metadata_block_matching_vectors_json() {
    let v = vectors();
    for entry in all_entries(&v) {
        let file = text(&entry["file"]);
        let bytes = read(file);
        assert_eq!(
            bytes.len() as u64,
            entry["size"].as_u64().expect("size"),
            "{file}"
        );
        assert_eq!(entry["manifest_kind"].as_u64(), Some(0x40_0000), "{file}");
        let manifest = weir_odf::manifest::read(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(manifest.version, ManifestVersion::V2, "{file}");
        assert_eq!(
            manifest.content.len() as u64,
            entry["content_size"].as_u64().expect("content_size")
        );
        let (block, version) =
            MetadataBlock::decode_versioned(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(version, ManifestVersion::V2);
        assert_eq!(
            block.sequence_number,
            entry["sequence_number"].as_u64().expect("seq"),
            "{file}"
        );
        assert_eq!(block.event.name(), text(&entry["event"]), "{file}");
        let system_time: DateTime<Utc> = text(&entry["system_time"]).parse().expect("a time");
        assert_eq!(block.system_time, system_time, "{file}");
        let prev = entry["prev_block_hash"]
            .as_str()
            .map(|h| h.parse::<Multihash>().expect("a hash"));
        assert_eq!(block.prev_block_hash, prev, "{file}");
        if let Some(slice) = block.event.new_data() {
            assert_eq!(
                slice.logical_hash.to_string(),
                text(&entry["new_data_logical_hash"]),
                "{file}"
            );
            assert_eq!(
                slice.physical_hash.to_string(),
                text(&entry["new_data_physical_hash"]),
                "{file}"
            );
        }
    }
}

#[test]
fn re_encoding_every_decoded_block_gives_identical_bytes() {
    let v = vectors();
    for entry in all_entries(&v) {
        let file = text(&entry["file"]);
        let bytes = read(file);
        let block = weir_odf::decode_block(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
        let encoded = weir_odf::encode_block(&block);
        if encoded != bytes {
            let first = encoded.iter().zip(&bytes).position(|(a, b)| a != b);
            panic!(
                "{file}: re-encoded {} bytes differ from kamu's {} bytes (first difference at {first:?})\n\
                 ours:  {encoded:02x?}\nkamu's: {bytes:02x?}",
                encoded.len(),
                bytes.len()
            );
        }
    }
}

#[test]
fn block_hashes_match_the_recorded_ones_and_link_the_chains() {
    let v = vectors();
    for chain in ["root_blocks", "derivative_blocks"] {
        let blocks = entries(&v, chain);
        let mut prev: Option<Multihash> = None;
        for (seq, entry) in blocks.iter().enumerate() {
            let file = text(&entry["file"]);
            let bytes = read(file);
            let hash = weir_odf::block_hash(&bytes);
            assert_eq!(hash.to_string(), text(&entry["block_hash"]), "{file}");
            assert_eq!(MetadataBlock::hash(&bytes), hash);
            let block = weir_odf::decode_block(&bytes).expect("decodes");
            assert_eq!(block.sequence_number, seq as u64, "{file}");
            assert_eq!(block.prev_block_hash, prev, "{file}");
            if seq == 0 {
                assert!(
                    matches!(block.event, MetadataEvent::Seed(_)),
                    "{file} starts its chain"
                );
            }
            prev = Some(hash);
        }
        let head = if chain == "root_blocks" {
            "root_head"
        } else {
            "derivative_head"
        };
        assert_eq!(prev.map(|h| h.to_string()).as_deref(), v[head].as_str());
    }
}

#[test]
fn hashes_and_dataset_ids_parse_and_print_to_the_exact_text() {
    let v = vectors();
    for entry in all_entries(&v) {
        for key in [
            "block_hash",
            "prev_block_hash",
            "new_data_logical_hash",
            "new_data_physical_hash",
        ] {
            if let Some(t) = entry[key].as_str() {
                assert_eq!(t.parse::<Multihash>().expect("a multihash").to_string(), t);
            }
        }
    }
    for dataset in v["datasets"].as_array().expect("datasets") {
        let t = text(&dataset["id"]);
        let id: DatasetId = t.parse().expect("a dataset id");
        assert_eq!(id.to_string(), t);
        let hex: String = id.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, text(&dataset["id_bytes_hex"]));
    }
    for file in v["data_files"].as_array().expect("data files") {
        let logical: Multihash = text(&file["logical_hash"]).parse().expect("a multihash");
        assert_eq!(logical.codec(), weir_odf::Multicodec::Arrow0_Sha3_256);
        assert_eq!(logical.to_string(), text(&file["logical_hash"]));
        let physical: Multihash = text(&file["physical_hash"]).parse().expect("a multihash");
        assert_eq!(physical.codec(), weir_odf::Multicodec::Sha3_256);
    }
}

#[test]
fn seeds_carry_the_dataset_ids_and_kinds() {
    let v = vectors();
    let ids: Vec<DatasetId> = v["datasets"]
        .as_array()
        .expect("datasets")
        .iter()
        .map(|d| text(&d["id"]).parse().expect("an id"))
        .collect();
    for (file, id, kind) in [
        ("root/00_Seed.bin", ids[0], weir_odf::DatasetKind::Root),
        (
            "deriv/00_Seed.bin",
            ids[1],
            weir_odf::DatasetKind::Derivative,
        ),
    ] {
        let block = weir_odf::decode_block(&read(file)).expect("decodes");
        assert_eq!(
            block.event,
            MetadataEvent::Seed(weir_odf::Seed {
                dataset_id: id,
                dataset_kind: kind
            }),
            "{file}"
        );
    }
}

fn data_slice(file: &str) -> DataSlice {
    match weir_odf::decode_block(&read(file)).expect("decodes").event {
        MetadataEvent::AddData(e) => e.new_data.expect("new data"),
        MetadataEvent::ExecuteTransform(e) => e.new_data.expect("new data"),
        other => panic!("{file}: {} carries no data", other.name()),
    }
}

#[test]
fn data_slices_give_the_parquet_files_size_and_physical_hash() {
    let v = vectors();
    for (block, data) in [
        ("root/04_AddData.bin", "data_root.parquet"),
        ("deriv/04_ExecuteTransform.bin", "data_deriv.parquet"),
    ] {
        let slice = data_slice(block);
        let bytes = read(data);
        assert_eq!(slice.size, bytes.len() as u64, "{data}");
        assert_eq!(slice.physical_hash, Multihash::sha3_256(&bytes), "{data}");
        let mut hasher = weir_odf::Sha3Hasher::new();
        std::io::copy(&mut bytes.as_slice(), &mut hasher).expect("hashing never fails");
        assert_eq!(hasher.finish(), slice.physical_hash);
        let recorded = v["data_files"]
            .as_array()
            .expect("data files")
            .iter()
            .find(|f| f["file"] == data)
            .expect("recorded");
        assert_eq!(
            slice.logical_hash.to_string(),
            text(&recorded["logical_hash"])
        );
        let interval = recorded["offset_interval"].as_array().expect("interval");
        assert_eq!(
            slice.offset_interval,
            weir_odf::OffsetInterval {
                start: interval[0].as_u64().expect("start"),
                end: interval[1].as_u64().expect("end")
            }
        );
    }
}

#[test]
fn execute_transform_names_the_root_seed_and_head_and_set_transform_the_same_id() {
    let v = vectors();
    let root_id: DatasetId = text(&v["datasets"][0]["id"]).parse().expect("an id");
    let root_head: Multihash = text(&v["root_head"]).parse().expect("a hash");
    let MetadataEvent::ExecuteTransform(et) =
        weir_odf::decode_block(&read("deriv/04_ExecuteTransform.bin"))
            .expect("decodes")
            .event
    else {
        panic!("not an ExecuteTransform");
    };
    assert_eq!(
        et.query_inputs,
        vec![weir_odf::ExecuteTransformInput {
            dataset_id: root_id,
            prev_block_hash: None,
            new_block_hash: Some(root_head),
            prev_offset: None,
            new_offset: Some(2),
        }]
    );
    let MetadataEvent::SetTransform(st) =
        weir_odf::decode_block(&read("deriv/01_SetTransform.bin"))
            .expect("decodes")
            .event
    else {
        panic!("not a SetTransform");
    };
    assert_eq!(st.inputs[0].dataset_id(), Some(root_id));
    assert_eq!(st.inputs[0].query_alias(), "root");
    let sql = st.transform.sql();
    assert_eq!(sql.engine, "datafusion");
    assert_eq!(sql.query, None);
    assert_eq!(
        sql.queries.as_deref(),
        Some(
            &[weir_odf::SqlQueryStep {
                alias: None,
                query: text(&v["transform_query_used"]).to_owned()
            }][..]
        )
    );
}

#[test]
fn timestamps_of_version_2_sit_unaligned_where_kamu_put_them() {
    // README: in root/00_Seed.bin system_time starts at byte 30 of the inner buffer, and at byte 50 in
    // root/01_SetPollingSource.bin.
    for (file, at) in [
        ("root/00_Seed.bin", 30usize),
        ("root/01_SetPollingSource.bin", 50),
    ] {
        let bytes = read(file);
        let content = weir_odf::manifest::read(&bytes)
            .expect("a manifest")
            .content;
        let block = weir_odf::decode_block(&bytes).expect("decodes");
        let ts = weir_odf::timestamp::to_flatbuffers(&block.system_time);
        assert_eq!(&content[at..at + 16], &ts.0[..], "{file}");
        assert_eq!(&block.encode_content()[..], content, "{file}");
    }
}
