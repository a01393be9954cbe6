//! Cancel modes: what a consumer does when a subscription ends, by mode and
//! reason, whether the producer cancelled or went down.

use crate::harness;

use harness::{Counter, Note, Recorder, RecorderCall, TIMEOUT, next_matching, notes};
use weir_gen_stage::{
    BroadcastDispatcher, CancelMode, Cancellation, PartitionDispatcher, ProducerOptions,
    StopReason, SubscribeError, SubscribeOptions,
};

#[derive(Clone, Copy)]
enum Ending {
    ProducerCancels,
    ProducerStops,
}

/// Subscribes a consumer with `mode`, ends the subscription with `reason`,
/// and returns the cancellation `handle_cancel` saw and whether the consumer
/// stopped (with which reason).
async fn end_subscription(
    mode: CancelMode,
    reason: StopReason,
    ending: Ending,
) -> (Cancellation, Option<StopReason>) {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new().cancel(mode))
        .await
        .expect("accepted");
    match ending {
        Ending::ProducerCancels => producer.producer().cancel(sub, reason).expect("sent"),
        Ending::ProducerStops => producer.stop(reason).await.expect("stopped"),
    }
    let cancellation = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(_, c) => Some(c),
        _ => None,
    })
    .await;
    let stopped = match consumer.call(RecorderCall::Ping, TIMEOUT).await {
        Ok(()) => None,
        Err(_) => Some(consumer.stopped().await),
    };
    (cancellation, stopped)
}

#[tokio::test]
async fn permanent_stops_the_consumer_with_the_same_reason_whatever_it_is() {
    for reason in [
        StopReason::Normal,
        StopReason::Shutdown,
        StopReason::custom("oops"),
    ] {
        let (cancellation, stopped) =
            end_subscription(CancelMode::Permanent, reason.clone(), Ending::ProducerStops).await;
        assert_eq!(cancellation, Cancellation::Down(reason.clone()));
        assert_eq!(stopped, Some(reason.clone()));
        let (cancellation, stopped) = end_subscription(
            CancelMode::Permanent,
            reason.clone(),
            Ending::ProducerCancels,
        )
        .await;
        assert_eq!(cancellation, Cancellation::Cancel(reason.clone()));
        assert_eq!(stopped, Some(reason));
    }
}

#[tokio::test]
async fn transient_survives_normal_and_shutdown_but_not_other_reasons() {
    for reason in [
        StopReason::Normal,
        StopReason::Shutdown,
        StopReason::ShutdownWith("rotating".to_owned()),
    ] {
        for ending in [Ending::ProducerStops, Ending::ProducerCancels] {
            let (_, stopped) =
                end_subscription(CancelMode::Transient, reason.clone(), ending).await;
            assert_eq!(stopped, None, "transient with {reason}");
        }
    }
    let (cancellation, stopped) = end_subscription(
        CancelMode::Transient,
        StopReason::custom("oops"),
        Ending::ProducerStops,
    )
    .await;
    assert_eq!(cancellation, Cancellation::Down(StopReason::custom("oops")));
    assert_eq!(stopped, Some(StopReason::custom("oops")));
}

#[tokio::test]
async fn temporary_never_stops_the_consumer() {
    for reason in [
        StopReason::Normal,
        StopReason::custom("oops"),
        StopReason::Killed,
    ] {
        for ending in [Ending::ProducerStops, Ending::ProducerCancels] {
            let (_, stopped) =
                end_subscription(CancelMode::Temporary, reason.clone(), ending).await;
            assert_eq!(stopped, None, "temporary with {reason}");
        }
    }
}

#[tokio::test]
async fn a_broadcast_refusing_a_second_subscription_leaves_a_permanent_consumer_running() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(
        Counter::new(0, notify.clone())
            .silent()
            .with_options(ProducerOptions::new().dispatcher(BroadcastDispatcher::new())),
    )
    .await
    .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    let refused = consumer.subscribe(&producer, SubscribeOptions::new()).await;
    assert!(refused.is_err(), "{refused:?}");
    let cancellation = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(_, c) => Some(c),
        _ => None,
    })
    .await;
    assert!(matches!(
        cancellation,
        Cancellation::Cancel(StopReason::SubscriptionRefused(
            SubscribeError::AlreadySubscribed { .. }
        ))
    ));
    consumer
        .call(RecorderCall::Ping, TIMEOUT)
        .await
        .expect("still running");
    // Its first subscription still gets events.
    producer.cast(vec![1, 2]).expect("cast");
    assert_eq!(harness::consumed(&mut seen).await, vec![1, 2]);
}

#[tokio::test]
async fn a_dispatcher_refusal_cancels_that_subscription_and_the_producer_keeps_running() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).with_options(
        ProducerOptions::new().dispatcher(PartitionDispatcher::with_hash(2, |n: u64| {
            Some((n, (n % 2) as usize))
        })),
    ))
    .await
    .expect("producer");
    let lost = weir_gen_stage::start_consumer(Recorder::new(notify.clone()))
        .await
        .expect("consumer");
    let refused = lost
        .subscribe(&producer, SubscribeOptions::new().partition(7))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(matches!(
        lost.stopped().await,
        StopReason::SubscriptionRefused(SubscribeError::PartitionUnknown { .. })
    ));
    let evens = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    evens
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(4).partition(0),
        )
        .await
        .expect("accepted");
    assert_eq!(harness::consumed(&mut seen).await, vec![0, 2]);
    assert!(producer.is_alive());
}
