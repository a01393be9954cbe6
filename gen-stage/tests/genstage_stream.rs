//! GenStage's `test/gen_stage_test.exs`, describe blocks "stream" and
//! "from_enumerable/2": consuming producers as a stream (batching, cleanup,
//! ending or failing by cancel mode) and producers built from enumerables.
//!
//! How the outcome is observed: GenStage's stream "exits" the caller; a
//! Weir [`EventStream`](weir_gen_stage::EventStream) yields one
//! `Err(Error::SubscriptionCancelled { .. })` and ends. GenStage's tests
//! check that no `$gen_consumer` message is left in the caller's mailbox
//! after `Enum.take`; a Rust stream owns its channel, so the equivalent
//! check is that the producer sees the subscription cancelled once the
//! stream is dropped. A producer that "does not ack" is a
//! [`RawProducer`] answering the subscription with a cancel.
//!
//! Skipped, no Rust equivalent:
//! - "does not remove unknown $gen_consumer and DOWN messages": a stream
//!   has its own channel, it cannot see or remove anyone else's messages.
//! - "exits when there is no named producer and subscription is
//!   permanent/transient" and "... temporary": no registered names; the
//!   dead-producer scenarios cover the outcome.
//! - "from_enumerable/2": "accepts a :link option" and "accepts a :name
//!   option": no links, no names.

use crate::support;

use futures::StreamExt;
use support::*;
use weir_gen_stage::protocol::{RawProducer, ToProducer};
use weir_gen_stage::{
    CancelMode, Cancellation, Error, FromIterOptions, OnCancel, ProducerRef, StopReason,
    SubscribeOptions,
};

/// `Enum.take(stream, n)`, failing on errors.
async fn take_ok<T: Send + 'static>(stream: weir_gen_stage::EventStream<T>, n: usize) -> Vec<T> {
    tokio::time::timeout(
        TIMEOUT,
        stream
            .take(n)
            .map(|event| event.expect("an event"))
            .collect(),
    )
    .await
    .expect("the stream yields within the timeout")
}

/// Everything the stream yields until it ends.
async fn all_items<T: Send + 'static>(
    stream: weir_gen_stage::EventStream<T>,
) -> Vec<Result<T, Error>> {
    tokio::time::timeout(TIMEOUT, stream.collect())
        .await
        .expect("the stream ends within the timeout")
}

fn cancel(mode: CancelMode) -> SubscribeOptions<u64> {
    SubscribeOptions::new().cancel(mode)
}

/// A producer that is not alive any more.
async fn dead_producer() -> ProducerRef<u64> {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .expect("the producer starts");
    producer
        .stop(StopReason::Normal)
        .await
        .expect("the stage stops");
    producer.producer()
}

/// A producer that answers the first subscription with a cancel
/// (`no_thanks`); it then stops, or keeps running if `lives`.
async fn refusing_producer(
    lives: bool,
) -> (
    ProducerRef<u64>,
    tokio::task::JoinHandle<Option<RawProducer<u64>>>,
) {
    let mut raw = RawProducer::<u64>::new();
    let producer = raw.producer_ref();
    let task = tokio::spawn(async move {
        if let Some(ToProducer::Subscribe {
            subscription,
            consumer,
            ..
        }) = raw.recv().await
        {
            raw.cancel(&consumer, subscription, StopReason::custom("no_thanks"));
        }
        lives.then_some(raw)
    });
    (producer, task)
}

fn assert_cancelled(
    items: &[Result<u64, Error>],
    producer: &ProducerRef<u64>,
    expected: Cancellation,
) {
    match items {
        [
            Err(Error::SubscriptionCancelled {
                producer: p,
                cancellation,
                ..
            }),
        ] => {
            assert_eq!(*p, producer.id());
            assert_eq!(*cancellation, expected);
        }
        other => panic!("expected one subscription error, got {other:?}"),
    }
}

// ---- stream ---------------------------------------------------------------

#[tokio::test]
async fn may_consume_10_events_out_of_demand_of_1000() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting_with(0, notify))
        .await
        .unwrap();

    let stream = weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new())]).unwrap();
    assert_eq!(take_ok(stream, 10).await, list(0..=9));

    // The dropped stream leaves nothing behind: its subscription is cancelled.
    inbox
        .assert_receive("the stream's cancellation", |note| match note {
            Note::ProducerCancelled(_, Cancellation::Cancel(StopReason::Normal)) => Some(()),
            _ => None,
        })
        .await;
}

#[tokio::test]
async fn may_consume_300_events_out_of_demand_of_100() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting_with(0, notify))
        .await
        .unwrap();

    let stream =
        weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new().max_demand(100))])
            .unwrap();
    let events = take_ok(stream, 300).await;
    assert_eq!(events.len(), 300);
    assert_eq!(events, list(0..300));

    inbox
        .assert_receive("the stream's cancellation", |note| match note {
            Note::ProducerCancelled(_, Cancellation::Cancel(StopReason::Normal)) => Some(()),
            _ => None,
        })
        .await;
}

#[tokio::test]
async fn exits_when_producer_is_dead_and_subscription_is_permanent_transient() {
    for mode in [CancelMode::Permanent, CancelMode::Transient] {
        let producer = dead_producer().await;
        let items =
            all_items(weir_gen_stage::stream([(producer.clone(), cancel(mode))]).unwrap()).await;
        assert_cancelled(&items, &producer, Cancellation::Down(StopReason::Noproc));
    }
}

