//! `weir conformance ENGINE`: the engine-contract conformance kit against an engine.

use super::Output;
use crate::error::CommandError;
use crate::transaction::Context;

/// Runs `conformance`.
pub async fn run(ctx: &Context, engine: &str) -> Result<Output, CommandError> {
    let handle = ctx.engines.resolve(engine)?;
    Err(CommandError::Engine(crate::engine::EngineFailure::NotConfigured {
        engine: engine.to_string(),
        runtime: handle.identity().runtime.clone(),
        hint: "the conformance kit drives engines over gRPC; run it with --engine process|docker|podman".into(),
    }))
}
