//! `weir pull`: transactions scheduled on a gen-stage pipeline.
//!
//! ```text
//!  PendingTransactions ──Partition(by dataset)──► Lane[dataset] ──► WorkerPool ──Demand──► Worker × N
//!        ▲ (producer)                          (one per dataset,   (producer_     (engine workers,
//!        │                                      max_demand 1)       consumer)       max_demand 1)
//!        └──────────────── cast: Completion ◄──────────────────────────────────────────┘
//!                                                                                      │ cast: Progress
//!  ProgressHub ──Broadcast──► Renderer (indicatif)                                     ▼
//!   (producer)             └► PluginRelay (--dispatcher-plugin) ──► PluginSink
//! ```
//!
//! The producer holds the [`Scheduler`]: it emits a dataset's transaction only when the dataset is ready
//! (never two of the same dataset at once), the Partition dispatcher keeps each dataset's transactions in
//! their own lane and order, and the Demand dispatcher hands them to free workers, so at most `N` engine
//! operations run at a time. Workers report completions back to the producer and progress to the hub.
//!
//! One file per stage kind: `schedule` (the producer and what workers report back), `worker`, `progress`
//! (hub and renderer), `plugin` (the `--dispatcher-plugin` branch); `summary` is what the pull prints,
//! `recompute` is `--recompute`. The pipeline is shut down by gen-stage's [`Drain`](weir_gen_stage::Drain).

mod plugin;
pub(crate) mod progress;
mod recompute;
mod schedule;
mod summary;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::{info, warn};
use weir_gen_stage::SubscribeOptions;

use super::Output;
use crate::commands::error::CommandError;
use crate::exit;
use crate::scheduler::Scheduler;
use plugin::PluginBranch;
pub use progress::ProgressEvent;
use progress::{ProgressHub, Renderer};
use schedule::PendingTransactions;
pub use schedule::{Change, Done, Failure, PullReport, Task, Timing};
use weir_transaction::Context;
use worker::Worker;

/// Options of `weir pull`.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Every dataset.
    pub all: bool,
    /// The named datasets' inputs too, all the way up.
    pub recursive: bool,
    /// Or these (names, or patterns with `%`).
    pub datasets: Vec<String>,
    /// Engine workers.
    pub max_concurrency: usize,
    /// A dispatcher plugin receiving progress events.
    pub dispatcher_plugin: Option<PathBuf>,
    /// Its options (a JSON object; `null` for none).
    pub dispatcher_plugin_options: serde_json::Value,
    /// No progress bars.
    pub quiet: bool,
    /// Reset pulled derivatives whose transform changed to their Seed, to compute them again.
    pub recompute: bool,
    /// The settle time of source files, overriding the workspace's.
    pub settle: Option<Duration>,
}

fn pipeline_err(e: impl std::fmt::Display) -> CommandError {
    CommandError::Pipeline {
        message: e.to_string(),
    }
}

