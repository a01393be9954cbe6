//! `weir upgrade [--dry-run]`: converts the datasets written by the Weir before its chains were ODF's into
//! the current format, losing nothing ([`weir_dataset::chain::upgrade`] says what changes), and leaves datasets
//! already in the current format alone.
//!
//! Everything is read and converted first, inputs before the datasets that read them: every old block (its
//! file checked against its name), every old data slice (checked, then its schema and ODF logical hash read
//! from it), every checkpoint the old chains name (checked). Anything that cannot be converted stops the
//! command before it writes anything, naming the dataset and the block. Then, unless `--dry-run`, for
//! every dataset that changes: the old blocks and head are copied into its upgrade backup
//! (`upgrade-backup/<dataset>/` in the storage), and the new blocks are written next to the old ones, each
//! durably (fsynced with its folder on a local disk). Only when every file of every dataset is written do the
//! heads move, roots first, each with a fsynced rename; the old block files are then removed from the
//! dataset's folder (the backup keeps them). A crash at any moment leaves every dataset either as it was or
//! upgraded, and running the command again finishes the work: a dataset already upgraded whose derivatives
//! are not yet has its old block hashes renamed from its backup.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use serde_json::json;
use tracing::{Instrument, info, info_span};
use weir_odf::{DatasetId, MetadataBlock, MetadataEvent, Multihash};

use super::Output;
use crate::commands::error::CommandError;
use weir_dataset::chain::legacy;
use weir_dataset::chain::store::{DatasetStore, FileKind};
use weir_dataset::chain::upgrade::{self, SliceFacts, StoredBlock, Upgraded, UpgradedInput};
use weir_dataset::data;
use weir_dataset::fault;
use weir_transaction::Context;

/// Options of `weir upgrade`.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpgradeOptions {
    /// Say what would change, write nothing.
    pub dry_run: bool,
    /// No progress spinners.
    pub quiet: bool,
}

/// A stored chain as read for the upgrade, oldest block first.
#[derive(Debug)]
struct Stored {
    head: Multihash,
    blocks: Vec<StoredBlock>,
    /// Each block's file.
    files: Vec<Bytes>,
}

impl Stored {
    /// The first old-format block and what marks it, if any.
    fn first_old(&self) -> Option<(&StoredBlock, &'static str)> {
        self.blocks.iter().find_map(|b| b.old.map(|why| (b, why)))
    }

    fn dataset_id(&self) -> Option<DatasetId> {
        match &self.blocks.first()?.block.event {
            MetadataEvent::Seed(s) => Some(s.dataset_id),
            _ => None,
        }
    }

    fn decoded(&self) -> Vec<(Multihash, MetadataBlock)> {
        self.blocks
            .iter()
            .map(|b| (b.hash, b.block.clone()))
            .collect()
    }
}

/// What the upgrade does to one dataset.
#[derive(Debug)]
enum Plan {
    /// No chain is stored.
    Empty,
    /// Already in the current format: `renamed` gives the new hashes of its blocks before an upgrade that
    /// an earlier `weir upgrade` did (from its backup), for derivatives not upgraded yet.
    Current {
        stored: Stored,
        renamed: HashMap<Multihash, Multihash>,
    },
    /// To be rewritten.
    Upgrade { stored: Stored, upgraded: Upgraded },
}

