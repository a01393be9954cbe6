//! Dispatchers at the stage level.
//!
//! Ported from GenStage's `test/gen_stage_test.exs`: the "with shared
//! (broadcast) demand" scenarios of the describe blocks "producer-to-consumer
//! demand" and "producer-producer_consumer-consumer demand". GenStage's
//! dispatcher unit tests (`test/gen_stage/*_dispatcher_test.exs`) are ported
//! in the `dispatchers` crate.
//!
//! GenStage's test suite has no stage-level Partition scenario and no
//! stage-level selector scenario; the last four tests here check the
//! examples of the dispatchers' documentation (`PartitionDispatcher`
//! moduledoc: partitions `[:odd, :even]`; `BroadcastDispatcher` moduledoc:
//! the `:selector` option) and SEMANTICS.md's partition rules through real
//! stages. Where Weir deliberately differs: a second consumer for a taken
//! partition is refused and the producer keeps running (GenStage crashes
//! the producer); partition queues show in `estimate_buffered_count`.
//!
//! How the outcome is observed: GenStage's "synchronizer subscriber" sends a
//! raw `$gen_producer` subscribe that never asks; here it is a
//! [`RawConsumer`] that subscribes and never asks. `refute_received` comes
//! after sync calls to every stage involved (a barrier).

use crate::support;

use support::*;
use weir_gen_stage::protocol::RawConsumer;
use weir_gen_stage::{
    BroadcastDispatcher, Cancellation, DemandMode, Error, FromIterOptions, PartitionDispatcher,
    ProducerConsumerOptions, ProducerOptions, StopReason, SubscribeError, SubscribeOptions,
    SubscriptionOptions, new_subscription_id,
};

fn demand(max: usize, min: usize) -> SubscribeOptions<u64> {
    SubscribeOptions::new().max_demand(max).min_demand(min)
}

fn broadcast_counter() -> Counter<u64> {
    Counter::counting(0).with_options(ProducerOptions::new().dispatcher(BroadcastDispatcher::new()))
}

// ---- producer-to-consumer demand ------------------------------------------

#[tokio::test]
async fn producer_to_consumer_with_shared_broadcast_demand() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(broadcast_counter())
        .await
        .unwrap();
    let consumer1 = weir_gen_stage::start_consumer(Forwarder::new(notify.clone()))
        .await
        .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    consumer1.async_subscribe(&producer, demand(10, 0)).unwrap();
    consumer2.async_subscribe(&producer, demand(20, 0)).unwrap();

    // Both consumers receive the same events, at the pace of the slower one;
    // whatever the race between the subscriptions, batch 1000..=1009 reaches
    // both.
    inbox.assert_consumed(list(1000..=1009)).await;
    inbox.assert_consumed(list(1000..=1009)).await;
}

#[tokio::test]
async fn producer_to_consumer_with_shared_broadcast_demand_and_synchronizer_subscriber() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(broadcast_counter())
        .await
        .unwrap();
    let consumer1 = weir_gen_stage::start_consumer(Forwarder::new(notify.clone()))
        .await
        .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    // Subscribe but not demand.
    let mut stale = RawConsumer::new();
    let stale_sub = new_subscription_id();
    stale.subscribe(&producer, stale_sub, SubscriptionOptions::new(1000, 500));

    // Further subscriptions get nothing while the stale one has no demand.
    consumer1.subscribe(&producer, demand(10, 0)).await.unwrap();
    consumer2.subscribe(&producer, demand(20, 0)).await.unwrap();
    support::barrier(&producer).await;
    ping(&consumer1).await;
    ping(&consumer2).await;
    inbox.refute_received("events while a subscriber has no demand", is_consumed);

    // Cancel the stale one.
    stale.cancel(&producer, stale_sub, StopReason::Killed);

    inbox.assert_consumed(list(1000..=1009)).await;
    inbox.assert_consumed(list(1000..=1009)).await;
}

