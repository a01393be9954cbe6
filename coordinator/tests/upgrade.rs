//! Datasets written by Weir before its chains were ODF's: every command but `weir upgrade` recognises and
//! refuses them with a message that names `weir upgrade`, never misreads them; `weir upgrade` converts them
//! into the chains the current Weir writes, losing nothing, keeping the old chains, and is safe to rerun.
use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use common::*;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use weir_dataset::chain::validate::{ChainValidator, check_input_against_chain};
use weir_odf::{DatasetId, MetadataBlock, MetadataEvent, Multicodec, Multihash};

const DATASETS: [&str; 5] = [
    "readings",
    "stations",
    "readings.clean",
    "readings.daily",
    "readings.hot-days",
];
const DERIVATIVES: [&str; 3] = ["readings.clean", "readings.daily", "readings.hot-days"];

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

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataset/tests/fixtures/pre-odf")
}

fn datasets_dir(ws: &Path) -> PathBuf {
    ws.join(".weir/datasets")
}

/// The example workspace with its five datasets as the old Weir wrote them.
fn old_workspace() -> tempfile::TempDir {
    let ws = workspace();
    for d in DATASETS {
        copy_dir(&fixture().join(d), &datasets_dir(ws.path()).join(d));
    }
    ws
}

/// Every file under `dir` with its bytes, but the workspace lock (which every writer takes).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.file_name().unwrap() != "weir.lock" {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn head_of(dataset_dir: &Path) -> Multihash {
    std::fs::read_to_string(dataset_dir.join("refs/head"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A dataset's blocks read straight from its folder, oldest first, with their files' bytes.
fn raw_chain(dataset_dir: &Path) -> Vec<(Multihash, Vec<u8>, MetadataBlock)> {
    let mut out = Vec::new();
    let mut next = Some(head_of(dataset_dir));
    while let Some(h) = next {
        let bytes = std::fs::read(dataset_dir.join("blocks").join(h.to_string())).unwrap();
        let block = MetadataBlock::decode(&bytes).unwrap();
        next = block.prev_block_hash;
        out.push((h, bytes, block));
    }
    out.reverse();
    out
}

/// The records of a dataset's slices, read from their Parquet files in chain order.
fn slice_records(dataset_dir: &Path) -> Vec<arrow::array::RecordBatch> {
    raw_chain(dataset_dir)
        .iter()
        .filter_map(|(_, _, b)| b.event.new_data().cloned())
        .flat_map(|d| {
            let bytes =
                std::fs::read(dataset_dir.join("data").join(d.physical_hash.to_string())).unwrap();
            ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
                .unwrap()
                .build()
                .unwrap()
                .map(Result::unwrap)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn upgrade(ws: &Path) -> String {
    ok(ws, &["upgrade", "--quiet"])
}

fn add_day4(ws: &Path) {
    let day3 = std::fs::read_to_string(ws.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        ws.join("data/readings/2024-06-04.csv"),
        day3.replace("2024-06-03", "2024-06-04"),
    )
    .unwrap();
}

/// `weir tail DATASET` of every record, as JSON objects.
fn all_records(ws: &Path, dataset: &str) -> Vec<serde_json::Value> {
    let out = ok(ws, &["--format", "json", "tail", dataset, "-n", "1000000"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["records"].as_array().unwrap().clone()
}

#[test]
fn the_fixture_is_in_the_old_format() {
    let blocks = fixture().join("readings/blocks");
    let old_hashes = std::fs::read_dir(blocks)
        .unwrap()
        .map(|e| {
            weir_odf::MetadataBlock::decode(&std::fs::read(e.unwrap().path()).unwrap()).unwrap()
        })
        .filter_map(|b| b.event.new_data().map(|d| d.logical_hash.codec()))
        .filter(|c| *c == weir_odf::Multicodec::Sha3_256)
        .count();
    assert_eq!(old_hashes, 3, "three slices with Weir's old logical hash");
}

#[test]
fn commands_on_an_old_format_dataset_fail_naming_weir_upgrade() {
    let ws = old_workspace();
    for args in [
        &["list"][..],
        &["log", "readings.hot-days"],
        &["tail", "readings"],
        &["validate"],
        &["pull", "--all", "--quiet"],
    ] {
        let out = weir(ws.path()).args(args).output().unwrap();
        assert!(!out.status.success(), "weir {args:?} succeeded");
        assert_eq!(out.status.code(), Some(8), "weir {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("written by an older Weir"),
            "weir {args:?}: {err}"
        );
        assert!(err.contains("run `weir upgrade`"), "weir {args:?}: {err}");
    }
}

#[test]
fn upgraded_datasets_pass_validate_and_verify() {
    let ws = old_workspace();
    let out = upgrade(ws.path());
    for d in DATASETS {
        assert!(out.contains(&format!("{d}: upgraded")), "{out}");
    }
    assert!(out.contains("5 dataset(s) upgraded"), "{out}");
    let validated = ok(ws.path(), &["validate"]);
    assert!(
        validated.contains("readings.daily: 6 block(s)"),
        "{validated}"
    );
    for d in DERIVATIVES {
        let verified = ok(ws.path(), &["verify", d]);
        assert!(
            verified.contains("all outputs identical"),
            "{d}: {verified}"
        );
    }
}

#[test]
fn the_records_are_the_ones_the_old_slices_hold() {
    let ws = old_workspace();
    let before: HashMap<&str, Vec<serde_json::Value>> = DATASETS
        .iter()
        .map(|d| {
            let rows = slice_records(&fixture().join(d))
                .iter()
                .flat_map(|b| weir_cli::commands::tail::to_json_rows(b).unwrap())
                .collect();
            (*d, rows)
        })
        .collect();
    upgrade(ws.path());
    for d in DATASETS {
        let after = all_records(ws.path(), d);
        assert!(!after.is_empty(), "{d} has records");
        assert_eq!(after, before[d], "{d}: the records changed");
    }
    // Every data and checkpoint file is kept byte for byte, under its name.
    for d in DATASETS {
        for kind in ["data", "checkpoints"] {
            let old = fixture().join(d).join(kind);
            if old.exists() {
                assert_eq!(
                    tree(&datasets_dir(ws.path()).join(d).join(kind)),
                    tree(&old),
                    "{d}/{kind}"
                );
            }
        }
    }
}

#[test]
fn upgraded_blocks_are_odf_byte_for_byte_and_keep_the_chain_rules() {
    let ws = old_workspace();
    upgrade(ws.path());
    let mut chains: HashMap<DatasetId, Vec<(Multihash, MetadataBlock)>> = HashMap::new();
    for d in DATASETS {
        let dir = datasets_dir(ws.path()).join(d);
        let chain = raw_chain(&dir);
        let mut v = ChainValidator::default();
        let mut schema_seen = false;
        for (h, bytes, b) in &chain {
            assert_eq!(MetadataBlock::hash(bytes), *h, "{d}: named by its hash");
            assert_eq!(&b.encode(), bytes, "{d}: block {h} re-encodes identically");
            let decoded = MetadataBlock::decode(&b.encode()).unwrap();
            assert_eq!(&decoded, b);
            v.push(*h, b).unwrap_or_else(|e| panic!("{d}: {e}"));
            match &b.event {
                MetadataEvent::SetDataSchema(_) => schema_seen = true,
                MetadataEvent::SetTransform(t) => {
                    for i in &t.inputs {
                        assert!(i.dataset_id().is_some() && i.alias.is_some(), "{d}");
                    }
                }
                MetadataEvent::ExecuteTransform(e) => {
                    // The engine of the step, which the old format kept in the block itself, is recorded
                    // by the SetTransform in force.
                    let before: Vec<_> = chain[..b.sequence_number as usize]
                        .iter()
                        .map(|(h, _, b)| (*h, b.clone()))
                        .collect();
                    let engine = weir_dataset::identity::in_force(&before).unwrap();
                    assert_eq!(engine.runtime, "embedded", "{d}");
                    assert!(engine.reference.starts_with("reference-engine@"), "{d}");
                    for (k, input) in e.query_inputs.iter().enumerate() {
                        check_input_against_chain(
                            b.sequence_number,
                            k,
                            input,
                            &chains[&input.dataset_id],
                        )
                        .unwrap_or_else(|e| panic!("{d}: {e}"));
                    }
                }
                _ => {}
            }
            if let Some(slice) = b.event.new_data() {
                assert!(schema_seen, "{d}: SetDataSchema precedes the first data");
                assert_eq!(slice.logical_hash.codec(), Multicodec::Arrow0_Sha3_256);
                let bytes =
                    std::fs::read(dir.join("data").join(slice.physical_hash.to_string())).unwrap();
                let batches: Vec<_> =
                    ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
                        .unwrap()
                        .with_batch_size(10_000)
                        .build()
                        .unwrap()
                        .map(Result::unwrap)
                        .collect();
                assert_eq!(
                    weir_odf::logical_hash::of_batches(&batches[0].schema(), &batches).unwrap(),
                    slice.logical_hash,
                    "{d}: logical hash of {}",
                    slice.physical_hash
                );
            }
        }
        // The dataset's folder holds the new chain's blocks only; the old ones are in the backup.
        let files = std::fs::read_dir(dir.join("blocks")).unwrap().count();
        assert_eq!(files, chain.len(), "{d}: block files");
        chains.insert(
            v.summary().dataset_id.unwrap(),
            chain.into_iter().map(|(h, _, b)| (h, b)).collect(),
        );
    }
}

/// Blocks with what differs between two runs of the same history taken out: times, hashes, ids, sizes and
/// watermarks (`stations` takes its watermark from the system time), and the source file an `AddData`
/// records in its extra attributes (its modification time differs between runs, and chains written before
/// Weir recorded it have none: an upgrade cannot know what the file was when it was ingested).
fn shape(dataset_dir: &Path) -> Vec<serde_json::Value> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for k in [
                    "systemTime",
                    "prevBlockHash",
                    "datasetId",
                    "logicalHash",
                    "physicalHash",
                    "prevCheckpoint",
                    "newBlockHash",
                    "newWatermark",
                    "size",
                    "extra",
                ] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            serde_json::Value::String(s) if s.starts_with("did:odf:") => *s = "id".into(),
            _ => {}
        }
    }
    raw_chain(dataset_dir)
        .into_iter()
        .map(|(_, _, b)| {
            let mut v = serde_json::to_value(&b).unwrap();
            strip(&mut v);
            v
        })
        .collect()
}

#[test]
fn upgraded_chains_are_what_the_current_weir_writes_for_the_same_history() {
    // The fixture's history: `pull --all` with day 1's files, then with day 2's, then with day 3's.
    let fresh = workspace();
    let later = tempfile::tempdir().unwrap();
    let held = [
        ("readings", "2024-06-02.csv"),
        ("readings", "2024-06-03.csv"),
        ("stations", "2024-06-03.csv"),
    ];
    for (i, (dir, file)) in held.iter().enumerate() {
        std::fs::rename(
            fresh.path().join("data").join(dir).join(file),
            later.path().join(i.to_string()),
        )
        .unwrap();
    }
    let put_back = |i: usize| {
        let (dir, file) = held[i];
        std::fs::rename(
            later.path().join(i.to_string()),
            fresh.path().join("data").join(dir).join(file),
        )
        .unwrap();
    };
    ok(fresh.path(), &["pull", "--all", "--quiet"]);
    put_back(0);
    ok(fresh.path(), &["pull", "--all", "--quiet"]);
    put_back(1);
    put_back(2);
    ok(fresh.path(), &["pull", "--all", "--quiet"]);

    let ws = old_workspace();
    upgrade(ws.path());
    for d in DATASETS {
        assert_eq!(
            shape(&datasets_dir(ws.path()).join(d)),
            shape(&datasets_dir(fresh.path()).join(d)),
            "{d}: the upgraded chain is not what the current Weir writes"
        );
    }
}

#[test]
fn a_pull_after_the_upgrade_continues_where_the_old_chains_stopped() {
    let ws = old_workspace();
    upgrade(ws.path());
    let heads: Vec<_> = DATASETS
        .iter()
        .map(|d| head_and_records(ws.path(), d))
        .collect();
    // Nothing new: nothing to do, not even a metadata block (the chains already say what the manifests say).
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let after: Vec<_> = DATASETS
        .iter()
        .map(|d| head_and_records(ws.path(), d))
        .collect();
    assert_eq!(after, heads);

    // A new day: only it is processed, with the same result as a workspace that never had an old format.
    add_day4(ws.path());
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let reference = workspace();
    add_day4(reference.path());
    ok(reference.path(), &["pull", "--all", "--quiet"]);
    for d in DATASETS {
        let (_, records) = head_and_records(ws.path(), d);
        assert_eq!(
            records,
            head_and_records(reference.path(), d).1,
            "{d}: record count"
        );
        let offsets: Vec<u64> = all_records(ws.path(), d)
            .iter()
            .map(|r| r["offset"].as_u64().unwrap())
            .collect();
        assert_eq!(
            offsets,
            (0..records).collect::<Vec<_>>(),
            "{d}: offsets are contiguous, none twice"
        );
    }
    // The derivative's new step starts where its last old step stopped.
    let log: serde_json::Value = serde_json::from_str(&ok(
        ws.path(),
        &["--format", "json", "log", "readings.clean"],
    ))
    .unwrap();
    let step = &log["blocks"][0]["block"]["event"];
    assert_eq!(step["kind"], "ExecuteTransform", "{step}");
    assert_eq!(step["queryInputs"][0]["prevOffset"], 431, "{step}");
    assert_eq!(step["newData"]["offsetInterval"]["start"], 425, "{step}");
    ok(ws.path(), &["validate"]);
}

#[test]
fn a_dry_run_writes_nothing_and_says_what_the_upgrade_would_do() {
    let ws = old_workspace();
    let before = tree(ws.path());
    let text = ok(ws.path(), &["upgrade", "--dry-run"]);
    assert!(
        text.contains(
            "readings: would upgrade: 6 block(s) rewritten, 1 added, 3 data slice(s) rehashed"
        ),
        "{text}"
    );
    assert!(text.contains("nothing was written"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&ok(
        ws.path(),
        &["--format", "json", "upgrade", "--dry-run"],
    ))
    .unwrap();
    assert_eq!(json["dryRun"], true);
    assert_eq!(json["upgraded"], 5);
    assert_eq!(tree(ws.path()), before, "a dry run changed files");
    assert!(
        !ws.path().join(".weir/weir.lock").exists(),
        "a dry run takes no lock"
    );

    // What the dry run announces is what the upgrade then does.
    let done: serde_json::Value =
        serde_json::from_str(&ok(ws.path(), &["--format", "json", "upgrade"])).unwrap();
    for (planned, upgraded) in json["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .zip(done["datasets"].as_array().unwrap())
    {
        assert_eq!(planned["status"], "wouldUpgrade");
        assert_eq!(upgraded["status"], "upgraded");
        for k in [
            "dataset",
            "oldHead",
            "newHead",
            "rewritten",
            "added",
            "rehashed",
        ] {
            assert_eq!(planned[k], upgraded[k], "{k}");
        }
        let d = upgraded["dataset"].as_str().unwrap();
        assert_eq!(
            upgraded["newHead"].as_str().unwrap(),
            head_of(&datasets_dir(ws.path()).join(d)).to_string()
        );
    }
}

#[test]
fn a_second_upgrade_changes_nothing() {
    let ws = old_workspace();
    upgrade(ws.path());
    let before = tree(ws.path());
    let out = upgrade(ws.path());
    for d in DATASETS {
        assert!(out.contains(&format!("{d}: already current")), "{out}");
    }
    assert!(out.contains("nothing to upgrade"), "{out}");
    assert_eq!(tree(ws.path()), before);
}

#[test]
fn the_old_chains_are_kept_and_can_be_restored() {
    let ws = old_workspace();
    let out = upgrade(ws.path());
    let backups = ws.path().join(".weir/upgrade-backup");
    let mut upgraded_heads = Vec::new();
    for d in DATASETS {
        assert!(
            out.contains(&backups.join(d).display().to_string()),
            "the output says where {d}'s old chain is: {out}"
        );
        assert_eq!(head_of(&backups.join(d)), head_of(&fixture().join(d)));
        assert_eq!(
            tree(&backups.join(d).join("blocks")),
            tree(&fixture().join(d).join("blocks"))
        );
        upgraded_heads.push(head_of(&datasets_dir(ws.path()).join(d)));
    }
    // Putting the backup back gives the old chains again; upgrading them again gives the same chains.
    for d in DATASETS {
        copy_dir(&backups.join(d), &datasets_dir(ws.path()).join(d));
    }
    let refused = weir(ws.path()).arg("list").output().unwrap();
    assert_eq!(refused.status.code(), Some(8));
    upgrade(ws.path());
    for (d, head) in DATASETS.iter().zip(upgraded_heads) {
        assert_eq!(head_of(&datasets_dir(ws.path()).join(d)), head, "{d}");
    }
}

#[test]
fn a_corrupt_old_block_stops_the_upgrade_before_anything_is_written() {
    let ws = old_workspace();
    // The middle step of readings.daily: its file no longer hashes to its name.
    let dir = datasets_dir(ws.path()).join("readings.daily");
    let (hash, mut bytes, _) = raw_chain(&dir).swap_remove(3);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(dir.join("blocks").join(hash.to_string()), &bytes).unwrap();
    let before = tree(ws.path());
    for args in [&["upgrade"][..], &["upgrade", "--dry-run"]] {
        let out = weir(ws.path()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(8), "weir {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("dataset `readings.daily`"), "{err}");
        assert!(err.contains(&hash.to_string()), "{err}");
        assert!(err.contains("nothing was written"), "{err}");
        assert_eq!(tree(ws.path()), before, "weir {args:?} changed files");
    }
}

#[test]
fn a_chain_that_cannot_be_converted_is_named_and_nothing_is_written() {
    let ws = old_workspace();
    // readings.daily reads readings.clean, whose chain is gone: its inputs cannot be given by id.
    std::fs::remove_dir_all(datasets_dir(ws.path()).join("readings.clean")).unwrap();
    let before = tree(ws.path());
    let out = weir(ws.path()).args(["upgrade"]).output().unwrap();
    assert_eq!(out.status.code(), Some(8));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dataset `readings.daily` block #1") && err.contains("`readings.clean`"),
        "{err}"
    );
    assert_eq!(tree(ws.path()), before);
}

#[test]
fn an_upgrade_stopped_at_any_step_completes_when_run_again() {
    let reference = old_workspace();
    upgrade(reference.path());
    let expected: Vec<Multihash> = DATASETS
        .iter()
        .map(|d| head_of(&datasets_dir(reference.path()).join(d)))
        .collect();
    for step in weir_dataset::fault::UPGRADE_STEPS {
        for dataset in ["readings", "readings.daily"] {
            let ws = old_workspace();
            let crashed = weir(ws.path())
                .args(["upgrade", "--quiet"])
                .env("WEIR_FAULT_AT", format!("{step}:{dataset}"))
                .output()
                .unwrap();
            assert!(!crashed.status.success(), "{step}:{dataset} did not abort");
            let upgraded = DATASETS
                .iter()
                .filter(|d| {
                    head_of(&datasets_dir(ws.path()).join(d)) != head_of(&fixture().join(d))
                })
                .count();
            match (*step, dataset) {
                ("upgrade-after-blocks", _) => assert_eq!(upgraded, 0, "{step}:{dataset}"),
                (_, "readings") => assert_eq!(upgraded, 1, "{step}:{dataset}"),
                _ => assert_eq!(upgraded, 3, "{step}:{dataset}"),
            }
            upgrade(ws.path());
            let heads: Vec<Multihash> = DATASETS
                .iter()
                .map(|d| head_of(&datasets_dir(ws.path()).join(d)))
                .collect();
            assert_eq!(heads, expected, "{step}:{dataset}");
            ok(ws.path(), &["validate"]);
        }
    }
}
