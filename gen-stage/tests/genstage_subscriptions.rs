//! GenStage's `test/gen_stage_test.exs`, describe blocks "sync_subscribe/2",
//! "sync_resubscribe/2", "async_resubscribe/2", "manual demand" and
//! "subscribe_to names".
//!
//! Where Weir deliberately differs:
//! - `subscribe` waits for the producer's answer: GenStage's
//!   `sync_subscribe` returns `{:ok, ref}` as soon as the consumer has sent
//!   the subscription, and a dead producer then shows only as the consumer's
//!   `{:down, :noproc}` cancellation. Weir returns
//!   `Err(SubscriptionRefused { cancellation: Down(Noproc) })` and the
//!   consumer then goes through the same cancellation (and, if permanent,
//!   stops with `noproc`).
//! - A consumer subscribing twice to a Broadcast producer is refused with
//!   `SubscriptionRefused(AlreadySubscribed)`; as in GenStage the consumer
//!   and its first subscription keep running.
//!
//! Skipped, no Rust equivalent:
//! - "consumer exits when there is no named producer and subscription is
//!   permanent" and "... temporary": stages have no registered names; a
//!   handle always names a stage that was started (the dead-producer tests
//!   cover the outcome).
//! - "subscribe_to names": "can be an atom name", "can be a via name ...",
//!   "can be a global name ...", "logs warning about ambiguity ..." (twice):
//!   no names, see above. "can be pid" is ported.

use crate::support;

use support::*;
use weir_gen_stage::protocol::RawProducer;
use weir_gen_stage::{
    BroadcastDispatcher, CancelMode, Cancellation, Error, ProducerOptions, StopReason,
    SubscribeError, SubscribeOptions, new_subscription_id,
};

fn bad_max_demand() -> SubscribeOptions<u64> {
    SubscribeOptions::new().max_demand(0)
}

fn bad_min_demand() -> SubscribeOptions<u64> {
    SubscribeOptions::new().min_demand(2000)
}

fn assert_bad_options(result: Result<impl std::fmt::Debug, Error>, message: &str) {
    match result {
        Err(error @ Error::InvalidOption { .. }) => assert_eq!(error.to_string(), message),
        other => panic!("expected invalid options, got {other:?}"),
    }
}

const MAX_DEMAND_0: &str =
    "invalid option `max_demand`: expected a value equal to or greater than 1, got: 0";
const MIN_DEMAND_2000: &str =
    "invalid option `min_demand`: expected a value equal to or less than 999, got: 2000";

/// A producer that is not alive any more.
async fn dead_producer() -> CounterRef<u64> {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .expect("the producer starts");
    producer
        .stop(StopReason::Normal)
        .await
        .expect("the stage stops");
    producer
}

fn subscribed_to(
    producer: weir_gen_stage::StageId,
) -> impl Fn(&Note<u64>) -> Option<weir_gen_stage::Subscription> {
    move |note| match note {
        Note::ConsumerSubscribed(s) if s.producer == producer => Some(*s),
        _ => None,
    }
}

// ---- sync_subscribe/2 -----------------------------------------------------

#[tokio::test]
async fn sync_subscribe_returns_ok_with_reference() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .unwrap();

    let subscription = inbox
        .assert_receive("the subscription", subscribed_to(producer.id()))
        .await;
    assert_eq!(subscription.id, sub);
    assert_eq!(subscription.consumer, consumer.id());
}

