//! Graceful shutdown: `drain` flushes partial batches and acks everything
//! in flight; a pipeline whose producers finish drains itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_pipeline::{BatchTrigger, Batcher, Error, Message, Pipeline};

#[tokio::test(start_paused = true)]
async fn drain_flushes_a_partial_batch_and_acks_it() -> Result<(), Error> {
    let triggers = Arc::new(Mutex::new(Vec::new()));
    let record = triggers.clone();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(
            Batcher::new("default", move |_: &mut [Message<u32>], info| {
                if let Ok(mut triggers) = record.lock() {
                    triggers.push(info.trigger);
                }
            })
            .batch_size(100)
            .batch_timeout(Duration::from_secs(3600)),
        )
        .start()
        .await?;
    let acked = tokio::spawn(pipeline.test_batch(vec![1, 2, 3]));
    // Let the messages reach the batcher (the clock does not move: the
    // timeout is an hour away).
    tokio::task::yield_now().await;
    let report = pipeline.drain(Duration::from_secs(10)).await;
    assert!(report.is_complete(), "{report:?}");
    assert!(!report.deadline_passed);
    let acked = acked.await.map_err(|_| Error::NoTestProducer)??;
    assert_eq!(acked.len(), 3);
    // Pushed before the drain: delivered (the producer had demand for them)
    // and handled, or acked failed by the producer if it never sent them.
    assert!(acked.iter().all(Message::is_ok), "{acked:?}");
    assert_eq!(*triggers.lock().expect("lock"), [BatchTrigger::Flush]);
    pipeline.stopped().await;
    assert!(pipeline.stages().iter().all(|stage| !stage.is_alive()));
    Ok(())
}

/// An endless source: every message it makes is counted, and every ack
/// recorded by number.
struct Ledger {
    made: AtomicU64,
    acked: Mutex<HashMap<u64, usize>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_acks_every_message_produced_exactly_once() -> Result<(), Error> {
    let ledger = Arc::new(Ledger {
        made: AtomicU64::new(0),
        acked: Mutex::new(HashMap::new()),
    });
    let counting = ledger.clone();
    let numbers = weir_gen_stage::from_iter(std::iter::from_fn(move || {
        Some(counting.made.fetch_add(1, Ordering::SeqCst))
    }))
    .await?;
    let record = ledger.clone();
    let acknowledger = Arc::new(move |ok: Vec<Message<u64>>, failed: Vec<Message<u64>>| {
        if let Ok(mut acked) = record.acked.lock() {
            for message in ok.into_iter().chain(failed) {
                *acked.entry(message.data).or_default() += 1;
            }
        }
    });
    let (first, mut started) = tokio::sync::mpsc::unbounded_channel();
    let pipeline = Pipeline::builder()
        .producer_of(&numbers, acknowledger)
        .processors(2, |message: &mut Message<u64>| {
            if message.data.is_multiple_of(5) {
                message.fail("multiple of 5");
            }
            assert!(!message.data.is_multiple_of(11), "multiple of 11");
        })
        .batcher(
            Batcher::new("default", move |messages: &mut [Message<u64>], _| {
                let _ = first.send(messages.len());
            })
            .batch_size(64)
            .batch_timeout(Duration::from_secs(3600))
            .concurrency(2),
        )
        .start()
        .await?;
    // Some batches were handled: the pipeline is busy.
    for _ in 0..3 {
        started.recv().await;
    }
    let report = pipeline.drain(Duration::from_secs(30)).await;
    assert!(report.is_complete(), "{report:?}");
    let made = ledger.made.load(Ordering::SeqCst);
    let acked = ledger.acked.lock().expect("lock");
    assert!(made > 0);
    assert_eq!(acked.len() as u64, made, "every message made was acked");
    assert!(acked.values().all(|&times| times == 1), "none twice");
    Ok(())
}

#[tokio::test]
async fn a_finished_producer_drains_the_pipeline_flushing_the_last_partial_batch()
-> Result<(), Error> {
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let record = sizes.clone();
    let numbers = weir_gen_stage::from_iter(
        (0..2500u32).map(|n| Message::new(n, Arc::new(weir_pipeline::NoopAcknowledger))),
    )
    .await?;
    let pipeline = Pipeline::builder()
        .producer(&numbers)
        .processors(2, |_: &mut Message<u32>| {})
        .batcher(
            Batcher::new("default", move |messages: &mut [Message<u32>], info| {
                if let Ok(mut sizes) = record.lock() {
                    sizes.push((messages.len(), info.trigger));
                }
            })
            .batch_size(1000)
            .batch_timeout(Duration::from_secs(3600)),
        )
        .start()
        .await?;
    pipeline.stopped().await;
    let sizes = sizes.lock().expect("lock").clone();
    assert_eq!(sizes.iter().map(|(n, _)| n).sum::<usize>(), 2500);
    assert_eq!(
        sizes[..2],
        [(1000, BatchTrigger::Size), (1000, BatchTrigger::Size)]
    );
    assert_eq!(sizes[2], (500, BatchTrigger::Flush));
    Ok(())
}
