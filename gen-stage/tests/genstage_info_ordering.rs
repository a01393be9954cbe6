//! GenStage's `test/gen_stage_test.exs`, describe block "info": infos sent
//! through a stage (`sync_info` / `async_info`) keep their place behind the
//! events buffered (producer) or queued (producer_consumer) before them.
//!
//! How the outcome is observed: where GenStage's test sends raw
//! `$gen_producer` messages (subscribe, ask) it is a
//! [`RawConsumer`](weir_gen_stage::protocol::RawConsumer) here; `refute_received`
//! comes after a sync call to the stage (a barrier), so the info would
//! already have been delivered if it were not held. In "with moving buffer"
//! the two asks are sent one after the other with a check in between, which
//! shows the same order more precisely.

use crate::support;

use support::*;
use weir_gen_stage::protocol::RawConsumer;
use weir_gen_stage::{
    BufferKeep, BufferSize, ProducerConsumerOptions, ProducerOptions, SubscribeOptions,
    SubscriptionOptions, new_subscription_id,
};

fn counter(notify: &Notifier<Item>, options: ProducerOptions<Item>) -> Counter<Item> {
    Counter::notifying(notify.clone()).with_options(options)
}

fn is_info(tag: &'static str) -> impl Fn(&Note<Item>) -> bool {
    move |note| *note == Note::Info(tag)
}

#[tokio::test]
async fn delivers_info_to_consumer() {
    let (notify, mut inbox) = inbox::<u64>();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    consumer.sync_info("sync").await.unwrap();
    inbox.assert_note(Note::Info("sync")).await;

    consumer.async_info("async").unwrap();
    inbox.assert_note(Note::Info("async")).await;
}

#[tokio::test]
async fn delivers_info_to_producer_consumer_immediately_when_there_is_no_incoming_buffer() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let doubler =
        weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()).with_options(
            ProducerConsumerOptions::new().subscribe_to(&producer, SubscribeOptions::new()),
        ))
        .await
        .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&doubler, SubscribeOptions::new()),
    )
    .await
    .unwrap();

    doubler.sync_info("sync").await.unwrap();
    inbox.assert_note(Note::Info("sync")).await;

    doubler.async_info("async").unwrap();
    inbox.assert_note(Note::Info("async")).await;
}

#[tokio::test]
async fn delivers_info_to_producer_consumer_immediately_when_there_is_incoming_buffer() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify.clone()))
        .await
        .unwrap();
    let doubler =
        weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()).with_options(
            ProducerConsumerOptions::new().subscribe_to(&producer, SubscribeOptions::new()),
        ))
        .await
        .unwrap();

    // The producer received the subscription and then we guarantee the
    // producer sent events to the producer_consumer's queue.
    inbox
        .assert_receive("the producer's subscription", |note| {
            matches!(note, Note::ProducerSubscribed(_)).then_some(())
        })
        .await;
    sync_queue(&producer, list(0..=9)).await;

    doubler.sync_info("sync").await.unwrap();
    ping_doubler(&doubler).await;
    inbox.refute_received("the sync info", |note| *note == Note::Info("sync"));

    doubler.async_info("async").unwrap();
    ping_doubler(&doubler).await;
    inbox.refute_received("the async info", |note| *note == Note::Info("async"));

    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&doubler, SubscribeOptions::new()),
    )
    .await
    .unwrap();
    // Both infos come after the queued events were handled, in order.
    let notes = inbox.notes_until(|note| *note == Note::Info("async")).await;
    let position = |wanted: &Note<u64>| notes.iter().position(|note| note == wanted);
    let consumed =
        position(&Note::ProducerConsumed(list(0..=9))).expect("the queued events were handled");
    let sync = position(&Note::Info("sync")).expect("the sync info arrived");
    let async_ = position(&Note::Info("async")).expect("the async info arrived");
    assert!(consumed < sync && sync < async_, "{notes:?}");
}

#[tokio::test]
async fn delivers_info_to_producer_immediately_when_there_is_no_buffer() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify))
        .await
        .unwrap();

    producer.sync_info(CounterInfo::Tag("sync")).await.unwrap();
    inbox.assert_note(Note::Info("sync")).await;

    producer.async_info(CounterInfo::Tag("async")).unwrap();
    inbox.assert_note(Note::Info("async")).await;
}

/// How an info is sent through a stage.
#[derive(Clone, Copy)]
enum Through {
    /// `sync_info`: returns once the stage queued it.
    Sync,
    /// `async_info`: returns at once.
    Async,
}

/// The "delivers info to producer eventually with ... buffer" tests: queue
/// `events`, send an info through; it is held (not delivered after a
/// barrier) until a consumer subscribes and takes the events, then it
/// arrives.
async fn info_waits_for_buffered_events(
    options: ProducerOptions<Item>,
    events: Vec<Item>,
    through: Through,
) {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(counter(&notify, options))
        .await
        .expect("the producer starts");
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .expect("the consumer starts");

    sync_queue(&producer, events.clone()).await;
    let tag = match through {
        Through::Sync => {
            producer
                .sync_info(CounterInfo::Tag("sync"))
                .await
                .expect("the stage queues the info");
            "sync"
        }
        Through::Async => {
            producer
                .async_info(CounterInfo::Tag("async"))
                .expect("the stage is alive");
            "async"
        }
    };
    support::barrier(&producer).await;
    inbox.refute_received("the info", is_info(tag));

    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("the producer accepts the subscription");
    inbox.assert_consumed(events).await;
    inbox.assert_note(Note::Info(tag)).await;
}

