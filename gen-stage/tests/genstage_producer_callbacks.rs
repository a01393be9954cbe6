//! GenStage's `test/gen_stage_test.exs`, describe block "producer
//! callbacks": init, subscribe and cancel callbacks, calls that emit events,
//! early replies, stopping from a call, terminate.
//!
//! How the outcome is observed: GenStage's test reads its own mailbox with
//! `Process.info(self(), :messages)` to see events and the call's reply in
//! order. Here a [`RawConsumer`] receives the events, and the order is shown
//! by what the consumer already holds when the reply arrives (events before
//! reply), or by holding the callback after its early reply (reply before
//! events). "Killing" a consumer is stopping it with [`StopReason::Killed`].
//!
//! Where Weir deliberately differs: `init/1`'s `buffer_size: -1` cannot be
//! expressed (sizes are unsigned); `buffer_size: 0` is refused instead (see
//! SEMANTICS.md), and a bad dispatcher is a type error.
//!
//! Skipped, no Rust equivalent:
//! - "init/1" parts `:ignore`, `:unknown` return values, unknown options and
//!   registered names: `init` returns a typed `Result`, options are a typed
//!   builder, stages have no names.
//! - "handle_subscribe/4 does not accept manual demand": a producer's
//!   `handle_subscribe` returns `Result<(), StopReason>`; there is no manual
//!   mode to return.
//! - "handle_info/2 is called for unmatched down messages": stages receive no
//!   process monitor messages; infos are typed.
//! - "format_status/2": no `:sys` status.
//! - "generates child_spec/1" (the first test of `gen_stage_test.exs`, outside
//!   any describe block): stages are not started from OTP child specs.

use crate::support;

use support::*;
use tokio::sync::oneshot;
use weir_gen_stage::protocol::{RawConsumer, ToConsumer};
use weir_gen_stage::{
    CancelMode, Cancellation, Error, Noreply, Producer, ProducerContext, ProducerOptions,
    StopReason, SubscribeOptions, Subscription, SubscriptionOptions, new_subscription_id,
};

/// A producer whose `init` returns what it is given.
struct InitWith(Option<Result<ProducerOptions<u64>, StopReason>>);

impl Producer for InitWith {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        self.0.take().unwrap_or_else(|| Ok(ProducerOptions::new()))
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::none()
    }
}

#[tokio::test]
async fn init_1() {
    let stopped =
        weir_gen_stage::start_producer(InitWith(Some(Err(StopReason::custom("oops"))))).await;
    assert!(
        matches!(&stopped, Err(Error::InitFailed { reason, .. }) if *reason == StopReason::custom("oops")),
        "{stopped:?}"
    );

    let bad_buffer =
        weir_gen_stage::start_producer(InitWith(Some(Ok(ProducerOptions::new().buffer_size(0)))))
            .await;
    match bad_buffer {
        Err(
            error @ Error::InvalidOption {
                option: "buffer_size",
                ..
            },
        ) => assert_eq!(
            error.to_string(),
            "invalid option `buffer_size`: expected a value equal to or greater than 1, or infinity, got: 0"
        ),
        other => panic!("expected a refused buffer_size, got {other:?}"),
    }

    let started = weir_gen_stage::start_producer(InitWith(None))
        .await
        .unwrap();
    assert!(started.is_alive());
}

#[tokio::test]
async fn handle_subscribe_4() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify.clone()))
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
        .assert_note(Note::ProducerSubscribed(Subscription {
            id: sub,
            producer: producer.id(),
            consumer: consumer.id(),
        }))
        .await;
}

#[tokio::test]
async fn handle_cancel_3() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify.clone()))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .unwrap();
    let subscription = Subscription {
        id: sub,
        producer: producer.id(),
        consumer: consumer.id(),
    };
    inbox
        .assert_note(Note::ProducerSubscribed(subscription))
        .await;

    producer
        .cancel_downstream(sub, StopReason::custom("oops"))
        .unwrap();

    inbox
        .assert_note(Note::ProducerCancelled(
            subscription,
            Cancellation::Cancel(StopReason::custom("oops")),
        ))
        .await;
}

#[tokio::test]
async fn handle_cancel_3_on_consumer_down() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify.clone()))
        .await
        .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .unwrap();
    let subscription = Subscription {
        id: sub,
        producer: producer.id(),
        consumer: consumer.id(),
    };
    inbox
        .assert_note(Note::ProducerSubscribed(subscription))
        .await;

    consumer.stop(StopReason::Killed).await.unwrap();

    inbox
        .assert_note(Note::ProducerCancelled(
            subscription,
            Cancellation::Down(StopReason::Killed),
        ))
        .await;
}

/// A raw consumer subscribed to `producer` that asked for 3 events.
fn subscribe_raw(producer: &CounterRef<u64>) -> (RawConsumer<u64>, weir_gen_stage::SubscriptionId) {
    let mut raw = RawConsumer::new();
    let sub = new_subscription_id();
    raw.subscribe(producer, sub, SubscriptionOptions::new(1000, 500));
    raw.ask(producer, sub, 3);
    (raw, sub)
}

#[tokio::test]
async fn handle_call_3_sends_events_before_reply() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify))
        .await
        .unwrap();
    let (mut raw, sub) = subscribe_raw(&producer);

    producer
        .call(CounterCall::Queue(vec![1, 2, 3]), TIMEOUT)
        .await
        .unwrap();

    // The events were sent before the reply: they are already here.
    assert_eq!(raw.try_recv(), Some(ToConsumer::Ack { subscription: sub }));
    assert_eq!(
        raw.try_recv(),
        Some(ToConsumer::Events {
            subscription: sub,
            events: vec![1, 2, 3]
        })
    );
    inbox
        .assert_note(Note::ProducerSubscribed(Subscription {
            id: sub,
            producer: producer.id(),
            consumer: raw.id(),
        }))
        .await;
    producer.stop(StopReason::Normal).await.unwrap();
}

#[tokio::test]
async fn handle_call_3_allows_replies_before_sending_events() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify))
        .await
        .unwrap();
    let (mut raw, sub) = subscribe_raw(&producer);

    let (open, gate) = oneshot::channel();
    producer
        .call(CounterCall::EarlyReplyQueue(vec![1, 2, 3], gate), TIMEOUT)
        .await
        .unwrap();

    // The reply came while the call was still being handled: no events yet.
    assert_eq!(raw.try_recv(), Some(ToConsumer::Ack { subscription: sub }));
    assert_eq!(raw.try_recv(), None);
    open.send(()).unwrap();
    assert_eq!(
        tokio::time::timeout(TIMEOUT, raw.recv()).await.unwrap(),
        Some(ToConsumer::Events {
            subscription: sub,
            events: vec![1, 2, 3]
        })
    );
    inbox
        .assert_note(Note::ProducerSubscribed(Subscription {
            id: sub,
            producer: producer.id(),
            consumer: raw.id(),
        }))
        .await;
    producer.stop(StopReason::Normal).await.unwrap();
}

#[tokio::test]
async fn handle_call_3_may_shut_stage_down() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify))
        .await
        .unwrap();

    producer.call(CounterCall::Stop, TIMEOUT).await.unwrap();

    assert_eq!(producer.stopped().await, StopReason::Shutdown);
    inbox
        .assert_note(Note::Terminated(StopReason::Shutdown))
        .await;
}

#[tokio::test]
async fn terminate_2() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(notify))
        .await
        .unwrap();

    producer.stop(StopReason::Normal).await.unwrap();

    inbox
        .assert_note(Note::Terminated(StopReason::Normal))
        .await;
}
