//! `weir pull --recompute`.

use crate::commands::error::CommandError;
use weir_transaction::Context;

/// `--recompute`: every derivative among `targets` whose transform is not the one its chain records is reset
/// to its Seed (refused, before anything changes, while datasets computed from it exist), so the pull
/// computes it again from its inputs with the new query.
pub(super) async fn recompute(ctx: &Context, targets: &[String]) -> Result<(), CommandError> {
    let mut moves = Vec::new();
    for name in targets {
        let m = &ctx.workspace.datasets[name];
        if !ctx.transform_changed(m).await? {
            continue;
        }
        let chain = ctx.storage.dataset(name).chain().await?;
        let seed = crate::commands::reset::find_block(&chain, None).map_err(|reason| {
            CommandError::BadBlock {
                dataset: name.clone(),
                reason,
            }
        })?;
        moves.extend(crate::commands::reset::plan(ctx, name, seed, false).await?);
    }
    crate::commands::reset::apply(ctx, &moves).await?;
    for m in &moves {
        tracing::info!(dataset = %m.dataset, "transform changed: reset to its Seed to compute it again");
    }
    Ok(())
}
