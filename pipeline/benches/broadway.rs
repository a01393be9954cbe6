//! The pipeline layer against the same topology written directly on
//! gen-stage, and how stages doing CPU work scale from 1 to 2 workers.
//!
//! - **layer**: producer -> 4 processors -> batcher (batch_size 100) -> 2
//!   batch processors, every message acked, N messages (10 000 000;
//!   `WEIR_BENCH_MESSAGES` to change, `--quick` a tenth): `pipeline` (the
//!   crate's `Pipeline::builder()`) against `hand` (the same stages written
//!   as gen-stage `Producer`/`ProducerConsumer`/`Consumer` impls, with the
//!   same demand: processors ask 10 at a time, the batcher 100 of each
//!   processor, batch processors one batch), on a current_thread and a
//!   multi_thread(2) runtime.
//! - **scaling**: a producer -> 4 consumers spinning ~2 µs per event,
//!   behind gen-stage's Demand dispatcher and its Partition dispatcher
//!   (`gen_stage`), and the same as a pipeline's 4 processors without and
//!   with `partition_by` (`pipeline`), N / 50 events, on a multi_thread
//!   runtime with 1 and with 2 workers. Both partitioned cases route an
//!   event where the Partition dispatcher's default hash does.
//!
//! The clock starts when the producer is released (it holds demand in
//! accumulate mode until every stage is subscribed) and stops when the last
//! message is acked (counted); each run checks the count and the sum. The
//! figures table is printed at the end, and written to
//! `$WEIR_BENCH_REPORT_DIR/pipeline.md` (`cargo xtask bench` sets it).
//!
//! ```sh
//! cargo xtask bench -p weir-pipeline            # N = 10 000 000
//! cargo xtask bench -p weir-pipeline --quick    # N = 1 000 000, criterion --quick
//! WEIR_BENCH_MESSAGES=2000000 cargo bench -p weir-pipeline --bench broadway
//! ```
//!
//! Without `--bench` (as under `cargo test --all-targets`) every case runs
//! once with 10 000 messages, as a smoke test.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use weir_gen_stage::{
    AnyStage, Consumer, ConsumerContext, DemandDispatcher, DemandMode, Dispatcher, Drain, Noreply,
    PartitionDispatcher, Producer, ProducerConsumer, ProducerConsumerContext, ProducerContext,
    ProducerOptions, SubscribeOptions, Subscription,
};
use weir_pipeline::{Acknowledger, Batcher, Message, Pipeline};

const DEFAULT_MESSAGES: u64 = 10_000_000;
const SMOKE_MESSAGES: u64 = 10_000;
const PROCESSORS: usize = 4;
const PROCESSOR_MAX_DEMAND: usize = 10;
const BATCH_SIZE: usize = 100;
const BATCH_PROCESSORS: usize = 2;
const CONSUMERS: usize = 4;
const SPIN: Duration = Duration::from_micros(2);

fn quick() -> bool {
    std::env::var_os("WEIR_BENCH_QUICK").is_some()
}

/// Messages per layer run: a multiple of the batch size, so that every
/// batch of the hand-written batcher (which has no timeout) fills.
fn messages(smoke: bool) -> u64 {
    let n = if smoke {
        SMOKE_MESSAGES
    } else if let Ok(raw) = std::env::var("WEIR_BENCH_MESSAGES") {
        match raw.replace('_', "").parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => panic!("WEIR_BENCH_MESSAGES must be a positive integer, got {raw:?}"),
        }
    } else if quick() {
        DEFAULT_MESSAGES / 10
    } else {
        DEFAULT_MESSAGES
    };
    (n / BATCH_SIZE as u64).max(1) * BATCH_SIZE as u64
}

// ---------------------------------------------------------------------------
// What every run shares.

/// The acked (or consumed) count and sum, and the signal that the last one
/// arrived.
#[derive(Debug)]
struct Tally {
    remaining: AtomicU64,
    sum: AtomicU64,
    done: Notify,
}

impl Tally {
    fn new(n: u64) -> Arc<Self> {
        Arc::new(Self {
            remaining: AtomicU64::new(n),
            sum: AtomicU64::new(0),
            done: Notify::new(),
        })
    }

