//! GenStage's `test/gen_stage_test.exs`, describe blocks
//! "producer-to-consumer demand" and "producer-producer_consumer-consumer
//! demand": the exact batches automatic demand cuts.
//!
//! The Broadcast scenarios of both blocks are in `genstage_dispatchers.rs`.
//! Nothing of these two blocks is skipped.

use crate::support;

use support::*;
use weir_gen_stage::{
    CancelMode, Cancellation, ProducerConsumerOptions, StopReason, SubscribeOptions,
};

fn demand(max: usize, min: usize) -> SubscribeOptions<u64> {
    SubscribeOptions::new().max_demand(max).min_demand(min)
}

// ---- producer-to-consumer demand ------------------------------------------

#[tokio::test]
async fn with_default_max_and_min_demand() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&producer, SubscribeOptions::new()),
    )
    .await
    .unwrap();

    inbox.assert_consumed(list(0..=499)).await;
    inbox.assert_consumed(list(500..=999)).await;
}

#[tokio::test]
async fn with_80_percent_min_demand() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&producer, demand(100, 80)),
    )
    .await
    .unwrap();

    inbox.assert_consumed(list(0..=19)).await;
    inbox.assert_consumed(list(20..=39)).await;
    inbox.assert_consumed(list(1000..=1019)).await;
}

#[tokio::test]
async fn with_20_percent_min_demand() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&producer, demand(100, 20)),
    )
    .await
    .unwrap();

    inbox.assert_consumed(list(0..=79)).await;
    inbox.assert_consumed(list(80..=99)).await;
    inbox.assert_consumed(list(100..=179)).await;
    inbox.assert_consumed(list(180..=259)).await;
    inbox.assert_consumed(list(260..=279)).await;
}

#[tokio::test]
async fn with_1_max_and_0_min_demand() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(1, 0)).unwrap();

    inbox.assert_consumed(vec![0]).await;
    inbox.assert_consumed(vec![1]).await;
    inbox.assert_consumed(vec![2]).await;
}

// ---- producer-producer_consumer-consumer demand ---------------------------

#[tokio::test]
async fn with_80_percent_min_demand_with_init_subscription() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler = weir_gen_stage::start_producer_consumer(
        Doubler::new(notify.clone())
            .with_options(ProducerConsumerOptions::new().subscribe_to(&producer, demand(100, 80))),
    )
    .await
    .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&doubler, demand(100, 50)),
    )
    .await
    .unwrap();

    inbox
        .assert_note(Note::ProducerConsumed(list(0..=19)))
        .await;
    inbox.assert_consumed(doubled(0..=19)).await;
    inbox.assert_consumed(doubled(20..=39)).await;

    inbox
        .assert_note(Note::ProducerConsumed(list(100..=119)))
        .await;
    inbox.assert_consumed(doubled(120..=124)).await;
    inbox.assert_consumed(doubled(125..=139)).await;
}

#[tokio::test]
async fn with_20_percent_min_demand_with_init_subscription() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler = weir_gen_stage::start_producer_consumer(
        Doubler::new(notify.clone())
            .with_options(ProducerConsumerOptions::new().subscribe_to(&producer, demand(100, 20))),
    )
    .await
    .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&doubler, demand(100, 50)),
    )
    .await
    .unwrap();

    inbox
        .assert_note(Note::ProducerConsumed(list(0..=79)))
        .await;
    inbox.assert_consumed(doubled(0..=24)).await;
    inbox.assert_consumed(doubled(25..=49)).await;
    inbox.assert_consumed(doubled(50..=74)).await;
    inbox
        .assert_note(Note::ProducerConsumed(list(100..=179)))
        .await;
}

#[tokio::test]
async fn with_80_percent_min_demand_with_late_subscription() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler = weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    // Now let's try consumer first.
    consumer.subscribe(&doubler, demand(100, 50)).await.unwrap();
    doubler.subscribe(&producer, demand(100, 80)).await.unwrap();

    inbox
        .assert_note(Note::ProducerConsumed(list(0..=19)))
        .await;
    inbox.assert_consumed(doubled(0..=19)).await;
    inbox.assert_consumed(doubled(20..=39)).await;

    inbox
        .assert_note(Note::ProducerConsumed(list(100..=119)))
        .await;
    inbox.assert_consumed(doubled(120..=124)).await;
    inbox.assert_consumed(doubled(125..=139)).await;
}

