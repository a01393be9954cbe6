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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gen_stage::{
    BroadcastDispatcher, Consumer, ConsumerContext, Msgs, Noreply, PartitionDispatcher, Producer,
    ProducerConsumer, ProducerConsumerContext, ProducerConsumerOptions, ProducerContext,
    ProducerOptions, ProducerStage, StageRef, SubscribeOptions, Subscription,
};
use serde::Serialize;
use serde_json::json;
use tokio::sync::oneshot;
use tracing::{info, warn};

use super::{Output, known};
use crate::error::{CommandError, tx_code};
use crate::exit;
use crate::progress::{Phase, PhaseTimes, Progress, Report};
use crate::scheduler::{Completion, DatasetState, Scheduler};
use crate::transaction::{Context, TxOutcome};

/// One transaction to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// The dataset.
    pub dataset: String,
}

/// What workers tell the progress hub.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ProgressEvent {
    /// A transaction started.
    Started {
        /// The dataset.
        dataset: String,
    },
    /// A transaction committed.
    Committed {
        /// The dataset.
        dataset: String,
        /// Records added.
        records: u64,
        /// New head.
        head: String,
        /// Milliseconds spent.
        millis: u128,
        /// Of which inside the engine.
        engine_millis: u128,
    },
    /// How far a running transaction is.
    Working {
        /// The dataset.
        dataset: String,
        /// Its phase and counts.
        #[serde(flatten)]
        report: Report,
    },
    /// Nothing to do.
    UpToDate {
        /// The dataset.
        dataset: String,
    },
    /// It failed.
    Failed {
        /// The dataset.
        dataset: String,
        /// Why.
        message: String,
    },
}

impl ProgressEvent {
    fn dataset(&self) -> &str {
        match self {
            ProgressEvent::Started { dataset }
            | ProgressEvent::Working { dataset, .. }
            | ProgressEvent::Committed { dataset, .. }
            | ProgressEvent::UpToDate { dataset }
            | ProgressEvent::Failed { dataset, .. } => dataset,
        }
    }
}

/// A completion sent back to the producer.
#[derive(Debug)]
pub struct Done {
    dataset: String,
    completion: Completion,
    error: Option<(String, u8)>,
    timing: Timing,
    change: Option<Change>,
}

/// What a pull changed in one dataset: the records its committed transactions added, and its head before
/// the first and after the last of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// Records added.
    pub records: u64,
    /// Head before the pull (`None` for a new dataset).
    pub old_head: Option<String>,
    /// Head after it.
    pub new_head: String,
}

/// Where a dataset's transactions spent their time during a pull.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// Wall time of its transactions, whatever their outcome.
    pub total: Duration,
    /// Of which inside engine operations (preprocess Raw queries, ExecuteTransform).
    pub engine: Duration,
    /// The same wall time by phase, as the transactions reported them.
    pub phases: PhaseTimes,
}

impl std::ops::AddAssign for Timing {
    fn add_assign(&mut self, other: Timing) {
        self.total += other.total;
        self.engine += other.engine;
        self.phases.add(&other.phases);
    }
}

/// The producer of pending transactions.
struct PendingTransactions {
    scheduler: Scheduler,
    datasets: Vec<String>,
    errors: BTreeMap<String, (String, u8)>,
    timings: BTreeMap<String, Timing>,
    changes: BTreeMap<String, Change>,
    finished: Option<oneshot::Sender<PullReport>>,
}

/// How a pull ended.
#[derive(Debug, Clone)]
pub struct PullReport {
    /// Final state and committed transactions per dataset.
    pub states: Vec<(String, DatasetState, u64)>,
    /// Errors by dataset, with their exit codes.
    pub errors: BTreeMap<String, (String, u8)>,
    /// Time spent per dataset (datasets that ran no transaction are absent).
    pub timings: BTreeMap<String, Timing>,
    /// What changed per dataset (datasets that committed nothing are absent).
    pub changes: BTreeMap<String, Change>,
}