    fn count(&self, n: usize, sum: u64) {
        self.sum.fetch_add(sum, Ordering::Relaxed);
        let n = n as u64;
        if n > 0 && self.remaining.fetch_sub(n, Ordering::AcqRel) == n {
            self.done.notify_one();
        }
    }

    async fn finished(&self, what: &str, n: u64) {
        let timeout = Duration::from_secs(60 + n / 10_000);
        if tokio::time::timeout(timeout, self.done.notified())
            .await
            .is_err()
        {
            panic!(
                "{what}: stalled with {} missing after {timeout:?}",
                self.remaining.load(Ordering::Acquire)
            );
        }
    }

    fn check(&self, what: &str, sum: u64) {
        assert_eq!(
            self.sum.load(Ordering::Acquire),
            sum,
            "{what}: messages lost, duplicated or altered"
        );
    }
}

/// The sum of `f(i)` for `i` in `0..n`, wrapping, for `f(i) = i * factor`.
fn checksum(n: u64, factor: u64) -> u64 {
    ((u128::from(n) * u128::from(n.saturating_sub(1)) / 2) as u64).wrapping_mul(factor)
}

/// Emits `make(0..end)` as demanded, starting in accumulate mode.
struct Numbers<E, F> {
    next: u64,
    end: u64,
    make: F,
    dispatcher: Option<Box<dyn Dispatcher<E>>>,
}

impl<E, F> Numbers<E, F> {
    fn new(end: u64, make: F, dispatcher: Box<dyn Dispatcher<E>>) -> Self {
        Self {
            next: 0,
            end,
            make,
            dispatcher: Some(dispatcher),
        }
    }

    /// A producer whose `init` leaves the dispatcher to whoever starts it.
    fn undispatched(end: u64, make: F) -> Self {
        Self {
            next: 0,
            end,
            make,
            dispatcher: None,
        }
    }
}

impl<E: Send + 'static, F: FnMut(u64) -> E + Send + 'static> Producer for Numbers<E, F> {
    type Messages = ();
    type Event = E;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<E>, weir_gen_stage::StopReason> {
        let options = ProducerOptions::new().demand(DemandMode::Accumulate);
        Ok(match self.dispatcher.take() {
            Some(dispatcher) => options.boxed_dispatcher(dispatcher),
            None => options,
        })
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<E> {
        let end = self.next.saturating_add(demand as u64).min(self.end);
        let events = (self.next..end).map(&mut self.make).collect();
        self.next = end;
        Noreply::Emit(events)
    }
}

fn with_demand<E>(max_demand: usize) -> SubscribeOptions<E> {
    SubscribeOptions::new()
        .max_demand(max_demand)
        .min_demand(max_demand / 2)
}

fn temporary<E>(options: SubscribeOptions<E>) -> SubscribeOptions<E> {
    options.cancel(weir_gen_stage::CancelMode::Temporary)
}

/// Release the producer, time until `tally` has all `n`, check, drain
/// every stage (untimed).
async fn timed(
    what: &str,
    producer: &weir_gen_stage::ProducerRef<impl Send + 'static>,
    tally: &Tally,
    n: u64,
    sum: u64,
    stages: Vec<AnyStage>,
) -> Duration {
    let start = Instant::now();
    producer
        .async_set_demand_mode(DemandMode::Forward)
        .expect("the producer is alive");
    tally.finished(what, n).await;
    let elapsed = start.elapsed();
    tally.check(what, sum);
    let report = Drain::new(Duration::from_secs(30))
        .stages(stages.iter())
        .run()
        .await;
    assert!(report.is_complete(), "{what}: the drain did not complete");
    elapsed
}

// ---------------------------------------------------------------------------
// The layer: the pipeline crate.

/// Counts what it is told was acked.
struct Count(Arc<Tally>);

impl Acknowledger<u64> for Count {
    fn ack(&self, successful: Vec<Message<u64>>, failed: Vec<Message<u64>>) {
        assert!(failed.is_empty(), "nothing fails in the bench");
        let sum = successful.iter().fold(0u64, |s, m| s.wrapping_add(m.data));
        self.0.count(successful.len(), sum);
    }
}

async fn layer_pipeline(n: u64) -> Duration {
    let tally = Tally::new(n);
    let acknowledger: Arc<dyn Acknowledger<u64>> = Arc::new(Count(tally.clone()));
    let producer = weir_gen_stage::start_producer(Numbers::new(
        n,
        move |i| Message::new(i, acknowledger.clone()),
        Box::new(DemandDispatcher::new()),
    ))
    .await
    .expect("the producer starts");
    let pipeline = Pipeline::builder()
        .producer(&producer)
        .processors(PROCESSORS, |message: &mut Message<u64>| {
            message.data = message.data.wrapping_mul(2);
        })
        .processor_max_demand(PROCESSOR_MAX_DEMAND)
        .batcher(
            Batcher::new("default", |_: &mut [Message<u64>], _| {})
                .batch_size(BATCH_SIZE)
                .concurrency(BATCH_PROCESSORS),
        )
        .start()
        .await
        .expect("the pipeline starts");
    let stages = pipeline.stages();
    timed(
        "layer/pipeline",
        &producer.producer(),
        &tally,
        n,
        checksum(n, 2),
        stages,
    )
    .await
}

// ---------------------------------------------------------------------------
// The same topology on raw gen-stage.

/// What a hand-written message carries: the data and who to tell.
struct Msg {
    data: u64,
    ack: Arc<Count>,
}

/// A processor: the handler, then on to the batcher.
struct HandProcessor;

impl ProducerConsumer for HandProcessor {
    type Messages = ();
    type In = Msg;
    type Out = Msg;

