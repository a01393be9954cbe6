//! Bytes that are not a metadata block this crate reads: each gives its own error, never a panic.

use flatbuffers::FlatBufferBuilder;
use weir_odf::generated as fb;
use weir_odf::{DatasetIdError, Error, TimestampError};

fn seed_file() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/odf/vectors/chain/root/00_Seed.bin"
    );
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("the ODF chain vectors are missing ({path}): {e}"))
}

/// A manifest around `content` with the given kind and version, built with the generated code.
fn manifest(kind: i64, version: i32, content: &[u8]) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let content = fbb.create_vector(content);
    let mut b = fb::ManifestBuilder::new(&mut fbb);
    b.add_kind(kind);
    b.add_version(version);
    b.add_content(content);
    let root = b.finish();
    fbb.finish(root, None);
    fbb.finished_data().to_vec()
}

/// A `MetadataBlock` buffer holding a Seed, with the given id bytes and system time.
fn seed_content(id: &[u8], system_time: Option<fb::Timestamp>) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let id = fbb.create_vector(id);
    let mut s = fb::SeedBuilder::new(&mut fbb);
    s.add_dataset_id(id);
    let seed = s.finish();
    let mut b = fb::MetadataBlockBuilder::new(&mut fbb);
    if let Some(t) = &system_time {
        b.add_system_time(t);
    }
    b.add_event_type(fb::MetadataEvent::Seed);
    b.add_event(seed.as_union_value());
    let root = b.finish();
    fbb.finish(root, None);
    fbb.finished_data().to_vec()
}

fn a_valid_time() -> Option<fb::Timestamp> {
    Some(fb::Timestamp::new(2024, 1, 0, 0))
}

#[test]
fn a_truncated_block_is_an_invalid_manifest_buffer() {
    let bytes = seed_file();
    for len in [0, 3, 20, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            matches!(
                weir_odf::decode_block(&bytes[..len]),
                Err(Error::InvalidFlatbuffer {
                    buffer: "manifest",
                    ..
                })
            ),
            "truncated to {len} bytes"
        );
    }
}

#[test]
fn garbage_is_an_invalid_manifest_buffer() {
    for garbage in [
        vec![0xff; 64],
        b"kind: MetadataBlock\nversion: 2\n".to_vec(),
    ] {
        assert!(matches!(
            weir_odf::decode_block(&garbage),
            Err(Error::InvalidFlatbuffer {
                buffer: "manifest",
                ..
            })
        ));
    }
}

#[test]
fn a_manifest_of_another_kind_is_not_a_metadata_block() {
    let mut id = vec![0xed, 0x01];
    id.extend([7; 32]);
    let content = seed_content(&id, a_valid_time());
    assert_eq!(
        weir_odf::decode_block(&manifest(0x16, 2, &content)),
        Err(Error::NotAMetadataBlock { kind: 0x16 })
    );
}

#[test]
fn manifest_versions_1_and_4_are_not_supported() {
    let bytes = seed_file();
    let content = weir_odf::manifest::read(&bytes)
        .expect("a manifest")
        .content;
    for version in [1, 4] {
        assert_eq!(
            weir_odf::decode_block(&manifest(0x40_0000, version, content)),
            Err(Error::UnsupportedManifestVersion { version })
        );
    }
}

#[test]
fn manifest_version_3_is_read() {
    let bytes = seed_file();
    let content = weir_odf::manifest::read(&bytes)
        .expect("a manifest")
        .content;
    let (block, version) =
        weir_odf::MetadataBlock::decode_versioned(&manifest(0x40_0000, 3, content))
            .expect("version 3 is read");
    assert_eq!(version, weir_odf::ManifestVersion::V3);
    assert_eq!(block, weir_odf::decode_block(&bytes).expect("decodes"));
}

#[test]
fn a_seed_with_a_3_byte_id_is_an_invalid_dataset_id() {
    let content = seed_content(&[0xed, 0x01, 0x00], a_valid_time());
    assert_eq!(
        weir_odf::decode_block(&manifest(0x40_0000, 2, &content)),
        Err(Error::InvalidDatasetId {
            field: "Seed.dataset_id",
            source: DatasetIdError::WrongLength { len: 3 },
        })
    );
}

#[test]
fn a_block_without_system_time_is_missing_a_field() {
    let mut id = vec![0xed, 0x01];
    id.extend([7; 32]);
    let content = seed_content(&id, None);
    assert_eq!(
        weir_odf::decode_block(&manifest(0x40_0000, 2, &content)),
        Err(Error::MissingField {
            field: "MetadataBlock.system_time"
        })
    );
}

#[test]
fn day_0_of_a_year_is_an_invalid_timestamp() {
    let mut id = vec![0xed, 0x01];
    id.extend([7; 32]);
    let content = seed_content(&id, Some(fb::Timestamp::new(2024, 0, 0, 0)));
    assert_eq!(
        weir_odf::decode_block(&manifest(0x40_0000, 2, &content)),
        Err(Error::InvalidTimestamp {
            field: "MetadataBlock.system_time",
            source: TimestampError::InvalidDate {
                year: 2024,
                ordinal: 0
            },
        })
    );
}

#[test]
fn truncated_content_is_an_invalid_metadata_block_buffer() {
    let bytes = seed_file();
    let content = weir_odf::manifest::read(&bytes)
        .expect("a manifest")
        .content;
    assert!(matches!(
        weir_odf::decode_block(&manifest(0x40_0000, 2, &content[..content.len() / 2])),
        Err(Error::InvalidFlatbuffer {
            buffer: "metadata block",
            ..
        })
    ));
}

#[test]
fn an_unknown_event_type_is_an_unknown_union_type() {
    let mut fbb = FlatBufferBuilder::new();
    let empty = fb::DisablePollingSourceBuilder::new(&mut fbb).finish();
    let mut b = fb::MetadataBlockBuilder::new(&mut fbb);
    b.add_system_time(&fb::Timestamp::new(2024, 1, 0, 0));
    b.add_event_type(fb::MetadataEvent(99));
    b.add_event(empty.as_union_value());
    let root = b.finish();
    fbb.finish(root, None);
    assert_eq!(
        weir_odf::decode_block(&manifest(0x40_0000, 2, fbb.finished_data())),
        Err(Error::UnknownUnionType {
            field: "MetadataBlock.event",
            tag: 99
        })
    );
}

#[test]
fn every_prefix_and_every_flipped_byte_of_every_vector_decodes_or_errs_without_panicking() {
    let bytes = seed_file();
    for len in 0..bytes.len() {
        let _ = weir_odf::decode_block(&bytes[..len]);
    }
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1 << bit;
            let _ = weir_odf::decode_block(&flipped);
        }
    }
}
