//! Datasets written by Weir before its chains were ODF's are recognised and refused with a message that
//! names `weir upgrade`, never misread.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pre-odf")
}

/// The example workspace with `readings` and `readings.hot-days` as the old Weir wrote them.
fn old_workspace() -> tempfile::TempDir {
    let ws = workspace();
    for d in ["readings", "readings.hot-days"] {
        copy_dir(
            &fixture().join(d),
            &ws.path().join(".weir/datasets").join(d),
        );
    }
    ws
}

#[test]
fn the_fixture_is_in_the_old_format() {
    let blocks = fixture().join("readings/blocks");
    let old_hashes = std::fs::read_dir(blocks)
        .unwrap()
        .map(|e| odf::MetadataBlock::decode(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .filter_map(|b| b.event.new_data().map(|d| d.logical_hash.codec()))
        .filter(|c| *c == odf::Multicodec::Sha3_256)
        .count();
    assert_eq!(old_hashes, 3, "three slices with Weir's old logical hash");
}

#[test]
fn commands_on_an_old_format_dataset_fail_naming_weir_upgrade() {
    let ws = old_workspace();
    for args in [
        &["list"][..],
        &["log", "readings.hot-days"],
        &["pull", "--all", "--quiet"],
    ] {
        let out = weir(ws.path()).args(args).output().unwrap();
        assert!(!out.status.success(), "weir {args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("written by an older Weir"),
            "weir {args:?}: {err}"
        );
        assert!(err.contains("`weir upgrade`"), "weir {args:?}: {err}");
    }
    let out = weir(ws.path()).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(8));
}
