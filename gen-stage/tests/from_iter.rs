//! Producers built from iterators and streams.

use weir_gen_stage::protocol::{RawConsumer, ToConsumer};
use weir_gen_stage::{
    FromIterOptions, OnCancel, StopReason, SubscriptionOptions, new_subscription_id,
};

async fn events(consumer: &mut RawConsumer<u64>) -> Vec<u64> {
    loop {
        match consumer.recv().await {
            Some(ToConsumer::Events { events, .. }) => return events,
            Some(ToConsumer::Ack { .. }) => continue,
            other => panic!("expected events, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn emits_exactly_the_demanded_sizes() {
    let producer = weir_gen_stage::from_iter(0u64..).await.expect("producer");
    let mut consumer = RawConsumer::new();
    let sub = new_subscription_id();
    consumer.subscribe(&producer, sub, SubscriptionOptions::new(10, 5));
    consumer.ask(&producer, sub, 3);
    assert_eq!(events(&mut consumer).await, vec![0, 1, 2]);
    consumer.ask(&producer, sub, 5);
    assert_eq!(events(&mut consumer).await, vec![3, 4, 5, 6, 7]);
}

#[tokio::test]
async fn stops_normally_after_its_last_events_are_dispatched() {
    let producer = weir_gen_stage::from_iter(0u64..5).await.expect("producer");
    let mut consumer = RawConsumer::new();
    let sub = new_subscription_id();
    consumer.subscribe(&producer, sub, SubscriptionOptions::new(10, 5));
    consumer.ask(&producer, sub, 10);
    assert_eq!(events(&mut consumer).await, vec![0, 1, 2, 3, 4]);
    assert_eq!(
        consumer.recv().await,
        Some(ToConsumer::Down {
            subscription: sub,
            reason: StopReason::Normal
        })
    );
    assert_eq!(producer.stopped().await, StopReason::Normal);
}

#[tokio::test]
async fn on_cancel_stop_stops_when_the_last_consumer_cancels() {
    let producer =
        weir_gen_stage::from_iter_with(0u64.., FromIterOptions::new().on_cancel(OnCancel::Stop))
            .await
            .expect("producer");
    let mut a = RawConsumer::new();
    let mut b = RawConsumer::new();
    let (sa, sb) = (new_subscription_id(), new_subscription_id());
    a.subscribe(&producer, sa, SubscriptionOptions::new(10, 5));
    b.subscribe(&producer, sb, SubscriptionOptions::new(10, 5));
    assert_eq!(a.recv().await, Some(ToConsumer::Ack { subscription: sa }));
    assert_eq!(b.recv().await, Some(ToConsumer::Ack { subscription: sb }));
    a.cancel(&producer, sa, StopReason::Normal);
    assert!(matches!(a.recv().await, Some(ToConsumer::Cancel { .. })));
    assert!(producer.is_alive(), "one consumer is left");
    b.cancel(&producer, sb, StopReason::Normal);
    assert_eq!(producer.stopped().await, StopReason::Normal);
}

#[tokio::test]
async fn on_cancel_continue_keeps_running() {
    let producer = weir_gen_stage::from_iter(0u64..).await.expect("producer");
    let mut a = RawConsumer::new();
    let sa = new_subscription_id();
    a.subscribe(&producer, sa, SubscriptionOptions::new(10, 5));
    a.cancel(&producer, sa, StopReason::Normal);
    assert_eq!(a.recv().await, Some(ToConsumer::Ack { subscription: sa }));
    assert!(matches!(a.recv().await, Some(ToConsumer::Cancel { .. })));
    assert_eq!(producer.estimate_buffered_count().await, Ok(0));
    assert!(producer.is_alive());
}

#[tokio::test]
async fn from_stream_waits_for_the_stream_to_fill_each_demand() {
    let (tx, rx) = futures::channel::mpsc::unbounded::<u64>();
    let producer = weir_gen_stage::from_stream(rx).await.expect("producer");
    let mut consumer = RawConsumer::new();
    let sub = new_subscription_id();
    consumer.subscribe(&producer, sub, SubscriptionOptions::new(10, 5));
    consumer.ask(&producer, sub, 3);
    for n in 0..4 {
        tx.unbounded_send(n).expect("send");
    }
    assert_eq!(events(&mut consumer).await, vec![0, 1, 2]);
    drop(tx);
    consumer.ask(&producer, sub, 3);
    // The stream ended after one more item: fewer than asked, then a normal stop.
    assert_eq!(events(&mut consumer).await, vec![3]);
    assert_eq!(producer.stopped().await, StopReason::Normal);
}
