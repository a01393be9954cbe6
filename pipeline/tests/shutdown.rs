//! Shutdown as Broadway's: a drain stops the producers taking new messages,
//! and every message already pushed or buffered is handled and acked by
//! the handlers; only a deadline that passed leaves messages unhandled, and
//! the drain's report says so. A stopped pipeline takes no new messages.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_pipeline::{Acknowledger, Batcher, Error, Message, Pipeline, Status};

/// Every ack, as (data, status).
#[derive(Default)]
struct Acks(Mutex<Vec<(u32, Status)>>);

impl Acks {
    fn acknowledger(self: &Arc<Self>) -> Arc<dyn Acknowledger<u32>> {
        let acks = self.clone();
        Arc::new(move |ok: Vec<Message<u32>>, failed: Vec<Message<u32>>| {
            let mut acks = acks.0.lock().expect("no panic while locked");
            for message in ok.into_iter().chain(failed) {
                acks.push((message.data, message.status().clone()));
            }
        })
    }

    fn sorted(&self) -> Vec<(u32, Status)> {
        let mut acks = self.0.lock().expect("no panic while locked").clone();
        acks.sort_by_key(|(data, _)| *data);
        acks
    }
}

fn messages(data: impl IntoIterator<Item = u32>, acks: &Arc<Acks>) -> Vec<Message<u32>> {
    let acknowledger = acks.acknowledger();
    data.into_iter()
        .map(|data| Message::new(data, acknowledger.clone()))
        .collect()
}

fn all_ok(data: impl IntoIterator<Item = u32>) -> Vec<(u32, Status)> {
    data.into_iter().map(|data| (data, Status::Ok)).collect()
}

on_both_runtimes! {
    /// Broadway's "shutting down broadway waits until all events are
    /// processed": four messages pushed, a processor asking two at a time,
    /// and a drain at once: all four are handled and acked successful.
    async fn a_drain_handles_every_message_already_pushed() -> Result<(), Error> {
        let acks = Arc::new(Acks::default());
        let handled = Arc::new(AtomicUsize::new(0));
        let count = handled.clone();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(1, move |_: &mut Message<u32>| {
                count.fetch_add(1, Ordering::SeqCst);
            })
            .processor_max_demand(2)
            .start()
            .await?;
        pipeline.push_messages(messages(1..=4, &acks))?;
        let report = pipeline.drain(Duration::from_secs(10)).await;
        assert!(report.is_complete(), "{report:?}");
        assert_eq!(acks.sorted(), all_ok(1..=4));
        assert_eq!(handled.load(Ordering::SeqCst), 4);
        Ok(())
    }

    /// The same through batchers: what the producer still held reaches the
    /// batcher, whose partial batch is flushed and acked successful.
    async fn a_drain_batches_every_message_already_pushed() -> Result<(), Error> {
        let acks = Arc::new(Acks::default());
        let batched = Arc::new(AtomicUsize::new(0));
        let count = batched.clone();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(2, |_: &mut Message<u32>| {})
            .processor_max_demand(2)
            .batcher(
                Batcher::new("default", move |batch: &mut [Message<u32>], _| {
                    count.fetch_add(batch.len(), Ordering::SeqCst);
                })
                .batch_size(1000)
                .batch_timeout(Duration::from_secs(3600)),
            )
            .start()
            .await?;
        pipeline.push_messages(messages(0..100, &acks))?;
        let report = pipeline.drain(Duration::from_secs(10)).await;
        assert!(report.is_complete(), "{report:?}");
        assert_eq!(acks.sorted(), all_ok(0..100));
        assert_eq!(batched.load(Ordering::SeqCst), 100);
        Ok(())
    }

    /// `test_batch` then an immediate drain: every message is acked
    /// successful and the future resolves.
    async fn test_batch_then_an_immediate_drain_acks_all_successful() -> Result<(), Error> {
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(1, |message: &mut Message<u32>| message.data += 1)
            .processor_max_demand(1)
            .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size(3))
            .start()
            .await?;
        let acked = pipeline.test_batch((0..10).collect());
        let report = pipeline.drain(Duration::from_secs(10)).await;
        assert!(report.is_complete(), "{report:?}");
        let mut acked = acked.await?;
        acked.sort_by_key(|m| m.data);
        assert!(acked.iter().all(Message::is_ok), "{acked:?}");
        assert_eq!(acked.iter().map(|m| m.data).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
        Ok(())
    }

    /// Once a drain began, the producers take no new messages: pushing is
    /// an error, and the messages are acked failed (nothing is lost).
    async fn pushing_into_a_drained_pipeline_is_an_error_and_acks_failed() -> Result<(), Error> {
        let acks = Arc::new(Acks::default());
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(1, |_: &mut Message<u32>| {})
            .start()
            .await?;
        assert!(pipeline.drain(Duration::from_secs(5)).await.is_complete());
        let pushed = pipeline.push_messages(messages([7], &acks));
        assert!(matches!(pushed, Err(Error::NotRunning)), "{pushed:?}");
        let acked = acks.sorted();
        assert_eq!(acked.len(), 1);
        assert!(
            matches!(&acked[0].1, Status::Failed(reason) if reason.contains("not running")),
            "{acked:?}"
        );
        match pipeline.test_message(8).await {
            Err(Error::NotRunning) => {}
            other => panic!("test_message on a stopped pipeline: {other:?}"),
        }
        Ok(())
    }
}

