//! `weir verify DATASET` and the replay it shares with `weir engine deprecate`: run every recorded transform
//! step again and compare the logical hash of its output with the recorded one.

use serde::Serialize;
use serde_json::json;

use super::{Output, known};
use crate::commands::error::CommandError;
use weir_dataset::chain::store::{Chain, FileKind};
use weir_dataset::identity::{self, EngineIdentity};
use weir_engines::{EngineFailure, EngineHandle, compat};
use weir_odf::Multihash;
use weir_odf::{Checkpoint, DatasetId, DatasetVocabulary, MetadataEvent};
use weir_transaction::{Context, PlannedInput, TransformPlan};

/// One replayed step.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayedStep {
    /// The dataset.
    pub dataset: String,
    /// The block's sequence number.
    pub sequence_number: u64,
    /// The block's hash.
    pub block_hash: Multihash,
    /// Engine recorded in the block.
    pub recorded_engine: Option<EngineIdentity>,
    /// Engine used for the replay.
    pub replay_engine: EngineIdentity,
    /// Recorded output: offsets and logical hash.
    pub recorded: Option<(u64, u64, Multihash)>,
    /// Replayed output: offsets and logical hash.
    pub replayed: Option<(u64, u64, Multihash)>,
}

impl ReplayedStep {
    /// Whether the outputs are identical.
    pub fn matches(&self) -> bool {
        self.recorded == self.replayed
    }

    /// A precise description of the difference.
    pub fn describe_mismatch(&self) -> String {
        let show = |o: &Option<(u64, u64, Multihash)>| match o {
            Some((s, e, h)) => format!("records [{s}, {e}] with logical hash {h}"),
            None => "no records".into(),
        };
        format!(
            "dataset `{}` block #{} ({}): recorded {} but {} replayed {}",
            self.dataset,
            self.sequence_number,
            self.block_hash,
            show(&self.recorded),
            self.replay_engine.reference,
            show(&self.replayed)
        )
    }
}

/// Chooses the engine that replays a recorded step (`None` skips the step), given the engine the step
/// recorded (in the `SetTransform` in force) and the engine name its transform asks for.
pub type EngineChooser<'a> =
    dyn Fn(Option<&EngineIdentity>, &str) -> Result<Option<EngineHandle>, EngineFailure> + 'a;

/// A recorded transform step, planned again from the chain alone.
#[derive(Debug, Clone)]
pub struct RecordedStep {
    /// The chain before the step.
    pub prefix: Chain,
    /// The step as a plan: the recorded inputs, offsets and checkpoint.
    pub plan: TransformPlan,
    /// The engine the step recorded (by the `SetTransform` in force).
    pub recorded_engine: Option<EngineIdentity>,
    /// The output vocabulary.
    pub vocab: DatasetVocabulary,
}

/// The step of block `k` of `chain` (the chain of `dataset`), planned again: `None` when the block is not
/// an `ExecuteTransform`, has no transform in force, or is a migration (which consumes no input records:
/// replaying it is MigrateQuery's, see [`weir_transaction::is_migration`]).
pub async fn recorded_step(
    ctx: &Context,
    dataset: &str,
    chain: &Chain,
    k: usize,
    ids: &[(DatasetId, String)],
) -> Result<Option<RecordedStep>, CommandError> {
    let Some((_, block)) = chain.blocks.get(k) else {
        return Ok(None);
    };
    let MetadataEvent::ExecuteTransform(recorded) = &block.event else {
        return Ok(None);
    };
    let previous = k
        .checked_sub(1)
        .and_then(|p| chain.blocks.get(p))
        .map(|(_, b)| &b.event);
    if weir_transaction::is_migration(previous, recorded) {
        return Ok(None);
    }
    let prefix = Chain::from_blocks(dataset, &chain.blocks[..k])?;
    let Some(set_transform) = &prefix.summary.transform else {
        return Ok(None);
    };
    let recorded_engine = identity::in_force(&chain.blocks[..k]);
    let sql = identity::without_engine(&set_transform.transform.sql().clone().normalize());
    let mut inputs = Vec::new();
    for (qi, ti) in recorded.query_inputs.iter().zip(&set_transform.inputs) {
        let name = ids
            .iter()
            .find(|(id, _)| *id == qi.dataset_id)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| ti.dataset_ref.clone());
        let in_chain = ctx
            .storage
            .dataset(&name)
            .chain_at(qi.last_block_hash().copied())
            .await?;
        let Some(schema_slice) = in_chain.data_slices().next().cloned() else {
            continue;
        };
        inputs.push(PlannedInput {
            name,
            query_alias: ti.query_alias().to_string(),
            id: qi.dataset_id,
            chain: in_chain,
            prev_block: qi.prev_block_hash,
            new_block: qi.last_block_hash().copied(),
            prev_offset: qi.prev_offset,
            new_offset: qi.last_offset(),
            schema_slice,
        });
    }
    let plan = TransformPlan {
        transform: sql,
        inputs,
        prev_checkpoint: recorded.prev_checkpoint.map(|h| Checkpoint {
            physical_hash: h,
            size: 0,
        }),
        prev_offset: recorded.prev_offset,
    };
    let vocab = DatasetVocabulary::from(&prefix.summary.vocab.clone().unwrap_or_default());
    Ok(Some(RecordedStep {
        prefix,
        plan,
        recorded_engine,
        vocab,
    }))
}