    async fn handle_events(
        &mut self,
        mut events: Vec<Msg>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Msg> {
        for event in &mut events {
            event.data = event.data.wrapping_mul(2);
        }
        Noreply::Emit(events)
    }
}

/// The batcher: batches of `BATCH_SIZE` (no timeout: every batch fills).
struct HandBatcher {
    pending: Vec<Msg>,
}

impl ProducerConsumer for HandBatcher {
    type Messages = ();
    type In = Msg;
    type Out = Vec<Msg>;

    async fn handle_events(
        &mut self,
        events: Vec<Msg>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Vec<Msg>> {
        let mut batches = Vec::new();
        for event in events {
            self.pending.push(event);
            if self.pending.len() == BATCH_SIZE {
                let next = Vec::with_capacity(BATCH_SIZE);
                batches.push(std::mem::replace(&mut self.pending, next));
            }
        }
        Noreply::Emit(batches)
    }
}

/// A batch processor: acks each batch.
struct HandBatchProcessor;

impl Consumer for HandBatchProcessor {
    type Messages = ();
    type Event = Vec<Msg>;

    async fn handle_events(
        &mut self,
        batches: Vec<Vec<Msg>>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for batch in batches {
            if let Some(first) = batch.first() {
                let tally = first.ack.0.clone();
                let sum = batch.iter().fold(0u64, |s, m| s.wrapping_add(m.data));
                tally.count(batch.len(), sum);
            }
        }
        Noreply::none()
    }
}

async fn layer_hand(n: u64) -> Duration {
    let tally = Tally::new(n);
    let ack = Arc::new(Count(tally.clone()));
    let producer = weir_gen_stage::start_producer(Numbers::new(
        n,
        move |data| Msg {
            data,
            ack: ack.clone(),
        },
        Box::new(DemandDispatcher::new()),
    ))
    .await
    .expect("the producer starts");
    let mut stages = vec![AnyStage::from(&producer)];
    let batcher = weir_gen_stage::start_producer_consumer(HandBatcher {
        pending: Vec::with_capacity(BATCH_SIZE),
    })
    .await
    .expect("the batcher starts");
    let mut tail = Vec::new();
    for _ in 0..BATCH_PROCESSORS {
        let processor = weir_gen_stage::start_consumer(HandBatchProcessor)
            .await
            .expect("a batch processor starts");
        processor
            .subscribe(
                &batcher,
                temporary(SubscribeOptions::new().max_demand(1).min_demand(0)),
            )
            .await
            .expect("a batch processor subscribes");
        tail.push(AnyStage::from(&processor));
    }
    for _ in 0..PROCESSORS {
        let processor = weir_gen_stage::start_producer_consumer(HandProcessor)
            .await
            .expect("a processor starts");
        batcher
            .subscribe(&processor, temporary(with_demand(BATCH_SIZE)))
            .await
            .expect("the batcher subscribes");
        processor
            .subscribe(&producer, temporary(with_demand(PROCESSOR_MAX_DEMAND)))
            .await
            .expect("a processor subscribes");
        stages.push(AnyStage::from(&processor));
    }
    stages.push(AnyStage::from(&batcher));
    stages.extend(tail);
    timed(
        "layer/hand",
        &producer.producer(),
        &tally,
        n,
        checksum(n, 2),
        stages,
    )
    .await
}

// ---------------------------------------------------------------------------
// Scaling: consumers doing CPU work.

/// About 2 µs of work.
fn spin() {
    let start = Instant::now();
    while start.elapsed() < SPIN {
        std::hint::spin_loop();
    }
}

struct Spinner(Arc<Tally>);

impl Consumer for Spinner {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for _ in &events {
            spin();
        }
        let sum = events.iter().fold(0u64, |s, e| s.wrapping_add(*e));
        self.0.count(events.len(), sum);
        Noreply::none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FanOut {
    Demand,
    Partition,
}

impl FanOut {
    fn name(self) -> &'static str {
        match self {
            FanOut::Demand => "demand",
            FanOut::Partition => "partition",
        }
    }
}

async fn scaling_gen_stage(fan_out: FanOut, n: u64) -> Duration {
    let tally = Tally::new(n);
    let dispatcher: Box<dyn Dispatcher<u64>> = match fan_out {
        FanOut::Demand => Box::new(DemandDispatcher::new()),
        FanOut::Partition => Box::new(PartitionDispatcher::new(CONSUMERS)),
    };
    let producer = weir_gen_stage::start_producer(Numbers::new(n, |i| i, dispatcher))
        .await
        .expect("the producer starts");
    let mut stages = vec![AnyStage::from(&producer)];
    for partition in 0..CONSUMERS {
        let consumer = weir_gen_stage::start_consumer(Spinner(tally.clone()))
            .await
            .expect("a consumer starts");
        let mut options =
            with_demand(PROCESSOR_MAX_DEMAND).cancel(weir_gen_stage::CancelMode::Temporary);
        if fan_out == FanOut::Partition {
            options = options.partition(partition);
        }
        consumer
            .subscribe(&producer, options)
            .await
            .expect("a consumer subscribes");
        stages.push(AnyStage::from(&consumer));
    }
    timed(
        "scaling/gen_stage",
        &producer.producer(),
        &tally,
        n,
        checksum(n, 1),
        stages,
    )
    .await
}

async fn scaling_pipeline(fan_out: FanOut, stages: Stages, n: u64) -> Duration {
    let tally = Tally::new(n);
    let acknowledger: Arc<dyn Acknowledger<u64>> = Arc::new(Count(tally.clone()));
    let mut builder = Pipeline::builder();
    let mut given = None;
    if stages == Stages::PipelineGivenProducer {
        let producer = weir_gen_stage::start_producer(Numbers::new(
            n,
            move |i| Message::new(i, acknowledger.clone()),
            Box::new(DemandDispatcher::new()),
        ))
        .await
        .expect("the producer starts");
        builder = builder.producer(&producer);
        given = Some(producer.producer());
    } else {
        builder = builder.producers(1, move |_| {
            let acknowledger = acknowledger.clone();
            Numbers::undispatched(n, move |i| Message::new(i, acknowledger.clone()))
        });
    }
    let mut builder = builder
        .processors(CONSUMERS, |_: &mut Message<u64>| spin())
        .processor_max_demand(PROCESSOR_MAX_DEMAND);
    if fan_out == FanOut::Partition {
        // The raw case's partitions (the dispatcher's default hash), so that
        // both send the same events to the same consumer. Consecutive keys
        // `% 4` would split every batch the producer emits four ways, one or
        // two events to each processor: about a third more deliveries per
        // event than the hash, each costing more on 2 workers than on 1.
        builder = builder.partition_by(|message: &Message<u64>| {
            PartitionDispatcher::default_partition(&message.data, CONSUMERS) as u64
        });
    }
    let pipeline = builder.start().await.expect("the pipeline starts");
    let producer = match given {
        Some(producer) => producer,
        None => pipeline.producers()[0].clone(),
    };
    let stages = pipeline.stages();
    timed(
        "scaling/pipeline",
        &producer,
        &tally,
        n,
        checksum(n, 1),
        stages,
    )
    .await
}

// ---------------------------------------------------------------------------
// Runtimes, the report and criterion.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Flavor {
    CurrentThread,
    MultiThread(usize),
}

impl Flavor {
    fn name(self) -> String {
        match self {
            Flavor::CurrentThread => "current_thread".into(),
            Flavor::MultiThread(workers) => format!("multi_thread({workers})"),
        }
    }

