//! `partition_by`: messages with the same key are handled by the same
//! processor (and batch processor), in order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tokio::task::Id;
use weir_pipeline::{Batcher, Error, Message, NoopAcknowledger, Pipeline};

type Seen = Arc<Mutex<Vec<(Id, u64, u32)>>>;

fn record(seen: &Seen, key: u64, seq: u32) {
    seen.lock()
        .expect("no panic while locked")
        .push((tokio::task::id(), key, seq));
}

/// Every key went to one stage (task), and its messages arrived in order.
fn check_per_key(seen: &Seen, partitions: u64) -> BTreeMap<u64, Id> {
    let seen = seen.lock().expect("no panic while locked");
    let mut stage_of: BTreeMap<u64, Id> = BTreeMap::new();
    let mut last: BTreeMap<u64, u32> = BTreeMap::new();
    for &(task, key, seq) in seen.iter() {
        let stage = *stage_of.entry(key).or_insert(task);
        assert_eq!(stage, task, "key {key} handled by two stages");
        if let Some(previous) = last.insert(key, seq) {
            assert!(previous < seq, "key {key}: {seq} after {previous}");
        }
    }
    // Keys with the same partition share a stage, others do not.
    for (&a, &stage_a) in &stage_of {
        for (&b, &stage_b) in &stage_of {
            assert_eq!(
                a % partitions == b % partitions,
                stage_a == stage_b,
                "keys {a} and {b}"
            );
        }
    }
    stage_of
}

fn interleaved(keys: u64, per_key: u32) -> Vec<(u64, u32)> {
    (0..per_key)
        .flat_map(|seq| (0..keys).map(move |key| (key, seq)))
        .collect()
}

#[tokio::test]
async fn the_same_key_goes_to_the_same_processor_in_order() -> Result<(), Error> {
    let seen = Seen::default();
    let log = seen.clone();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(3, move |message: &mut Message<(u64, u32)>| {
            record(&log, message.data.0, message.data.1)
        })
        .processor_max_demand(2)
        .partition_by(|message: &Message<(u64, u32)>| message.data.0)
        .start()
        .await?;
    let acked = pipeline.test_batch(interleaved(7, 40)).await?;
    assert_eq!(acked.len(), 280);
    let stages = check_per_key(&seen, 3);
    let distinct: BTreeSet<Id> = stages.values().copied().collect();
    assert_eq!(distinct.len(), 3, "every processor has keys");
    // Each processor's metrics count its own partition's messages.
    let metrics = pipeline.metrics();
    let mut processed: Vec<u64> = metrics.processors().map(|p| p.processed).collect();
    processed.sort_unstable();
    // keys 0..7 % 3: partitions of 3, 2 and 2 keys, 40 messages each.
    assert_eq!(processed, vec![80, 80, 120]);
    Ok(())
}