#[tokio::test]
async fn exits_when_producer_does_not_ack_and_subscription_is_permanent_transient() {
    for mode in [CancelMode::Permanent, CancelMode::Transient] {
        let (producer, task) = refusing_producer(false).await;
        let items =
            all_items(weir_gen_stage::stream([(producer.clone(), cancel(mode))]).unwrap()).await;
        assert_cancelled(
            &items,
            &producer,
            Cancellation::Cancel(StopReason::custom("no_thanks")),
        );
        assert!(task.await.unwrap().is_none());
    }
}

#[tokio::test]
async fn exits_when_producer_does_not_ack_and_lives_and_subscription_is_permanent_transient() {
    for mode in [CancelMode::Permanent, CancelMode::Transient] {
        let (producer, task) = refusing_producer(true).await;
        let items =
            all_items(weir_gen_stage::stream([(producer.clone(), cancel(mode))]).unwrap()).await;
        assert_cancelled(
            &items,
            &producer,
            Cancellation::Cancel(StopReason::custom("no_thanks")),
        );
        // The producer is still running when the stream has ended.
        let still_running = task.await.unwrap();
        assert!(still_running.is_some());
        assert!(producer.is_alive());
    }
}

#[tokio::test]
async fn exits_when_producer_is_dead_and_subscription_is_temporary() {
    let producer = dead_producer().await;
    let stream = weir_gen_stage::stream([(producer, cancel(CancelMode::Temporary))]).unwrap();
    assert_eq!(take_ok(stream, 10).await, Vec::<u64>::new());
}

#[tokio::test]
async fn exits_when_producer_does_not_ack_and_subscription_is_temporary() {
    let (producer, task) = refusing_producer(false).await;
    let stream = weir_gen_stage::stream([(producer, cancel(CancelMode::Temporary))]).unwrap();
    assert_eq!(take_ok(stream, 10).await, Vec::<u64>::new());
    assert!(task.await.unwrap().is_none());
}

#[tokio::test]
async fn exits_when_producer_does_not_ack_and_lives_and_subscription_is_temporary() {
    let (producer, task) = refusing_producer(true).await;
    let stream =
        weir_gen_stage::stream([(producer.clone(), cancel(CancelMode::Temporary))]).unwrap();
    assert_eq!(take_ok(stream, 10).await, Vec::<u64>::new());
    // The producer is still running when the stream has ended.
    let still_running = task.await.unwrap();
    assert!(still_running.is_some());
    assert!(producer.is_alive());
}

#[tokio::test]
async fn sends_termination_message_on_done() {
    let producer = weir_gen_stage::from_iter(0u64..).await.unwrap();

    let stream =
        weir_gen_stage::stream([(producer.clone(), cancel(CancelMode::Transient))]).unwrap();
    assert_eq!(take_ok(stream, 10).await, list(0..=9));

    // The infinite producer is not done: once it has handled the stream's
    // cancellation (a call after it is the barrier), it is still running.
    producer.estimate_buffered_count().await.unwrap();
    assert!(producer.is_alive());
}

#[tokio::test]
async fn sends_termination_message_on_halt() {
    let producer = weir_gen_stage::from_iter((0u64..).take(10)).await.unwrap();

    let stream =
        weir_gen_stage::stream([(producer.clone(), cancel(CancelMode::Transient))]).unwrap();
    let items = all_items(stream).await;
    let events: Vec<u64> = items.into_iter().map(|e| e.expect("an event")).collect();
    assert_eq!(events, list(0..=9));

    // The producer stopped once its last events went out.
    let reason = tokio::time::timeout(TIMEOUT, producer.stopped())
        .await
        .unwrap();
    assert_eq!(reason, StopReason::Normal);
}

#[tokio::test]
async fn raises_on_bad_options() {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let result =
        weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new().max_demand(0))]);
    match result {
        Err(
            error @ Error::InvalidOption {
                option: "max_demand",
                ..
            },
        ) => assert_eq!(
            error.to_string(),
            "invalid option `max_demand`: expected a value equal to or greater than 1, got: 0"
        ),
        other => panic!("expected invalid options, got {other:?}"),
    }
}

// ---- from_enumerable/2 ----------------------------------------------------

#[tokio::test]
async fn from_enumerable_accepts_a_on_cancel_option() {
    let cycle = || [1u64, 2, 3].into_iter().cycle();

    let producer = weir_gen_stage::from_iter(cycle()).await.unwrap();
    let stream = weir_gen_stage::stream([(producer.clone(), SubscribeOptions::new())]).unwrap();
    assert_eq!(take_ok(stream, 5).await, vec![1, 2, 3, 1, 2]);
    producer.estimate_buffered_count().await.unwrap();
    assert!(producer.is_alive());

    let producer = weir_gen_stage::from_iter_with(
        cycle(),
        FromIterOptions::new().on_cancel(OnCancel::Continue),
    )
    .await
    .unwrap();
    let stream = weir_gen_stage::stream([(producer.clone(), SubscribeOptions::new())]).unwrap();
    assert_eq!(take_ok(stream, 5).await, vec![1, 2, 3, 1, 2]);
    producer.estimate_buffered_count().await.unwrap();
    assert!(producer.is_alive());

    let producer =
        weir_gen_stage::from_iter_with(cycle(), FromIterOptions::new().on_cancel(OnCancel::Stop))
            .await
            .unwrap();
    let stream = weir_gen_stage::stream([(producer.clone(), SubscribeOptions::new())]).unwrap();
    assert_eq!(take_ok(stream, 5).await, vec![1, 2, 3, 1, 2]);
    let reason = tokio::time::timeout(TIMEOUT, producer.stopped())
        .await
        .unwrap();
    assert_eq!(reason, StopReason::Normal);
}
