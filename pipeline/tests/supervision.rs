//! Supervision: a stage of the pipeline that stops abnormally is started
//! again (within `max_restarts` in `max_seconds`), what it held is acked
//! failed, and beyond the intensity the pipeline goes down, reported by
//! `exited`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_gen_stage::{AnyStage, Noreply, Producer, ProducerContext, StageId, StopReason};
use weir_pipeline::{Acknowledger, BatchMode, Batcher, Error, Message, Pipeline, Status};

const DEADLINE: Duration = Duration::from_secs(10);

/// Every ack, by message: how many times, and the last status.
type Acks = Arc<Mutex<BTreeMap<u64, (usize, Status)>>>;

fn recorder() -> (Acks, Arc<dyn Acknowledger<u64>>) {
    let acks: Acks = Arc::default();
    let record = acks.clone();
    let acknowledger = Arc::new(move |ok: Vec<Message<u64>>, failed: Vec<Message<u64>>| {
        let mut acks = record.lock().expect("no panic while locked");
        for message in ok.into_iter().chain(failed) {
            let entry = acks.entry(message.data).or_insert((0, Status::Ok));
            entry.0 += 1;
            entry.1 = message.status().clone();
        }
    });
    (acks, acknowledger)
}

fn stage(pipeline: &Pipeline<u64>, id: StageId) -> AnyStage {
    pipeline
        .stages()
        .into_iter()
        .find(|stage| stage.id() == id)
        .expect("the stage is the pipeline's")
}

fn batcher_id(pipeline: &Pipeline<u64>) -> StageId {
    pipeline.topology().batchers[0].stages[0]
}

fn processor_id(pipeline: &Pipeline<u64>, index: usize) -> StageId {
    pipeline.topology().processors.stages[index]
}