#[tokio::test]
async fn partition_by_routes_the_messages_of_every_kind_of_producer() -> Result<(), Error> {
    let seen = Seen::default();
    let log = seen.clone();
    let data = weir_gen_stage::from_iter(interleaved(4, 25)).await?;
    let messages = weir_gen_stage::from_iter(
        interleaved(4, 25)
            .into_iter()
            .map(|(key, seq)| Message::new((key + 4, seq), Arc::new(NoopAcknowledger))),
    )
    .await?;
    let pipeline = Pipeline::builder()
        .producer_of(&data, Arc::new(NoopAcknowledger))
        .producer(&messages)
        .processors(2, move |message: &mut Message<(u64, u32)>| {
            record(&log, message.data.0, message.data.1)
        })
        .partition_by(|message: &Message<(u64, u32)>| message.data.0)
        .start()
        .await?;
    pipeline.stopped().await;
    assert_eq!(seen.lock().expect("no panic while locked").len(), 200);
    check_per_key(&seen, 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn batcher_partition_by_keeps_a_key_on_one_batch_processor_in_order() -> Result<(), Error> {
    let seen = Seen::default();
    let log = seen.clone();
    let key = |message: &Message<(u64, u32)>| message.data.0;
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(3, |_: &mut Message<(u64, u32)>| {})
        .partition_by(key)
        .batcher(
            Batcher::new("default", move |batch: &mut [Message<(u64, u32)>], _| {
                let partitions: BTreeSet<u64> = batch.iter().map(|m| m.data.0 % 2).collect();
                assert_eq!(partitions.len(), 1, "a batch holds one partition");
                for message in batch.iter() {
                    record(&log, message.data.0, message.data.1);
                }
            })
            .batch_size(4)
            .concurrency(2)
            .partition_by(key),
        )
        .start()
        .await?;
    let acked = pipeline.test_batch(interleaved(6, 30)).await?;
    assert_eq!(acked.len(), 180);
    assert!(acked.iter().all(Message::is_ok), "no batch failed");
    check_per_key(&seen, 2);
    let metrics = pipeline.metrics();
    assert_eq!(
        metrics.batchers("default").count(),
        2,
        "one stage per partition"
    );
    let per_processor: Vec<u64> = metrics
        .batch_processors("default")
        .map(|p| p.processed)
        .collect();
    assert_eq!(per_processor, vec![90, 90]);
    Ok(())
}

#[tokio::test]
async fn a_panicking_partition_by_fails_the_message() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(2, |_: &mut Message<u64>| {})
        .partition_by(|message: &Message<u64>| {
            assert_ne!(message.data, 13, "no partition for 13");
            message.data
        })
        .start()
        .await?;
    let acked = pipeline.test_batch(vec![12, 13, 14]).await?;
    let failed: Vec<u64> = acked
        .iter()
        .filter(|m| !m.is_ok())
        .map(|m| m.data)
        .collect();
    assert_eq!(failed, vec![13]);
    Ok(())
}

/// A producer of `(key, seq)` messages for keys `first..first + keys`; its
/// `init` leaves the dispatcher to whoever starts it.
struct Keys {
    pending: std::vec::IntoIter<(u64, u32)>,
}

impl weir_gen_stage::Producer for Keys {
    type Messages = ();
    type Event = Message<(u64, u32)>;

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut weir_gen_stage::ProducerContext<'_, Self>,
    ) -> weir_gen_stage::Noreply<Message<(u64, u32)>> {
        weir_gen_stage::Noreply::Emit(
            self.pending
                .by_ref()
                .take(demand)
                .map(|data| Message::new(data, Arc::new(NoopAcknowledger)))
                .collect(),
        )
    }
}

#[tokio::test]
async fn producers_started_by_the_pipeline_are_partitioned_at_the_source() -> Result<(), Error> {
    let seen = Seen::default();
    let log = seen.clone();
    // Three producers, keys 0..4, 4..8 and 8..12, 30 messages a key.
    let pipeline = Pipeline::builder()
        .producers(3, |index| Keys {
            pending: interleaved(4, 30)
                .into_iter()
                .map(|(key, seq)| (key + 4 * index as u64, seq))
                .collect::<Vec<_>>()
                .into_iter(),
        })
        .processors(4, move |message: &mut Message<(u64, u32)>| {
            record(&log, message.data.0, message.data.1)
        })
        .processor_max_demand(3)
        .partition_by(|message: &Message<(u64, u32)>| message.data.0)
        .start()
        .await?;
    assert_eq!(pipeline.producers().len(), 3);
    // The producers are the pipeline's first stages, with no stage in front of
    // the processors: 3 producers + 4 processors.
    assert_eq!(pipeline.stages().len(), 7);
    for producer in pipeline.producers() {
        let status = producer.status().await?;
        assert_eq!(
            status.producer.expect("a producer side").dispatcher,
            "partition"
        );
    }
    // The producers never finish: wait for every message, then drain.
    let all = async {
        while seen.lock().expect("no panic while locked").len() < 360 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), all)
        .await
        .expect("every message is handled");
    assert!(
        pipeline
            .drain(std::time::Duration::from_secs(10))
            .await
            .is_complete()
    );
    assert_eq!(seen.lock().expect("no panic while locked").len(), 360);
    check_per_key(&seen, 4);
    Ok(())
}

#[tokio::test]
async fn zero_producers_is_refused() {
    let result = Pipeline::builder()
        .producers(0, |_| Keys {
            pending: Vec::new().into_iter(),
        })
        .processors(1, |_: &mut Message<(u64, u32)>| {})
        .start()
        .await;
    match result {
        Err(Error::ZeroConcurrency { stage }) => assert_eq!(stage, "producers"),
        other => panic!("expected ZeroConcurrency, got {other:?}"),
    }
}
