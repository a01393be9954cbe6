//! GenStage's `test/gen_stage_test.exs`, describe block "producer_consumer
//! callbacks": a producer_consumer's callbacks on both of its sides, and the
//! cancel modes of its subscriptions to producers.
//!
//! How the outcome is observed: as in `genstage_consumer_callbacks.rs`,
//! `{:EXIT, stage, reason}` becomes `stopped()`, a pid as abnormal reason
//! becomes `StopReason::custom("oops")`, `Process.exit(pid, :kill)` becomes
//! `stop(StopReason::Killed)` and `Process.exit(pid, :shutdown)` becomes
//! `stop(StopReason::Shutdown)`. GenStage's "consumer handle_subscribe/4"
//! starts the Doubler as a plain consumer; a Rust producer_consumer is
//! always one, and its producer-side `handle_subscribe` is what is asserted.
//!
//! Skipped, no Rust equivalent:
//! - "init/1" parts `:ignore`, `:unknown`, unknown options, bad dispatcher
//!   and registered names (typed `init` result and options, no names). The
//!   stop is ported.
//! - "producer handle_subscribe/4 does not accept manual demand": the
//!   consumer-side `handle_subscribe_consumer` returns `Result<(), _>`.
//! - "consumer handle_subscribe/4 with invalid demand": `ConsumerDemand` is
//!   a closed enum.
//! - "format_status/2": no `:sys` status.

use crate::support;

use support::*;
use weir_gen_stage::{
    CancelMode, Cancellation, Error, Noreply, ProducerConsumer, ProducerConsumerContext,
    ProducerConsumerOptions, StopReason, SubscribeOptions, Subscription,
};

/// A producer_consumer whose `init` stops with `oops`.
struct StopsInInit;

impl ProducerConsumer for StopsInInit {
    type Messages = ();
    type In = u64;
    type Out = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<u64, u64>, StopReason> {
        Err(StopReason::custom("oops"))
    }

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Emit(events)
    }
}

#[tokio::test]
async fn init_1() {
    let stopped = weir_gen_stage::start_producer_consumer(StopsInInit).await;
    assert!(
        matches!(&stopped, Err(Error::InitFailed { reason, .. }) if *reason == StopReason::custom("oops")),
        "{stopped:?}"
    );

    let (notify, _inbox) = inbox();
    let started = weir_gen_stage::start_producer_consumer(Doubler::new(notify))
        .await
        .unwrap();
    assert!(started.is_alive());
}

#[tokio::test]
async fn producer_handle_subscribe_4() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .unwrap();

    inbox
        .assert_note(Note::PcSubscribed(
            Side::Consumer,
            Subscription {
                id: sub,
                producer: producer.id(),
                consumer: consumer.id(),
            },
        ))
        .await;
}

/// A doubler with a forwarder subscribed to it (temporary).
async fn doubler_with_consumer() -> (DoublerRef, ForwarderRef<u64>, Subscription, Inbox<u64>) {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()))
        .await
        .expect("the producer_consumer starts");
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .expect("the consumer starts");
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("the producer accepts the subscription");
    let subscription = Subscription {
        id: sub,
        producer: producer.id(),
        consumer: consumer.id(),
    };
    inbox
        .assert_note(Note::PcSubscribed(Side::Consumer, subscription))
        .await;
    (producer, consumer, subscription, inbox)
}

#[tokio::test]
async fn producer_handle_cancel_3() {
    let (producer, _consumer, subscription, mut inbox) = doubler_with_consumer().await;

    producer
        .cancel_downstream(subscription.id, StopReason::custom("oops"))
        .unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Cancel(StopReason::custom("oops")),
        ))
        .await;
}

#[tokio::test]
async fn producer_handle_cancel_3_on_consumer_down() {
    let (_producer, consumer, subscription, mut inbox) = doubler_with_consumer().await;

    consumer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
}

#[tokio::test]
async fn consumer_handle_subscribe_4() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_producer_consumer(Doubler::new(notify))
        .await
        .unwrap();

    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .unwrap();

    inbox
        .assert_note(Note::PcSubscribed(
            Side::Producer,
            Subscription {
                id: sub,
                producer: producer.id(),
                consumer: consumer.id(),
            },
        ))
        .await;
}

/// A counting producer -> doubler (subscribed with `cancel`) -> forwarder.
async fn pipeline(cancel: CancelMode) -> (CounterRef<u64>, DoublerRef, Subscription, Inbox<u64>) {
    let (notify, inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .expect("the producer starts");
    let producer_consumer = weir_gen_stage::start_producer_consumer(Doubler::new(notify.clone()))
        .await
        .expect("the producer_consumer starts");
    let _consumer = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&producer_consumer, SubscribeOptions::new()),
    )
    .await
    .expect("the consumer starts");
    let sub = producer_consumer
        .subscribe(&producer, SubscribeOptions::new().cancel(cancel))
        .await
        .expect("the producer accepts the subscription");
    let subscription = Subscription {
        id: sub,
        producer: producer.id(),
        consumer: producer_consumer.id(),
    };
    (producer, producer_consumer, subscription, inbox)
}

#[tokio::test]
async fn consumer_handle_cancel_3_with_temporary_subscription() {
    let (producer, producer_consumer, subscription, mut inbox) =
        pipeline(CancelMode::Temporary).await;

    producer
        .cancel_downstream(subscription.id, StopReason::custom("oops"))
        .unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Cancel(StopReason::custom("oops")),
        ))
        .await;
    ping_doubler(&producer_consumer).await;
    assert!(producer_consumer.is_alive());
}

#[tokio::test]
async fn consumer_handle_cancel_3_with_permanent_subscription() {
    let (producer, producer_consumer, subscription, mut inbox) =
        pipeline(CancelMode::Permanent).await;

    producer
        .cancel_downstream(subscription.id, StopReason::custom("oops"))
        .unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Cancel(StopReason::custom("oops")),
        ))
        .await;
    assert_eq!(
        producer_consumer.stopped().await,
        StopReason::custom("oops")
    );
}

#[tokio::test]
async fn consumer_handle_cancel_3_on_producer_down_with_temporary_subscription() {
    let (producer, producer_consumer, subscription, mut inbox) =
        pipeline(CancelMode::Temporary).await;

    producer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
    ping_doubler(&producer_consumer).await;
    assert!(producer_consumer.is_alive());
}

#[tokio::test]
async fn consumer_handle_cancel_3_on_producer_normal_down_with_transient_subscription() {
    let (producer, producer_consumer, subscription, mut inbox) =
        pipeline(CancelMode::Transient).await;

    producer.stop(StopReason::Shutdown).await.unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Down(StopReason::Shutdown),
        ))
        .await;
    ping_doubler(&producer_consumer).await;
    assert!(producer_consumer.is_alive());
}

#[tokio::test]
async fn consumer_handle_cancel_3_on_producer_non_normal_down_with_transient_subscription() {
    let (producer, producer_consumer, subscription, mut inbox) =
        pipeline(CancelMode::Transient).await;

    producer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
    assert_eq!(producer_consumer.stopped().await, StopReason::Killed);
}

#[tokio::test]
async fn consumer_handle_cancel_3_on_producer_down_with_permanent_subscription() {
    let (producer, producer_consumer, subscription, mut inbox) =
        pipeline(CancelMode::Permanent).await;

    producer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::PcCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
    assert_eq!(producer_consumer.stopped().await, StopReason::Killed);
}
