//! Graceful drain: producers stop emitting, everything in flight is
//! delivered and handled, stages stop upstream first, and the report says
//! what was drained and what was not.
//!
//! The property tests build random pipelines (producers, layers of
//! producer_consumers, consumers, random demand and surplus), drain them at
//! a random point and check that every event ever produced reached a
//! consumer exactly once, on both ways of running stages (a tokio task per
//! stage, a `StageGroup`, or a mix) and both tokio runtimes (current_thread
//! and a 2-worker multi_thread).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use tokio::sync::mpsc;
use weir_gen_stage::{
    AnyStage, BufferSize, CancelMode, ConsumerSupervisor, Drain, DrainOutcome, FlatMap, ForEach,
    Msgs, Noreply, Producer, ProducerContext, ProducerOptions, ProducerRef, StageGroup, StageId,
    StageKind, StopReason, SubscribeOptions,
};

/// Far longer than any drain here takes: the property fails (the report
/// says the deadline passed) rather than hangs if something never drains.
const DEADLINE: Duration = Duration::from_secs(60);

/// The most events one producer emits.
const MAX_EVENTS: usize = 2_000;

/// Events produced so far, shared with the test.
type Log = Arc<Mutex<Vec<u64>>>;

fn take(log: &Log) -> Vec<u64> {
    std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Emits `tag << 32 | n` for n = 0, 1, 2, ...: `demand + surplus` events
/// per ask (the surplus is buffered), or, when `short`, half the demand at
/// once and the rest from `handle_info` (GenStage's "emit later").
/// Logs everything it emits; `cast(n)` emits `n` more. Emits at most
/// [`MAX_EVENTS`] in all, so that a pipeline on a current_thread runtime
/// leaves the test some time.
struct Numbers {
    tag: u64,
    next: u64,
    surplus: usize,
    short: bool,
    owed: usize,
    log: Log,
}

impl Numbers {
    fn new(tag: u64, surplus: usize, short: bool, log: Log) -> Self {
        Self {
            tag,
            next: 0,
            surplus,
            short,
            owed: 0,
            log,
        }
    }

    fn emit(&mut self, n: usize) -> Noreply<u64> {
        let n = n.min(MAX_EVENTS.saturating_sub(self.next as usize));
        let events: Vec<u64> = (self.next..self.next + n as u64)
            .map(|i| (self.tag << 32) | i)
            .collect();
        self.next += n as u64;
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(&events);
        Noreply::Emit(events)
    }
}

type NumbersMessages = Msgs<(), (), usize>;

impl Producer for Numbers {
    type Messages = NumbersMessages;
    type Event = u64;

    async fn handle_demand(
        &mut self,
        demand: usize,
        ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        if !self.short {
            return self.emit(demand + self.surplus);
        }
        let now = demand.div_ceil(2);
        self.owed += demand - now;
        ctx.send_info(());
        self.emit(now)
    }

    async fn handle_info(
        &mut self,
        _info: (),
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let owed = std::mem::take(&mut self.owed);
        self.emit(owed)
    }

    async fn handle_cast(
        &mut self,
        n: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        self.emit(n)
    }
}

fn unbounded() -> ProducerOptions<u64> {
    ProducerOptions::new().buffer_size(BufferSize::Infinity)
}

/// What a producer_consumer layer does to each event: `fan_out` events
/// `e * fan_out + j`, so every output is unique and traceable.
fn expand(fan_out: u64) -> impl Fn(u64) -> Vec<u64> + Send + Clone + 'static {
    move |e| (0..fan_out).map(|j| e * fan_out + j).collect()
}

#[derive(Debug, Clone, Copy)]
enum Flavor {
    CurrentThread,
    MultiThread,
}

#[derive(Debug, Clone, Copy)]
enum Placement {
    /// Every stage on a tokio task of its own.
    Tasks,
    /// Every stage in one `StageGroup`.
    Group,
    /// Every other stage in a group.
    Mixed,
}

impl Placement {
    fn group(self, index: usize, group: &StageGroup) -> Option<&StageGroup> {
        match self {
            Placement::Tasks => None,
            Placement::Group => Some(group),
            Placement::Mixed => index.is_multiple_of(2).then_some(group),
        }
    }
}

#[derive(Debug, Clone)]
struct Shape {
    /// Per producer: (surplus, short).
    producers: Vec<(usize, bool)>,
    /// Per producer_consumer layer: (fan-out, max_demand, min_demand).
    layers: Vec<(u64, usize, usize)>,
    /// Per consumer: (max_demand, min_demand).
    consumers: Vec<(usize, usize)>,
    /// Drain once the consumers have handled this many events.
    drain_after: usize,
}

