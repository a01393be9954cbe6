//! GenStage's `test/gen_stage_test.exs`, describe blocks "$gen_producer
//! message errors" and "$gen_consumer message errors": how stages answer
//! protocol messages naming a subscription they do not know, or reusing one.
//!
//! GenStage's tests send raw `$gen_producer` / `$gen_consumer` tuples from
//! the test process; here the raw protocol ends
//! ([`RawConsumer`], [`RawProducer`]) send the same messages.
//!
//! Skipped, no Rust equivalent: "not a producer" and "not a consumer" send a
//! subscription to a consumer and events to a producer. Handles are typed
//! (`ProducerRef<T>` only exists for stages that emit, `ConsumerRef<T>` for
//! stages that receive), so neither message can be sent.

use crate::support;

use support::*;
use weir_gen_stage::protocol::{RawConsumer, RawProducer, ToConsumer, ToProducer};
use weir_gen_stage::{StopReason, SubscriptionOptions, new_subscription_id};

#[tokio::test]
async fn duplicated_subscriptions() {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let mut raw = RawConsumer::new();
    let sub = new_subscription_id();

    raw.subscribe(&producer, sub, SubscriptionOptions::new(1000, 500));
    raw.subscribe(&producer, sub, SubscriptionOptions::new(1000, 500));

    let cancel = ToConsumer::Cancel {
        subscription: sub,
        reason: StopReason::DuplicatedSubscription,
    };
    loop {
        let msg = tokio::time::timeout(TIMEOUT, raw.recv())
            .await
            .unwrap()
            .unwrap();
        if msg == cancel {
            break;
        }
        assert_eq!(
            msg,
            ToConsumer::Ack { subscription: sub },
            "only the first subscription is accepted"
        );
    }
    // The producer keeps its first subscription and keeps running.
    assert!(producer.is_alive());
}

#[tokio::test]
async fn unknown_demand() {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::counting(0))
        .await
        .unwrap();
    let mut raw = RawConsumer::new();
    let sub = new_subscription_id();

    raw.ask(&producer, sub, 10);

    assert_eq!(
        tokio::time::timeout(TIMEOUT, raw.recv()).await.unwrap(),
        Some(ToConsumer::Cancel {
            subscription: sub,
            reason: StopReason::UnknownSubscription
        })
    );
}

#[tokio::test]
async fn unknown_events() {
    let (notify, mut inbox) = inbox::<u64>();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    let mut raw = RawProducer::new();
    let sub = new_subscription_id();

    raw.send_events(&consumer.consumer(), sub, vec![1, 2, 3]);

    match tokio::time::timeout(TIMEOUT, raw.recv()).await.unwrap() {
        Some(ToProducer::Cancel {
            subscription,
            reason,
        }) => {
            assert_eq!(subscription, sub);
            assert_eq!(reason, StopReason::UnknownSubscription);
        }
        other => panic!("expected a cancel, got {other:?}"),
    }
    // The events were not handed to the consumer.
    ping(&consumer).await;
    inbox.refute_received("events of an unknown subscription", is_consumed);
}
