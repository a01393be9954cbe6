//! `weir ingest DATASET [FILE|-]`: one transaction of a root's push source (`AddPushSource`), as kamu's
//! `kamu ingest`. The file (or standard input) is read with the source's read step, or one of the format
//! named by `--input-format`, and goes through the same checks, preprocess query, merge strategy and commit
//! as a polled file: a file given by path is read from a checked snapshot (changed while read: refused,
//! nothing committed); standard input is copied to scratch first, so what is read is what was sent.
//!
//! The push records the SHA3-256 of the bytes it pushed. Bytes that are exactly what the source's last push
//! recorded are not ingested again (a rerun of a push killed after its commit, before it reported, finds
//! them there): the command says which block holds them and exits 0; `--again` ingests them anyway.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use weir_odf::{AddPushSource, Multihash, ReadStep, Sha3Hasher, SourceState};

use super::pull::progress::ProgressLine;
use super::{Output, known};
use crate::commands::error::CommandError;
use weir_dataset::progress::{Progress, Report};
use weir_ingest::error::BadData;
use weir_ingest::fetch::Fetched;
use weir_ingest::source_file::{FileSnapshot, SnapshotError};
use weir_transaction::{Context, PushOutcome, Pushed, TxError, TxOutcome};

/// A data format `--input-format` names, overriding the push source's read step kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// CSV with a header line.
    Csv,
    /// Newline-delimited JSON.
    Ndjson,
    /// Parquet.
    Parquet,
}

/// Options of `weir ingest`.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// The root dataset.
    pub dataset: String,
    /// A file, or `-` / `None` for standard input.
    pub file: Option<String>,
    /// The push source, when the dataset has more than one.
    pub source_name: Option<String>,
    /// The format of the data, when it is not the source's.
    pub input_format: Option<InputFormat>,
    /// No progress line.
    pub quiet: bool,
    /// Ingest the data even when it is exactly what the source's last push pushed.
    pub again: bool,
}

/// Runs `weir ingest`.
pub async fn run(ctx: &Context, opts: &IngestOptions) -> Result<Output, CommandError> {
    known(ctx, &opts.dataset)?;
    let dataset = opts.dataset.as_str();
    let unsupported = |message: String| {
        CommandError::Transaction(TxError::Unsupported {
            dataset: dataset.to_string(),
            message,
        })
    };
    let m = &ctx.workspace.datasets[dataset];
    let source = push_source(&m.push_sources, opts.source_name.as_deref()).map_err(unsupported)?;
    let read = read_step_as(&source.read, opts.input_format);
    let old_head = ctx
        .storage
        .dataset(dataset)
        .head()
        .await?
        .map(|h| h.to_string());
    // The line a pull draws for a root: the file hashed, read, checked, committed.
    let line = Arc::new(ProgressLine::new(dataset, opts.quiet));
    let shown = line.clone();
    let progress = Progress::new(move |r: Report| shown.show(&r));
    let ctx = ctx.with_progress(progress.clone());
    let scratch = ctx.scratch(dataset)?;
    let file = match opts.file.as_deref() {
        None | Some("-") => stdin_copy(dataset, scratch.path())
            .await
            .map(|(f, content)| (f, None, content)),
        Some(path) => snapshot(dataset, Path::new(path), progress)
            .await
            .map(|(f, s)| {
                let content = s.sha3;
                (f, Some(s), content)
            }),
    };
    let (file, snapshot, content) = match file {
        Ok(f) => f,
        Err(e) => {
            line.finish();
            return Err(e);
        }
    };
    let outcome = ctx
        .ingest_pushed(
            dataset,
            Pushed {
                source_name: source.source_name.clone(),
                read,
                file,
                snapshot,
                content,
                again: opts.again,
            },
        )
        .await;
    line.finish();
    Ok(match outcome? {
        PushOutcome::AlreadyIngested(last) => Output {
            text: format!(
                "{dataset}: nothing ingested: these {} bytes (sha3-256 {}) are exactly what the last push to source `{}` sent, already in block #{} {} ({} record(s) added then); nothing committed. `--again` ingests them once more",
                last.pushed.size,
                last.pushed.sha3_256,
                source.source_name,
                last.sequence_number,
                last.block,
                last.records,
            ),
            json: json!({
                "dataset": dataset,
                "sourceName": source.source_name,
                "recordsAdded": 0,
                "oldHead": old_head,
                "newHead": old_head,
                "alreadyIngested": {
                    "block": last.block.to_string(),
                    "sequenceNumber": last.sequence_number,
                    "systemTime": last.system_time.to_rfc3339(),
                    "records": last.records,
                    "size": last.pushed.size,
                    "sha3-256": last.pushed.sha3_256,
                },
            }),
        },
        PushOutcome::Ingested(TxOutcome::Committed { head, records, .. }) => Output {
            text: format!(
                "{dataset}: {records} record(s) added, head {} -> {head}",
                old_head.as_deref().unwrap_or("(new)")
            ),
            json: json!({
                "dataset": dataset,
                "sourceName": source.source_name,
                "recordsAdded": records,
                "oldHead": old_head,
                "newHead": head.to_string(),
                "alreadyIngested": null,
            }),
        },
        PushOutcome::Ingested(TxOutcome::UpToDate { .. }) => Output {
            text: format!("{dataset}: nothing to add"),
            json: json!({
                "dataset": dataset,
                "sourceName": source.source_name,
                "recordsAdded": 0,
                "oldHead": old_head,
                "newHead": old_head,
                "alreadyIngested": null,
            }),
        },
    })
}

