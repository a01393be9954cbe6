//! GenStage's `test/gen_stage_test.exs`, describe block "demand": the
//! `forward` and `accumulate` demand modes, set on init or at run time.
//!
//! Differences in how the outcome is observed (not in the outcome):
//! - "can be set to :accumulate via API using broadcast" sleeps 200 ms and
//!   inspects `:sys.get_state(producer).buffer`; here a sync call to the
//!   producer is the barrier and `estimate_buffered_count` reads the buffer.

use crate::support;

use support::*;
use weir_gen_stage::{
    BroadcastDispatcher, DemandMode, ProducerOptions, StopReason, SubscribeOptions,
};

fn demand(max: usize, min: usize) -> SubscribeOptions<u64> {
    SubscribeOptions::new().max_demand(max).min_demand(min)
}

/// After this, anything the producer dispatched before has reached the
/// consumer's `handle_events`.
async fn settle(producer: &CounterRef<u64>, consumer: &ForwarderRef<u64>) {
    support::barrier(producer).await;
    ping(consumer).await;
}

#[tokio::test]
async fn can_be_set_to_accumulate_on_init() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::counting(0).with_options(ProducerOptions::new().demand(DemandMode::Accumulate)),
    )
    .await
    .unwrap();
    assert_eq!(
        producer.demand_mode().await.unwrap(),
        DemandMode::Accumulate
    );

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.subscribe(&producer, demand(4, 0)).await.unwrap();
    settle(&producer, &consumer).await;
    inbox.refute_received("events while accumulating", is_consumed);

    producer.set_demand_mode(DemandMode::Forward).await.unwrap();
    assert_eq!(producer.demand_mode().await.unwrap(), DemandMode::Forward);
    inbox.assert_consumed(vec![0, 1, 2, 3]).await;
}

#[tokio::test]
async fn can_be_set_to_accumulate_via_api_using_broadcast() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::notifying(notify.clone())
            .with_options(ProducerOptions::new().dispatcher(BroadcastDispatcher::new())),
    )
    .await
    .unwrap();
    assert_eq!(producer.demand_mode().await.unwrap(), DemandMode::Forward);

    let consumer1 = weir_gen_stage::start_consumer(
        Forwarder::new(notify.clone()).subscribe_to(&producer, SubscribeOptions::new()),
    )
    .await
    .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(
        Forwarder::new(notify.clone()).subscribe_to(&producer, SubscribeOptions::new()),
    )
    .await
    .unwrap();
    producer
        .set_demand_mode(DemandMode::Accumulate)
        .await
        .unwrap();
    assert_eq!(
        producer.demand_mode().await.unwrap(),
        DemandMode::Accumulate
    );

    consumer1.stop(StopReason::Normal).await.unwrap();
    consumer2.stop(StopReason::Normal).await.unwrap();

    async_queue(&producer, vec![1]);
    async_queue(&producer, vec![2]);
    async_queue(&producer, vec![3]);
    async_queue(&producer, vec![4]);
    support::barrier(&producer).await;

    let consumer1 = weir_gen_stage::start_consumer(
        Forwarder::new(notify.clone()).subscribe_to(&producer, SubscribeOptions::new()),
    )
    .await
    .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(
        Forwarder::new(notify).subscribe_to(&producer, SubscribeOptions::new()),
    )
    .await
    .unwrap();
    // Both new consumers are subscribed and have asked once the producer
    // answered both subscriptions and a call after them.
    inbox
        .assert_receive("two subscriptions", |note| {
            matches!(note, Note::ProducerSubscribed(s) if s.consumer == consumer1.id())
                .then_some(())
        })
        .await;
    inbox
        .assert_receive("two subscriptions", |note| {
            matches!(note, Note::ProducerSubscribed(s) if s.consumer == consumer2.id())
                .then_some(())
        })
        .await;
    settle(&producer, &consumer1).await;
    ping(&consumer2).await;
    inbox.refute_received("events while accumulating", is_consumed);

    producer.set_demand_mode(DemandMode::Forward).await.unwrap();
    assert_eq!(producer.demand_mode().await.unwrap(), DemandMode::Forward);
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 0);
    inbox.assert_consumed(vec![1]).await;
    inbox.assert_consumed(vec![2]).await;
    inbox.assert_consumed(vec![3]).await;
    inbox.assert_consumed(vec![4]).await;
}

