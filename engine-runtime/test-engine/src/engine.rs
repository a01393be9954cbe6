//! The test engine: copies input files to the output, or runs a test [`Hook`] (the stream-breaking
//! hooks excepted: `front.rs` answers those).

use std::path::{Path, PathBuf};
use std::time::Duration;

use weir_engine_contract::model::{
    OffsetInterval, Progress, RawQueryRequest, RawQuerySuccess, TransformRequest, TransformSuccess,
};
use weir_engine_contract::{Engine, EngineError, ProgressSink};

use crate::hooks::Hook;
use crate::sandbox_report;

/// An engine that computes nothing: it copies bytes and obeys hooks.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestEngine;

impl Engine for TestEngine {
    async fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        progress: ProgressSink,
    ) -> Result<RawQuerySuccess, EngineError> {
        let inputs: Vec<PathBuf> = request.input_data_paths.iter().map(PathBuf::from).collect();
        let output = PathBuf::from(&request.output_data_path);
        let num_records = match Hook::of(&request.transform) {
            Hook::SandboxReport => {
                let report = sandbox_report::report(&inputs, &output);
                let json =
                    serde_json::to_vec_pretty(&report).map_err(|e| EngineError::internal(&e))?;
                write(&output, &json).await?;
                1
            }
            Hook::Respond { file, start, end } => {
                copy(&[file], &output).await?;
                claimed_records(start, end)
            }
            Hook::RespondNone { start, end } => claimed_records(start, end),
            hook => {
                run_hook(hook, &progress).await?;
                copy(&inputs, &output).await?
            }
        };
        Ok(RawQuerySuccess { num_records })
    }

    async fn execute_transform(
        &self,
        request: TransformRequest,
        progress: ProgressSink,
    ) -> Result<TransformSuccess, EngineError> {
        let output = Path::new(&request.new_data_path);
        let new_offset_interval = match Hook::of(&request.transform) {
            // Lies on purpose: the claim is whatever the SQL text says, whatever was written.
            Hook::Respond { file, start, end } => {
                copy(&[file], output).await?;
                OffsetInterval::new(start, end)
            }
            Hook::RespondNone { start, end } => OffsetInterval::new(start, end),
            hook => {
                run_hook(hook, &progress).await?;
                let inputs: Vec<PathBuf> = request
                    .query_inputs
                    .iter()
                    .flat_map(|i| i.data_paths.iter().map(PathBuf::from))
                    .collect();
                let rows = copy(&inputs, output).await?;
                rows.checked_sub(1).and_then(|last| {
                    OffsetInterval::new(request.next_offset, request.next_offset + last)
                })
            }
        };
        let checkpoint = match new_offset_interval {
            Some(interval) => format!(
                "checkpoint of {} after offset {}\n",
                request.dataset_alias, interval.end
            ),
            None => format!(
                "checkpoint of {} with no new records\n",
                request.dataset_alias
            ),
        };
        write(
            Path::new(&request.new_checkpoint_path),
            checkpoint.as_bytes(),
        )
        .await?;
        Ok(TransformSuccess {
            new_offset_interval,
            new_watermark: None,
        })
    }
}

/// Runs the hooks that only delay or break the operation; `Copy` and `Progress` continue.
async fn run_hook(hook: Hook, progress: &ProgressSink) -> Result<(), EngineError> {
    match hook {
        Hook::Copy | Hook::SandboxReport | Hook::Respond { .. } | Hook::RespondNone { .. } => {
            Ok(())
        }
        Hook::Invalid => Err(EngineError::invalid_query(
            "the test engine was asked for `invalid`",
        )),
        Hook::Usage(usage) => Err(EngineError::invalid_query(usage)),
        // The raw front service answers these before the SDK sees the call.
        Hook::TwoTerminals | Hook::NoTerminal => Err(EngineError::Internal {
            message: "stream-breaking hooks are answered by the raw front service".into(),
            backtrace: None,
        }),
        Hook::Progress(n) => {
            for i in 0..n {
                progress
                    .report(Progress {
                        phase: Some("copying".into()),
                        rows_read: Some(i),
                        rows_written: Some(i),
                    })
                    .await;
            }
            Ok(())
        }
        Hook::Hang => {
            progress.report(phase("hanging")).await;
            tracing::warn!("hanging forever, as asked");
            std::future::pending().await
        }
        Hook::Crash => {
            progress.report(phase("crashing")).await;
            // Let the progress message reach the client: the crash is mid-operation.
            tokio::time::sleep(Duration::from_millis(200)).await;
            eprintln!("test engine: aborting mid-operation, as asked");
            std::process::abort()
        }
    }
}

/// The number of records in `[start, end]` (0 when `end < start`).
fn claimed_records(start: u64, end: u64) -> u64 {
    OffsetInterval::new(start, end).map_or(0, |i| i.len())
}

fn phase(name: &str) -> Progress {
    Progress {
        phase: Some(name.into()),
        ..Progress::default()
    }
}

/// Concatenates `inputs` into `output` and returns the number of lines copied.
async fn copy(inputs: &[PathBuf], output: &Path) -> Result<u64, EngineError> {
    let mut bytes = Vec::new();
    for input in inputs {
        let content = tokio::fs::read(input)
            .await
            .map_err(|e| EngineError::Internal {
                message: format!("cannot read input {}: {e}", input.display()),
                backtrace: None,
            })?;
        bytes.extend_from_slice(&content);
    }
    write(output, &bytes).await?;
    Ok(bytes.iter().filter(|&&b| b == b'\n').count() as u64)
}

async fn write(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    tokio::fs::write(path, bytes)
        .await
        .map_err(|e| EngineError::Internal {
            message: format!("cannot write {}: {e}", path.display()),
            backtrace: None,
        })
}
