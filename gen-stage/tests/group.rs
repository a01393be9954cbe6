//! Stages in a `StageGroup` behave as stages on their own tasks: same
//! protocol, same stop reasons, a panic stops only its stage; the group
//! shares its worker with other tasks and refuses stages once its runtime
//! is gone.

use crate::harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use harness::{Counter, Doubler, Note, Recorder, consumed, next_matching, notes};
use tokio::sync::mpsc;
use weir_gen_stage::{
    CancelMode, Cancellation, Consumer, ConsumerContext, DemandMode, Error, FromIterOptions,
    Noreply, PartitionDispatcher, Producer, ProducerContext, ProducerOptions, StageGroup,
    StopReason, SubscribeOptions, Subscription,
};

/// Emits `0..end` as demanded, then stops normally once it has emitted
/// everything (its permanent consumers stop with it).
struct Numbers {
    next: u64,
    end: u64,
    options: Option<ProducerOptions<u64>>,
}

impl Numbers {
    fn new(end: u64) -> Self {
        Numbers {
            next: 0,
            end,
            options: None,
        }
    }
}

impl Producer for Numbers {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let end = self.next.saturating_add(demand as u64).min(self.end);
        let events = (self.next..end).collect();
        self.next = end;
        Noreply::Emit(events)
    }
}

/// Forwards every event it receives, in order, and reports when it has
/// seen `expect` of them.
struct Collect {
    expect: usize,
    seen: Vec<u64>,
    done: mpsc::UnboundedSender<Vec<u64>>,
    /// Read when the last event arrives (see the fairness test).
    ticks: Option<(Arc<AtomicU64>, mpsc::UnboundedSender<u64>)>,
}

impl Collect {
    fn new(expect: usize) -> (Self, mpsc::UnboundedReceiver<Vec<u64>>) {
        let (done, rx) = mpsc::unbounded_channel();
        let collect = Collect {
            expect,
            seen: Vec::with_capacity(expect),
            done,
            ticks: None,
        };
        (collect, rx)
    }
}

impl Consumer for Collect {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.seen.extend(events);
        if self.seen.len() >= self.expect {
            if let Some((ticks, report)) = &self.ticks {
                let _ = report.send(ticks.load(Ordering::SeqCst));
            }
            let _ = self.done.send(std::mem::take(&mut self.seen));
        }
        Noreply::none()
    }
}