#[tokio::test]
async fn delivers_info_to_producer_eventually_with_infinity_buffer_size() {
    info_waits_for_buffered_events(
        ProducerOptions::new().buffer_size(BufferSize::Infinity),
        atoms("abc"),
        Through::Sync,
    )
    .await;
}

#[tokio::test]
async fn delivers_info_to_producer_eventually_with_one_item_filled_buffer() {
    info_waits_for_buffered_events(
        ProducerOptions::new().buffer_size(3),
        atoms("a"),
        Through::Sync,
    )
    .await;
}

#[tokio::test]
async fn delivers_info_to_producer_eventually_with_mid_filled_buffer() {
    info_waits_for_buffered_events(
        ProducerOptions::new().buffer_size(3),
        atoms("ab"),
        Through::Sync,
    )
    .await;
}

#[tokio::test]
async fn delivers_info_to_producer_eventually_with_filled_buffer() {
    info_waits_for_buffered_events(
        ProducerOptions::new().buffer_size(3),
        atoms("abc"),
        Through::Sync,
    )
    .await;
}

/// Weir: GenStage's scenarios send only `sync_info` through a producer's
/// buffer; `async_info` keeps its place the same way.
#[tokio::test]
async fn delivers_async_info_to_producer_eventually_with_filled_buffer() {
    info_waits_for_buffered_events(
        ProducerOptions::new().buffer_size(3),
        atoms("abc"),
        Through::Async,
    )
    .await;
}

#[tokio::test]
async fn delivers_info_to_producer_eventually_with_moving_buffer() {
    let (notify, mut inbox) = inbox();
    let producer =
        weir_gen_stage::start_producer(counter(&notify, ProducerOptions::new().buffer_size(3)))
            .await
            .unwrap();

    // Subscribe.
    let mut raw = RawConsumer::new();
    let sub = new_subscription_id();
    raw.subscribe(&producer, sub, SubscriptionOptions::new(1000, 500));

    // Queue events and an info.
    sync_queue(&producer, atoms("abc")).await;
    producer.sync_info(CounterInfo::Tag("sync1")).await.unwrap();

    // Ask for events: the info stays behind :c.
    raw.ask(&producer, sub, 2);
    assert_eq!(next_events(&mut raw, sub).await, atoms("ab"));
    support::barrier(&producer).await;
    inbox.refute_received("sync1 before :c", is_info("sync1"));

    // Queue more events and another info.
    sync_queue(&producer, atoms("de")).await;
    producer.sync_info(CounterInfo::Tag("sync2")).await.unwrap();

    // Ask the remaining events and infos.
    raw.ask(&producer, sub, 1);
    assert_eq!(next_events(&mut raw, sub).await, atoms("c"));
    inbox.assert_note(Note::Info("sync1")).await;
    support::barrier(&producer).await;
    inbox.refute_received("sync2 before :d and :e", is_info("sync2"));

    raw.ask(&producer, sub, 2);
    assert_eq!(next_events(&mut raw, sub).await, atoms("de"));
    inbox.assert_note(Note::Info("sync2")).await;
}

#[tokio::test]
async fn delivers_info_to_producer_eventually_when_dropping_buffer() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(counter(
        &notify,
        ProducerOptions::new()
            .buffer_keep(BufferKeep::Last)
            .buffer_size(3),
    ))
    .await
    .unwrap();

    sync_queue(&producer, atoms("ab")).await;
    producer.sync_info(CounterInfo::Tag("sync")).await.unwrap();
    support::barrier(&producer).await;
    inbox.refute_received("the info", is_info("sync"));

    // A subscriber without demand: the buffer overflows and drops :a and :b,
    // which releases the info behind them.
    let mut raw = RawConsumer::<Item>::new();
    raw.subscribe(
        &producer,
        new_subscription_id(),
        SubscriptionOptions::new(1000, 500),
    );
    sync_queue(&producer, atoms("cde")).await;
    inbox.assert_note(Note::Info("sync")).await;
}

#[tokio::test]
async fn delivers_multiple_info_to_producer_in_fifo_order() {
    let (notify, mut inbox) = inbox();
    let producer =
        weir_gen_stage::start_producer(counter(&notify, ProducerOptions::new().buffer_size(10)))
            .await
            .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().extra("consumer_demand", "manual"),
        )
        .await
        .unwrap();
    inbox
        .assert_receive("the producer's subscription", |note| {
            matches!(note, Note::ProducerSubscribed(_)).then_some(())
        })
        .await;
    let sub = inbox
        .assert_receive("the consumer's subscription", |note| match note {
            Note::ConsumerSubscribed(s) => Some(s.id),
            _ => None,
        })
        .await;

    sync_queue(&producer, atoms("abc")).await;
    producer.sync_info(CounterInfo::Tag("d")).await.unwrap();
    producer.sync_info(CounterInfo::Tag("e")).await.unwrap();
    producer.sync_info(CounterInfo::Tag("f")).await.unwrap();
    sync_queue(&producer, atoms("gh")).await;
    producer.sync_info(CounterInfo::Tag("i")).await.unwrap();

    support::barrier(&producer).await;
    inbox.refute_received("the first info", is_info("d"));

    forwarder_ask(&consumer, sub, 5).await;

    inbox.assert_consumed(atoms("abc")).await;
    inbox.assert_consumed(atoms("gh")).await;

    let mut infos = Vec::new();
    for _ in 0..4 {
        infos.push(inbox.next_info().await);
    }
    assert_eq!(infos, vec!["d", "e", "f", "i"]);
}
