//! The store never hands out unchecked bytes, and a lost head is never a new dataset: files swapped or
//! corrupted under their content-addressed names, deleted outputs and a deleted head, end to end through
//! the `weir` binary on copies of the example workspace.
use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use weir_dataset::chain::store::{FileKind, Storage};
use weir_odf::MetadataEvent;
use weir_odf::Multihash;

/// Another day of readings (a copy of day 3), for the next transactions.
fn add_day(dir: &Path, day: u32) {
    let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        dir.join(format!("data/readings/2024-06-{day:02}.csv")),
        day3.replace("2024-06-03", &format!("2024-06-{day:02}")),
    )
    .unwrap();
}

/// One file a chain references: the sequence number of the block that references it, its hash and path.
#[derive(Debug, Clone)]
struct Stored {
    sequence_number: u64,
    hash: Multihash,
    path: PathBuf,
}

/// The data slices (or checkpoints) the chain of `dataset` references, oldest first.
fn stored(dir: &Path, dataset: &str, kind: FileKind) -> Vec<Stored> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let storage = Storage::open(dir.join(".weir").to_str().unwrap()).unwrap();
        let store = storage.dataset(dataset);
        let chain = store.chain().await.unwrap();
        chain
            .blocks
            .iter()
            .filter_map(|(_, b)| {
                let hash = match (kind, &b.event) {
                    (FileKind::Data, e) => e.new_data().map(|d| d.physical_hash),
                    (FileKind::Checkpoint, MetadataEvent::ExecuteTransform(t)) => {
                        t.new_checkpoint.as_ref().map(|c| c.physical_hash)
                    }
                    _ => None,
                }?;
                Some(Stored {
                    sequence_number: b.sequence_number,
                    hash,
                    path: store.local_path(kind, &hash).unwrap(),
                })
            })
            .collect()
    })
}

fn head_file(dir: &Path, dataset: &str) -> PathBuf {
    dir.join(".weir/datasets").join(dataset).join("refs/head")
}