/// Every dataset of the workspace with an id, by id.
pub async fn dataset_ids(ctx: &Context) -> Result<Vec<(DatasetId, String)>, CommandError> {
    let mut ids = Vec::new();
    for name in ctx.workspace.datasets.keys() {
        if let Some(id) = ctx.storage.dataset(name).chain().await?.summary.dataset_id {
            ids.push((id, name.clone()));
        }
    }
    Ok(ids)
}

/// Replays the transform steps of `dataset` in order, stopping at the first mismatch. Migration steps
/// are not replayed (see [`recorded_step`]); the steps after them are.
pub async fn replay(
    ctx: &Context,
    dataset: &str,
    engine_for: &EngineChooser<'_>,
) -> Result<Vec<ReplayedStep>, CommandError> {
    let store = ctx.storage.dataset(dataset);
    let chain = store.chain().await?;
    let ids = dataset_ids(ctx).await?;
    let mut steps = Vec::new();
    for (k, (hash, block)) in chain.blocks.iter().enumerate() {
        let Some(step) = recorded_step(ctx, dataset, &chain, k, &ids).await? else {
            continue;
        };
        let MetadataEvent::ExecuteTransform(recorded) = &block.event else {
            continue;
        };
        let RecordedStep {
            prefix,
            plan,
            recorded_engine,
            vocab,
        } = step;
        let Some(engine) = engine_for(recorded_engine.as_ref(), &plan.transform.engine)? else {
            continue;
        };
        let id = chain
            .summary
            .dataset_id
            .unwrap_or(DatasetId::from_key([0; 32]));
        let run = ctx
            .run_engine(
                &store,
                &prefix,
                dataset,
                id,
                &plan,
                &engine,
                &vocab,
                block.system_time,
            )
            .await?;
        // A replay's output is compared, never stored: what the engine wrote to the store goes.
        if let Some(objects) = &run.objects {
            objects.remove_outputs().await;
        }
        let replayed = run.output.as_ref().map(|o| {
            (
                plan.next_offset(),
                plan.next_offset() + o.rows - 1,
                o.logical_hash,
            )
        });
        let step = ReplayedStep {
            dataset: dataset.to_string(),
            sequence_number: block.sequence_number,
            block_hash: *hash,
            recorded_engine,
            replay_engine: engine.identity().clone(),
            recorded: recorded.new_data.as_ref().map(|d| {
                (
                    d.offset_interval.start,
                    d.offset_interval.end,
                    d.logical_hash,
                )
            }),
            replayed,
        };
        let stop = !step.matches();
        steps.push(step);
        if stop {
            break;
        }
    }
    Ok(steps)
}

/// The engine that replays a recorded step: the recorded one when this runtime serves it, or its recorded
/// replacement (`weir engine deprecate`).
pub fn recorded_engine(
    ctx: &Context,
    compat: &[compat::Compatibility],
    recorded: Option<&EngineIdentity>,
    name: &str,
) -> Result<EngineHandle, EngineFailure> {
    let current = ctx.engines.resolve(name)?;
    let Some(rec) = recorded else {
        return Ok(current);
    };
    if rec == current.identity() {
        return Ok(current);
    }
    if let Some(replacement) = compat::replacement_for(compat, rec) {
        if replacement == current.identity() {
            return Ok(current);
        }
        return ctx
            .engines
            .by_reference(name, &replacement.reference_for_cli());
    }
    Err(EngineFailure::NotConfigured {
        engine: name.to_string(),
        runtime: rec.runtime.clone(),
        hint: format!(
            "the step was recorded with {} but this runtime serves {}; run `weir engine deprecate {name} --to ...` to replace it",
            rec.reference,
            current.identity().reference
        ),
    })
}

/// One stored file of a chain that failed its check.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileProblem {
    /// The block that references the file.
    pub sequence_number: u64,
    /// That block's hash.
    pub block_hash: Multihash,
    /// What went wrong: the file, and the expected and actual hashes (or that it is missing).
    pub problem: String,
}