#[tokio::test]
async fn caller_exits_when_the_consumer_is_dead() {
    let (notify, _inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.stop(StopReason::Normal).await.unwrap();

    let result = consumer.subscribe(&producer, SubscribeOptions::new()).await;
    assert_eq!(
        result,
        Err(Error::NotAlive {
            stage: consumer.id()
        })
    );
}

#[tokio::test]
async fn sync_subscribe_returns_errors_on_bad_options() {
    let (notify, _inbox) = inbox();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    let mut whatever = RawProducer::<u64>::new();

    assert_bad_options(
        consumer
            .subscribe(&whatever.producer_ref(), bad_max_demand())
            .await,
        MAX_DEMAND_0,
    );
    assert_bad_options(
        consumer
            .subscribe(&whatever.producer_ref(), bad_min_demand())
            .await,
        MIN_DEMAND_2000,
    );

    // Nothing was sent to the producer, and the consumer keeps running.
    ping(&consumer).await;
    assert!(whatever.try_recv().is_none());
}

#[tokio::test]
async fn consumer_exits_when_producer_is_dead_and_subscription_is_permanent() {
    let (notify, mut inbox) = inbox();
    let producer = dead_producer().await;
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    let result = consumer.subscribe(&producer, SubscribeOptions::new()).await;
    assert!(
        matches!(
            &result,
            Err(Error::SubscriptionRefused { producer: p, cancellation: Cancellation::Down(StopReason::Noproc) })
                if *p == producer.id()
        ),
        "{result:?}"
    );
    assert_eq!(consumer.stopped().await, StopReason::Noproc);
    inbox
        .assert_note(Note::Terminated(StopReason::Noproc))
        .await;
}

#[tokio::test]
async fn consumer_does_not_exit_when_producer_is_dead_and_subscription_is_temporary() {
    let (notify, mut inbox) = inbox();
    let producer = dead_producer().await;
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    let result = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await;
    assert!(
        matches!(result, Err(Error::SubscriptionRefused { .. })),
        "{result:?}"
    );
    let subscription = inbox
        .assert_receive("the subscription", subscribed_to(producer.id()))
        .await;
    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Down(StopReason::Noproc),
        ))
        .await;
    ping(&consumer).await;
    assert!(consumer.is_alive());
}

#[tokio::test]
async fn handles_subscription_error_gracefully() {
    let (notify, _producer_inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::<u64>::notifying(notify)
            .with_options(ProducerOptions::new().dispatcher(BroadcastDispatcher::new())),
    )
    .await
    .unwrap();
    let (notify1, mut inbox1) = inbox();
    let (notify2, mut inbox2) = inbox();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify1))
        .await
        .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(Forwarder::new(notify2))
        .await
        .unwrap();

    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .unwrap();
    let second = consumer.subscribe(&producer, SubscribeOptions::new()).await;
    assert!(
        matches!(
            &second,
            Err(Error::SubscriptionRefused {
                cancellation: Cancellation::Cancel(StopReason::SubscriptionRefused(
                    SubscribeError::AlreadySubscribed { .. }
                )),
                ..
            })
        ),
        "{second:?}"
    );

    consumer2
        .async_subscribe(&producer, SubscribeOptions::new())
        .unwrap();
    consumer2
        .async_subscribe(&producer, SubscribeOptions::new())
        .unwrap();
    support::barrier(&producer).await;
    ping(&consumer2).await;

    // Each consumer is subscribed exactly once: one event reaches each once.
    sync_queue(&producer, vec![7]).await;
    inbox1.assert_consumed(vec![7]).await;
    inbox2.assert_consumed(vec![7]).await;
    support::barrier(&producer).await;
    ping(&consumer).await;
    ping(&consumer2).await;
    inbox1.refute_received("a second copy", is_consumed);
    inbox2.refute_received("a second copy", is_consumed);
    assert!(consumer.is_alive() && consumer2.is_alive() && producer.is_alive());
}

// ---- sync_resubscribe/2 ---------------------------------------------------

#[tokio::test]
async fn sync_resubscribe_returns_ok_with_reference() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    let old = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .unwrap();

    let new = consumer
        .resubscribe(
            old,
            StopReason::custom("resubscribe"),
            &producer,
            SubscribeOptions::new(),
        )
        .await
        .unwrap();
    assert_ne!(old, new);

    assert_eq!(
        inbox
            .assert_receive("the old subscription", subscribed_to(producer.id()))
            .await
            .id,
        old
    );
    assert_eq!(
        inbox
            .assert_receive("the new subscription", subscribed_to(producer.id()))
            .await
            .id,
        new
    );
}