/// Runs `weir` expecting exit `code`; returns stderr.
fn fails(dir: &Path, args: &[&str], code: i32) -> String {
    let out = weir(dir).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "weir {args:?}\nstdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// The message names the file and both hashes: the expected one (its name) and the actual one.
fn assert_names_swap(err: &str, file: &Stored, actual: &Multihash) {
    assert!(
        err.contains(&file.path.display().to_string()),
        "names the file: {err}"
    );
    assert!(
        err.contains(&format!("expected SHA3-256 {}", file.hash)),
        "{err}"
    );
    assert!(
        err.contains(&format!("hashes to {actual}")),
        "names the actual hash: {err}"
    );
}

#[test]
fn an_input_slice_swapped_under_its_name_is_refused_before_the_engine_and_nothing_is_committed() {
    let ws = workspace();
    let dir = ws.path();
    ok(dir, &["pull", "--all", "--quiet"]);
    add_day(dir, 4);
    ok(dir, &["pull", "readings", "--quiet"]);
    let before = head_and_records(dir, "readings.clean");

    // Day 4's slice, not yet consumed by readings.clean, replaced by day 3's (valid Parquet, other records).
    let slices = stored(dir, "readings", FileKind::Data);
    let (day3, day4) = (&slices[slices.len() - 2], &slices[slices.len() - 1]);
    std::fs::copy(&day3.path, &day4.path).unwrap();

    let err = fails(dir, &["pull", "--all", "--quiet"], 8);
    assert_names_swap(&err, day4, &day3.hash);
    assert!(err.contains("readings.clean"), "{err}");
    assert_eq!(head_and_records(dir, "readings.clean"), before);
}

#[test]
fn a_swapped_schema_slice_fails_pull_and_verify_which_no_longer_say_identical() {
    let ws = workspace();
    let dir = ws.path();
    ok(dir, &["pull", "--all", "--quiet"]);
    add_day(dir, 4);
    ok(dir, &["pull", "readings", "--quiet"]);
    let before = head_and_records(dir, "readings.clean");

    // The first slice is staged as every transform's schema file, and is an input of the recorded steps.
    let slices = stored(dir, "readings", FileKind::Data);
    let (first, second) = (&slices[0], &slices[1]);
    std::fs::copy(&second.path, &first.path).unwrap();

    let err = fails(dir, &["pull", "--all", "--quiet"], 8);
    assert_names_swap(&err, first, &second.hash);
    assert_eq!(head_and_records(dir, "readings.clean"), before);

    let err = fails(dir, &["verify", "readings.clean"], 8);
    assert_names_swap(&err, first, &second.hash);
    assert!(!err.contains("identical"), "{err}");
}

#[test]
fn a_swapped_checkpoint_is_refused_before_the_engine_resumes_from_it() {
    let ws = workspace();
    let dir = ws.path();
    ok(dir, &["pull", "--all", "--quiet"]);
    add_day(dir, 4);
    ok(dir, &["pull", "--all", "--quiet"]);
    add_day(dir, 5);
    ok(dir, &["pull", "-r", "readings.clean", "--quiet"]);
    let before = head_and_records(dir, "readings.daily");

    let checkpoints = stored(dir, "readings.daily", FileKind::Checkpoint);
    assert!(checkpoints.len() >= 2, "{checkpoints:?}");
    let (older, last) = (
        &checkpoints[checkpoints.len() - 2],
        &checkpoints[checkpoints.len() - 1],
    );
    assert_ne!(older.hash, last.hash);
    std::fs::copy(&older.path, &last.path).unwrap();

    let err = fails(dir, &["pull", "--all", "--quiet"], 8);
    assert_names_swap(&err, last, &older.hash);
    assert!(err.contains("checkpoints"), "{err}");
    assert_eq!(head_and_records(dir, "readings.daily"), before);
}

#[test]
fn a_lost_head_is_a_storage_error_naming_the_block_to_restore_never_a_new_dataset() {
    let ws = workspace();
    let dir = ws.path();
    ok(dir, &["pull", "--all", "--quiet"]);
    let (head, records) = head_and_records(dir, "readings");
    let clean_before = head_and_records(dir, "readings.clean");
    let head = head.as_str().unwrap().to_string();
    let blocks_dir = dir.join(".weir/datasets/readings/blocks");
    let blocks = std::fs::read_dir(&blocks_dir).unwrap().count();
    std::fs::remove_file(head_file(dir, "readings")).unwrap();

    for args in [&["pull", "--all", "--quiet"][..], &["validate"][..]] {
        let err = fails(dir, args, 8);
        assert!(err.contains("dataset `readings`"), "{err}");
        assert!(err.contains("its head was lost"), "{err}");
        let restore = format!(
            "printf %s {head} > {}",
            dir.canonicalize()
                .unwrap()
                .join(".weir/datasets/readings/refs/head")
                .display()
        );
        assert!(err.contains(&restore), "tells how to recover: {err}");
    }
    // Nothing was created again: no new Seed, no head, the derivative untouched.
    assert_eq!(std::fs::read_dir(&blocks_dir).unwrap().count(), blocks);
    assert!(!head_file(dir, "readings").exists());

    // An unreadable head is the same error.
    std::fs::write(head_file(dir, "readings"), "not a hash").unwrap();
    let err = fails(dir, &["validate"], 8);
    assert!(err.contains("is not a multihash"), "{err}");
    assert!(err.contains(&format!("block {head}")), "{err}");
    // `list` still lists every dataset: the unreadable one as such, with why.
    let text = ok(dir, &["list"]);
    assert!(text.contains("UNREADABLE"), "{text}");
    assert!(text.contains("is not a multihash"), "{text}");
    assert!(text.contains("readings.clean "), "{text}");
    let listed = list(dir);
    let readings = listed["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "readings")
        .unwrap()
        .clone();
    assert!(
        readings["error"]
            .as_str()
            .unwrap()
            .contains("is not a multihash")
    );

    // Following the advice restores the dataset as it was, and nothing downstream reprocesses.
    std::fs::write(head_file(dir, "readings"), &head).unwrap();
    ok(dir, &["validate"]);
    assert_eq!(
        head_and_records(dir, "readings"),
        (serde_json::json!(head), records)
    );
    ok(dir, &["pull", "--all", "--quiet"]);
    assert_eq!(head_and_records(dir, "readings.clean"), clean_before);
}

#[test]
fn a_first_transaction_that_crashed_before_its_head_leaves_a_new_dataset_and_a_rerun_completes() {
    let ws = workspace();
    let dir = ws.path();
    let crashed = weir(dir)
        .args(["pull", "--all", "--quiet"])
        .env("WEIR_FAULT_AT", "after-blocks:readings")
        .output()
        .unwrap();
    assert!(!crashed.status.success());
    assert!(dir.join(".weir/datasets/readings/blocks").is_dir());
    assert!(!head_file(dir, "readings").exists());
    ok(dir, &["pull", "--all", "--quiet"]);
    assert_eq!(head_and_records(dir, "readings").1, 432);
}

#[test]
fn temporary_files_a_killed_writer_left_in_the_store_are_removed_by_the_next_pull_and_nothing_else()
{
    let ws = workspace();
    let dir = ws.path();
    ok(dir, &["pull", "readings", "--quiet"]);
    // What a writer killed mid-copy or mid-write leaves: a copy that never reached its content name, a
    // head that never replaced the old one.
    let data = dir.join(".weir/datasets/readings/data");
    let refs = dir.join(".weir/datasets/readings/refs");
    let left = [
        data.join(".incoming.4242-0.tmp"),
        refs.join(".head.4242-1.tmp"),
    ];
    for path in &left {
        std::fs::write(path, b"half written").unwrap();
    }
    let slices_before = stored(dir, "readings", FileKind::Data);
    let before = head_and_records(dir, "readings");

    ok(dir, &["pull", "--all", "--quiet"]);
    for path in &left {
        assert!(!path.exists(), "{} is left", path.display());
    }
    // The committed files are untouched: same head, same slices, every one still checks.
    assert_eq!(head_and_records(dir, "readings"), before);
    let slices_after = stored(dir, "readings", FileKind::Data);
    assert_eq!(slices_after.len(), slices_before.len());
    assert!(slices_after.iter().all(|s| s.path.exists()));
    ok(dir, &["verify", "--all"]);
}

#[test]
fn every_file_of_a_transaction_is_fsynced_before_the_head_that_commits_it() {
    let ws = workspace();
    let dir = ws.path();
    let out = weir(dir)
        .args(["--log", "weir=debug", "pull", "--all", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = log.lines().collect();
    let durable = |path: &str| {
        lines
            .iter()
            .position(|l| l.contains("written durably") && l.ends_with(path))
    };
    for dataset in ["readings", "readings.daily"] {
        let moves: Vec<(usize, &str)> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains("head moved") && l.contains(&format!("dataset={dataset} ")))
            .map(|(i, l)| (i, l.rsplit("head=").next().unwrap().trim()))
            .collect();
        assert!(!moves.is_empty(), "{log}");
        let root = format!("datasets/{dataset}/");
        for (i, head) in &moves {
            let block = durable(&format!("{root}blocks/{head}"));
            assert!(
                block.is_some_and(|b| b < *i),
                "block {head} fsynced before the head moved to it\n{log}"
            );
            let head_write = lines[..*i].iter().rposition(|l| {
                l.contains("written durably") && l.ends_with(&format!("{root}refs/head"))
            });
            assert!(head_write.is_some(), "{log}");
        }
        let last = moves.last().unwrap().0;
        for kind in [FileKind::Data, FileKind::Checkpoint] {
            for f in stored(dir, dataset, kind) {
                let name = f
                    .path
                    .strip_prefix(dir.join(".weir"))
                    .unwrap()
                    .display()
                    .to_string();
                let at = durable(&name);
                assert!(
                    at.is_some_and(|a| a < last),
                    "{name} fsynced before the head\n{log}"
                );
            }
        }
    }
}

#[test]
fn verify_checks_every_stored_output_slice_and_checkpoint_and_reports_each_problem() {
    let ws = workspace();
    let dir = ws.path();
    ok(dir, &["pull", "--all", "--quiet"]);
    let out = ok(dir, &["verify", "readings.daily"]);
    assert!(out.contains("stored file(s) intact"), "{out}");

    // One output slice deleted, the checkpoint replaced by other bytes.
    let slice = stored(dir, "readings.daily", FileKind::Data).pop().unwrap();
    let checkpoint = stored(dir, "readings.daily", FileKind::Checkpoint)
        .pop()
        .unwrap();
    std::fs::remove_file(&slice.path).unwrap();
    std::fs::write(&checkpoint.path, b"not the checkpoint").unwrap();
    let forged = Multihash::sha3_256(b"not the checkpoint");

    let err = fails(dir, &["verify", "readings.daily"], 8);
    assert!(err.contains("dataset `readings.daily`"), "{err}");
    assert!(
        err.contains(&format!("block #{}", slice.sequence_number)),
        "{err}"
    );
    assert!(
        err.contains(&format!("data slice: {} is missing", slice.path.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("block #{}", checkpoint.sequence_number)),
        "{err}"
    );
    assert_names_swap(&err, &checkpoint, &forged);
    assert!(!err.contains("identical"), "{err}");

    // A root's stored slices are checked too, though it has no transform to replay.
    let first = stored(dir, "readings", FileKind::Data).remove(0);
    std::fs::write(&first.path, b"garbage").unwrap();
    let err = fails(dir, &["verify", "readings"], 8);
    assert_names_swap(&err, &first, &Multihash::sha3_256(b"garbage"));
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_root_whose_storage_vanished_is_not_seeded_again_under_its_dependents() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let before = list(ws.path());
    let folder = ws.path().join(".weir/datasets/readings");
    let backup = tempfile::tempdir().unwrap();
    copy_tree(&folder, backup.path());
    std::fs::remove_dir_all(&folder).unwrap();
    add_day(ws.path(), 4);

    for args in [
        &["pull", "--all", "--quiet"][..],
        &["pull", "readings"],
        &["validate"],
    ] {
        let out = weir(ws.path()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(8), "{args:?}: {stderr}");
        assert!(
            stderr.contains(
                "dataset `readings` has no stored chain, but `readings.clean` was computed from it"
            ),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("restore"), "{args:?}: {stderr}");
        // Nothing was written: no new `readings` under a new id.
        assert!(!folder.exists(), "{args:?}");
    }

    // Restored from the backup, the pull goes on where it stopped: one new day, nothing twice.
    copy_tree(backup.path(), &folder);
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let after = list(ws.path());
    let records = |l: &serde_json::Value, name: &str| {
        l["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap()["records"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        records(&after, "readings"),
        records(&before, "readings") + 144
    );
    ok(ws.path(), &["validate"]);
    ok(ws.path(), &["verify", "--all"]);
}

#[test]
fn an_input_name_that_leads_to_another_dataset_is_refused() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    // `readings` is replaced by another dataset's storage: same name, another id.
    let folder = ws.path().join(".weir/datasets/readings");
    std::fs::remove_dir_all(&folder).unwrap();
    copy_tree(&ws.path().join(".weir/datasets/stations"), &folder);
    let heads = list(ws.path());

    let out = weir(ws.path())
        .args(["pull", "--all", "--quiet"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains("input `readings` of `readings.clean` is now dataset"),
        "{stderr}"
    );
    assert!(stderr.contains("--recompute"), "{stderr}");
    assert_eq!(list(ws.path()), heads, "nothing was written");
    let out = weir(ws.path()).args(["validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(8));
}