impl PendingTransactions {
    fn ready(&mut self) -> Vec<Task> {
        let tasks: Vec<Task> = self
            .scheduler
            .take_ready()
            .into_iter()
            .map(|dataset| Task { dataset })
            .collect();
        if tasks.is_empty()
            && self.scheduler.is_finished()
            && let Some(tx) = self.finished.take()
        {
            let _ = tx.send(PullReport {
                states: self.scheduler.states(),
                errors: self.errors.clone(),
                timings: self.timings.clone(),
                changes: self.changes.clone(),
            });
        }
        tasks
    }
}

type PendingTransactionsMessages = Msgs<(), (), Done>;

impl Producer<PendingTransactionsMessages> for PendingTransactions {
    type Event = Task;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self, PendingTransactionsMessages>,
    ) -> Result<ProducerOptions<Task>, gen_stage::StopReason> {
        let dispatcher = PartitionDispatcher::named(self.datasets.clone(), |t: Task| {
            let key = t.dataset.clone();
            Some((t, key))
        });
        Ok(ProducerOptions::new().dispatcher(dispatcher))
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self, PendingTransactionsMessages>,
    ) -> Noreply<Task> {
        Noreply::Emit(self.ready())
    }

    async fn handle_cast(
        &mut self,
        done: Done,
        _ctx: &mut ProducerContext<'_, Self, PendingTransactionsMessages>,
    ) -> Noreply<Task> {
        if let Some(e) = done.error {
            self.errors.insert(done.dataset.clone(), e);
        }
        *self.timings.entry(done.dataset.clone()).or_default() += done.timing;
        if let Some(change) = done.change {
            match self.changes.get_mut(&done.dataset) {
                Some(total) => {
                    total.records += change.records;
                    total.new_head = change.new_head;
                }
                None => {
                    self.changes.insert(done.dataset.clone(), change);
                }
            }
        }
        self.scheduler.complete(&done.dataset, done.completion);
        Noreply::Emit(self.ready())
    }
}

/// An engine worker: runs one transaction at a time.
struct Worker {
    ctx: Context,
    scheduler: StageRef<ProducerStage<PendingTransactions, PendingTransactionsMessages>>,
    progress: StageRef<ProducerStage<ProgressHub, ProgressHubMessages>>,
}

impl Consumer for Worker {
    type Event = Task;

    async fn handle_events(
        &mut self,
        events: Vec<Task>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for task in events {
            let dataset = task.dataset.clone();
            self.emit(ProgressEvent::Started {
                dataset: dataset.clone(),
            });
            let old_head = match self.ctx.storage.dataset(&dataset).head().await {
                Ok(head) => head.map(|h| h.to_string()),
                // The transaction itself reports an unreadable head.
                Err(_) => None,
            };
            let started = Instant::now();
            let hub = self.progress.clone();
            let reporting = dataset.clone();
            let clock = Arc::new(Mutex::new(PhaseTimes::default()));
            let ticking = clock.clone();
            let progress = Progress::new(move |report: Report| {
                if let Ok(mut c) = ticking.lock() {
                    c.saw(report.phase);
                }
                let event = ProgressEvent::Working {
                    dataset: reporting.clone(),
                    report,
                };
                // A hub that stopped (the pull is ending) misses a report, nothing else.
                let _ = hub.cast(event);
            });
            let outcome = self.ctx.with_progress(progress).run_once(&dataset).await;
            let mut change = None;
            let phases = match clock.lock() {
                Ok(mut c) => {
                    c.stop();
                    *c
                }
                Err(_) => PhaseTimes::default(),
            };
            let mut timing = Timing {
                total: started.elapsed(),
                engine: Duration::ZERO,
                phases,
            };
            let (completion, event, error) = match outcome {
                Ok(TxOutcome::Committed {
                    head,
                    records,
                    engine_time,
                    ..
                }) => {
                    timing.engine = engine_time;
                    change = Some(Change {
                        records,
                        old_head: old_head.clone(),
                        new_head: head.to_string(),
                    });
                    (
                        Completion::Committed,
                        ProgressEvent::Committed {
                            dataset: dataset.clone(),
                            records,
                            head: head.to_string(),
                            millis: timing.total.as_millis(),
                            engine_millis: engine_time.as_millis(),
                        },
                        None,
                    )
                }
                Ok(TxOutcome::UpToDate { .. }) => (
                    Completion::UpToDate,
                    ProgressEvent::UpToDate {
                        dataset: dataset.clone(),
                    },
                    None,
                ),
                Err(e) => {
                    let message = error_chain(&e);
                    // The summary says it once; the log has it for those who ask (`--log weir=info`).
                    info!(dataset = %dataset, error = %message, "transaction failed; the dataset keeps its previous head");
                    (
                        Completion::Failed(message.clone()),
                        ProgressEvent::Failed {
                            dataset: dataset.clone(),
                            message: message.clone(),
                        },
                        Some((message, tx_code(&e))),
                    )
                }
            };
            self.emit(event);
            let _ = self.scheduler.cast(Done {
                dataset,
                completion,
                error,
                timing,
                change,
            });
        }
        Noreply::none()
    }
}