#[tokio::test]
async fn with_20_percent_min_demand_with_later_subscription() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler = weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    // Now let's try consumer first.
    consumer.subscribe(&doubler, demand(100, 50)).await.unwrap();
    doubler.subscribe(&producer, demand(100, 20)).await.unwrap();

    inbox
        .assert_note(Note::ProducerConsumed(list(0..=79)))
        .await;
    inbox.assert_consumed(doubled(0..=24)).await;
    inbox.assert_consumed(doubled(25..=49)).await;
    inbox.assert_consumed(doubled(50..=74)).await;
    inbox
        .assert_note(Note::ProducerConsumed(list(100..=179)))
        .await;
}

#[tokio::test]
async fn stops_asking_when_consumer_stops_asking() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let postponer = weir_gen_stage::start_producer_consumer(Postponer::new(
        notify.clone(),
        ProducerConsumerOptions::new().subscribe_to(&producer, demand(10, 8)),
    ))
    .await
    .unwrap();
    let _sleeper = weir_gen_stage::start_consumer(
        Sleeper::new(notify).subscribe_to(&postponer, demand(10, 5)),
    )
    .await
    .unwrap();

    inbox.assert_note(Note::Postponed(vec![0, 1])).await;
    inbox.assert_note(Note::Sleep(vec![0, 1])).await;
    inbox.assert_note(Note::Postponed(vec![2, 3])).await;
    inbox.assert_note(Note::Postponed(vec![4, 5])).await;
    inbox.assert_note(Note::Postponed(vec![6, 7])).await;
    inbox.assert_note(Note::Postponed(vec![8, 9])).await;
    // The sleeper's demand of 10 is used up and it never asks again: the
    // producer_consumer takes no more events from its producer.
    inbox
        .refute_receive("a second batch for the sleeper", |note| {
            *note == Note::Sleep(vec![2, 3])
        })
        .await;
    inbox.refute_received("events 10 and 11", |note| {
        *note == Note::Postponed(vec![10, 11])
    });
}

#[tokio::test]
async fn keeps_emitting_events_even_when_discarded() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let discarder = weir_gen_stage::start_producer_consumer(Discarder::new(
        notify.clone(),
        ProducerConsumerOptions::new().subscribe_to(&producer, demand(100, 80)),
    ))
    .await
    .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&discarder, demand(100, 50)),
    )
    .await
    .unwrap();

    inbox.assert_note(Note::Discarded(list(0..=19))).await;
    inbox.assert_note(Note::Discarded(list(100..=119))).await;
    inbox.assert_note(Note::Discarded(list(1000..=1019))).await;
}

#[tokio::test]
async fn queued_events_with_lost_producer() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler = weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()))
        .await
        .unwrap();

    let sub = doubler
        .subscribe(&producer, demand(100, 50).cancel(CancelMode::Temporary))
        .await
        .unwrap();
    let subscription = inbox
        .assert_receive("the doubler's subscription", |note| match note {
            Note::PcSubscribed(Side::Producer, s) if s.id == sub && s.producer == producer.id() => {
                Some(*s)
            }
            _ => None,
        })
        .await;

    // The producer sent 100 events before it handled the cancellation: the
    // cancellation waits behind them in the producer_consumer's queue.
    producer
        .cancel_downstream(sub, StopReason::custom("done"))
        .unwrap();
    support::barrier(&producer).await;
    ping_doubler(&doubler).await;
    let done = Note::PcCancelled(
        subscription,
        Cancellation::Cancel(StopReason::custom("done")),
    );
    inbox.refute_received("the cancellation before the queued events", |note| {
        *note == done
    });
    inbox.refute_received("events without downstream demand", |note| {
        matches!(note, Note::ProducerConsumed(_))
    });

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.subscribe(&doubler, demand(100, 50)).await.unwrap();

    // GenStage hands the queued events over in one batch or in two pieces of
    // 50 (its test accepts both); so do we.
    let first = inbox
        .assert_receive("the queued events", |note| match note {
            Note::ProducerConsumed(events) => Some(events.clone()),
            _ => None,
        })
        .await;
    if first != list(0..=99) {
        assert_eq!(first, list(0..=49));
        inbox
            .assert_note(Note::ProducerConsumed(list(50..=99)))
            .await;
    }

    inbox.assert_consumed(doubled(0..=24)).await;
    inbox.assert_consumed(doubled(25..=49)).await;
    inbox.assert_note(done).await;
    inbox.refute_received("events after the producer was lost", |note| {
        matches!(note, Note::ProducerConsumed(_))
    });
}
