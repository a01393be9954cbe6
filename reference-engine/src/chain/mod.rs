//! Stateful query steps chained within one transform: a window, a join or a top-N over the output of
//! a join or a window (kamu's `overdue_shipments`: an interval join, a daily window over its output,
//! a filter over the window's).
//!
//! A transform that no single operator runs is split after its earliest query step that, with the
//! steps before it, is a stateful operator of its own (the *head*); the steps after it (the *tail*)
//! read the head's output as an input named after that step's alias — an *intermediate stream*, with
//! its own offsets, operation types and watermark. The tail is again a transform, split again when it
//! chains further. Each transaction runs the head over the transform's inputs, writes its output to
//! a private folder beside the new checkpoint, and runs the tail over it: the head's output watermark
//! is the intermediate stream's watermark. Both stages keep their own state; the transform's
//! checkpoint holds both stages' checkpoints ([`checkpoint`], format 5).

pub(crate) mod checkpoint;

use std::path::{Path, PathBuf};

use datafusion::common::tree_node::TreeNode;
use datafusion::logical_expr::LogicalPlan;
use tracing::Instrument;

use self::checkpoint::{ChainHeader, IntermediateHeader, StageCheckpoints};
use crate::error::EngineError;
use crate::inputs::{InputSource, RegisteredInput, register_inputs};
use crate::prepare::{QueryShape, prepare, transform_fingerprint};
use crate::progress::ProgressSink;
use crate::request::{
    DatasetVocabulary, OffsetInterval, SqlQueryStep, Transform, TransformRequest,
    TransformRequestInput, TransformSql, TransformSuccess, Watermark, sql,
};
use crate::session::{Sessions, new_session};
use crate::steps::plan_steps;

/// The system columns of an intermediate stream (offset, operation type, system time): reserved names,
/// so that `SELECT *` over a chained step never outputs them (the output layout leaves them out).
pub(crate) const INTERMEDIATE_SYSTEM_COLUMNS: [&str; 3] = [
    "__weir_chain_offset",
    "__weir_chain_op",
    "__weir_chain_system_time",
];

/// The vocabulary of an intermediate stream: reserved system columns, the output's event time.
fn intermediate_vocab(output: &DatasetVocabulary) -> DatasetVocabulary {
    let [offset, op, system_time] = INTERMEDIATE_SYSTEM_COLUMNS;
    DatasetVocabulary {
        offset_column: offset.to_owned(),
        operation_type_column: op.to_owned(),
        system_time_column: system_time.to_owned(),
        event_time_column: output.event_time_column.clone(),
    }
}

/// A transform split into a head and a tail.
#[derive(Debug, Clone)]
pub(crate) struct Split {
    /// The steps up to the head's last (a stateful operator of its own).
    pub head: TransformSql,
    /// The steps after it, reading its output under [`Split::alias`].
    pub tail: TransformSql,
    /// The alias of the head's last step.
    pub alias: String,
    /// The transform's inputs the head reads (positions in the request).
    pub head_inputs: Vec<usize>,
}

/// `transform` with only `steps` and the temporal tables among `inputs`.
fn with_steps(transform: &TransformSql, steps: &[SqlQueryStep], inputs: &[&str]) -> TransformSql {
    let mut out = transform.clone();
    out.query = None;
    out.queries = Some(steps.to_vec());
    out.temporal_tables = transform.temporal_tables.as_ref().map(|tables| {
        tables
            .iter()
            .filter(|t| inputs.contains(&t.name.as_str()))
            .cloned()
            .collect()
    });
    out
}

/// The inputs `plan` scans.
fn scanned_inputs(plan: &LogicalPlan, inputs: &[RegisteredInput]) -> Vec<usize> {
    let mut used = Vec::new();
    let _ = plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && let Some(input) = inputs
                .iter()
                .find(|i| scan.table_name.table() == i.scan_name)
            && !used.contains(&input.index)
        {
            used.push(input.index);
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    used.sort_unstable();
    used
}

/// Where `transform` splits into a stateful head and a tail, when an earlier step is a stateful
/// operator of its own: `None` when no step before the last is.
pub(crate) async fn split(
    transform: &Transform,
    sources: &[InputSource],
    vocab: &DatasetVocabulary,
) -> Result<Option<Split>, EngineError> {
    let transform = sql(transform);
    let steps = transform.steps();
    let names: Vec<String> = sources.iter().map(|s| s.query_alias.clone()).collect();
    if let Some(table) = transform.temporal_tables.iter().flatten().find(|table| {
        steps
            .iter()
            .any(|step| step.alias.as_deref() == Some(table.name.as_str()))
    }) {
        return Err(EngineError::UnsupportedChain {
            reason: format!(
                "the temporal table `{}` is a query step: temporal tables are inputs of the \
                 transform (their own datasets' changelogs); join a step's output as a stream \
                 instead",
                table.name
            ),
        });
    }
    for i in 0..steps.len().saturating_sub(1) {
        let Some(alias) = steps[i].alias.clone() else {
            return Ok(None);
        };
        let all: Vec<&str> = names.iter().map(String::as_str).collect();
        let head = with_steps(transform, &steps[..=i], &all);
        let ctx = new_session();
        let inputs = register_inputs(&ctx, sources).await?;
        let stream_vocab = intermediate_vocab(vocab);
        let Ok(prepared) =
            prepare(&ctx, &Transform::Sql(head.clone()), &inputs, &stream_vocab).await
        else {
            continue;
        };
        if matches!(prepared.shape, QueryShape::MapFilter { .. }) {
            continue;
        }
        let ctx = new_session();
        let inputs = register_inputs(&ctx, sources).await?;
        let planned = plan_steps(&ctx, &head, &names).await?;
        let head_inputs = scanned_inputs(&planned.plan, &inputs);
        let head_names: Vec<&str> = head_inputs.iter().map(|&i| names[i].as_str()).collect();
        let tail_names: Vec<&str> = all.iter().copied().chain([alias.as_str()]).collect();
        return Ok(Some(Split {
            head: with_steps(transform, &steps[..=i], &head_names),
            tail: with_steps(transform, &steps[i + 1..], &tail_names),
            alias,
            head_inputs,
        }));
    }
    Ok(None)
}

fn io_failed(path: &Path, error: std::io::Error) -> EngineError {
    EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason: error.to_string(),
    }
}