/// Pushing into a pipeline whose drain has finished is an error every time,
/// on either runtime (no push is accepted and then never acked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_messages_after_the_pipeline_stopped_is_always_an_error() -> Result<(), Error> {
    for round in 0..200u32 {
        let acks = Arc::new(Acks::default());
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(2, |_: &mut Message<u32>| {})
            .start()
            .await?;
        pipeline.push_messages(messages([round], &acks))?;
        assert!(pipeline.drain(Duration::from_secs(5)).await.is_complete());
        let pushed = pipeline.push_messages(messages([round + 1], &acks));
        assert!(
            matches!(pushed, Err(Error::NotRunning)),
            "round {round}: {pushed:?}"
        );
        assert_eq!(
            acks.sorted(),
            [
                (round, Status::Ok),
                (
                    round + 1,
                    Status::Failed("the pipeline is not running: it takes no new messages".into())
                )
            ],
            "round {round}"
        );
    }
    Ok(())
}

/// Pushes racing a drain: each is accepted and then handled, or refused
/// and acked failed; none is acked twice or never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_racing_a_drain_are_each_acked_exactly_once() -> Result<(), Error> {
    for _ in 0..50 {
        let acks = Arc::new(Acks::default());
        let pipeline = Arc::new(
            Pipeline::builder()
                .test_producer()
                .processors(2, |_: &mut Message<u32>| {})
                .processor_max_demand(3)
                .start()
                .await?,
        );
        let pusher = {
            let (pipeline, acks) = (pipeline.clone(), acks.clone());
            tokio::spawn(async move {
                let mut accepted = Vec::new();
                for n in 0..100u32 {
                    if pipeline.push_messages(messages([n], &acks)).is_ok() {
                        accepted.push(n);
                    }
                    tokio::task::yield_now().await;
                }
                accepted
            })
        };
        tokio::task::yield_now().await;
        assert!(pipeline.drain(Duration::from_secs(5)).await.is_complete());
        let accepted = pusher.await.expect("the pusher does not panic");
        let acked = acks.sorted();
        assert_eq!(acked.len(), 100, "{acked:?}");
        for (n, status) in acked {
            assert_eq!(
                status.eq(&Status::Ok),
                accepted.contains(&n),
                "{n}: {status:?}"
            );
        }
    }
    Ok(())
}

/// A deadline that passes stops the stages where they are, and the report
/// says so: the messages the stages still held (the test producer's
/// buffer, mailboxes) are counted as undelivered and acked failed, a
/// partial batch is acked failed with why, and every message is acked
/// exactly once (a message inside a handler when the deadline passed that
/// finds its next stage stopped comes back to its stage, which acks it
/// failed). Multi-thread only: on one thread the blocked handler would hold
/// the drain's clock too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_deadline_is_reported() -> Result<(), Error> {
    let acks = Arc::new(Acks::default());
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |message: &mut Message<u32>| {
            // The first message holds the processor past the deadline.
            if message.data == 0 {
                std::thread::sleep(Duration::from_millis(300));
            }
        })
        .processor_max_demand(1)
        .batcher(
            Batcher::new("default", |_: &mut [Message<u32>], _| {})
                .batch_size(1000)
                .batch_timeout(Duration::from_secs(3600)),
        )
        .start()
        .await?;
    pipeline.push_messages(messages(0..20, &acks))?;
    let report = pipeline.drain(Duration::from_millis(50)).await;
    assert!(report.deadline_passed, "{report:?}");
    assert!(!report.is_complete());
    pipeline.stopped().await;
    let acked = acks.sorted();
    assert_eq!(
        acked.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        (0..20).collect::<Vec<_>>(),
        "{report:?}"
    );
    assert!(report.undelivered() >= 19, "{report:?}");
    for (_, status) in &acked {
        if let Status::Failed(reason) = status {
            assert!(
                reason.contains("deadline") || reason.contains("stopped (shutdown)"),
                "{reason}"
            );
        }
    }
    Ok(())
}