#[tokio::test]
async fn sync_resubscribe_returns_ok_with_reference_even_if_previous_subscription_does_not_exist() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    let sub = consumer
        .resubscribe(
            new_subscription_id(),
            StopReason::custom("resubscribe"),
            &producer,
            SubscribeOptions::new(),
        )
        .await
        .unwrap();

    assert_eq!(
        inbox
            .assert_receive("the subscription", subscribed_to(producer.id()))
            .await
            .id,
        sub
    );
}

#[tokio::test]
async fn sync_resubscribe_returns_errors_on_bad_options() {
    let (notify, _inbox) = inbox();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    let whatever = RawProducer::<u64>::new();
    let reason = || StopReason::custom("resubscribe");

    assert_bad_options(
        consumer
            .resubscribe(
                new_subscription_id(),
                reason(),
                &whatever.producer_ref(),
                bad_max_demand(),
            )
            .await,
        MAX_DEMAND_0,
    );
    assert_bad_options(
        consumer
            .resubscribe(
                new_subscription_id(),
                reason(),
                &whatever.producer_ref(),
                bad_min_demand(),
            )
            .await,
        MIN_DEMAND_2000,
    );
}

// ---- async_resubscribe/2 --------------------------------------------------

#[tokio::test]
async fn async_resubscribe_returns_ok_with_reference() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    let old = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .unwrap();

    consumer
        .async_resubscribe(
            old,
            StopReason::custom("resubscribe"),
            &producer,
            SubscribeOptions::new(),
        )
        .unwrap();

    assert_eq!(
        inbox
            .assert_receive("the old subscription", subscribed_to(producer.id()))
            .await
            .id,
        old
    );
    assert_ne!(
        inbox
            .assert_receive("a new subscription", subscribed_to(producer.id()))
            .await
            .id,
        old
    );
}

#[tokio::test]
async fn async_resubscribe_returns_ok_with_reference_even_if_previous_subscription_does_not_exist()
{
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    consumer
        .async_resubscribe(
            new_subscription_id(),
            StopReason::custom("resubscribe"),
            &producer,
            SubscribeOptions::new(),
        )
        .unwrap();

    inbox
        .assert_receive("the subscription", subscribed_to(producer.id()))
        .await;
}

// ---- manual demand --------------------------------------------------------

#[tokio::test]
async fn manual_demand_can_be_set_on_subscribe() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer
        .async_subscribe(
            &producer,
            SubscribeOptions::new().extra("consumer_demand", "manual"),
        )
        .unwrap();

    let sub = inbox
        .assert_receive("the subscription", subscribed_to(producer.id()))
        .await
        .id;
    forwarder_ask(&consumer, sub, 50).await;
    inbox.assert_consumed(list(0..=49)).await;
    forwarder_ask(&consumer, sub, 50).await;
    inbox.assert_consumed(list(50..=99)).await;
}

#[tokio::test]
async fn manual_demand_can_be_set_on_subscribe_on_init() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify).subscribe_to(
        &producer,
        SubscribeOptions::new().extra("consumer_demand", "manual"),
    ))
    .await
    .unwrap();

    let sub = inbox
        .assert_receive("the subscription", subscribed_to(producer.id()))
        .await
        .id;
    forwarder_ask(&consumer, sub, 50).await;
    inbox.assert_consumed(list(0..=49)).await;
    forwarder_ask(&consumer, sub, 50).await;
    inbox.assert_consumed(list(50..=99)).await;
}

// ---- subscribe_to names ---------------------------------------------------

#[tokio::test]
async fn subscribe_to_can_be_pid() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&producer, SubscribeOptions::new()),
    )
    .await
    .unwrap();
    inbox.next_consumed().await;
}