/// Runs one transaction of a split transform: the head, then the tail over the head's output.
pub(crate) async fn run_transform(
    sessions: &Sessions,
    request: &TransformRequest,
    split: &Split,
    progress: &dyn ProgressSink,
) -> Result<TransformSuccess, EngineError> {
    let fingerprint = transform_fingerprint(&request.transform);
    let (mut intermediate, stages): (IntermediateHeader, StageCheckpoints) =
        match &request.prev_checkpoint_path {
            Some(path) => {
                let path = PathBuf::from(path);
                let mismatch = |reason: String| EngineError::CheckpointMismatch {
                    path: path.clone(),
                    reason,
                };
                let kind = crate::window::checkpoint::kind_of(&path)?;
                if kind.kind != checkpoint::KIND {
                    return Err(mismatch(format!(
                        "it holds {} state, and this query chains stateful steps",
                        kind.kind
                    )));
                }
                let (header, stages) = checkpoint::read(&path)?;
                if header.query_fingerprint != fingerprint {
                    return Err(mismatch("its query fingerprint differs".to_owned()));
                }
                if header.intermediate.alias != split.alias {
                    return Err(mismatch(format!(
                        "it splits the steps after `{}`, not `{}`",
                        header.intermediate.alias, split.alias
                    )));
                }
                (header.intermediate, stages)
            }
            None => (
                IntermediateHeader {
                    alias: split.alias.clone(),
                    next_offset: 0,
                    watermark_ms: None,
                },
                [None, None],
            ),
        };
    // A private folder beside the new checkpoint (the output folder is writable; the engine's root
    // may not be).
    let checkpoint_path = PathBuf::from(&request.new_checkpoint_path);
    let parent = checkpoint_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    std::fs::create_dir_all(&parent).map_err(|e| io_failed(&parent, e))?;
    let work = tempfile::Builder::new()
        .prefix(".weir-chain-")
        .tempdir_in(&parent)
        .map_err(|e| io_failed(&parent, e))?;
    let prev_of = |stage: usize, bytes: &Option<Vec<u8>>| -> Result<Option<String>, EngineError> {
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let path = work.path().join(format!("stage-{stage}-prev"));
        std::fs::write(&path, bytes).map_err(|e| io_failed(&path, e))?;
        Ok(Some(path.display().to_string()))
    };

    // The head over the transform's inputs.
    let head_data = work.path().join("stage-0-data");
    let head_request = TransformRequest {
        dataset_id: request.dataset_id,
        dataset_alias: format!("{}/{}", request.dataset_alias, split.alias),
        system_time: request.system_time,
        vocab: intermediate_vocab(&request.vocab),
        transform: Transform::Sql(split.head.clone()),
        query_inputs: split
            .head_inputs
            .iter()
            .filter_map(|&i| request.query_inputs.get(i).cloned())
            .collect(),
        next_offset: intermediate.next_offset,
        prev_checkpoint_path: prev_of(0, &stages[0])?,
        new_checkpoint_path: work.path().join("stage-0-checkpoint").display().to_string(),
        new_data_path: head_data.display().to_string(),
    };
    let head = Box::pin(
        crate::transform::execute_transform(sessions, &head_request, progress)
            .instrument(tracing::info_span!("chained_step", stage = "head", step = %split.alias)),
    )
    .await?;
    if let Some(OffsetInterval { end, .. }) = head.new_offset_interval {
        intermediate.next_offset = end + 1;
    }
    if let Some(w) = head.new_watermark {
        let w = w.timestamp_millis();
        intermediate.watermark_ms = Some(intermediate.watermark_ms.map_or(w, |old| old.max(w)));
    }
    tracing::debug!(
        step = %split.alias,
        interval = ?head.new_offset_interval,
        watermark = ?intermediate.watermark_ms,
        "chained head step finished"
    );

    // The tail over the head's output (and any of the transform's inputs it reads too).
    let head_data = head_data.display().to_string();
    let stream = TransformRequestInput {
        dataset_id: request.dataset_id,
        dataset_alias: split.alias.clone(),
        query_alias: split.alias.clone(),
        vocab: intermediate_vocab(&request.vocab),
        offset_interval: head.new_offset_interval,
        data_paths: if head.new_offset_interval.is_some() {
            vec![head_data.clone()]
        } else {
            Vec::new()
        },
        // The head's output file always exists and carries its schema.
        schema_file: head_data,
        explicit_watermarks: intermediate
            .watermark_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|event_time| Watermark {
                system_time: request.system_time,
                event_time,
            })
            .into_iter()
            .collect(),
    };
    let mut candidates: Vec<TransformRequestInput> = request.query_inputs.clone();
    candidates.push(stream);
    let sources = candidates
        .iter()
        .map(InputSource::for_transform)
        .collect::<Result<Vec<_>, _>>()?;
    let ctx = new_session();
    let inputs = register_inputs(&ctx, &sources).await?;
    let names: Vec<String> = inputs.iter().map(|i| i.query_alias.clone()).collect();
    let planned = plan_steps(&ctx, &split.tail, &names).await?;
    let tail_inputs = scanned_inputs(&planned.plan, &inputs);
    let tail_request = TransformRequest {
        transform: Transform::Sql(split.tail.clone()),
        query_inputs: tail_inputs
            .iter()
            .filter_map(|&i| candidates.get(i).cloned())
            .collect(),
        prev_checkpoint_path: prev_of(1, &stages[1])?,
        new_checkpoint_path: work.path().join("stage-1-checkpoint").display().to_string(),
        ..request.clone()
    };
    let tail = Box::pin(
        crate::transform::execute_transform(sessions, &tail_request, progress)
            .instrument(tracing::info_span!("chained_step", stage = "tail", after = %split.alias)),
    )
    .await?;

    let written = |path: &str| -> Result<Option<Vec<u8>>, EngineError> {
        let path = Path::new(path);
        if !path.exists() {
            return Ok(None);
        }
        std::fs::read(path)
            .map(Some)
            .map_err(|e| io_failed(path, e))
    };
    let stages = [
        written(&head_request.new_checkpoint_path)?,
        written(&tail_request.new_checkpoint_path)?,
    ];
    let header = ChainHeader {
        format: checkpoint::FORMAT,
        kind: checkpoint::KIND.to_owned(),
        query_fingerprint: fingerprint,
        intermediate,
    };
    checkpoint::write(&checkpoint_path, &header, &stages)?;
    Ok(tail)
}

