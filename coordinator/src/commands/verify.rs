//! `weir verify DATASET` and the replay it shares with `weir engine deprecate`: run every recorded transform
//! step again and compare the logical hash of its output with the recorded one.

use serde::Serialize;
use serde_json::json;

use super::{Output, known};
use crate::commands::error::CommandError;
use crate::engine::{EngineFailure, EngineHandle, compat};
use crate::transaction::{Context, PlannedInput, TransformPlan};
use odf::Multihash;
use odf::{Checkpoint, DatasetId, DatasetVocabulary, MetadataEvent};
use weir_dataset::chain::store::{Chain, FileKind};
use weir_dataset::identity::{self, EngineIdentity};

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
/// replaying it is MigrateQuery's, see [`crate::transaction::is_migration`]).
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
    if crate::transaction::is_migration(previous, recorded) {
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

/// Runs `verify`: checks the stored files of the chain, then replays its transform steps.
pub async fn run(ctx: &Context, dataset: &str) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let (files, problems) = check_stored_files(ctx, dataset).await?;
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
    let compat = compat::load(&ctx.storage).await?;
    let steps = replay(ctx, dataset, &|rec, name| {
        recorded_engine(ctx, &compat, rec, name).map(Some)
    })
    .await?;
    if let Some(bad) = steps.iter().find(|s| !s.matches()) {
        return Err(CommandError::Mismatch {
            summary: format!("verification failed: {}", bad.describe_mismatch()),
        });
    }
    let chain = ctx.storage.dataset(dataset).chain().await?;
    let migrations = chain
        .blocks
        .iter()
        .enumerate()
        .filter(|(k, (_, b))| match &b.event {
            MetadataEvent::ExecuteTransform(t) => crate::transaction::is_migration(
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
/// up), inputs before the datasets computed from them, stopping at the first that fails.
pub async fn run_many(
    ctx: &Context,
    datasets: &[String],
    all: bool,
    recursive: bool,
) -> Result<Output, CommandError> {
    for d in datasets {
        known(ctx, d)?;
    }
    let mut wanted: std::collections::BTreeSet<String> = if all {
        ctx.workspace.datasets.keys().cloned().collect()
    } else {
        datasets.iter().cloned().collect()
    };
    if recursive {
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
    if let [one] = order.as_slice() {
        return run(ctx, one).await;
    }
    let mut text = Vec::new();
    let mut json = Vec::new();
    for d in &order {
        let out = run(ctx, d).await?;
        text.push(out.text);
        json.push(out.json);
    }
    text.push(format!("{} dataset(s) verified", order.len()));
    Ok(Output {
        text: text.join("\n"),
        json: json!({ "verified": true, "datasets": json }),
    })
}
