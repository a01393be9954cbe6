//! Batches: handed over at `batch_size`, after `batch_timeout` (on tokio's
//! paused clock), apart by batch key, to the batcher each message names.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::future::Future;

use weir_pipeline::{BatchInfo, BatchMode, BatchTrigger, Batcher, Error, Message, Pipeline};

/// One message in bulk mode: its batch waits to fill or time out.
fn bulk_message(
    pipeline: &Pipeline<u32>,
    data: u32,
) -> impl Future<Output = Result<Message<u32>, Error>> + Send + 'static {
    let acked = pipeline.test_batch_with(vec![data], BatchMode::Bulk);
    async move {
        acked.await?.pop().ok_or(Error::NotAcked {
            acked: 0,
            expected: 1,
        })
    }
}

type Seen = Arc<Mutex<Vec<(BatchInfo, Vec<u32>)>>>;

/// A batcher named `name` that records each batch it is handed.
fn recording(name: &str, seen: &Seen) -> Batcher<u32> {
    let seen = seen.clone();
    Batcher::new(name, move |messages: &mut [Message<u32>], info| {
        let data = messages.iter().map(|m| m.data).collect();
        if let Ok(mut seen) = seen.lock() {
            seen.push((info.clone(), data));
        }
    })
}

fn batches(seen: &Seen) -> Vec<(BatchInfo, Vec<u32>)> {
    seen.lock().map(|s| s.clone()).unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn batch_size_3_hands_over_two_full_batches_of_six_messages() -> Result<(), Error> {
    let seen = Seen::default();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(
            recording("default", &seen)
                .batch_size(3)
                .batch_timeout(Duration::from_secs(3600)),
        )
        .start()
        .await?;
    let start = tokio::time::Instant::now();
    let acked = pipeline.test_batch((1..=6).collect()).await?;
    assert!(acked.iter().all(Message::is_ok));
    // Full batches do not wait for the timeout.
    assert!(start.elapsed() < Duration::from_secs(3600));
    let seen = batches(&seen);
    assert_eq!(seen.len(), 2);
    for (info, data) in &seen {
        assert_eq!((info.size, info.trigger), (3, BatchTrigger::Size));
        assert_eq!(data.len(), 3);
    }
    let mut all: Vec<u32> = seen.into_iter().flat_map(|(_, data)| data).collect();
    all.sort_unstable();
    assert_eq!(all, [1, 2, 3, 4, 5, 6]);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_partial_batch_is_handed_over_when_batch_timeout_passes() -> Result<(), Error> {
    let seen = Seen::default();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(
            recording("default", &seen)
                .batch_size(10)
                .batch_timeout(Duration::from_secs(5)),
        )
        .start()
        .await?;
    let start = tokio::time::Instant::now();
    let acked = pipeline
        .test_batch_with(vec![1, 2, 3], BatchMode::Bulk)
        .await?;
    assert_eq!(acked.len(), 3);
    // The paused clock only moves when every task waits: the batch was
    // handed over by its timer, not before.
    assert!(start.elapsed() >= Duration::from_secs(5));
    let seen_log = seen;
    let seen = batches(&seen_log);
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].0.size, seen[0].0.trigger),
        (3, BatchTrigger::Timeout)
    );
    // A new partial batch gets a timer of its own.
    let again = tokio::time::Instant::now();
    bulk_message(&pipeline, 4).await?;
    assert!(again.elapsed() >= Duration::from_secs(5));
    let all = batches(&seen_log);
    assert_eq!(all.len(), 2);
    assert_eq!(
        (all[1].0.size, all[1].0.trigger),
        (1, BatchTrigger::Timeout)
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn messages_of_different_batch_keys_are_batched_apart() -> Result<(), Error> {
    let seen = Seen::default();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |message: &mut Message<u32>| {
            let key = if message.data.is_multiple_of(2) {
                "even"
            } else {
                "odd"
            };
            message.put_batch_key(key);
        })
        .batcher(recording("default", &seen).batch_size(2))
        .start()
        .await?;
    pipeline
        .test_batch_with(vec![1, 2, 3, 4], BatchMode::Bulk)
        .await?;
    let mut seen = batches(&seen);
    seen.sort_by(|a, b| a.0.batch_key.cmp(&b.0.batch_key));
    let keys: Vec<(&str, Vec<u32>)> = seen
        .iter()
        .map(|(info, data)| (info.batch_key.as_str(), data.clone()))
        .collect();
    assert_eq!(keys, [("even", vec![2, 4]), ("odd", vec![1, 3])]);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn each_message_goes_to_the_batcher_it_names() -> Result<(), Error> {
    let (small, large) = (Seen::default(), Seen::default());
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(2, |message: &mut Message<u32>| {
            if message.data >= 100 {
                message.put_batcher("large");
            }
        })
        .batcher(recording("default", &small).batch_size(2).concurrency(2))
        .batcher(recording("large", &large).batch_size(2))
        .start()
        .await?;
    let acked = pipeline.test_batch(vec![1, 100, 2, 200]).await?;
    assert!(acked.iter().all(Message::is_ok));
    let data = |seen: &Seen| {
        let mut all: Vec<u32> = batches(seen).into_iter().flat_map(|(_, d)| d).collect();
        all.sort_unstable();
        all
    };
    assert_eq!(data(&small), [1, 2]);
    assert_eq!(data(&large), [100, 200]);
    assert!(
        batches(&large)
            .iter()
            .all(|(info, _)| info.batcher == "large")
    );
    Ok(())
}

/// One timer per batcher stage: each partial batch is still handed over
/// `batch_timeout` after its own first message, whatever the others did.
#[tokio::test(start_paused = true)]
async fn each_partial_batch_times_out_after_its_own_first_message() -> Result<(), Error> {
    let seen = Seen::default();
    let timeout = Duration::from_secs(5);
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |message: &mut Message<u32>| {
            message.put_batch_key(if message.data < 10 { "a" } else { "b" });
        })
        .batcher(
            recording("default", &seen)
                .batch_size(2)
                .batch_timeout(timeout),
        )
        .start()
        .await?;
    let start = tokio::time::Instant::now();
    // Key a: a full batch at once (its deadline passes with nothing due),
    // then a partial one started at 1 s.
    let full = pipeline.test_batch(vec![1, 2]);
    assert_eq!(full.await?.len(), 2);
    assert!(start.elapsed() < Duration::from_secs(1));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let a = tokio::spawn(bulk_message(&pipeline, 3));
    // Key b: a partial batch started at 3 s.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = tokio::spawn(bulk_message(&pipeline, 10));
    let (a, b) = (a.await.expect("no panic")?, b.await.expect("no panic")?);
    assert_eq!((a.data, b.data), (3, 10));
    let seen = batches(&seen);
    let got: Vec<(&str, BatchTrigger, Vec<u32>)> = seen
        .iter()
        .map(|(info, data)| (info.batch_key.as_str(), info.trigger, data.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("a", BatchTrigger::Size, vec![1, 2]),
            ("a", BatchTrigger::Timeout, vec![3]),
            ("b", BatchTrigger::Timeout, vec![10]),
        ]
    );
    // b's batch waited its whole timeout from 3 s, not a's deadline.
    assert!(start.elapsed() >= Duration::from_secs(3) + timeout);
    assert!(pipeline.drain(Duration::from_secs(5)).await.is_complete());
    Ok(())
}
