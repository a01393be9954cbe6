//! `weir reset DATASET [--to BLOCK] [--recursive]`: move a dataset's head back to an earlier block of its
//! own chain (its Seed by default), so the next `weir pull` computes it again from there.
//!
//! The dataset keeps its id. Blocks and files after the new head stay in storage, unreferenced (as kamu
//! leaves them). A dataset computed from blocks that the reset removes would point at blocks that are no
//! longer in its input's chain, so the reset is refused while such datasets exist, unless `--recursive`:
//! then each of them is reset too, to the block before its first step that read a removed block, and so on
//! down the graph. Datasets downstream are reset first, so an interrupted reset never leaves a dataset
//! pointing at blocks its input no longer has.

use std::collections::{BTreeMap, HashSet};

use serde_json::json;

use super::intent::{HeadChange, Intent, Journal};
use super::{Output, known};
use crate::commands::error::CommandError;
use weir_dataset::chain::store::Chain;
use weir_odf::{DatasetId, MetadataEvent, Multihash};
use weir_transaction::{Context, TxError};

/// One dataset's head move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadMove {
    /// The dataset.
    pub dataset: String,
    /// Its head now.
    pub from: Multihash,
    /// Its head after the reset.
    pub to: Multihash,
    /// Blocks the chain loses.
    pub blocks_removed: usize,
}

/// Why `--to` names no block of the chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockSpecError {
    /// The dataset has no blocks yet.
    #[error("it has no blocks yet")]
    Empty,
    /// No block of the chain is named so.
    #[error("no block of its chain is `{spec}`")]
    NotFound {
        /// What was given.
        spec: String,
    },
    /// `#...` that is not a number.
    #[error("`{spec}` is not a block number (#N)")]
    NotANumber {
        /// What was given.
        spec: String,
    },
    /// Too few characters to name a block surely, or several blocks match.
    #[error(
        "`{spec}` matches {matches} block(s): give at least 8 characters of the hash, enough to name one block"
    )]
    Ambiguous {
        /// What was given.
        spec: String,
        /// How many blocks it matches.
        matches: usize,
    },
}

/// The block `spec` names in `chain`: a whole block hash or its start or end (at least 8 characters, as
/// `weir log` shows them), or `#N` for sequence number N; `None` means the Seed.
///
/// A spec that matches no block is [`BlockSpecError::NotFound`] whatever its length; one that matches
/// blocks but is shorter than 8 characters, or matches several, is [`BlockSpecError::Ambiguous`].
pub fn find_block(chain: &Chain, spec: Option<&str>) -> Result<Multihash, BlockSpecError> {
    let Some(spec) = spec else {
        return chain
            .blocks
            .first()
            .map(|(h, _)| *h)
            .ok_or(BlockSpecError::Empty);
    };
    if let Some(n) = spec.strip_prefix('#') {
        let n: u64 = n.parse().map_err(|_| BlockSpecError::NotANumber {
            spec: spec.to_string(),
        })?;
        return chain
            .blocks
            .iter()
            .find(|(_, b)| b.sequence_number == n)
            .map(|(h, _)| *h)
            .ok_or_else(|| BlockSpecError::NotFound {
                spec: spec.to_string(),
            });
    }
    let matches: Vec<Multihash> = chain
        .blocks
        .iter()
        .map(|(h, _)| *h)
        .filter(|h| {
            let text = h.to_string();
            !spec.is_empty() && (text == spec || text.ends_with(spec) || text.starts_with(spec))
        })
        .collect();
    match matches.as_slice() {
        [] => Err(BlockSpecError::NotFound {
            spec: spec.to_string(),
        }),
        [one] if spec.len() >= 8 => Ok(*one),
        _ => Err(BlockSpecError::Ambiguous {
            spec: spec.to_string(),
            matches: matches.len(),
        }),
    }
}