    fn runtime(self) -> Runtime {
        let mut builder = match self {
            Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Flavor::MultiThread(workers) => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(workers);
                builder
            }
        };
        match builder.enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => panic!("cannot build a {} runtime: {error}", self.name()),
        }
    }
}

/// One measured case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Case {
    Layer { pipeline: bool },
    Scaling { fan_out: FanOut, stages: Stages },
}

/// Who runs the scaling case's consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stages {
    /// gen-stage consumers behind the producer's dispatcher.
    GenStage,
    /// A pipeline's processors, its producer started by the pipeline
    /// (`producers`): the pipeline's dispatcher is the producer's.
    Pipeline,
    /// A pipeline's processors behind a producer started outside
    /// (`producer(&p)`): `partition_by` adds a stage in front of it.
    PipelineGivenProducer,
}

impl Stages {
    const ALL: [Stages; 3] = [
        Stages::GenStage,
        Stages::Pipeline,
        Stages::PipelineGivenProducer,
    ];

    fn name(self) -> &'static str {
        match self {
            Stages::GenStage => "gen_stage",
            Stages::Pipeline => "pipeline",
            Stages::PipelineGivenProducer => "pipeline_given_producer",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Stages::GenStage => "gen-stage consumers",
            Stages::Pipeline => "pipeline processors (`producers`)",
            Stages::PipelineGivenProducer => "pipeline processors (`producer(&p)`)",
        }
    }
}