#[tokio::test]
async fn with_shared_broadcast_demand_does_not_result_in_duplicate_upstream_demand() {
    let (notify, mut inbox) = inbox::<u64>();
    let producer = weir_gen_stage::start_producer(NothingProducer::new(
        notify.clone(),
        ProducerOptions::new().dispatcher(BroadcastDispatcher::new()),
    ))
    .await
    .unwrap();
    let consumer1 = weir_gen_stage::start_consumer(Sleeper::new(notify.clone()))
        .await
        .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(Sleeper::new(notify))
        .await
        .unwrap();

    consumer1.subscribe(&producer, demand(10, 0)).await.unwrap();
    consumer2.subscribe(&producer, demand(20, 0)).await.unwrap();

    // The common demand of 10 is asked upstream once (until the consumers
    // ask for another batch, which sleepers never do).
    inbox.assert_note(Note::Demand(10)).await;
    producer.call((), TIMEOUT).await.unwrap();
    inbox.refute_received("a second upstream demand", |note| {
        matches!(note, Note::Demand(_))
    });
}

// ---- producer-producer_consumer-consumer demand ---------------------------

#[tokio::test]
async fn producer_consumer_with_shared_broadcast_demand() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler = weir_gen_stage::start_producer_consumer(
        Doubler::new(notify.clone()).with_options(
            ProducerConsumerOptions::new()
                .dispatcher(BroadcastDispatcher::new())
                .subscribe_to(&producer, SubscribeOptions::new().max_demand(10)),
        ),
    )
    .await
    .unwrap();
    let consumer1 = weir_gen_stage::start_consumer(Forwarder::new(notify.clone()))
        .await
        .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    consumer1.async_subscribe(&doubler, demand(10, 0)).unwrap();
    consumer2.async_subscribe(&doubler, demand(20, 0)).unwrap();

    inbox.assert_consumed(doubled(200..=204)).await;
    inbox.assert_consumed(doubled(200..=204)).await;
}

#[tokio::test]
async fn producer_consumer_with_shared_broadcast_demand_and_synchronizer_subscriber() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler = weir_gen_stage::start_producer_consumer(
        Doubler::new(notify.clone()).with_options(
            ProducerConsumerOptions::new()
                .dispatcher(BroadcastDispatcher::new())
                .subscribe_to(&producer, SubscribeOptions::new()),
        ),
    )
    .await
    .unwrap();
    let consumer1 = weir_gen_stage::start_consumer(Forwarder::new(notify.clone()))
        .await
        .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    // Subscribe but not demand.
    let mut stale = RawConsumer::new();
    let stale_sub = new_subscription_id();
    stale.subscribe(&doubler, stale_sub, SubscriptionOptions::new(1000, 500));

    consumer1.subscribe(&doubler, demand(10, 0)).await.unwrap();
    consumer2.subscribe(&doubler, demand(20, 0)).await.unwrap();
    ping_doubler(&doubler).await;
    ping(&consumer1).await;
    ping(&consumer2).await;
    inbox.refute_received("events while a subscriber has no demand", is_consumed);

    // Cancel the stale one.
    stale.cancel(&doubler, stale_sub, StopReason::Killed);

    inbox.assert_consumed(doubled(200..=204)).await;
    inbox.assert_consumed(doubled(200..=204)).await;
}

// ---- from the dispatchers' documentation ----------------------------------

/// Collects what one consumer receives until it has `count` events.
async fn consume(inbox: &mut Inbox<u64>, count: usize) -> Vec<u64> {
    let mut events = Vec::new();
    while events.len() < count {
        events.extend(inbox.next_consumed().await);
    }
    events
}

#[tokio::test]
async fn partition_dispatcher_with_partitions_named_odd_and_even() {
    let partitions = PartitionDispatcher::named(["odd", "even"], |n: u64| {
        Some((n, if n.is_multiple_of(2) { "even" } else { "odd" }))
    });
    let producer = weir_gen_stage::from_iter_with(
        1..=10u64,
        FromIterOptions::new()
            .dispatcher(partitions)
            .demand(DemandMode::Accumulate),
    )
    .await
    .unwrap();
    let (notify_odd, mut odd) = inbox();
    let (notify_even, mut even) = inbox();
    let odd_consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify_odd).subscribe_to(&producer, demand(4, 2).partition("odd")),
    )
    .await
    .unwrap();
    let even_consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify_even).subscribe_to(&producer, demand(4, 2).partition("even")),
    )
    .await
    .unwrap();
    producer.set_demand_mode(DemandMode::Forward).await.unwrap();

    assert_eq!(consume(&mut odd, 5).await, vec![1, 3, 5, 7, 9]);
    assert_eq!(consume(&mut even, 5).await, vec![2, 4, 6, 8, 10]);
    // The producer stops normally after its last events; the permanent
    // subscriptions stop both consumers with the same reason.
    assert_eq!(producer.stopped().await, StopReason::Normal);
    assert_eq!(odd_consumer.stopped().await, StopReason::Normal);
    assert_eq!(even_consumer.stopped().await, StopReason::Normal);
}