fn demand() -> impl Strategy<Value = (usize, usize)> {
    (1usize..=20).prop_flat_map(|max| (Just(max), 0..max))
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        prop::collection::vec((0usize..=3, any::<bool>()), 1..=2),
        prop::collection::vec(
            (1u64..=3, demand()).prop_map(|(f, (max, min))| (f, max, min)),
            0..=2,
        ),
        prop::collection::vec(demand(), 1..=3),
        0usize..=150,
    )
        .prop_map(|(producers, layers, consumers, drain_after)| Shape {
            producers,
            layers,
            consumers,
            drain_after,
        })
}

fn runtime(flavor: Flavor) -> tokio::runtime::Runtime {
    let built = match flavor {
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    };
    match built {
        Ok(runtime) => runtime,
        Err(error) => panic!("a tokio runtime: {error}"),
    }
}

/// Builds the pipeline of `shape`, drains it after `drain_after` events,
/// and checks that nothing was lost or duplicated and that the stages
/// stopped upstream first.
async fn drain_loses_nothing(shape: Shape, placement: Placement) -> Result<(), TestCaseError> {
    let group = StageGroup::new();
    let mut index = 0;
    let mut place = || {
        index += 1;
        placement.group(index, &group).cloned()
    };
    let log: Log = Arc::default();
    let mut all: Vec<AnyStage> = Vec::new();
    // Each stage's in-set producers, to check the stop order.
    let mut upstream_of: HashMap<StageId, Vec<StageId>> = HashMap::new();

    let mut previous: Vec<ProducerRef<u64>> = Vec::new();
    for (tag, &(surplus, short)) in shape.producers.iter().enumerate() {
        let numbers = Numbers::new(tag as u64, surplus, short, log.clone());
        let stage = match place() {
            Some(group) => group.start_producer_with(numbers, unbounded()).await,
            None => weir_gen_stage::start_producer_with(numbers, unbounded()).await,
        }
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
        all.push((&stage).into());
        previous.push(stage.producer());
    }
    let mut layers = Vec::new();
    for &(fan_out, max, min) in &shape.layers {
        let stage = FlatMap::new(expand(fan_out));
        let stage = match place() {
            Some(group) => group.start_producer_consumer(stage).await,
            None => weir_gen_stage::start_producer_consumer(stage).await,
        }
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for producer in &previous {
            stage
                .subscribe(
                    producer,
                    SubscribeOptions::new().max_demand(max).min_demand(min),
                )
                .await
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        upstream_of.insert(stage.id(), previous.iter().map(ProducerRef::id).collect());
        all.push((&stage).into());
        layers.push(fan_out);
        previous = vec![stage.producer()];
    }
    let (seen, mut received) = mpsc::unbounded_channel::<u64>();
    for &(max, min) in &shape.consumers {
        let seen = seen.clone();
        let sink = ForEach::new(move |event: u64| {
            let _ = seen.send(event);
        });
        let sink = match place() {
            Some(group) => group.start_consumer(sink).await,
            None => weir_gen_stage::start_consumer(sink).await,
        }
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for producer in &previous {
            sink.subscribe(
                producer,
                SubscribeOptions::new().max_demand(max).min_demand(min),
            )
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        upstream_of.insert(sink.id(), previous.iter().map(ProducerRef::id).collect());
        all.push((&sink).into());
    }
    drop(seen);

    let mut got = Vec::new();
    while got.len() < shape.drain_after {
        match received.recv().await {
            Some(event) => got.push(event),
            None => break,
        }
    }
    let report = Drain::new(DEADLINE).stages(&all).run().await;
    while let Ok(event) = received.try_recv() {
        got.push(event);
    }

    prop_assert!(!report.deadline_passed, "{report:#?}");
    prop_assert!(report.is_complete(), "{report:#?}");
    prop_assert_eq!(report.stages.len(), all.len());
    for stage in &report.stages {
        prop_assert_eq!(&stage.outcome, &DrainOutcome::Drained);
    }
    // Upstream first: every stage stopped after the producers it
    // subscribed to.
    let position: HashMap<StageId, usize> = report
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id, i))
        .collect();
    for (stage, producers) in &upstream_of {
        for producer in producers {
            prop_assert!(
                position[producer] < position[stage],
                "{producer} stopped after its consumer {stage}: {report:#?}"
            );
        }
    }
    // Every event produced reached a consumer exactly once.
    let mut expected: Vec<u64> = take(&log);
    for &fan_out in &layers {
        expected = expected.into_iter().flat_map(expand(fan_out)).collect();
    }
    expected.sort_unstable();
    got.sort_unstable();
    prop_assert_eq!(got, expected);
    for stage in &all {
        prop_assert!(!stage.is_alive());
    }
    Ok(())
}