/// A failure to read what the upgrade needs, naming the dataset and the block or file.
fn read_err(
    dataset: &str,
    what: String,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> CommandError {
    CommandError::UpgradeRead {
        dataset: dataset.to_owned(),
        what,
        source: source.into(),
    }
}

/// Progress on stderr (hidden with `--quiet`, `--format json`, or when stderr is not a terminal): a bar
/// counting the steps done of all there are (each dataset's chain read and converted; each upgraded
/// dataset's blocks written and head moved) with an ETA, and a spinner per dataset saying what it is at.
struct Progress {
    multi: indicatif::MultiProgress,
    overall: indicatif::ProgressBar,
    bars: BTreeMap<String, indicatif::ProgressBar>,
}

impl Progress {
    fn new(quiet: bool, steps: u64) -> Self {
        let multi = indicatif::MultiProgress::new();
        if quiet {
            multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let style = indicatif::ProgressStyle::with_template(
            "{prefix:<24} [{bar:30}] {pos}/{len} steps (ETA {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
        let overall = multi.add(indicatif::ProgressBar::new(steps).with_style(style));
        overall.set_prefix("weir upgrade");
        Self {
            multi,
            overall,
            bars: BTreeMap::new(),
        }
    }

    /// One more step done.
    fn step(&self) {
        self.overall.inc(1);
    }

    /// `more` steps to do than counted so far.
    fn more_steps(&self, more: u64) {
        self.overall.inc_length(more);
    }

    fn bar(&mut self, dataset: &str) -> indicatif::ProgressBar {
        self.bars
            .entry(dataset.to_owned())
            .or_insert_with(|| {
                let style = indicatif::ProgressStyle::with_template("{spinner} {prefix:<24} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
                let b = self
                    .multi
                    .add(indicatif::ProgressBar::new_spinner().with_style(style));
                b.set_prefix(dataset.to_owned());
                b
            })
            .clone()
    }

    fn say(&mut self, dataset: &str, message: impl Into<String>) {
        self.bar(dataset).set_message(message.into());
    }

    fn done(&mut self, dataset: &str, message: impl Into<String>) {
        self.bar(dataset).finish_with_message(message.into());
    }
}

/// Runs `upgrade`.
pub async fn run(ctx: &Context, opts: &UpgradeOptions) -> Result<Output, CommandError> {
    let datasets = ctx.workspace.datasets.len() as u64;
    let mut progress = Progress::new(opts.quiet, 2 * datasets);
    let mut stored = BTreeMap::new();
    for name in ctx.workspace.datasets.keys() {
        progress.say(name, "reading the chain");
        let chain = read_stored(&ctx.storage.dataset(name)).await?;
        stored.insert(name.clone(), chain);
        progress.step();
    }
    let order = dependency_order(&stored);
    let needed = needed_as_inputs(&stored);

    let mut plans: Vec<(String, Plan)> = Vec::new();
    let mut inputs: Vec<UpgradedInput> = Vec::new();
    for name in order {
        let chain = stored.remove(&name).flatten();
        let span = info_span!("upgrade", dataset = %name);
        let plan = plan(
            ctx,
            &name,
            chain,
            &inputs,
            needed.contains(&name),
            &mut progress,
        )
        .instrument(span)
        .await?;
        if let Some(input) = as_input(&name, &plan) {
            inputs.push(input);
        }
        plans.push((name, plan));
        progress.step();
    }

    if !opts.dry_run {
        let upgrading = plans
            .iter()
            .filter(|(_, p)| matches!(p, Plan::Upgrade { .. }))
            .count() as u64;
        progress.more_steps(2 * upgrading);
        write(ctx, &plans, &mut progress).await?;
    }
    progress.overall.finish_and_clear();
    Ok(report(ctx, &plans, opts, &mut progress))
}

/// The chain of a dataset as stored, each block's file checked against its name and decoded by `odf`,
/// with the old format's marks and engine records. `None` when nothing is stored.
async fn read_stored(store: &DatasetStore) -> Result<Option<Stored>, CommandError> {
    let name = store.name();
    let head = store
        .head()
        .await
        .map_err(|e| read_err(name, "the head".into(), e))?;
    let Some(head) = head else {
        return Ok(None);
    };
    let mut blocks = Vec::new();
    let mut files = Vec::new();
    let mut next = Some(head);
    while let Some(hash) = next {
        let what = || format!("block {hash} ({} link(s) back from the head)", blocks.len());
        let bytes = store
            .get_file(FileKind::Block, &hash)
            .await
            .map_err(|e| read_err(name, what(), e))?;
        let (block, version) =
            MetadataBlock::decode_versioned(&bytes).map_err(|e| read_err(name, what(), e))?;
        let old = legacy::old_format_mark(&bytes, &block, version);
        let engine = match (&old, &block.event) {
            (Some(_), MetadataEvent::ExecuteTransform(_)) => legacy::engine_record(&bytes)
                .map_err(|e| {
                    read_err(
                        name,
                        format!(
                            "the engine record of block #{} ({hash})",
                            block.sequence_number
                        ),
                        e,
                    )
                })?,
            _ => None,
        };
        next = block.prev_block_hash;
        blocks.push(StoredBlock {
            hash,
            block,
            old,
            engine,
        });
        files.push(bytes);
    }
    blocks.reverse();
    files.reverse();
    Ok(Some(Stored {
        head,
        blocks,
        files,
    }))
}

/// The datasets a stored chain's transforms read, by name (old chains name them; current ones give ids).
fn inputs_named(chain: &Stored, all: &BTreeMap<String, Option<Stored>>) -> BTreeSet<String> {
    let ids: HashMap<DatasetId, &String> = all
        .iter()
        .filter_map(|(n, s)| Some((s.as_ref()?.dataset_id()?, n)))
        .collect();
    chain
        .blocks
        .iter()
        .filter_map(|b| match &b.block.event {
            MetadataEvent::SetTransform(t) => Some(&t.inputs),
            _ => None,
        })
        .flatten()
        .filter_map(|i| match i.dataset_id() {
            Some(id) => ids.get(&id).map(|n| (*n).clone()),
            None => all
                .contains_key(&i.dataset_ref)
                .then(|| i.dataset_ref.clone()),
        })
        .collect()
}

/// The datasets whose blocks an old chain names, directly or through a dataset an earlier upgrade converted
/// (whose backup names its inputs' blocks before that upgrade): the current ones among them need the new
/// hashes of their blocks before that upgrade.
fn needed_as_inputs(all: &BTreeMap<String, Option<Stored>>) -> HashSet<String> {
    let mut needed = HashSet::new();
    let mut todo: Vec<String> = all
        .values()
        .flatten()
        .filter(|s| s.first_old().is_some())
        .flat_map(|s| inputs_named(s, all))
        .collect();
    while let Some(name) = todo.pop() {
        if !needed.insert(name.clone()) {
            continue;
        }
        if let Some(Some(chain)) = all.get(&name)
            && chain.first_old().is_none()
        {
            todo.extend(inputs_named(chain, all));
        }
    }
    needed
}

/// The datasets with every input (as the stored chains name them) before the datasets that read it.
fn dependency_order(all: &BTreeMap<String, Option<Stored>>) -> Vec<String> {
    fn visit(
        name: &str,
        all: &BTreeMap<String, Option<Stored>>,
        on_path: &mut HashSet<String>,
        done: &mut HashSet<String>,
        order: &mut Vec<String>,
    ) {
        if done.contains(name) || !on_path.insert(name.to_owned()) {
            // A cycle is left to the conversion, which then names the block whose input is missing.
            return;
        }
        if let Some(Some(chain)) = all.get(name) {
            for input in inputs_named(chain, all) {
                visit(&input, all, on_path, done, order);
            }
        }
        on_path.remove(name);
        done.insert(name.to_owned());
        order.push(name.to_owned());
    }
    let mut order = Vec::new();
    let (mut on_path, mut done) = (HashSet::new(), HashSet::new());
    for name in all.keys() {
        visit(name, all, &mut on_path, &mut done, &mut order);
    }
    order
}

/// Decides and, for an old chain, computes the upgrade of one dataset.
async fn plan(
    ctx: &Context,
    name: &str,
    chain: Option<Stored>,
    inputs: &[UpgradedInput],
    needed_as_input: bool,
    progress: &mut Progress,
) -> Result<Plan, CommandError> {
    let Some(chain) = chain else {
        progress.done(name, "nothing stored");
        return Ok(Plan::Empty);
    };
    let Some((first, why)) = chain.first_old() else {
        let renamed = if needed_as_input {
            renamed_by_backup(ctx, name, &chain, inputs, progress).await?
        } else {
            HashMap::new()
        };
        progress.done(name, "already current");
        return Ok(Plan::Current {
            stored: chain,
            renamed,
        });
    };
    info!(dataset = %name, block = first.block.sequence_number, reason = why, "old format: upgrading");
    let store = ctx.storage.dataset(name);
    let facts = slice_facts(&store, &chain, progress).await?;
    progress.say(name, "converting the chain");
    let upgraded = upgrade::upgrade_chain(name, &chain.blocks, &facts, inputs)?;
    for (hash, block) in &upgraded.blocks {
        // The new blocks are odf's encoding: they decode to themselves and are named by their bytes' hash.
        let bytes = block.encode();
        if MetadataBlock::hash(&bytes) != *hash
            || MetadataBlock::decode(&bytes).ok().as_ref() != Some(block)
        {
            return Err(read_err(
                name,
                format!("upgraded block #{}", block.sequence_number),
                "odf does not decode it back to the same block",
            ));
        }
    }
    info!(
        dataset = %name,
        old_head = %chain.head,
        new_head = %upgraded.head().map_or_else(String::new, |h| h.to_string()),
        rewritten = upgraded.rewritten,
        added = upgraded.added,
        rehashed = upgraded.rehashed,
        "chain converted"
    );
    progress.say(
        name,
        format!(
            "converted: {} block(s) rewritten, {} added, {} slice(s) rehashed",
            upgraded.rewritten, upgraded.added, upgraded.rehashed
        ),
    );
    Ok(Plan::Upgrade {
        stored: chain,
        upgraded,
    })
}

/// Reads every old-format data slice of `chain` (checked against its hash and recorded size) for its
/// schema and ODF logical hash, and checks every checkpoint file the old blocks name.
async fn slice_facts(
    store: &DatasetStore,
    chain: &Stored,
    progress: &mut Progress,
) -> Result<HashMap<Multihash, SliceFacts>, CommandError> {
    let name = store.name();
    let old_slices: Vec<(u64, &weir_odf::DataSlice)> = chain
        .blocks
        .iter()
        .filter(|b| b.old.is_some())
        .filter_map(|b| Some((b.block.sequence_number, b.block.event.new_data()?)))
        .collect();
    let mut facts = HashMap::new();
    // Where slices read from an object store are checked into, one at a time.
    let scratch = tempfile::Builder::new()
        .prefix(&format!("weir-upgrade-{name}-"))
        .tempdir()
        .map_err(|e| read_err(name, "a scratch folder".into(), e))?;
    for (k, (seq, slice)) in old_slices.iter().enumerate() {
        progress.say(
            name,
            format!("rehashing data slice {} of {}", k + 1, old_slices.len()),
        );
        let what = || {
            format!(
                "data slice {} of block #{seq}",
                store.display_file(FileKind::Data, &slice.physical_hash)
            )
        };
        // Checked against its hash and recorded size as it is read (in place on a local disk, copied into
        // the scratch folder from an object store), then decoded and hashed as a stream.
        let staged = store
            .stage_file(
                FileKind::Data,
                &slice.physical_hash,
                Some(slice.size),
                scratch.path(),
            )
            .await
            .map_err(|e| read_err(name, what(), e))?;
        let (schema, logical_hash) = data::logical_hash_of_file(&staged)
            .await
            .map_err(|e| read_err(name, what(), e))?;
        if staged.starts_with(scratch.path()) {
            let _ = std::fs::remove_file(&staged);
        }
        facts.insert(
            slice.physical_hash,
            SliceFacts {
                schema,
                logical_hash,
            },
        );
    }
    for b in chain.blocks.iter().filter(|b| b.old.is_some()) {
        let checkpoint = match &b.block.event {
            MetadataEvent::ExecuteTransform(e) => e.new_checkpoint.as_ref(),
            MetadataEvent::AddData(a) => a.new_checkpoint.as_ref(),
            _ => None,
        };
        if let Some(c) = checkpoint {
            store
                .check_file(
                    FileKind::Checkpoint,
                    &c.physical_hash,
                    (c.size > 0).then_some(c.size),
                )
                .await
                .map_err(|e| {
                    read_err(
                        name,
                        format!("the checkpoint of block #{}", b.block.sequence_number),
                        e,
                    )
                })?;
        }
    }
    Ok(facts)
}

/// The new hashes of the blocks a current dataset had before an earlier `weir upgrade` converted it, from
/// its upgrade backup: a derivative that run did not get to still names those blocks. Converting the
/// backed-up chain again gives the same blocks (the conversion is deterministic), a prefix of the chain.
async fn renamed_by_backup(
    ctx: &Context,
    name: &str,
    current: &Stored,
    inputs: &[UpgradedInput],
    progress: &mut Progress,
) -> Result<HashMap<Multihash, Multihash>, CommandError> {
    let backup = ctx.storage.upgrade_backup(name);
    let Some(old) = read_stored(&backup).await? else {
        return Ok(HashMap::new());
    };
    progress.say(name, "renaming the blocks of its last upgrade");
    let facts = slice_facts(&ctx.storage.dataset(name), &old, progress).await?;
    let upgraded = upgrade::upgrade_chain(name, &old.blocks, &facts, inputs)?;
    let head = upgraded.head();
    if !current.blocks.iter().any(|b| Some(b.hash) == head) {
        return Err(read_err(
            name,
            format!("its upgrade backup {}", backup.display_root()),
            "the chain kept there does not upgrade to a part of the dataset's chain",
        ));
    }
    Ok(upgraded.renamed)
}

/// What a planned dataset is to the derivatives that read it.
fn as_input(name: &str, plan: &Plan) -> Option<UpgradedInput> {
    let (stored, blocks, renamed) = match plan {
        Plan::Empty => return None,
        Plan::Current { stored, renamed } => (stored, stored.decoded(), renamed.clone()),
        Plan::Upgrade { stored, upgraded } => {
            (stored, upgraded.blocks.clone(), upgraded.renamed.clone())
        }
    };
    Some(UpgradedInput {
        name: name.to_owned(),
        id: stored.dataset_id()?,
        blocks,
        renamed,
    })
}

/// Writes the backups and the new blocks of every dataset that changes, then moves the heads (inputs
/// first), then removes the replaced block files.
async fn write(
    ctx: &Context,
    plans: &[(String, Plan)],
    progress: &mut Progress,
) -> Result<(), CommandError> {
    for (name, plan) in plans {
        let Plan::Upgrade { stored, upgraded } = plan else {
            continue;
        };
        progress.say(name, "writing the backup and the new blocks");
        let backup = ctx.storage.upgrade_backup(name);
        for bytes in &stored.files {
            backup.put_file(FileKind::Block, bytes.clone()).await?;
        }
        backup.record_head(stored.head).await?;
        let store = ctx.storage.dataset(name);
        for (hash, block) in &upgraded.blocks {
            let written = store.put_block(block).await?;
            if written != *hash {
                return Err(read_err(
                    name,
                    format!("upgraded block #{}", block.sequence_number),
                    format!("it was written as {written}, not {hash}"),
                ));
            }
        }
        fault::point("upgrade-after-blocks", name);
        progress.step();
    }
    for (name, plan) in plans {
        let Plan::Upgrade { stored, upgraded } = plan else {
            continue;
        };
        let Some(head) = upgraded.head() else {
            continue;
        };
        let store = ctx.storage.dataset(name);
        store.set_head(Some(stored.head), head).await?;
        info!(dataset = %name, old_head = %stored.head, new_head = %head, "dataset upgraded");
        fault::point("upgrade-after-head", name);
        let kept: HashSet<Multihash> = upgraded.blocks.iter().map(|(h, _)| *h).collect();
        for b in stored.blocks.iter().filter(|b| !kept.contains(&b.hash)) {
            store.remove_file(FileKind::Block, &b.hash).await?;
        }
        progress.done(name, format!("upgraded, head {head}"));
        progress.step();
    }
    Ok(())
}

/// What the command prints.
fn report(
    ctx: &Context,
    plans: &[(String, Plan)],
    opts: &UpgradeOptions,
    progress: &mut Progress,
) -> Output {
    let mut lines = Vec::new();
    let mut items = Vec::new();
    let (mut changed, mut current) = (0, 0);
    for (name, plan) in plans {
        match plan {
            Plan::Empty => {
                lines.push(format!("{name}: nothing stored yet"));
                items.push(json!({ "dataset": name, "status": "empty" }));
            }
            Plan::Current { .. } => {
                current += 1;
                lines.push(format!("{name}: already current"));
                items.push(json!({ "dataset": name, "status": "current" }));
            }
            Plan::Upgrade { stored, upgraded } => {
                changed += 1;
                let backup = ctx.storage.upgrade_backup(name).display_root();
                let verb = if opts.dry_run {
                    "would upgrade"
                } else {
                    "upgraded"
                };
                let new_head = upgraded.head();
                lines.push(format!(
                    "{name}: {verb}: {} block(s) rewritten, {} added, {} data slice(s) rehashed; head {} -> {}",
                    upgraded.rewritten,
                    upgraded.added,
                    upgraded.rehashed,
                    stored.head,
                    new_head.map_or_else(|| "none".to_owned(), |h| h.to_string())
                ));
                if !opts.dry_run {
                    lines.push(format!(
                        "  the old chain is kept in {backup} (its head in refs/head; its data and checkpoint files are the dataset's)"
                    ));
                }
                if opts.dry_run {
                    progress.done(name, "would upgrade");
                }
                items.push(json!({
                    "dataset": name,
                    "status": if opts.dry_run { "wouldUpgrade" } else { "upgraded" },
                    "oldHead": stored.head,
                    "newHead": new_head,
                    "oldBlocks": stored.blocks.len(),
                    "newBlocks": upgraded.blocks.len(),
                    "rewritten": upgraded.rewritten,
                    "added": upgraded.added,
                    "rehashed": upgraded.rehashed,
                    "backup": (!opts.dry_run).then_some(backup),
                }));
            }
        }
    }
    lines.push(match (opts.dry_run, changed) {
        (true, 0) | (false, 0) => format!("nothing to upgrade: {current} dataset(s) already current"),
        (true, n) => format!(
            "dry run: {n} dataset(s) would be upgraded, {current} already current; nothing was written"
        ),
        (false, n) => format!("{n} dataset(s) upgraded, {current} already current"),
    });
    Output {
        text: lines.join("\n"),
        json: json!({
            "dryRun": opts.dry_run,
            "upgraded": changed,
            "current": current,
            "datasets": items,
        }),
    }
}