fn partitioned_counter(notify: &Notifier<u64>) -> Counter<u64> {
    Counter::notifying(notify.clone()).with_options(ProducerOptions::new().dispatcher(
        PartitionDispatcher::with_hash(2, |n: u64| Some((n, (n % 2) as usize))),
    ))
}

#[tokio::test]
async fn partition_events_without_a_consumer_wait_until_one_subscribes() {
    let (notify, _producer_inbox) = inbox();
    let producer = weir_gen_stage::start_producer(partitioned_counter(&notify))
        .await
        .unwrap();
    let (notify0, mut inbox0) = inbox();
    let (notify1, mut inbox1) = inbox();
    let consumer0 = weir_gen_stage::start_consumer(Forwarder::new(notify0))
        .await
        .unwrap();
    consumer0
        .subscribe(&producer, demand(10, 5).partition(0))
        .await
        .unwrap();

    sync_queue(&producer, vec![0, 1, 2, 3]).await;
    inbox0.assert_consumed(vec![0, 2]).await;
    // Weir: partition queues count in the buffered-count estimate.
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 2);

    let consumer1 = weir_gen_stage::start_consumer(Forwarder::new(notify1))
        .await
        .unwrap();
    consumer1
        .subscribe(&producer, demand(10, 5).partition(1))
        .await
        .unwrap();
    inbox1.assert_consumed(vec![1, 3]).await;
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 0);
}

#[tokio::test]
async fn partition_taken_is_refused_and_the_producer_keeps_running() {
    let (notify, _producer_inbox) = inbox();
    let producer = weir_gen_stage::start_producer(partitioned_counter(&notify))
        .await
        .unwrap();
    let (notify_a, mut inbox_a) = inbox();
    let (notify_b, _inbox_b) = inbox();
    let first = weir_gen_stage::start_consumer(Forwarder::new(notify_a))
        .await
        .unwrap();
    let second = weir_gen_stage::start_consumer(Forwarder::new(notify_b))
        .await
        .unwrap();
    first
        .subscribe(&producer, demand(10, 5).partition(0))
        .await
        .unwrap();

    let refused = second
        .subscribe(&producer, demand(10, 5).partition(0))
        .await;
    assert!(
        matches!(
            &refused,
            Err(Error::SubscriptionRefused {
                cancellation: Cancellation::Cancel(StopReason::SubscriptionRefused(
                    SubscribeError::PartitionTaken { .. }
                )),
                ..
            })
        ),
        "{refused:?}"
    );

    // Weir: the producer keeps serving the partition's consumer.
    assert!(producer.is_alive());
    sync_queue(&producer, vec![4]).await;
    inbox_a.assert_consumed(vec![4]).await;
}

#[tokio::test]
async fn broadcast_selector_filters_what_a_consumer_receives() {
    let (notify, _producer_inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::<u64>::notifying(notify)
            .with_options(ProducerOptions::new().dispatcher(BroadcastDispatcher::new())),
    )
    .await
    .unwrap();
    let (notify_even, mut evens) = inbox();
    let (notify_all, mut all) = inbox();
    let even_consumer = weir_gen_stage::start_consumer(Forwarder::new(notify_even))
        .await
        .unwrap();
    let all_consumer = weir_gen_stage::start_consumer(Forwarder::new(notify_all))
        .await
        .unwrap();
    even_consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().selector(|n: &u64| n.is_multiple_of(2)),
        )
        .await
        .unwrap();
    all_consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .unwrap();

    sync_queue(&producer, vec![1, 2, 3, 4]).await;

    assert_eq!(consume(&mut evens, 2).await, vec![2, 4]);
    assert_eq!(consume(&mut all, 4).await, vec![1, 2, 3, 4]);
}