macro_rules! drain_property {
    ($name:ident, $flavor:expr, $placement:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
            #[test]
            fn $name(shape in shape()) {
                runtime($flavor).block_on(drain_loses_nothing(shape, $placement))?;
            }
        }
    };
}

drain_property!(
    no_event_lost_on_drain_tasks_current_thread,
    Flavor::CurrentThread,
    Placement::Tasks
);
drain_property!(
    no_event_lost_on_drain_group_current_thread,
    Flavor::CurrentThread,
    Placement::Group
);
drain_property!(
    no_event_lost_on_drain_tasks_multi_thread,
    Flavor::MultiThread,
    Placement::Tasks
);
drain_property!(
    no_event_lost_on_drain_group_multi_thread,
    Flavor::MultiThread,
    Placement::Group
);
drain_property!(
    no_event_lost_on_drain_mixed_multi_thread,
    Flavor::MultiThread,
    Placement::Mixed
);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_passes_when_a_consumer_never_asks_and_the_report_says_what_was_left() {
    let log: Log = Arc::default();
    let producer = weir_gen_stage::start_producer_with(Numbers::new(0, 0, false, log), unbounded())
        .await
        .expect("producer");
    // Ten events and no consumer: they wait in the buffer.
    producer.cast(10).expect("alive");
    // A manual consumer that never asks.
    let (seen, _received) = mpsc::unbounded_channel::<u64>();
    let consumer = weir_gen_stage::start_consumer(Manual(seen))
        .await
        .expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");

    let report = Drain::new(Duration::from_secs(1))
        .stage(&producer)
        .stage(&consumer)
        .run()
        .await;

    assert!(report.deadline_passed);
    assert!(!report.is_complete());
    let p = report.stage(producer.id()).expect("the producer's report");
    assert_eq!(p.outcome, DrainOutcome::DeadlinePassed);
    assert_eq!(p.kind, StageKind::Producer);
    assert_eq!(p.undelivered.buffered, 10);
    assert_eq!(p.dispatched, 0);
    let c = report.stage(consumer.id()).expect("the consumer's report");
    assert_eq!(c.outcome, DrainOutcome::DeadlinePassed);
    assert!(c.undelivered.is_empty());
    assert_eq!(report.undelivered(), 10);
    assert_eq!(producer.stopped().await, StopReason::Shutdown);
    assert_eq!(consumer.stopped().await, StopReason::Shutdown);
}

/// A consumer in manual demand that never asks.
struct Manual(mpsc::UnboundedSender<u64>);

impl weir_gen_stage::Consumer for Manual {
    type Messages = ();
    type Event = u64;