async fn collected(rx: &mut mpsc::UnboundedReceiver<Vec<u64>>) -> Vec<u64> {
    tokio::time::timeout(harness::TIMEOUT, rx.recv())
        .await
        .expect("the consumer saw every event in time")
        .expect("the consumer reports")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_chain_delivers_every_event_in_order_on_a_multi_thread_runtime() {
    let group = StageGroup::new();
    let (notify, _seen) = notes();
    let producer = group
        .start_producer(Numbers::new(20_000))
        .await
        .expect("producer");
    let doubler = group
        .start_producer_consumer(Doubler { notify })
        .await
        .expect("producer_consumer");
    doubler
        .subscribe(&producer, SubscribeOptions::new().max_demand(3))
        .await
        .expect("accepted");
    let (collect, mut done) = Collect::new(20_000);
    let consumer = group.start_consumer(collect).await.expect("consumer");
    consumer
        .subscribe(
            &doubler,
            SubscribeOptions::new().max_demand(2).min_demand(1),
        )
        .await
        .expect("accepted");
    let got = collected(&mut done).await;
    assert_eq!(got, (0..20_000).map(|n| n * 2).collect::<Vec<_>>());
}

#[tokio::test(flavor = "current_thread")]
async fn grouped_and_ungrouped_stages_subscribe_to_each_other() {
    let group = StageGroup::new();
    // Producer outside, consumer inside.
    let outside = weir_gen_stage::start_producer(Numbers::new(50))
        .await
        .expect("producer");
    let (collect, mut done) = Collect::new(50);
    let inside = group.start_consumer(collect).await.expect("consumer");
    inside
        .subscribe(&outside, SubscribeOptions::new().max_demand(4))
        .await
        .expect("accepted");
    assert_eq!(collected(&mut done).await, (0..50).collect::<Vec<_>>());

    // Producer inside, consumer outside.
    let grouped = group
        .start_producer(Numbers::new(30))
        .await
        .expect("producer");
    let (collect, mut done) = Collect::new(30);
    let ungrouped = weir_gen_stage::start_consumer(collect)
        .await
        .expect("consumer");
    ungrouped
        .subscribe(&grouped, SubscribeOptions::new().max_demand(7))
        .await
        .expect("accepted");
    assert_eq!(collected(&mut done).await, (0..30).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_producer_in_a_group_feeds_each_partition_its_events() {
    let group = StageGroup::new();
    let producer = group
        .start_producer(Numbers {
            options: Some(ProducerOptions::new().dispatcher(PartitionDispatcher::new(2))),
            ..Numbers::new(1_000)
        })
        .await
        .expect("producer");
    let mut partitions = Vec::new();
    for partition in 0..2usize {
        let (notify, seen) = notes();
        let consumer = group
            .start_consumer(Recorder::new(notify))
            .await
            .expect("consumer");
        consumer
            .subscribe(
                &producer,
                SubscribeOptions::new().max_demand(10).partition(partition),
            )
            .await
            .expect("accepted");
        partitions.push((seen, Vec::new()));
    }
    let total =
        |partitions: &[(_, Vec<u64>)]| partitions.iter().map(|(_, got)| got.len()).sum::<usize>();
    while total(&partitions) < 1_000 {
        let [(first, got_first), (second, got_second)] = &mut partitions[..] else {
            unreachable!("two partitions");
        };
        tokio::select! {
            events = consumed(first) => got_first.extend(events),
            events = consumed(second) => got_second.extend(events),
        }
    }
    let mut all = Vec::new();
    for (_, got) in partitions {
        assert!(!got.is_empty(), "both partitions get events");
        assert!(
            got.windows(2).all(|pair| pair[0] < pair[1]),
            "a partition's events arrive in order"
        );
        all.extend(got);
    }
    all.sort_unstable();
    assert_eq!(all, (0..1_000).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_from_an_iterator_runs_in_a_group_and_stops_when_exhausted() {
    let group = StageGroup::new();
    let producer = weir_gen_stage::from_iter_with(0..100u64, FromIterOptions::new().group(&group))
        .await
        .expect("producer");
    let (collect, mut done) = Collect::new(100);
    let consumer = group.start_consumer(collect).await.expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new().max_demand(8))
        .await
        .expect("accepted");
    assert_eq!(collected(&mut done).await, (0..100).collect::<Vec<_>>());
    assert_eq!(producer.stopped().await, StopReason::Normal);
}

#[tokio::test(flavor = "current_thread")]
async fn a_panic_stops_only_its_stage_and_the_group_keeps_running() {
    let group = StageGroup::new();
    let (notify, mut seen) = notes();
    let producer = group
        .start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let crashing = group
        .start_consumer(Recorder::new(notify.clone()).panicking())
        .await
        .expect("consumer");
    crashing
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    let reason = StopReason::Panicked("handle_events was asked to panic".to_owned());
    assert_eq!(crashing.stopped().await, reason);
    assert_eq!(
        next_matching(&mut seen, |note| match note {
            Note::ProducerCancelled(_, cancellation) => Some(cancellation),
            _ => None,
        })
        .await,
        Cancellation::Down(reason)
    );
    assert!(producer.is_alive());

    // A new consumer in the same group is served by the same producer.
    let healthy = group
        .start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    healthy
        .subscribe(&producer, SubscribeOptions::new().max_demand(2))
        .await
        .expect("accepted");
    let events = consumed(&mut seen).await;
    assert!(!events.is_empty(), "the healthy consumer gets events");
}

/// A producer whose `init` refuses to start.
struct Refuses;

impl Producer for Refuses {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        Err(StopReason::Custom("not today".to_owned()))
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::none()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_stage_that_fails_to_start_leaves_the_group_usable() {
    let group = StageGroup::new();
    let error = group
        .start_producer(Refuses)
        .await
        .expect_err("init refuses");
    assert!(
        matches!(
            &error,
            Error::InitFailed { reason: StopReason::Custom(why), .. } if why == "not today"
        ),
        "{error:?}"
    );
    let producer = group
        .start_producer(Numbers::new(5))
        .await
        .expect("producer");
    let (collect, mut done) = Collect::new(5);
    let consumer = group.start_consumer(collect).await.expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    assert_eq!(collected(&mut done).await, vec![0, 1, 2, 3, 4]);
}

#[test]
fn starting_outside_a_runtime_is_refused() {
    let group = StageGroup::new();
    let started = futures::executor::block_on(group.start_producer(Numbers::new(1)));
    assert_eq!(started.err(), Some(Error::NoRuntime));
}

#[test]
fn a_group_whose_runtime_shut_down_refuses_new_stages_and_its_stages_are_dead() {
    let group = StageGroup::new();
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let producer = first
        .block_on(group.start_producer(Numbers::new(1)))
        .expect("producer");
    assert!(producer.is_alive());
    drop(first);
    assert!(!producer.is_alive(), "the group's stages went with it");

    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let started = second.block_on(group.start_producer(Numbers::new(1)));
    assert_eq!(started.err(), Some(Error::GroupClosed));
}

#[tokio::test(flavor = "current_thread")]
async fn a_busy_group_yields_its_worker_to_other_tasks() {
    const EVENTS: u64 = 20_000;
    let group = StageGroup::new();
    let producer = group
        .start_producer(Numbers {
            options: Some(ProducerOptions::new().demand(DemandMode::Accumulate)),
            ..Numbers::new(EVENTS)
        })
        .await
        .expect("producer");
    let ticks = Arc::new(AtomicU64::new(0));
    let (report, mut reported) = mpsc::unbounded_channel();
    let (mut collect, mut done) = Collect::new(EVENTS as usize);
    collect.ticks = Some((ticks.clone(), report));
    let consumer = group.start_consumer(collect).await.expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new().max_demand(1))
        .await
        .expect("accepted");

    // Another task on the same (only) worker, counting its turns.
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = tokio::spawn({
        let (ticks, stop) = (ticks.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                ticks.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        }
    });
    tokio::task::yield_now().await;
    let before = ticks.load(Ordering::SeqCst);
    // Release the demand: from here on the group always has work, one
    // event per round trip, until the consumer has all of them.
    producer
        .producer()
        .async_set_demand_mode(DemandMode::Forward)
        .expect("alive");
    assert_eq!(collected(&mut done).await.len(), EVENTS as usize);
    let at_the_end = reported.recv().await.expect("the consumer reports");
    stop.store(true, Ordering::SeqCst);
    ticker.await.expect("the ticker ends");
    assert!(
        at_the_end > before,
        "the ticker never ran while the group was busy ({before} ticks before, {at_the_end} at the end)"
    );
}

/// Runs one action inside `handle_events` (on its first events), reports
/// what it gave, then stops normally.
struct Acts<T> {
    action: Option<BoxFuture<'static, T>>,
    report: mpsc::UnboundedSender<T>,
}

impl<T: Send + 'static> Consumer for Acts<T> {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        _events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        if let Some(action) = self.action.take() {
            let _ = self.report.send(action.await);
        }
        Noreply::Stop(StopReason::Normal)
    }
}

/// Starts a producer and an [`Acts`] consumer in `group`, the consumer
/// subscribed (temporary) to the producer; returns what the action gave,
/// once the consumer has stopped normally and the producer is still alive.
async fn acted<T: Send + 'static>(
    group: &StageGroup,
    action: impl FnOnce(weir_gen_stage::ProducerRef<u64>) -> BoxFuture<'static, T>,
) -> T {
    let producer = group
        .start_producer(Numbers::new(10))
        .await
        .expect("producer");
    let (report, mut reported) = mpsc::unbounded_channel();
    let consumer = group
        .start_consumer(Acts {
            action: Some(action(producer.producer())),
            report,
        })
        .await
        .expect("consumer");
    consumer
        .subscribe(
            &producer,
            SubscribeOptions::new()
                .max_demand(4)
                .cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    let acted = tokio::time::timeout(harness::TIMEOUT, reported.recv())
        .await
        .expect("the action ended in time")
        .expect("the consumer reports");
    assert_eq!(consumer.stopped().await, StopReason::Normal);
    assert!(producer.is_alive());
    acted
}

#[tokio::test(flavor = "current_thread")]
async fn a_stage_awaits_a_reply_from_a_sibling_in_its_group() {
    // The group must keep polling the producer while the consumer awaits it.
    let group = StageGroup::new();
    let answer = acted(&group, |producer| {
        async move { producer.estimate_buffered_count().await }.boxed()
    })
    .await;
    assert_eq!(answer, Ok(0));
}

#[test]
fn a_group_handle_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<StageGroup>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_starts_a_sibling_in_its_own_group() {
    let group = StageGroup::new();
    let sibling_group = group.clone();
    let started = acted(&group, move |_| {
        async move {
            sibling_group
                .start_producer(Numbers::new(1))
                .await
                .map(|sibling| sibling.is_alive())
        }
        .boxed()
    })
    .await;
    assert_eq!(started, Ok(true));
}

/// Runs `f` on a thread of its own and fails the test if it has not
/// returned within [`harness::TIMEOUT`] (a hang would otherwise hang the
/// test run).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(harness::TIMEOUT)
        .unwrap_or_else(|_| panic!("{what} did not return within {:?}", harness::TIMEOUT))
}