/// Checks every data slice and checkpoint the chain of `dataset` references: present, of the recorded size,
/// hashing to the recorded physical hash. Returns how many files were checked and the problems found.
pub async fn check_stored_files(
    ctx: &Context,
    dataset: &str,
) -> Result<(usize, Vec<FileProblem>), CommandError> {
    let store = ctx.storage.dataset(dataset);
    let chain = store.chain().await?;
    let mut checked = 0;
    let mut problems = Vec::new();
    for (hash, block) in &chain.blocks {
        let mut files = Vec::new();
        if let Some(d) = block.event.new_data() {
            files.push(("data slice", FileKind::Data, d.physical_hash, d.size));
        }
        if let MetadataEvent::ExecuteTransform(t) = &block.event
            && let Some(c) = &t.new_checkpoint
        {
            files.push(("checkpoint", FileKind::Checkpoint, c.physical_hash, c.size));
        }
        for (what, kind, physical_hash, size) in files {
            checked += 1;
            if let Err(e) = store.check_file(kind, &physical_hash, Some(size)).await {
                problems.push(FileProblem {
                    sequence_number: block.sequence_number,
                    block_hash: *hash,
                    problem: format!("{what}: {e}"),
                });
            }
        }
    }
    Ok((checked, problems))
}

/// Options of `weir verify`.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Every dataset of the workspace.
    pub all: bool,
    /// The named datasets' inputs too, all the way up.
    pub recursive: bool,
    /// `--integrity`: check the stored files against the chain's hashes (physical and logical) and replay
    /// nothing.
    pub integrity_only: bool,
    /// No progress bar.
    pub quiet: bool,
}

/// The progress of a verification on stderr: one bar over every stored file to check and every step to
/// replay, with counts and an ETA (hidden with `--quiet`, `--format json`, or when stderr is not a terminal).
#[derive(Debug, Clone)]
pub struct VerifyProgress {
    bar: indicatif::ProgressBar,
}

