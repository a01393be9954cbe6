//! The producer buffer through running stages: served first, bounded,
//! discards reported, infos kept in their place, partition queues counted.

use crate::harness;

use std::sync::{Arc, Mutex};

use harness::{
    Counter, CounterCall, CounterInfo, Logs, Note, Recorder, TIMEOUT, consumed, demand, drain,
    notes,
};
use weir_gen_stage::{
    BufferKeep, CancelMode, Error, PartitionDispatcher, ProducerOptions, SubscribeOptions,
};

#[tokio::test]
async fn events_emitted_without_consumers_are_buffered_and_served_first() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    producer.cast(vec![100, 101, 102]).expect("cast");
    assert_eq!(producer.estimate_buffered_count().await, Ok(3));

    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(2).min_demand(0),
        )
        .await
        .expect("accepted");
    // The first ask is served from the buffer; the next ask of 2 takes the
    // last buffered event, and only the remaining 1 reaches handle_demand.
    let (mut batches, mut demands) = (Vec::new(), Vec::new());
    while batches.len() < 3 {
        match harness::next(&mut seen).await {
            Note::Consumed(events) => batches.push(events),
            Note::Demand(n) => demands.push(n),
            _ => {}
        }
    }
    assert_eq!(batches, vec![vec![100, 101], vec![102], vec![0]]);
    assert_eq!(demands, vec![1]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_full_buffer_keeping_the_last_drops_the_oldest_and_reports_the_count() {
    let (logs, _guard) = Logs::capture();
    let (notify, mut seen) = notes();
    let discards = Arc::new(Mutex::new(Vec::new()));
    let producer = weir_gen_stage::start_producer(
        Counter::new(0, notify.clone())
            .silent()
            .with_options(ProducerOptions::new().buffer_size(5))
            .record_discards(discards.clone(), true),
    )
    .await
    .expect("producer");
    producer.cast((0..8).collect()).expect("cast");
    assert_eq!(producer.estimate_buffered_count().await, Ok(5));
    assert_eq!(*discards.lock().expect("discards"), vec![3]);
    assert!(
        logs.text()
            .contains("producer has discarded 3 events from its buffer"),
        "{}",
        logs.text()
    );

    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    assert_eq!(consumed(&mut seen).await, vec![3, 4, 5, 6, 7]);
}

#[tokio::test(flavor = "current_thread")]
async fn handle_discarded_can_silence_the_warning_and_keep_first_drops_the_newest() {
    let (logs, _guard) = Logs::capture();
    let (notify, mut seen) = notes();
    let discards = Arc::new(Mutex::new(Vec::new()));
    let producer = weir_gen_stage::start_producer(
        Counter::new(0, notify.clone())
            .silent()
            .with_options(
                ProducerOptions::new()
                    .buffer_size(5)
                    .buffer_keep(BufferKeep::First),
            )
            .record_discards(discards.clone(), false),
    )
    .await
    .expect("producer");
    producer.cast((0..8).collect()).expect("cast");
    assert_eq!(producer.estimate_buffered_count().await, Ok(5));
    assert_eq!(*discards.lock().expect("discards"), vec![3]);
    assert!(!logs.text().contains("discarded"), "{}", logs.text());

    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    assert_eq!(consumed(&mut seen).await, vec![0, 1, 2, 3, 4]);
}

#[tokio::test]
async fn buffer_size_zero_is_refused_when_the_producer_starts() {
    let (notify, _seen) = notes();
    let error = weir_gen_stage::start_producer(
        Counter::new(0, notify).with_options(ProducerOptions::new().buffer_size(0)),
    )
    .await
    .expect_err("refused");
    assert_eq!(
        error,
        Error::InvalidOption {
            option: "buffer_size",
            value: "0".to_owned(),
            expected: "a value equal to or greater than 1, or infinity".to_owned()
        }
    );
}

fn by_parity() -> PartitionDispatcher<u64> {
    PartitionDispatcher::with_hash(2, |n: u64| Some((n, (n % 2) as usize)))
}

#[tokio::test]
async fn partition_queues_show_in_the_buffered_count_estimate() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(
        Counter::new(0, notify.clone())
            .silent()
            .with_options(ProducerOptions::new().dispatcher(by_parity())),
    )
    .await
    .expect("producer");
    let evens = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    evens
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(10).partition(0),
        )
        .await
        .expect("accepted");
    assert_eq!(demand(&mut seen).await, 10);
    producer.cast((0..10).collect()).expect("cast");
    assert_eq!(consumed(&mut seen).await, vec![0, 2, 4, 6, 8]);
    // The odd events wait in partition 1, which has no consumer yet.
    assert_eq!(producer.estimate_buffered_count().await, Ok(5));
}

#[tokio::test]
async fn partition_queues_count_toward_the_buffer_limit() {
    let (notify, mut seen) = notes();
    let discards = Arc::new(Mutex::new(Vec::new()));
    let producer = weir_gen_stage::start_producer(
        Counter::new(0, notify.clone())
            .silent()
            .with_options(
                ProducerOptions::new()
                    .dispatcher(by_parity())
                    .buffer_size(6)
                    .buffer_keep(BufferKeep::First),
            )
            .record_discards(discards.clone(), false),
    )
    .await
    .expect("producer");
    let evens = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    evens
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(10).partition(0),
        )
        .await
        .expect("accepted");
    assert_eq!(demand(&mut seen).await, 10);
    // Ten odd events fill partition 1's queue up to the upstream demand of
    // 10; ten more are left over, but the queue already holds more than the
    // buffer size allows, so the producer's own buffer takes none of them.
    producer
        .cast((0..20).map(|n| 2 * n + 1).collect())
        .expect("cast");
    assert_eq!(producer.estimate_buffered_count().await, Ok(10));
    assert_eq!(*discards.lock().expect("discards"), vec![10]);
}

#[tokio::test]
async fn infos_keep_their_place_among_buffered_events() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    producer.cast(vec![1, 2, 3]).expect("cast");
    producer
        .sync_info(CounterInfo::Label("after 3"))
        .await
        .expect("queued");
    producer.cast(vec![4, 5]).expect("cast");
    producer
        .sync_info(CounterInfo::Label("after 5"))
        .await
        .expect("queued");
    let barrier = || producer.call(CounterCall::Queue(vec![]), TIMEOUT);
    barrier().await.expect("barrier");
    assert!(
        drain(&mut seen).is_empty(),
        "both infos wait behind buffered events"
    );

    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify).manual())
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    consumer.ask_and_wait(sub, 4).await.expect("asked");
    barrier().await.expect("barrier");
    let seen_now = drain(&mut seen);
    assert!(seen_now.contains(&Note::Info("after 3")), "{seen_now:?}");
    assert!(!seen_now.contains(&Note::Info("after 5")), "{seen_now:?}");

    consumer.ask_and_wait(sub, 1).await.expect("asked");
    barrier().await.expect("barrier");
    let seen_now = drain(&mut seen);
    assert!(seen_now.contains(&Note::Info("after 5")), "{seen_now:?}");
}