/// The output columns of `transform` over inputs seen through their schemas only (ValidateQuery): a
/// transform a single operator runs as prepared; a chained one stage by stage, the head's output
/// schema written to a file in a temporary folder made in `scratch` as the tail's input.
pub(crate) async fn output_schema(
    transform: &Transform,
    sources: &[InputSource],
    vocab: &DatasetVocabulary,
    scratch: &Path,
) -> Result<datafusion::arrow::datatypes::SchemaRef, EngineError> {
    let ctx = new_session();
    let inputs = register_inputs(&ctx, sources).await?;
    let error = match prepare(&ctx, transform, &inputs, vocab).await {
        Ok(prepared) => return Ok(prepared.layout.schema()),
        Err(error) => error,
    };
    let Some(split) = split(transform, sources, vocab).await? else {
        return Err(error);
    };
    let head_sources: Vec<InputSource> = split
        .head_inputs
        .iter()
        .filter_map(|&i| sources.get(i).cloned())
        .collect();
    let stream_vocab = intermediate_vocab(vocab);
    let head = Box::pin(output_schema(
        &Transform::Sql(split.head.clone()),
        &head_sources,
        &stream_vocab,
        scratch,
    ))
    .await?;
    std::fs::create_dir_all(scratch).map_err(|e| io_failed(scratch, e))?;
    let folder = tempfile::Builder::new()
        .prefix(".weir-validate-")
        .tempdir_in(scratch)
        .map_err(|e| io_failed(scratch, e))?;
    let file = folder.path().join("head.schema");
    crate::output::writer::write_parquet_file(&file, head, &[], Vec::new()).map_err(|reason| {
        EngineError::OutputWrite {
            path: file.clone(),
            reason,
        }
    })?;
    let mut tail_sources = sources.to_vec();
    tail_sources.push(InputSource::schema_only(
        &split.alias,
        &stream_vocab,
        &file.display().to_string(),
    ));
    Box::pin(output_schema(
        &Transform::Sql(split.tail.clone()),
        &tail_sources,
        vocab,
        scratch,
    ))
    .await
}