/// The messages per run of a case and the rate of each timed run.
type Runs = (u64, Vec<f64>);

/// Rates (messages/s) of every timed run, by case and runtime.
#[derive(Debug, Default)]
struct Report {
    runs: Mutex<BTreeMap<(Case, Flavor), Runs>>,
}

fn median(rates: &[f64]) -> f64 {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn rate(value: f64) -> String {
    if value >= 100e6 {
        format!("{:.0} M", value / 1e6)
    } else if value >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else {
        format!("{:.3} M", value / 1e6)
    }
}

impl Report {
    fn record(&self, case: Case, flavor: Flavor, n: u64, elapsed: Duration) {
        let rate = n as f64 / elapsed.as_secs_f64().max(1e-9);
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = runs.entry((case, flavor)).or_insert((n, Vec::new()));
        entry.1.push(rate);
    }

    fn get(&self, case: Case, flavor: Flavor) -> Option<(u64, f64, usize)> {
        let runs = self
            .runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        runs.get(&(case, flavor))
            .map(|(n, rates)| (*n, median(rates), rates.len()))
    }

    fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| runtime | messages per run | pipeline msg/s | hand-written msg/s | hand / pipeline (time ratio) | target <= 1.3x |\n|---|---:|---:|---:|---:|---|"
        );
        for flavor in [Flavor::CurrentThread, Flavor::MultiThread(2)] {
            let layer = self.get(Case::Layer { pipeline: true }, flavor);
            let hand = self.get(Case::Layer { pipeline: false }, flavor);
            if let (Some((n, layer, _)), Some((_, hand, _))) = (layer, hand) {
                let ratio = hand / layer;
                let _ = writeln!(
                    out,
                    "| {} | {n} | {} | {} | {ratio:.2}x | {} |",
                    flavor.name(),
                    rate(layer),
                    rate(hand),
                    if ratio <= 1.3 { "yes" } else { "**no**" }
                );
            }
        }
        let _ = writeln!(
            out,
            "\n| stages | fan-out | events per run | 1 worker events/s | 2 workers events/s | 2 / 1 | target >= 1.8x |\n|---|---|---:|---:|---:|---:|---|"
        );
        for stages in Stages::ALL {
            for fan_out in [FanOut::Demand, FanOut::Partition] {
                let case = Case::Scaling { fan_out, stages };
                let one = self.get(case, Flavor::MultiThread(1));
                let two = self.get(case, Flavor::MultiThread(2));
                if let (Some((n, one, _)), Some((_, two, _))) = (one, two) {
                    let ratio = two / one;
                    let _ = writeln!(
                        out,
                        "| {} | {} | {n} | {} | {} | {ratio:.2}x | {} |",
                        stages.label(),
                        fan_out.name(),
                        rate(one),
                        rate(two),
                        if ratio >= 1.8 { "yes" } else { "**no**" }
                    );
                }
            }
        }
        out
    }
}

fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, n: u64) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .throughput(Throughput::Elements(n));
    if quick() {
        group
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1));
    } else {
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5));
    }
}

fn measure(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    report: &Report,
    runtime: &Runtime,
    id: BenchmarkId,
    (case, flavor, n): (Case, Flavor, u64),
) {
    group.bench_function(id, |bencher| {
        bencher.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let elapsed = runtime.block_on(async {
                    match case {
                        Case::Layer { pipeline: true } => layer_pipeline(n).await,
                        Case::Layer { pipeline: false } => layer_hand(n).await,
                        Case::Scaling {
                            fan_out,
                            stages: Stages::GenStage,
                        } => scaling_gen_stage(fan_out, n).await,
                        Case::Scaling { fan_out, stages } => {
                            scaling_pipeline(fan_out, stages, n).await
                        }
                    }
                });
                report.record(case, flavor, n, elapsed);
                total += elapsed;
            }
            total
        })
    });
}

/// `WEIR_BENCH_ONE=pipeline` (or `hand`): run that layer case once on a
/// current_thread runtime (`WEIR_BENCH_WORKERS=2`: multi_thread(2)) with
/// `WEIR_BENCH_MESSAGES` messages and exit, for instruction counts under
/// callgrind (see docs/benchmarks.md).
fn one(case: &str) {
    let pipeline = match case {
        "pipeline" => true,
        "hand" => false,
        other => panic!("WEIR_BENCH_ONE must be pipeline or hand, got {other:?}"),
    };
    let n = messages(false);
    let flavor = match std::env::var("WEIR_BENCH_WORKERS") {
        Ok(workers) => match workers.parse::<usize>() {
            Ok(workers) if workers > 0 => Flavor::MultiThread(workers),
            _ => panic!("WEIR_BENCH_WORKERS must be a positive integer, got {workers:?}"),
        },
        Err(_) => Flavor::CurrentThread,
    };
    let runtime = flavor.runtime();
    let elapsed = runtime.block_on(async {
        if pipeline {
            layer_pipeline(n).await
        } else {
            layer_hand(n).await
        }
    });
    println!(
        "layer/{case} on {}: {n} messages in {elapsed:?}",
        flavor.name()
    );
}

fn main() {
    if let Ok(case) = std::env::var("WEIR_BENCH_ONE") {
        one(&case);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test` does not.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let mut criterion = Criterion::default().configure_from_args();
    let report = Report::default();
    let n = messages(smoke);

    for flavor in [Flavor::CurrentThread, Flavor::MultiThread(2)] {
        let runtime = flavor.runtime();
        let mut group = criterion.benchmark_group(format!("layer/{}", flavor.name()));
        configure(&mut group, n);
        for pipeline in [true, false] {
            let name = if pipeline { "pipeline" } else { "hand" };
            let id = BenchmarkId::new(name, n);
            measure(
                &mut group,
                &report,
                &runtime,
                id,
                (Case::Layer { pipeline }, flavor, n),
            );
        }
        group.finish();
    }

    let events = (n / 50).max(100);
    for flavor in [Flavor::MultiThread(1), Flavor::MultiThread(2)] {
        let runtime = flavor.runtime();
        let mut group = criterion.benchmark_group(format!("scaling/{}", flavor.name()));
        configure(&mut group, events);
        for stages in Stages::ALL {
            for fan_out in [FanOut::Demand, FanOut::Partition] {
                let id = BenchmarkId::new(format!("{}_{}", stages.name(), fan_out.name()), events);
                let case = Case::Scaling { fan_out, stages };
                measure(&mut group, &report, &runtime, id, (case, flavor, events));
            }
        }
        group.finish();
    }
    criterion.final_summary();

    if smoke {
        return;
    }
    let table = report.table();
    println!("\n## pipeline figures (median of the timed runs)\n\n{table}");
    if let Some(dir) = std::env::var_os("WEIR_BENCH_REPORT_DIR") {
        let dir = std::path::PathBuf::from(dir);
        let path = dir.join("pipeline.md");
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &table)) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(error) => eprintln!("cannot write {}: {error}", path.display()),
        }
    }
}