/// How long the pipeline may take to deliver what is still in flight once the scheduler has finished.
const DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// Runs `pull`.
pub async fn run(ctx: &Context, opts: &PullOptions) -> Result<Output, CommandError> {
    let ctx = &Context {
        source_settle: opts.settle.or(ctx.source_settle),
        ..ctx.clone()
    };
    let named = super::select(ctx, &opts.datasets)?;
    let targets = targets(ctx, opts, &named)?;
    for warning in crate::commands::validate::static_checks(
        ctx,
        &targets,
        crate::commands::validate::EngineCheck::ThisRuntime,
    )? {
        tracing::warn!("{warning}");
    }
    if opts.recompute {
        recompute::recompute(ctx, &targets).await?;
    }
    // Inputs are pinned by id: a name that leads to another dataset, or to none, stops the pull before
    // anything is written (a root seeded again under a new id would feed its records twice downstream).
    ctx.check_inputs_pinned(&targets).await?;
    let ws = ctx.workspace.clone();
    let scheduler = Scheduler::new(targets.clone(), |d| ws.inputs_of(d));
    let started = Instant::now();
    let (finished_tx, finished_rx) = oneshot::channel();

    // Progress: hub -> renderer (+ plugin branch).
    let hub = weir_gen_stage::start_producer(ProgressHub)
        .await
        .map_err(pipeline_err)?;
    let multi = indicatif::MultiProgress::new();
    if opts.quiet {
        multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let renderer = weir_gen_stage::start_consumer(Renderer {
        bars: BTreeMap::new(),
        multi,
    })
    .await
    .map_err(pipeline_err)?;
    renderer
        .subscribe(&hub, SubscribeOptions::new().max_demand(100))
        .await
        .map_err(pipeline_err)?;
    let plugin = match &opts.dispatcher_plugin {
        Some(path) => Some(PluginBranch::start(path, &opts.dispatcher_plugin_options, &hub).await?),
        None => None,
    };

    // Transactions: producer -> lanes -> pool -> workers.
    let producer = weir_gen_stage::start_producer(PendingTransactions::new(
        scheduler,
        targets.clone(),
        finished_tx,
    ))
    .await
    .map_err(pipeline_err)?;
    // The pool gathers the lanes and hands tasks to free workers (a forwarding stage's Demand dispatcher).
    let pool = weir_gen_stage::map(|t: Task| t)
        .await
        .map_err(pipeline_err)?;
    let mut lanes = Vec::new();
    for d in &targets {
        // One dataset's lane: the consumer of its partition, forwarding in order.
        let lane = weir_gen_stage::map(|t: Task| t)
            .await
            .map_err(pipeline_err)?;
        lane.subscribe(
            &producer,
            SubscribeOptions::new()
                .partition(d.as_str())
                .max_demand(1)
                .min_demand(0),
        )
        .await
        .map_err(pipeline_err)?;
        pool.subscribe(&lane, SubscribeOptions::new().max_demand(1).min_demand(0))
            .await
            .map_err(pipeline_err)?;
        lanes.push(lane);
    }
    let mut workers = Vec::new();
    for _ in 0..opts.max_concurrency.max(1) {
        let w = weir_gen_stage::start_consumer(Worker {
            ctx: ctx.clone(),
            scheduler: producer.clone(),
            progress: hub.clone(),
        })
        .await
        .map_err(pipeline_err)?;
        w.subscribe(&pool, SubscribeOptions::new().max_demand(1).min_demand(0))
            .await
            .map_err(pipeline_err)?;
        workers.push(w);
    }
    let report = finished_rx
        .await
        .map_err(|_| pipeline_err("the scheduler stopped before the pull finished"))?;
    let elapsed = started.elapsed();
    let engine_time: Duration = report.timings.values().map(|t| t.engine).sum();
    info!(
        elapsed_ms = elapsed.as_millis() as u64,
        engine_ms = engine_time.as_millis() as u64,
        "pull finished"
    );

    // Every stage drained, upstream first: the progress events still on their way reach the renderer
    // and the plugin, then each stage stops (gen-stage's `Drain`).
    let mut drain = weir_gen_stage::Drain::new(DRAIN_DEADLINE)
        .stage(&producer)
        .stages(lanes.iter())
        .stage(&pool)
        .stages(workers.iter())
        .stage(&hub)
        .stage(&renderer);
    if let Some(p) = &plugin {
        drain = p.drain(drain);
    }
    let drained = drain.run().await;
    if !drained.is_complete() {
        warn!(undelivered = ?drained.undelivered(), "the pull's pipeline did not drain within 10 s");
    }
    let first_error = report.errors.values().next();
    let first_error_code = first_error.map(|f| f.code);
    let plugin = match &plugin {
        Some(p) => match p.outcome(&drained) {
            Ok(outcome) => Some(outcome),
            // The transactions went on without the plugin: what they committed is said with the error.
            Err(CommandError::Plugin { path, message }) => {
                return Err(CommandError::PluginFailed {
                    path,
                    message,
                    committed: summary::committed_in_words(&report),
                    code: first_error_code.unwrap_or(exit::FAILURE),
                    summary: Box::new(summary::summary(
                        &report,
                        elapsed,
                        opts.max_concurrency,
                        None,
                    )),
                });
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let summary = summary::summary(&report, elapsed, opts.max_concurrency, plugin.as_ref());
    if !report.errors.is_empty() {
        let code = first_error_code.unwrap_or(exit::FAILURE);
        return Err(CommandError::PullFailed {
            failed: report.errors.len(),
            datasets: report.errors.keys().cloned().collect(),
            code,
            hint: first_error.and_then(|f| f.hint),
            summary: Box::new(summary),
        });
    }
    Ok(summary)
}

/// The datasets a pull runs, in topological order: every dataset with `--all` or none named, otherwise the
/// named ones, and with `--recursive` everything they are computed from (as kamu's `pull --recursive`).
fn targets(
    ctx: &Context,
    opts: &PullOptions,
    named: &[String],
) -> Result<Vec<String>, CommandError> {
    let order = ctx.workspace.topological_order()?;
    if opts.all || named.is_empty() {
        return Ok(order);
    }
    let mut wanted = std::collections::BTreeSet::new();
    let mut stack = named.to_vec();
    while let Some(d) = stack.pop() {
        if wanted.insert(d.clone()) && opts.recursive {
            stack.extend(ctx.workspace.inputs_of(&d));
        }
    }
    Ok(order.into_iter().filter(|d| wanted.contains(d)).collect())
}