/// Wait until the topology shows a new stage in place of `old`.
async fn replaced(
    pipeline: &Pipeline<u64>,
    old: StageId,
    current: impl Fn(&Pipeline<u64>) -> StageId,
) -> StageId {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let now = current(pipeline);
            if now != old {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the stage is started again")
}

fn batching_pipeline(max_restarts: usize) -> weir_pipeline::PipelineBuilder<u64> {
    Pipeline::builder()
        .test_producer()
        .processors(2, |_: &mut Message<u64>| {})
        .batcher(
            Batcher::new("default", |_: &mut [Message<u64>], _| {})
                .batch_size(1000)
                .batch_timeout(Duration::from_secs(3600)),
        )
        .max_restarts(max_restarts)
}

/// Push `data` in bulk mode with `acknowledger`.
fn push(
    pipeline: &Pipeline<u64>,
    data: impl IntoIterator<Item = u64>,
    acknowledger: &Arc<dyn Acknowledger<u64>>,
) {
    let messages = data
        .into_iter()
        .map(|n| {
            let mut message = Message::new(n, acknowledger.clone());
            message.put_batch_mode(BatchMode::Bulk);
            message
        })
        .collect();
    pipeline.push_messages(messages).expect("pushed");
}

/// Wait until `count` messages have been acked.
async fn acked(acks: &Acks, count: usize) {
    tokio::time::timeout(DEADLINE, async {
        while acks.lock().expect("no panic while locked").len() < count {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every message is acked");
}

/// Wait until the batcher holds `count` messages in partial batches.
async fn buffered(pipeline: &Pipeline<u64>, count: usize) {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let held: usize = pipeline
                .metrics()
                .batchers("default")
                .map(|b| b.buffered)
                .sum();
            if held == count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the batcher holds the messages");
}

/// A finite producer (0..total) whose `handle_demand` panics once, on its
/// sixth call (once the pipeline runs), across every instance `make` builds.
struct Flaky {
    next: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
    crashed: Arc<AtomicBool>,
    total: u64,
    acknowledger: Arc<dyn Acknowledger<u64>>,
}

impl Producer for Flaky {
    type Messages = ();
    type Event = Message<u64>;

    async fn handle_demand(
        &mut self,
        demand: usize,
        _: &mut ProducerContext<'_, Self>,
    ) -> Noreply<Message<u64>> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 5
            && !self.crashed.swap(true, Ordering::SeqCst)
        {
            panic!("the producer's own code failed");
        }
        let start = self.next.load(Ordering::SeqCst);
        if start >= self.total {
            return Noreply::Stop(StopReason::Normal);
        }
        let end = (start + demand as u64).min(self.total);
        self.next.store(end, Ordering::SeqCst);
        Noreply::Emit(
            (start..end)
                .map(|n| Message::new(n, self.acknowledger.clone()))
                .collect(),
        )
    }
}

on_both_runtimes! {
    /// A batcher stopped with partial batches: its messages are acked
    /// failed, a new batcher takes its place, and messages go on through it.
    async fn a_stopped_batcher_fails_its_partial_batches_and_is_started_again() -> () {
        let pipeline = batching_pipeline(3).start().await.expect("started");
        let (acks, acknowledger) = recorder();
        push(&pipeline, 0..20, &acknowledger);
        buffered(&pipeline, 20).await;
        let old = batcher_id(&pipeline);
        stage(&pipeline, old).stop(StopReason::custom("the batcher's own code failed")).expect("running");
        acked(&acks, 20).await;
        for (n, (times, status)) in acks.lock().expect("no panic while locked").iter() {
            assert_eq!(*times, 1, "message {n} acked once");
            assert!(
                matches!(status, Status::Failed(reason) if reason.contains("the batcher stopped")),
                "message {n}: {status:?}"
            );
        }
        replaced(&pipeline, old, batcher_id).await;
        // The new batcher is subscribed to both processors and feeds the
        // batch processor.
        for n in 100..110 {
            let message = pipeline.test_message(n).await.expect("acked");
            assert_eq!(message.status(), &Status::Ok);
        }
        assert!(pipeline.drain(DEADLINE).await.is_complete());
        pipeline.exited().await.expect("drained, not down");
    }

    /// A processor stopped: a new one takes its place, subscribed to the
    /// producer and by the batcher; every message pushed afterwards is
    /// handled and acked once.
    async fn a_stopped_processor_is_started_again() -> () {
        let pipeline = batching_pipeline(3).start().await.expect("started");
        let old = processor_id(&pipeline, 1);
        stage(&pipeline, old).stop(StopReason::custom("crash")).expect("running");
        let new = replaced(&pipeline, old, |p| processor_id(p, 1)).await;
        assert_ne!(new, processor_id(&pipeline, 0));
        let acked = pipeline.test_batch((0..200).collect()).await.expect("acked");
        assert_eq!(acked.len(), 200);
        assert!(acked.iter().all(|m| m.status() == &Status::Ok));
        // Both processors handled messages.
        let metrics = pipeline.metrics();
        assert!(metrics.processors().all(|p| p.processed > 0), "{metrics:?}");
        assert!(pipeline.drain(DEADLINE).await.is_complete());
        pipeline.exited().await.expect("drained, not down");
    }

    /// Past the restart intensity the pipeline goes down: every stage
    /// stops, what they held is acked failed, `exited` says why, and
    /// pushes are refused.
    async fn too_many_restarts_take_the_pipeline_down() -> () {
        let pipeline = batching_pipeline(1).start().await.expect("started");
        let (acks, acknowledger) = recorder();
        push(&pipeline, 0..10, &acknowledger);
        buffered(&pipeline, 10).await;
        let old = processor_id(&pipeline, 0);
        stage(&pipeline, old).stop(StopReason::custom("first")).expect("running");
        let new = replaced(&pipeline, old, |p| processor_id(p, 0)).await;
        stage(&pipeline, new).stop(StopReason::custom("second")).expect("running");
        let exited = tokio::time::timeout(DEADLINE, pipeline.exited()).await.expect("the pipeline stops");
        match exited {
            Err(Error::TooManyRestarts { max_restarts, reason, .. }) => {
                assert_eq!(max_restarts, 1);
                assert_eq!(reason, "second");
            }
            other => panic!("expected TooManyRestarts, got {other:?}"),
        }
        assert!(pipeline.stages().iter().all(|stage| !stage.is_alive()));
        // The batcher's partial batch was acked failed when it stopped.
        acked(&acks, 10).await;
        assert!(acks.lock().expect("no panic while locked").values().all(|(times, status)| {
            *times == 1 && matches!(status, Status::Failed(_))
        }));
        assert!(matches!(pipeline.test_message(1).await, Err(Error::NotRunning)));
    }

    /// A producer of `producers` whose own code panics is made again with
    /// `make(index)` and goes on; every message is acked once, and the
    /// pipeline drains itself when the producer finishes.
    async fn a_producer_that_panics_is_made_again() -> () {
        let (acks, acknowledger) = recorder();
        let next = Arc::new(AtomicU64::new(0));
        let calls = Arc::new(AtomicU64::new(0));
        let crashed = Arc::new(AtomicBool::new(false));
        let made = Arc::new(AtomicU64::new(0));
        let count = made.clone();
        let seen = crashed.clone();
        let pipeline = Pipeline::builder()
            .producers(1, move |_| {
                count.fetch_add(1, Ordering::SeqCst);
                Flaky {
                    next: next.clone(),
                    calls: calls.clone(),
                    crashed: crashed.clone(),
                    total: 500,
                    acknowledger: acknowledger.clone(),
                }
            })
            .processors(2, |_: &mut Message<u64>| {})
            .start()
            .await
            .expect("started");
        tokio::time::timeout(DEADLINE, pipeline.exited())
            .await
            .expect("the pipeline finishes")
            .expect("drained, not down");
        assert!(seen.load(Ordering::SeqCst), "the producer panicked");
        assert_eq!(made.load(Ordering::SeqCst), 2, "made once more after the panic");
        let acks = acks.lock().expect("no panic while locked");
        assert_eq!(acks.len(), 500);
        assert!(acks.values().all(|(times, status)| *times == 1 && status == &Status::Ok));
    }
}