/// Every head move a reset of `dataset` to `target` needs: its own, then (when `recursive`) those of the
/// datasets computed from the blocks it loses, downstream first. Without `recursive`, a dataset that would
/// need one is an error naming it.
pub async fn plan(
    ctx: &Context,
    dataset: &str,
    target: Multihash,
    recursive: bool,
) -> Result<Vec<HeadMove>, CommandError> {
    let mut moves: BTreeMap<String, HeadMove> = BTreeMap::new();
    let mut order = Vec::new();
    let mut pending = vec![(dataset.to_string(), target)];
    while let Some((name, to)) = pending.pop() {
        let chain = ctx.storage.dataset(&name).chain().await?;
        let Some(from) = chain.summary.head else {
            continue;
        };
        let Some(kept) = chain.up_to(&to).map(|b| b.len()) else {
            return Err(TxError::Refused {
                dataset: name.clone(),
                reason: format!("block {to} is not in its chain"),
            }
            .into());
        };
        let removed: HashSet<Multihash> = chain.blocks[kept..].iter().map(|(h, _)| *h).collect();
        if let Some(earlier) = moves.get(&name) {
            // Reached twice (two paths down the graph): keep the earlier of the two blocks.
            if chain.up_to(&earlier.to).map(|b| b.len()) <= Some(kept) {
                continue;
            }
        }
        moves.insert(
            name.clone(),
            HeadMove {
                dataset: name.clone(),
                from,
                to,
                blocks_removed: removed.len(),
            },
        );
        order.retain(|n| n != &name);
        order.push(name.clone());
        if removed.is_empty() {
            continue;
        }
        let Some(id) = chain.summary.dataset_id else {
            continue;
        };
        let mut affected = Vec::new();
        for dependent in ctx.workspace.dependents_of(&name) {
            let dep_chain = ctx.storage.dataset(&dependent).chain().await?;
            if let Some(to) = last_block_before_reading(&dep_chain, id, &removed) {
                affected.push((dependent, to));
            }
        }
        if !recursive && !affected.is_empty() {
            let names: Vec<String> = affected.iter().map(|(d, _)| format!("`{d}`")).collect();
            return Err(TxError::Refused {
                dataset: name.clone(),
                reason: format!(
                    "{} computed from blocks this reset removes; pass --recursive to reset {} too",
                    names.join(", "),
                    if names.len() == 1 { "it" } else { "them" }
                ),
            }
            .into());
        }
        pending.extend(affected);
    }
    // Downstream first: the reverse of the order datasets were reached in.
    Ok(order
        .into_iter()
        .rev()
        .filter_map(|n| moves.remove(&n))
        .filter(|m| m.from != m.to)
        .collect())
}

/// The block of `chain` just before its first step that read one of `removed` (blocks of input `id`), or
/// `None` when no step did.
fn last_block_before_reading(
    chain: &Chain,
    id: DatasetId,
    removed: &HashSet<Multihash>,
) -> Option<Multihash> {
    let at = chain.blocks.iter().position(|(_, b)| match &b.event {
        MetadataEvent::ExecuteTransform(t) => t
            .query_inputs
            .iter()
            .any(|q| q.dataset_id == id && q.new_block_hash.is_some_and(|h| removed.contains(&h))),
        _ => false,
    })?;
    // A derivative's first block is its Seed, never a step, so `at` is at least 1.
    chain.blocks.get(at.checked_sub(1)?).map(|(h, _)| *h)
}

/// Moves every head of `moves`, in order (downstream first), recorded first so that a reset killed at any
/// point is completed by the next command.
pub async fn apply(ctx: &Context, moves: &[HeadMove]) -> Result<(), CommandError> {
    if moves.is_empty() {
        return Ok(());
    }
    let intent = Intent::Reset {
        moves: moves
            .iter()
            .map(|m| HeadChange {
                dataset: m.dataset.clone(),
                from: m.from,
                to: m.to,
            })
            .collect(),
    };
    Journal::for_workspace(&ctx.storage, &ctx.workspace.root)
        .run(&ctx.storage, &intent)
        .await?;
    for m in moves {
        tracing::info!(dataset = %m.dataset, from = %m.from, to = %m.to, "dataset reset");
    }
    Ok(())
}

/// Runs `reset`.
pub async fn run(
    ctx: &Context,
    dataset: &str,
    to: Option<&str>,
    recursive: bool,
) -> Result<Output, CommandError> {
    known(ctx, dataset)?;
    let chain = ctx.storage.dataset(dataset).chain().await?;
    let target = find_block(&chain, to).map_err(|reason| CommandError::BadBlock {
        dataset: dataset.to_string(),
        reason,
    })?;
    let moves = plan(ctx, dataset, target, recursive).await?;
    apply(ctx, &moves).await?;
    Ok(report(dataset, &moves))
}

fn report(dataset: &str, moves: &[HeadMove]) -> Output {
    let text = if moves.is_empty() {
        format!("dataset `{dataset}` is already at that block; nothing changed")
    } else {
        moves
            .iter()
            .map(|m| {
                format!(
                    "{}: reset to {} ({} block(s) removed from its chain); `weir pull {}` computes it again",
                    m.dataset, m.to, m.blocks_removed, m.dataset
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Output {
        text,
        json: json!({
            "reset": moves.iter().map(|m| json!({
                "dataset": m.dataset,
                "oldHead": m.from.to_string(),
                "newHead": m.to.to_string(),
                "blocksRemoved": m.blocks_removed,
            })).collect::<Vec<_>>()
        }),
    }
}