#[test]
fn starting_a_group_on_a_runtime_that_shut_down_fails_instead_of_hanging() {
    let started = within("a start on a shut-down runtime", || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let handle = runtime.handle().clone();
        drop(runtime);
        let group = StageGroup::new();
        let first = handle.block_on(group.start_producer(Numbers::new(1)));
        let second = handle.block_on(group.start_producer(Numbers::new(1)));
        (first.err(), second.err())
    });
    assert!(
        matches!(started.0, Some(Error::InitFailed { .. })),
        "{started:?}"
    );
    assert_eq!(started.1, Some(Error::GroupClosed));
}

/// A future that wakes itself and stays pending until `flag` is set,
/// without spending tokio's cooperative budget.
struct SpinUntil(Arc<AtomicBool>);

impl std::future::Future for SpinUntil {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0.load(Ordering::SeqCst) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[test]
fn a_stage_that_wakes_itself_without_budget_still_lets_other_tasks_run() {
    within("a spinning stage", || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let group = StageGroup::new();
            acted(&group, |_| {
                async move {
                    // Only the task spawned here sets the flag: it runs
                    // only if the group yields the (single) worker.
                    let flag = Arc::new(AtomicBool::new(false));
                    let setter = flag.clone();
                    tokio::spawn(async move { setter.store(true, Ordering::SeqCst) });
                    SpinUntil(flag).await;
                }
                .boxed()
            })
            .await;
        });
    });
}

#[tokio::test(flavor = "current_thread")]
async fn the_group_task_ends_once_its_stages_stopped_and_its_handles_are_gone() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let group = StageGroup::new();
    let producer = weir_gen_stage::from_iter_with(0..10u64, FromIterOptions::new().group(&group))
        .await
        .expect("producer");
    let (collect, mut done) = Collect::new(10);
    let consumer = group.start_consumer(collect).await.expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    assert_eq!(collected(&mut done).await.len(), 10);
    assert_eq!(
        metrics.num_alive_tasks(),
        before + 1,
        "one task for the group"
    );

    // The producer stops when exhausted and its permanent consumer with it;
    // with the last handle gone the group has nothing left to run.
    assert_eq!(consumer.stopped().await, StopReason::Normal);
    drop(group);
    let ended = tokio::time::timeout(harness::TIMEOUT, async {
        while metrics.num_alive_tasks() > before {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(ended.is_ok(), "the group task is still alive");
}