#[tokio::test]
async fn can_be_set_to_accumulate_via_api() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Counter::counting(0))
        .await
        .unwrap();
    assert_eq!(producer.demand_mode().await.unwrap(), DemandMode::Forward);
    producer
        .set_demand_mode(DemandMode::Accumulate)
        .await
        .unwrap();
    assert_eq!(
        producer.demand_mode().await.unwrap(),
        DemandMode::Accumulate
    );

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.subscribe(&producer, demand(4, 0)).await.unwrap();
    settle(&producer, &consumer).await;
    inbox.refute_received("events while accumulating", is_consumed);

    producer.set_demand_mode(DemandMode::Forward).await.unwrap();
    assert_eq!(producer.demand_mode().await.unwrap(), DemandMode::Forward);
    inbox.assert_consumed(vec![0, 1, 2, 3]).await;
}

#[tokio::test]
async fn can_be_set_to_forward_via_api_before_subscriptions() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::counting(0).with_options(ProducerOptions::new().demand(DemandMode::Accumulate)),
    )
    .await
    .unwrap();
    assert_eq!(
        producer.demand_mode().await.unwrap(),
        DemandMode::Accumulate
    );
    producer.set_demand_mode(DemandMode::Forward).await.unwrap();
    assert_eq!(producer.demand_mode().await.unwrap(), DemandMode::Forward);

    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.subscribe(&producer, demand(4, 0)).await.unwrap();
    inbox.assert_consumed(vec![0, 1, 2, 3]).await;
}

#[tokio::test]
async fn is_not_reset_when_set_to_accumulate_and_is_already_accumulating() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(
        Counter::counting(0).with_options(ProducerOptions::new().demand(DemandMode::Accumulate)),
    )
    .await
    .unwrap();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer.subscribe(&producer, demand(4, 0)).await.unwrap();
    settle(&producer, &consumer).await;
    inbox.refute_received("events while accumulating", is_consumed);

    // Accumulating again keeps the demand accumulated so far.
    producer
        .set_demand_mode(DemandMode::Accumulate)
        .await
        .unwrap();
    producer.set_demand_mode(DemandMode::Forward).await.unwrap();
    inbox.assert_consumed(vec![0, 1, 2, 3]).await;
}

#[tokio::test]
async fn does_not_combine_demands_when_accumulating() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(DemandProducer::new(
        ProducerOptions::new().demand(DemandMode::Accumulate),
    ))
    .await
    .unwrap();
    let consumer1 = weir_gen_stage::start_consumer(Forwarder::new(notify.clone()))
        .await
        .unwrap();
    let consumer2 = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .unwrap();
    consumer1
        .subscribe(&producer, SubscribeOptions::new().max_demand(2))
        .await
        .unwrap();
    consumer2
        .subscribe(&producer, SubscribeOptions::new().max_demand(2))
        .await
        .unwrap();
    // A demand-mode query is answered after both asks were recorded.
    assert_eq!(
        producer.demand_mode().await.unwrap(),
        DemandMode::Accumulate
    );
    ping(&consumer1).await;
    ping(&consumer2).await;
    inbox.refute_received("a combined demand of 4", |note| {
        *note == Note::Consumed(vec![4])
    });
    inbox.refute_received("events while accumulating", is_consumed);

    producer.set_demand_mode(DemandMode::Forward).await.unwrap();
    // Each accumulated demand of 2 is replayed on its own: handle_demand(2)
    // twice, never handle_demand(4); then each consumer asks 1 more.
    inbox.assert_consumed(vec![2]).await;
    inbox.assert_consumed(vec![2]).await;
    inbox.assert_consumed(vec![1]).await;
    inbox.refute_received("a combined demand of 4", |note| {
        *note == Note::Consumed(vec![4])
    });
}
