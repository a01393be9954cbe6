//! `weir conformance ENGINE`: the engine-contract conformance kit against the engine serving `ENGINE` on the
//! chosen runtime (`--engine embedded|process|docker|podman`).

use serde_json::json;

use super::Output;
use crate::commands::error::CommandError;
use weir_transaction::Context;

/// Runs `conformance`.
pub async fn run(ctx: &Context, engine: &str) -> Result<Output, CommandError> {
    let handle = ctx.engines.resolve(engine)?;
    let dir = tempfile::Builder::new()
        .prefix("weir-conformance-")
        .tempdir()
        .map_err(|e| CommandError::Pipeline {
            message: format!("scratch directory: {e}"),
        })?;
    let report = handle.conformance(dir.path()).await?;
    use weir_engine_contract::conformance::{CheckStatus, Verdict};
    let failed = report.count(CheckStatus::Failed);
    let not_run = report.count(CheckStatus::NotRun);
    let text = format!(
        "engine `{engine}` ({} {}):\n{report}",
        handle.identity().runtime,
        handle.identity().reference
    );
    if report.verdict() != Verdict::Passed {
        eprintln!("{text}");
        return Err(CommandError::ConformanceFailed { failed, not_run });
    }
    Ok(Output {
        text,
        json: json!({ "engine": handle.identity(), "report": report }),
    })
}
