//! GenStage's `test/gen_stage_test.exs`, describe block "buffer": events kept
//! while there is no demand, size limits with keep first / last, the
//! discard callback (`format_discarded`) and the buffered-count estimate.
//!
//! How the outcome is observed:
//! - GenStage's `capture_log` becomes [`CapturedLog`] (warnings logged by the
//!   stages, which run on the test's thread).
//! - The `DiscardedBufferLogger`'s own info log becomes a
//!   [`Note::DiscardedCount`] report from its `handle_discarded`.
//! - GenStage's log line reads "GenStage producer #PID<...> has discarded 3
//!   events from buffer"; Weir's reads "producer has discarded 3 events from
//!   its buffer" inside the stage's span, so the shared part is asserted.

use crate::support;

use support::*;
use weir_gen_stage::{BufferKeep, BufferSize, ProducerOptions, SubscribeOptions};

fn demand(max: usize, min: usize) -> SubscribeOptions<Item> {
    SubscribeOptions::new().max_demand(max).min_demand(min)
}

const DISCARDED_3: &str = "has discarded 3 events";

#[tokio::test]
async fn stores_events_when_there_is_no_demand() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<Item>::counting(0))
        .await
        .unwrap();
    producer
        .send_info(CounterInfo::Queue(atoms("abc")))
        .unwrap();
    async_queue(&producer, atoms("de"));

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(4, 0)).unwrap();

    inbox.assert_consumed(atoms("abcd")).await;
    inbox.assert_consumed(atoms("e")).await;
    inbox.assert_consumed(nums(0..=2)).await;
    inbox.assert_consumed(nums(3..=6)).await;
}

#[tokio::test]
async fn emits_warning_and_keeps_first_when_it_exceeds_configured_size() {
    let (log, _guard) = CapturedLog::start();
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::<Item>::counting(0).with_options(
            ProducerOptions::new()
                .buffer_size(5)
                .buffer_keep(BufferKeep::First),
        ),
    )
    .await
    .unwrap();
    sync_queue(&producer, atoms("abcde")).await;
    assert!(
        !log.contents().contains("has discarded"),
        "{}",
        log.contents()
    );

    sync_queue(&producer, atoms("fgh")).await;
    assert!(log.contents().contains(DISCARDED_3), "{}", log.contents());

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(4, 0)).unwrap();
    inbox.assert_consumed(atoms("abcd")).await;
    inbox.assert_consumed(atoms("e")).await;
}

#[tokio::test]
async fn emits_warning_and_keeps_last_when_it_exceeds_configured_size() {
    let (log, _guard) = CapturedLog::start();
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::<Item>::counting(0).with_options(ProducerOptions::new().buffer_size(5)),
    )
    .await
    .unwrap();
    sync_queue(&producer, atoms("abcde")).await;
    assert!(
        !log.contents().contains("has discarded"),
        "{}",
        log.contents()
    );

    sync_queue(&producer, atoms("fgh")).await;
    assert!(log.contents().contains(DISCARDED_3), "{}", log.contents());

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(4, 0)).unwrap();
    inbox.assert_consumed(atoms("defg")).await;
    inbox.assert_consumed(atoms("h")).await;
}

#[tokio::test]
async fn may_have_limit_set_to_infinity() {
    let (log, _guard) = CapturedLog::start();
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::<Item>::counting(0)
            .with_options(ProducerOptions::new().buffer_size(BufferSize::Infinity)),
    )
    .await
    .unwrap();
    sync_queue(&producer, atoms("abcde")).await;
    sync_queue(&producer, atoms("fgh")).await;

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(4, 0)).unwrap();
    inbox.assert_consumed(atoms("abcd")).await;
    inbox.assert_consumed(atoms("efgh")).await;
    assert!(
        !log.contents().contains("has discarded"),
        "{}",
        log.contents()
    );
}

#[tokio::test]
async fn calls_optional_format_discarded_callback_with_discarded_count_when_it_exceeds_configured_size()
 {
    let (log, _guard) = CapturedLog::start();
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(DiscardedBufferLogger::new(
        notify.clone(),
        false,
        ProducerOptions::new()
            .buffer_size(5)
            .buffer_keep(BufferKeep::First),
    ))
    .await
    .unwrap();

    producer.call(atoms("abcdefgh"), TIMEOUT).await.unwrap();
    inbox.assert_note(Note::DiscardedCount(3)).await;

    log.clear();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(4, 0)).unwrap();
    inbox.assert_consumed(atoms("abcd")).await;
    inbox.assert_consumed(atoms("e")).await;
    assert_eq!(log.contents(), "");
}

#[tokio::test]
async fn format_discarded_can_allow_printing_the_default_log_when_items_are_discarded() {
    let (log, _guard) = CapturedLog::start();
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(DiscardedBufferLogger::new(
        notify.clone(),
        true,
        ProducerOptions::new()
            .buffer_size(5)
            .buffer_keep(BufferKeep::First),
    ))
    .await
    .unwrap();

    producer.call(atoms("abcdefgh"), TIMEOUT).await.unwrap();
    inbox.assert_note(Note::DiscardedCount(3)).await;
    assert!(log.contents().contains(DISCARDED_3), "{}", log.contents());

    log.clear();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(5, 0)).unwrap();
    inbox.assert_consumed(atoms("abcde")).await;
    assert_eq!(log.contents(), "");
}

#[tokio::test]
async fn format_discarded_can_prevent_printing_the_default_log_when_items_are_discarded() {
    let (log, _guard) = CapturedLog::start();
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(DiscardedBufferLogger::new(
        notify.clone(),
        false,
        ProducerOptions::new()
            .buffer_size(5)
            .buffer_keep(BufferKeep::First),
    ))
    .await
    .unwrap();

    producer.call(atoms("abcdefgh"), TIMEOUT).await.unwrap();
    inbox.assert_note(Note::DiscardedCount(3)).await;
    assert!(!log.contents().contains(DISCARDED_3), "{}", log.contents());

    log.clear();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(5, 0)).unwrap();
    inbox.assert_consumed(atoms("abcde")).await;
    assert_eq!(log.contents(), "");
}

#[tokio::test]
async fn returns_the_correct_buffer_count_when_polled() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::<Item>::counting(0)
            .with_options(ProducerOptions::new().buffer_size(BufferSize::Infinity)),
    )
    .await
    .unwrap();
    sync_queue(&producer, atoms("abcde")).await;
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 5);

    sync_queue(&producer, atoms("fgh")).await;
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 8);

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.async_subscribe(&producer, demand(4, 0)).unwrap();
    inbox.assert_consumed(atoms("abcd")).await;
    inbox.assert_consumed(atoms("efgh")).await;

    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 0);
}