impl Worker {
    fn emit(&self, event: ProgressEvent) {
        let _ = self.progress.cast(event);
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

/// Progress events in, broadcast to every renderer.
struct ProgressHub;

type ProgressHubMessages = Msgs<(), (), ProgressEvent>;

impl Producer<ProgressHubMessages> for ProgressHub {
    type Event = ProgressEvent;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self, ProgressHubMessages>,
    ) -> Result<ProducerOptions<ProgressEvent>, gen_stage::StopReason> {
        Ok(ProducerOptions::new().dispatcher(BroadcastDispatcher::new()))
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self, ProgressHubMessages>,
    ) -> Noreply<ProgressEvent> {
        Noreply::none()
    }

    async fn handle_cast(
        &mut self,
        event: ProgressEvent,
        _ctx: &mut ProducerContext<'_, Self, ProgressHubMessages>,
    ) -> Noreply<ProgressEvent> {
        Noreply::Emit(vec![event])
    }
}

/// Progress bars, one per dataset, with the phase each shows.
struct Renderer {
    bars: BTreeMap<String, (indicatif::ProgressBar, Option<crate::progress::Phase>)>,
    multi: indicatif::MultiProgress,
}

impl Consumer for Renderer {
    type Event = ProgressEvent;

    async fn handle_events(
        &mut self,
        events: Vec<ProgressEvent>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for e in events {
            let line = self.bars.entry(e.dataset().to_string()).or_insert_with(|| {
                let b = self.multi.add(indicatif::ProgressBar::new_spinner());
                b.set_style(spinner_style());
                b.set_prefix(e.dataset().to_string());
                b.enable_steady_tick(Duration::from_millis(120));
                (b, None)
            });
            let (bar, shown) = (line.0.clone(), &mut line.1);
            let phase_changed = match &e {
                ProgressEvent::Working { report, .. } => {
                    shown.replace(report.phase) != Some(report.phase)
                }
                _ => {
                    *shown = None;
                    false
                }
            };
            match &e {
                ProgressEvent::Started { .. } => bar.set_message("starting"),
                ProgressEvent::Working { report, .. } => show(&bar, report, phase_changed),
                ProgressEvent::Committed {
                    records,
                    millis,
                    engine_millis,
                    ..
                } => {
                    bar.set_style(spinner_style());
                    bar.set_message(format!(
                        "committed {records} record(s) in {millis} ms (engine {engine_millis} ms)"
                    ));
                }
                ProgressEvent::UpToDate { .. } => {
                    bar.set_style(spinner_style());
                    bar.finish_with_message("up to date")
                }
                ProgressEvent::Failed { message, .. } => {
                    bar.set_style(spinner_style());
                    bar.finish_with_message(format!("FAILED: {message}"))
                }
            }
        }
        Noreply::none()
    }
}

/// A dataset's line while its size is unknown: a spinner and what it is doing.
fn spinner_style() -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template("{spinner} {prefix:<24} {msg}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner())
}

/// A dataset's line once the phase knows how much it has to do: a bar, the count, the rate and an ETA.
fn bar_style(bytes: bool) -> indicatif::ProgressStyle {
    let counts = if bytes {
        "{binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, eta {eta})"
    } else {
        "{human_pos}/{human_len} records (eta {eta})"
    };
    indicatif::ProgressStyle::with_template(&format!(
        "{{spinner}} {{prefix:<24}} {{msg}} [{{bar:20}}] {counts}"
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
}

/// Shows one report on a dataset's line: the phase (and the engine's own words), then a bar with an ETA when
/// the phase's size is known, the counts so far otherwise.
fn show(bar: &indicatif::ProgressBar, report: &Report, phase_changed: bool) {
    let mut msg = report.phase.as_str().to_string();
    if let Some(d) = &report.detail {
        msg.push_str(&format!(" ({d})"));
    }
    match report.done_of() {
        Some((done, total)) => {
            let bytes = report.total_bytes.is_some_and(|t| t > 0) && report.bytes.is_some();
            if phase_changed || bar.length() != Some(total) {
                bar.set_style(bar_style(bytes));
                bar.set_length(total);
                bar.reset_eta();
            }
            if bytes && let Some(rows) = report.rows {
                msg.push_str(&format!(", {rows} records"));
            }
            bar.set_position(done);
        }
        None => {
            if phase_changed || bar.length().is_some() {
                bar.set_style(spinner_style());
                bar.unset_length();
            }
            match (report.rows, report.bytes) {
                (Some(r), Some(b)) => {
                    msg.push_str(&format!(", {r} records, {}", indicatif::BinaryBytes(b)))
                }
                (Some(r), None) => msg.push_str(&format!(", {r} records")),
                (None, Some(b)) => msg.push_str(&format!(", {}", indicatif::BinaryBytes(b))),
                (None, None) => {}
            }
        }
    }
    bar.set_message(msg);
}

/// Forwards progress through the plugin's dispatcher.
struct PluginRelay {
    dispatcher: Option<plugin_host::PluginDispatcher<ProgressEvent>>,
}

impl ProducerConsumer for PluginRelay {
    type In = ProgressEvent;
    type Out = ProgressEvent;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<ProgressEvent, ProgressEvent>, gen_stage::StopReason> {
        let d = self
            .dispatcher
            .take()
            .ok_or(gen_stage::StopReason::Normal)?;
        Ok(ProducerConsumerOptions::new().dispatcher(d))
    }

    async fn handle_events(
        &mut self,
        events: Vec<ProgressEvent>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<ProgressEvent> {
        Noreply::Emit(events)
    }
}

/// The end of the plugin's branch: counts what the plugin delivered.
struct PluginSink {
    delivered: Arc<Mutex<u64>>,
}

impl Consumer for PluginSink {
    type Event = ProgressEvent;

    async fn handle_events(
        &mut self,
        events: Vec<ProgressEvent>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        if let Ok(mut n) = self.delivered.lock() {
            *n += events.len() as u64;
        }
        Noreply::none()
    }
}

/// Options of `weir pull`.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Every dataset.
    pub all: bool,
    /// Or these (with their inputs).
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
}

fn pipeline_err(e: impl std::fmt::Display) -> CommandError {
    CommandError::Pipeline {
        message: e.to_string(),
    }
}

/// Runs `pull`.
pub async fn run(ctx: &Context, opts: &PullOptions) -> Result<Output, CommandError> {
    for d in &opts.datasets {
        known(ctx, d)?;
    }
    let order = ctx.workspace.topological_order()?;
    let targets: Vec<String> = if opts.all || opts.datasets.is_empty() {
        order
    } else {
        let mut wanted = std::collections::BTreeSet::new();
        let mut stack = opts.datasets.clone();
        while let Some(d) = stack.pop() {
            if wanted.insert(d.clone()) {
                stack.extend(ctx.workspace.inputs_of(&d));
            }
        }
        order.into_iter().filter(|d| wanted.contains(d)).collect()
    };
    if opts.recompute {
        recompute(ctx, &targets).await?;
    }
    let ws = ctx.workspace.clone();
    let scheduler = Scheduler::new(targets.clone(), |d| ws.inputs_of(d));
    let started = Instant::now();
    let (finished_tx, finished_rx) = oneshot::channel();

    // Progress: hub -> renderer (+ plugin branch).
    let hub = gen_stage::start_producer(ProgressHub)
        .await
        .map_err(pipeline_err)?;
    let multi = indicatif::MultiProgress::new();
    if opts.quiet {
        multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let renderer = gen_stage::start_consumer(Renderer {
        bars: BTreeMap::new(),
        multi,
    })
    .await
    .map_err(pipeline_err)?;
    renderer
        .subscribe(&hub, SubscribeOptions::new().max_demand(100))
        .await
        .map_err(pipeline_err)?;
    let mut metrics = None;
    let delivered = Arc::new(Mutex::new(0u64));
    let mut plugin_stages = Vec::new();
    if let Some(path) = &opts.dispatcher_plugin {
        let plugin_err = |e: plugin_host::PluginError| CommandError::Plugin {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let options = match &opts.dispatcher_plugin_options {
            serde_json::Value::Null => json!({}),
            given => given.clone(),
        };
        let factory = plugin_host::load(path, &options).map_err(plugin_err)?;
        // A plugin that panics or breaks the dispatcher contract stops its relay stage (instead of
        // degrading quietly), and the pull fails naming the plugin and the callback.
        // Progress events are keyed by their dataset, for plugins that route by key (key-affinity).
        let dispatcher = factory
            .dispatcher_with_key(|e: &ProgressEvent| dataset_key(e.dataset()))
            .map_err(plugin_err)?
            .panic_on_fault();
        metrics = dispatcher.metrics();
        let relay = gen_stage::start_producer_consumer(PluginRelay {
            dispatcher: Some(dispatcher),
        })
        .await
        .map_err(pipeline_err)?;
        relay
            .subscribe(&hub, SubscribeOptions::new().max_demand(100))
            .await
            .map_err(pipeline_err)?;
        let sink = gen_stage::start_consumer(PluginSink {
            delivered: delivered.clone(),
        })
        .await
        .map_err(pipeline_err)?;
        sink.subscribe(&relay, SubscribeOptions::new().max_demand(100))
            .await
            .map_err(pipeline_err)?;
        plugin_stages.push((relay, sink));
    }

    // Transactions: producer -> lanes -> pool -> workers.
    let producer = gen_stage::start_producer(PendingTransactions {
        scheduler,
        datasets: targets.clone(),
        errors: BTreeMap::new(),
        timings: BTreeMap::new(),
        changes: BTreeMap::new(),
        finished: Some(finished_tx),
    })
    .await
    .map_err(pipeline_err)?;
    // The pool gathers the lanes and hands tasks to free workers (a forwarding stage's Demand dispatcher).
    let pool = gen_stage::map(|t: Task| t).await.map_err(pipeline_err)?;
    let mut lanes = Vec::new();
    for d in &targets {
        // One dataset's lane: the consumer of its partition, forwarding in order.
        let lane = gen_stage::map(|t: Task| t).await.map_err(pipeline_err)?;
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
        let w = gen_stage::start_consumer(Worker {
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
    let mut drain = gen_stage::Drain::new(Duration::from_secs(10))
        .stage(&producer)
        .stages(lanes.iter())
        .stage(&pool)
        .stages(workers.iter())
        .stage(&hub)
        .stage(&renderer);
    for (relay, sink) in &plugin_stages {
        drain = drain.stage(relay).stage(sink);
    }
    let drained = drain.run().await;
    if !drained.is_complete() {
        warn!(undelivered = ?drained.undelivered(), "the pull's pipeline did not drain within 10 s");
    }
    if let (Some(path), Some((relay, _))) = (&opts.dispatcher_plugin, plugin_stages.first()) {
        let fault = drained.stage(relay.id()).and_then(|s| match &s.outcome {
            gen_stage::DrainOutcome::Stopped(gen_stage::StopReason::Panicked(m))
            | gen_stage::DrainOutcome::AlreadyStopped(gen_stage::StopReason::Panicked(m)) => {
                Some(m.clone())
            }
            _ => None,
        });
        if let Some(message) = fault {
            return Err(CommandError::Plugin {
                path: path.display().to_string(),
                message,
            });
        }
    }
    let metrics_text = match &metrics {
        Some(m) => Some(
            m.snapshot()
                .map_err(|e| CommandError::Plugin {
                    path: String::new(),
                    message: e.to_string(),
                })?
                .to_prometheus(),
        ),
        None => None,
    };
    let mut lines = Vec::new();
    let mut items = Vec::new();
    for (name, state, transactions) in &report.states {
        let (what, code, error, because) = match state {
            DatasetState::UpToDate => (
                format!("up to date ({transactions} transaction(s))"),
                "upToDate",
                None,
                None,
            ),
            DatasetState::Failed(m) => (format!("FAILED: {m}"), "failed", Some(m), None),
            DatasetState::Skipped { because } => (
                format!("skipped: input `{because}` failed"),
                "skipped",
                None,
                Some(because),
            ),
            DatasetState::Pending | DatasetState::InFlight => {
                (format!("{state:?}"), "unfinished", None, None)
            }
        };
        let timing = report.timings.get(name).copied().unwrap_or_default();
        let change = report.changes.get(name);
        match change {
            Some(c) => lines.push(format!(
                "{name}: {what}, {} record(s) added, head {} -> {}",
                c.records,
                c.old_head.as_deref().map_or("(new)", short_hash),
                short_hash(&c.new_head)
            )),
            None => lines.push(format!("{name}: {what}")),
        }
        items.push(json!({
            "dataset": name,
            "state": code,
            "error": error,
            "exitCode": report.errors.get(name).map(|(_, c)| *c),
            "skippedBecause": because,
            "summary": what,
            "transactions": transactions,
            "recordsAdded": change.map_or(0, |c| c.records),
            "oldHead": change.and_then(|c| c.old_head.clone()),
            "newHead": change.map(|c| c.new_head.clone()),
            "millis": millis(timing.total),
            "engineMillis": millis(timing.engine),
            "phaseMillis": Phase::ALL
                .iter()
                .map(|p| (p.as_str().to_string(), json!(millis(timing.phases.times[p.index()]))))
                .collect::<serde_json::Map<_, _>>(),
        }));
    }
    lines.push(format!(
        "pulled {} dataset(s) in {:.2} s, {:.2} s of it in engines",
        report.states.len(),
        elapsed.as_secs_f64(),
        engine_time.as_secs_f64()
    ));
    let delivered = delivered.lock().map(|d| *d).unwrap_or(0);
    if let Some(path) = &opts.dispatcher_plugin {
        lines.push(format!(
            "dispatcher plugin {}: {delivered} event(s) delivered",
            path.display()
        ));
    }
    if let Some(m) = &metrics_text {
        lines.push("dispatcher plugin metrics:".to_string());
        lines.push(m.trim_end().to_string());
    }
    let summary = Output {
        text: lines.join("\n"),
        json: json!({
            "datasets": items,
            "millis": millis(elapsed),
            "engineMillis": millis(engine_time),
            "pluginMetrics": metrics_text,
            "pluginEventsDelivered": opts.dispatcher_plugin.as_ref().map(|_| delivered),
        }),
    };
    if !report.errors.is_empty() {
        let code = report
            .errors
            .values()
            .next()
            .map_or(exit::FAILURE, |(_, c)| *c);
        return Err(CommandError::PullFailed {
            failed: report.errors.len(),
            datasets: report.errors.keys().cloned().collect(),
            code,
            summary: Box::new(summary),
        });
    }
    Ok(summary)
}

/// `--recompute`: every derivative among `targets` whose transform is not the one its chain records is reset
/// to its Seed (refused, before anything changes, while datasets computed from it exist), so the pull
/// computes it again from its inputs with the new query.
async fn recompute(ctx: &Context, targets: &[String]) -> Result<(), CommandError> {
    let mut moves = Vec::new();
    for name in targets {
        let m = &ctx.workspace.datasets[name];
        if !ctx.transform_changed(m).await? {
            continue;
        }
        let chain = ctx.storage.dataset(name).chain().await?;
        let seed = super::reset::find_block(&chain, None).map_err(|reason| {
            crate::transaction::TxError::Refused {
                dataset: name.clone(),
                reason,
            }
        })?;
        moves.extend(super::reset::plan(ctx, name, seed, false).await?);
    }
    super::reset::apply(ctx, &moves).await?;
    for m in &moves {
        tracing::info!(dataset = %m.dataset, "transform changed: reset to its Seed to compute it again");
    }
    Ok(())
}

/// A dataset's 64-bit routing key for dispatcher plugins: FNV-1a of its name, the same in every run.
fn dataset_key(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The end of a block hash, enough to tell heads apart in a summary line (`weir log` shows them whole).
fn short_hash(hash: &str) -> &str {
    hash.get(hash.len().saturating_sub(12)..).unwrap_or(hash)
}

/// Whole milliseconds, for the JSON summary.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