    async fn handle_subscribe(
        &mut self,
        _subscription: weir_gen_stage::Subscription,
        _options: &SubscribeOptions<u64>,
        _ctx: &mut weir_gen_stage::ConsumerContext<'_, Self>,
    ) -> Result<weir_gen_stage::ConsumerDemand, StopReason> {
        Ok(weir_gen_stage::ConsumerDemand::Manual)
    }

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: weir_gen_stage::Subscription,
        _ctx: &mut weir_gen_stage::ConsumerContext<'_, Self>,
    ) -> Noreply {
        for event in events {
            let _ = self.0.send(event);
        }
        Noreply::none()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn buffered_events_reach_the_consumers_before_the_producer_stops() {
    let log: Log = Arc::default();
    let producer =
        weir_gen_stage::start_producer_with(Numbers::new(0, 0, false, log.clone()), unbounded())
            .await
            .expect("producer");
    let (seen, mut received) = mpsc::unbounded_channel::<u64>();
    let consumer = weir_gen_stage::start_consumer(Manual(seen))
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    // 25 events in the buffer, none asked for yet.
    producer.cast(25).expect("alive");
    let drain = tokio::spawn(Drain::new(DEADLINE).stage(&producer).stage(&consumer).run());
    // The producer is draining: it waits for demand to send its buffer.
    consumer.ask_and_wait(sub, 25).await.expect("asked");
    let report = drain.await.expect("the drain");
    assert!(report.is_complete(), "{report:#?}");
    assert_eq!(report.stages[0].id, producer.id());
    assert_eq!(report.stages[0].dispatched, 25);
    assert_eq!(report.stages[1].handled, 25);
    let mut got = Vec::new();
    while let Ok(event) = received.try_recv() {
        got.push(event);
    }
    assert_eq!(got, take(&log));
}

#[tokio::test(flavor = "current_thread")]
async fn producers_outside_the_set_are_cancelled_and_keep_running() {
    let log: Log = Arc::default();
    let outside = weir_gen_stage::start_producer(Numbers::new(0, 0, false, log))
        .await
        .expect("producer");
    let (seen, mut received) = mpsc::unbounded_channel::<u64>();
    let consumer = weir_gen_stage::for_each(move |e: u64| {
        let _ = seen.send(e);
    })
    .await
    .expect("consumer");
    consumer
        .subscribe(
            &outside,
            SubscribeOptions::new()
                .max_demand(5)
                .cancel(CancelMode::Permanent),
        )
        .await
        .expect("accepted");
    assert!(received.recv().await.is_some());

    let report = Drain::new(DEADLINE).stage(&consumer).run().await;
    assert!(report.is_complete(), "{report:#?}");
    assert_eq!(consumer.stopped().await, StopReason::Shutdown);
    assert!(outside.is_alive());
    let status = outside.status().await.expect("running");
    assert!(status.consumers.is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn a_stage_already_stopped_is_reported_as_such() {
    let numbers = weir_gen_stage::from_iter(0..3u32).await.expect("producer");
    let consumer = weir_gen_stage::for_each(|_: u32| {})
        .await
        .expect("consumer");
    consumer
        .subscribe(&numbers, SubscribeOptions::new())
        .await
        .expect("accepted");
    // The producer runs out, and the permanent subscription stops the
    // consumer with it.
    assert_eq!(consumer.stopped().await, StopReason::Normal);
    let report = Drain::new(DEADLINE)
        .stage(&numbers)
        .stage(&consumer)
        .run()
        .await;
    assert!(report.is_complete());
    for stage in &report.stages {
        assert_eq!(
            stage.outcome,
            DrainOutcome::AlreadyStopped(StopReason::Normal)
        );
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_consumer_supervisor_drains_once_its_children_have_finished() {
    let numbers = weir_gen_stage::from_iter(0..u64::MAX)
        .await
        .expect("producer");
    let finished = Arc::new(Mutex::new(Vec::new()));
    let (started, mut running) = mpsc::unbounded_channel();
    let done = finished.clone();
    let supervisor = ConsumerSupervisor::new(move |n: u64| {
        let started = started.clone();
        let done = done.clone();
        async move {
            let _ = started.send(n);
            // Children take a while (virtual time: the runtime's clock is
            // paused and jumps ahead when everything waits).
            tokio::time::sleep(Duration::from_secs(10)).await;
            done.lock().unwrap_or_else(|p| p.into_inner()).push(n);
            Ok::<(), std::convert::Infallible>(())
        }
    })
    .subscribe_to(&numbers, SubscribeOptions::new().max_demand(4))
    .start()
    .await
    .expect("supervisor");
    for _ in 0..4 {
        running.recv().await;
    }

    let report = Drain::new(DEADLINE)
        .stage(&numbers)
        .stage(&supervisor)
        .run()
        .await;
    assert!(report.is_complete(), "{report:#?}");
    let s = report
        .stage(supervisor.id())
        .expect("the supervisor's report");
    assert_eq!(s.outcome, DrainOutcome::Drained);
    // Every child the supervisor started finished: none was aborted.
    let mut started_children = Vec::new();
    while let Ok(n) = running.try_recv() {
        started_children.push(n);
    }
    let finished = finished.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(finished.len() >= 4);
    assert_eq!(finished.len(), 4 + started_children.len());
}

#[tokio::test(flavor = "current_thread")]
async fn a_producer_consumer_flushes_what_it_emitted_beyond_demand() {
    let numbers = weir_gen_stage::from_iter(0..u64::MAX)
        .await
        .expect("producer");
    // One event in, ten out: most wait in the producer_consumer's buffer.
    let tenfold = weir_gen_stage::flat_map(expand(10))
        .await
        .expect("flat_map");
    tenfold
        .subscribe(&numbers, SubscribeOptions::new().max_demand(2))
        .await
        .expect("accepted");
    let (seen, mut received) = mpsc::unbounded_channel::<u64>();
    let sink = weir_gen_stage::for_each(move |e: u64| {
        let _ = seen.send(e);
    })
    .await
    .expect("consumer");
    sink.subscribe(&tenfold, SubscribeOptions::new().max_demand(3))
        .await
        .expect("accepted");
    let first = received.recv().await.expect("an event");

    let report = Drain::new(DEADLINE)
        .stage(&numbers)
        .stage(&tenfold)
        .stage(&sink)
        .run()
        .await;
    assert!(report.is_complete(), "{report:#?}");
    let order: Vec<StageId> = report.stages.iter().map(|s| s.id).collect();
    assert_eq!(order, [numbers.id(), tenfold.id(), sink.id()]);
    let mut got = vec![first];
    while let Ok(event) = received.try_recv() {
        got.push(event);
    }
    // Whole groups of ten: every input the producer_consumer took was
    // expanded and delivered in full.
    assert_eq!(got.len() % 10, 0);
    got.sort_unstable();
    let inputs = got.len() as u64 / 10;
    assert_eq!(got, (0..inputs).flat_map(expand(10)).collect::<Vec<_>>());
}