/// The push source named `name`, or the only one.
fn push_source<'a>(
    sources: &'a [AddPushSource],
    name: Option<&str>,
) -> Result<&'a AddPushSource, String> {
    let names = || {
        sources
            .iter()
            .map(|s| format!("`{}`", s.source_name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (name, sources) {
        (_, []) => Err(
            "the dataset has no push source (AddPushSource in its manifest): `weir ingest` feeds push sources only; a polling source is pulled (`weir pull`)".into(),
        ),
        (None, [only]) => Ok(only),
        (None, _) => Err(format!(
            "the dataset has several push sources ({}): name one with --source-name",
            names()
        )),
        (Some(n), _) => sources
            .iter()
            .find(|s| s.source_name == n)
            .ok_or_else(|| format!("no push source `{n}` (the dataset has {})", names())),
    }
}

/// The source's read step, or one of `format` carrying the source's schema (a CSV with a header line).
pub fn read_step_as(step: &ReadStep, format: Option<InputFormat>) -> ReadStep {
    let Some(format) = format else {
        return step.clone();
    };
    let schema = match step {
        ReadStep::Csv(c) => c.schema.clone(),
        ReadStep::NdJson(j) => j.schema.clone(),
        ReadStep::Parquet(p) => p.schema.clone(),
        _ => None,
    };
    match (format, step) {
        (InputFormat::Csv, ReadStep::Csv(_))
        | (InputFormat::Ndjson, ReadStep::NdJson(_))
        | (InputFormat::Parquet, ReadStep::Parquet(_)) => step.clone(),
        (InputFormat::Csv, _) => ReadStep::Csv(weir_odf::ReadStepCsv {
            schema,
            header: Some(true),
            ..Default::default()
        }),
        (InputFormat::Ndjson, _) => ReadStep::NdJson(weir_odf::ReadStepNdJson {
            schema,
            ..Default::default()
        }),
        (InputFormat::Parquet, _) => ReadStep::Parquet(weir_odf::ReadStepParquet { schema }),
    }
}

fn bad(dataset: &str, file: &str, message: String) -> CommandError {
    CommandError::Transaction(TxError::BadData {
        dataset: dataset.to_string(),
        source: Box::new(BadData::Unreadable {
            file: file.to_string(),
            message,
        }),
    })
}

/// The file at `path` (relative to the current folder), stamped and hashed before it is read, reporting
/// to `progress`.
async fn snapshot(
    dataset: &str,
    path: &Path,
    progress: Progress,
) -> Result<(Fetched, FileSnapshot), CommandError> {
    let name = path.display().to_string();
    let full: PathBuf =
        std::path::absolute(path).map_err(|e| bad(dataset, &name, e.to_string()))?;
    if !full.is_file() {
        return Err(bad(dataset, &name, "no such file".into()));
    }
    let taken = {
        let (full, given) = (full.clone(), name.clone());
        tokio::task::spawn_blocking(move || FileSnapshot::take_reporting(&full, &given, &progress))
            .await
            .map_err(|_| bad(dataset, &name, "hashing the file failed".into()))?
    };
    let snapshot = match taken {
        Ok(s) => s,
        Err(SnapshotError::Changed(changed)) => {
            return Err(CommandError::Transaction(TxError::BadData {
                dataset: dataset.to_string(),
                source: Box::new(BadData::ChangedWhileRead(changed)),
            }));
        }
        Err(SnapshotError::Io { source, .. }) => {
            return Err(bad(dataset, &name, source.to_string()));
        }
    };
    let file = Fetched {
        name: name.clone(),
        path: full,
        size: snapshot.stamp.size,
        state: pushed_state(),
    };
    Ok((file, snapshot))
}

/// Standard input, copied to `dir` as it comes, and the SHA3-256 of its bytes.
async fn stdin_copy(dataset: &str, dir: &Path) -> Result<(Fetched, Multihash), CommandError> {
    let path = dir.join("stdin");
    let target = path.clone();
    let (size, content) = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        use std::io::{Read as _, Write as _};
        let mut out = std::fs::File::create(&target)?;
        let mut hasher = Sha3Hasher::new();
        let mut input = std::io::stdin().lock();
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            let got = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(got) => got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            hasher.update(&buf[..got]);
            out.write_all(&buf[..got])?;
            n += got as u64;
        }
        out.sync_all()?;
        Ok((n, hasher.finish()))
    })
    .await
    .map_err(|_| bad(dataset, "standard input", "reading it failed".into()))?
    .map_err(|e| bad(dataset, "standard input", e.to_string()))?;
    Ok((
        Fetched {
            name: "standard input".into(),
            path,
            size,
            state: pushed_state(),
        },
        content,
    ))
}

/// A push source records no source state (the transaction does not write this one).
fn pushed_state() -> SourceState {
    SourceState {
        source_name: SourceState::DEFAULT_SOURCE_NAME.into(),
        kind: String::new(),
        value: String::new(),
    }
}