impl VerifyProgress {
    /// A bar over `total` units of work.
    pub fn new(total: u64, quiet: bool) -> Self {
        let bar = if quiet {
            indicatif::ProgressBar::hidden()
        } else {
            indicatif::ProgressBar::with_draw_target(
                Some(total),
                indicatif::ProgressDrawTarget::stderr(),
            )
        };
        let style = indicatif::ProgressStyle::with_template(
            "{prefix:<24} [{bar:30}] {pos}/{len} {msg} (ETA {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        Self { bar }
    }

    /// A bar that shows nothing.
    pub fn hidden() -> Self {
        Self::new(0, true)
    }

    fn dataset(&self, name: &str, what: &str) {
        self.bar.set_prefix(name.to_owned());
        self.bar.set_message(what.to_owned());
    }

    fn tick(&self) {
        self.bar.inc(1);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// How much a verification of `dataset` has to do: the files its chain references, and (unless
/// `integrity_only`) the transform steps it replays.
async fn work(ctx: &Context, dataset: &str, integrity_only: bool) -> Result<u64, CommandError> {
    let chain = ctx.storage.dataset(dataset).chain().await?;
    let mut units = 0u64;
    for (_, b) in &chain.blocks {
        units += u64::from(b.event.new_data().is_some());
        if let MetadataEvent::ExecuteTransform(t) = &b.event {
            units += u64::from(t.new_checkpoint.is_some());
            units += u64::from(!integrity_only);
        }
    }
    Ok(units)
}

/// `verify --integrity` of one dataset: every block read against its hash (reading the chain does that),
/// then every data slice against its physical hash, size, record count and logical hash and every
/// checkpoint against its physical hash and size ([`weir_dataset`]'s `check_integrity`). Nothing is
/// replayed.
pub async fn run_integrity(
    ctx: &Context,
    dataset: &str,
    progress: &VerifyProgress,
) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    progress.dataset(dataset, "checking stored files");
    let store = ctx.storage.dataset(dataset);
    let chain = store.chain().await?;
    let scratch = ctx.scratch(dataset)?;
    let report = store
        .check_integrity(&chain, scratch.path(), |_| progress.tick())
        .await?;
    Ok(Output {
        text: format!(
            "dataset `{dataset}`: {} block(s), {} data slice(s) and {} checkpoint(s) match their hashes (integrity only: no transform replayed)",
            chain.blocks.len(),
            report.data_files,
            report.checkpoints
        ),
        json: json!({
            "dataset": dataset,
            "verified": true,
            "integrityOnly": true,
            "blocksChecked": chain.blocks.len(),
            "dataFilesChecked": report.data_files,
            "checkpointsChecked": report.checkpoints,
        }),
    })
}

/// Runs `verify`: checks the stored files of the chain, then replays its transform steps.
pub async fn run(
    ctx: &Context,
    dataset: &str,
    progress: &VerifyProgress,
) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    progress.dataset(dataset, "checking stored files");
    let (files, problems) = check_stored_files(ctx, dataset).await?;
    for _ in 0..files {
        progress.tick();
    }
    if !problems.is_empty() {
        return Err(CommandError::StoredFiles {
            dataset: dataset.to_string(),
            checked: files,
            problems: problems
                .iter()
                .map(|p| {
                    format!(
                        "block #{} ({}): {}",
                        p.sequence_number, p.block_hash, p.problem
                    )
                })
                .collect(),
        });
    }
    progress.dataset(dataset, "replaying transform steps");
    let compat = compat::load(&ctx.storage).await?;
    let steps = replay(ctx, dataset, &|rec, name| {
        recorded_engine(ctx, &compat, rec, name).map(Some)
    })
    .await?;
    let chain = ctx.storage.dataset(dataset).chain().await?;
    // Every ExecuteTransform was counted as a step to replay; skipped ones (migrations) are done too.
    let transform_blocks = chain
        .blocks
        .iter()
        .filter(|(_, b)| matches!(b.event, MetadataEvent::ExecuteTransform(_)))
        .count();
    for _ in 0..transform_blocks {
        progress.tick();
    }
    if let Some(bad) = steps.iter().find(|s| !s.matches()) {
        return Err(CommandError::Mismatch {
            summary: format!("verification failed: {}", bad.describe_mismatch()),
        });
    }
    let migrations = chain
        .blocks
        .iter()
        .enumerate()
        .filter(|(k, (_, b))| match &b.event {
            MetadataEvent::ExecuteTransform(t) => weir_transaction::is_migration(
                k.checked_sub(1)
                    .and_then(|p| chain.blocks.get(p))
                    .map(|(_, b)| &b.event),
                t,
            ),
            _ => false,
        })
        .count();
    let migrated = if migrations > 0 {
        format!("; {migrations} migration step(s) (MigrateQuery) not replayed")
    } else {
        String::new()
    };
    let text = if steps.is_empty() {
        format!(
            "dataset `{dataset}`: {files} stored file(s) intact; it has no transform steps to verify{migrated}"
        )
    } else {
        format!(
            "dataset `{dataset}`: {files} stored file(s) intact; {} transform step(s) replayed, all outputs identical{migrated}",
            steps.len()
        )
    };
    Ok(Output {
        text,
        json: json!({ "dataset": dataset, "verified": true, "filesChecked": files, "steps": steps, "migrationsNotReplayed": migrations }),
    })
}

/// Runs `verify` for several datasets (`--all`: every one; `--recursive`: their inputs too, all the way
/// up; names or `%` patterns), inputs before the datasets computed from them, stopping at the first that
/// fails. A bar on stderr counts the files checked and steps replayed, with an ETA.
pub async fn run_many(
    ctx: &Context,
    datasets: &[String],
    opts: &VerifyOptions,
) -> Result<Output, CommandError> {
    let named = super::select(ctx, datasets)?;
    let mut wanted: std::collections::BTreeSet<String> = if opts.all {
        ctx.workspace.datasets.keys().cloned().collect()
    } else {
        named.into_iter().collect()
    };
    if opts.recursive {
        let mut stack: Vec<String> = wanted.iter().cloned().collect();
        while let Some(d) = stack.pop() {
            for input in ctx.workspace.inputs_of(&d) {
                if wanted.insert(input.clone()) {
                    stack.push(input);
                }
            }
        }
    }
    let order: Vec<String> = ctx
        .workspace
        .topological_order()?
        .into_iter()
        .filter(|d| wanted.contains(d))
        .collect();
    let mut total = 0;
    for d in &order {
        total += work(ctx, d, opts.integrity_only).await?;
    }
    let progress = VerifyProgress::new(total, opts.quiet);
    let mut text = Vec::new();
    let mut json = Vec::new();
    for d in &order {
        let out = if opts.integrity_only {
            run_integrity(ctx, d, &progress).await
        } else {
            run(ctx, d, &progress).await
        };
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                progress.finish();
                return Err(e);
            }
        };
        text.push(out.text);
        json.push(out.json);
    }
    progress.finish();
    if let [one] = json.as_slice() {
        return Ok(Output {
            text: text.join("\n"),
            json: one.clone(),
        });
    }
    text.push(format!("{} dataset(s) verified", order.len()));
    Ok(Output {
        text: text.join("\n"),
        json: json!({ "verified": true, "integrityOnly": opts.integrity_only, "datasets": json }),
    })
}
