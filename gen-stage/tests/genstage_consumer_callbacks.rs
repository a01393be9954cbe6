//! GenStage's `test/gen_stage_test.exs`, describe block "consumer
//! callbacks": init, subscribe and cancel callbacks, and the cancel modes
//! (permanent, transient, temporary) deciding whether the consumer stops when
//! its producer cancels or goes down.
//!
//! How the outcome is observed: GenStage's tests trap exits and receive
//! `{:EXIT, consumer, reason}`; here `StageRef::stopped` returns the
//! consumer's stop reason. GenStage cancels with `self()` (a pid) as an
//! abnormal reason and kills producers with `Process.exit(pid, :kill)`; here
//! the abnormal reason is `StopReason::custom("oops")` and a killed producer
//! is stopped with [`StopReason::Killed`].
//!
//! Skipped, no Rust equivalent:
//! - "init/1" parts `:ignore`, `:unknown`, unknown options and registered
//!   names (typed `init` result and options, no names). The stop and the
//!   invalid subscription options are ported.
//! - "handle_subscribe/4 with invalid demand": `handle_subscribe` returns
//!   the closed enum `ConsumerDemand`.
//! - "handle_info/2 is called for unmatched down messages": no process
//!   monitor messages reach stages.
//! - "emit warning if trying to dispatch events from a consumer": a
//!   consumer's callbacks return `Noreply<Infallible>`; emitting events does
//!   not compile.
//! - "format_status/2": no `:sys` status.

use crate::support;

use support::*;
use weir_gen_stage::{
    CancelMode, Cancellation, Consumer, ConsumerContext, ConsumerOptions, Error, Noreply,
    StopReason, SubscribeOptions, Subscription,
};

/// A consumer whose `init` returns what it is given.
struct InitWith(Option<Result<ConsumerOptions<u64>, StopReason>>);

impl Consumer for InitWith {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerOptions<u64>, StopReason> {
        self.0.take().unwrap_or_else(|| Ok(ConsumerOptions::new()))
    }

    async fn handle_events(
        &mut self,
        _events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        Noreply::none()
    }
}

#[tokio::test]
async fn init_1() {
    let stopped =
        weir_gen_stage::start_consumer(InitWith(Some(Err(StopReason::custom("oops"))))).await;
    assert!(
        matches!(&stopped, Err(Error::InitFailed { reason, .. }) if *reason == StopReason::custom("oops")),
        "{stopped:?}"
    );

    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let bad_subscription =
        ConsumerOptions::new().subscribe_to(&producer, SubscribeOptions::new().max_demand(0));
    let bad = weir_gen_stage::start_consumer(InitWith(Some(Ok(bad_subscription)))).await;
    assert!(
        matches!(
            &bad,
            Err(Error::InvalidOption {
                option: "max_demand",
                ..
            })
        ),
        "{bad:?}"
    );

    let started = weir_gen_stage::start_consumer(InitWith(None))
        .await
        .unwrap();
    assert!(started.is_alive());
}

#[tokio::test]
async fn handle_subscribe_4() {
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

    inbox
        .assert_note(Note::ConsumerSubscribed(Subscription {
            id: sub,
            producer: producer.id(),
            consumer: consumer.id(),
        }))
        .await;
}

/// A counting producer and a forwarder subscribed to it with `cancel`.
async fn subscribed(
    cancel: CancelMode,
) -> (CounterRef<u64>, ForwarderRef<u64>, Subscription, Inbox<u64>) {
    let (notify, inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .expect("the producer starts");
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .expect("the consumer starts");
    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new().cancel(cancel))
        .await
        .expect("the producer accepts the subscription");
    let subscription = Subscription {
        id: sub,
        producer: producer.id(),
        consumer: consumer.id(),
    };
    (producer, consumer, subscription, inbox)
}

/// The consumer keeps running: it still answers a call.
async fn assert_running(consumer: &ForwarderRef<u64>) {
    ping(consumer).await;
    assert!(consumer.is_alive());
}

#[tokio::test]
async fn handle_cancel_3_with_temporary_subscription() {
    let (producer, consumer, subscription, mut inbox) = subscribed(CancelMode::Temporary).await;

    producer
        .cancel_downstream(subscription.id, StopReason::custom("oops"))
        .unwrap();

    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Cancel(StopReason::custom("oops")),
        ))
        .await;
    assert_running(&consumer).await;
}

#[tokio::test]
async fn handle_cancel_3_with_normal_transient_subscription() {
    let (producer, consumer, subscription, mut inbox) = subscribed(CancelMode::Transient).await;

    producer
        .cancel_downstream(subscription.id, StopReason::Normal)
        .unwrap();

    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Cancel(StopReason::Normal),
        ))
        .await;
    assert_running(&consumer).await;
}

#[tokio::test]
async fn handle_cancel_3_with_non_normal_transient_subscription() {
    let (producer, consumer, subscription, mut inbox) = subscribed(CancelMode::Transient).await;

    producer
        .cancel_downstream(subscription.id, StopReason::custom("oops"))
        .unwrap();

    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Cancel(StopReason::custom("oops")),
        ))
        .await;
    assert_eq!(consumer.stopped().await, StopReason::custom("oops"));
}

#[tokio::test]
async fn handle_cancel_3_with_permanent_subscription() {
    let (producer, consumer, subscription, mut inbox) = subscribed(CancelMode::Permanent).await;

    producer
        .cancel_downstream(subscription.id, StopReason::custom("oops"))
        .unwrap();

    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Cancel(StopReason::custom("oops")),
        ))
        .await;
    assert_eq!(consumer.stopped().await, StopReason::custom("oops"));
}

#[tokio::test]
async fn handle_cancel_3_on_producer_down_with_temporary_subscription() {
    let (producer, consumer, subscription, mut inbox) = subscribed(CancelMode::Temporary).await;

    producer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
    assert_running(&consumer).await;
}

#[tokio::test]
async fn handle_cancel_3_on_producer_down_with_transient_subscription() {
    let (producer, consumer, subscription, mut inbox) = subscribed(CancelMode::Transient).await;

    producer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
    assert_eq!(consumer.stopped().await, StopReason::Killed);
}

#[tokio::test]
async fn handle_cancel_3_on_producer_down_with_permanent_subscription() {
    let (producer, consumer, subscription, mut inbox) = subscribed(CancelMode::Permanent).await;

    producer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::ConsumerCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
    assert_eq!(consumer.stopped().await, StopReason::Killed);
}

#[tokio::test]
async fn terminate_1() {
    let (notify, mut inbox) = inbox::<u64>();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();

    consumer.stop(StopReason::Normal).await.unwrap();

    inbox
        .assert_note(Note::Terminated(StopReason::Normal))
        .await;
}
