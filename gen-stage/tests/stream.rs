//! Producers consumed as a `futures::Stream`.

use crate::harness;

use futures::StreamExt;
use harness::{Counter, Note, TIMEOUT, demand, next_matching, notes};
use weir_gen_stage::protocol::{RawProducer, ToProducer};
use weir_gen_stage::{
    CancelMode, Cancellation, DemandMode, Error, ProducerOptions, StopReason, SubscribeOptions,
};

#[tokio::test]
async fn takes_10_events_out_of_a_demand_of_1000_and_cancels_on_drop() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    let stream =
        weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new())]).expect("stream");
    let first: Vec<u64> = stream.take(10).map(|e| e.expect("event")).collect().await;
    assert_eq!(first, (0..10).collect::<Vec<_>>());
    assert_eq!(demand(&mut seen).await, 1000);
    // Dropping the stream (inside `take`) cancelled the subscription.
    let cancellation = next_matching(&mut seen, |n| match n {
        Note::ProducerCancelled(_, c) => Some(c),
        _ => None,
    })
    .await;
    assert_eq!(cancellation, Cancellation::Cancel(StopReason::Normal));
    assert!(producer.is_alive());
}

#[tokio::test]
async fn takes_300_events_with_max_demand_100_asking_as_it_goes() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    let stream =
        weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new().max_demand(100))])
            .expect("stream");
    let events: Vec<u64> = stream.take(300).map(|e| e.expect("event")).collect().await;
    assert_eq!(events, (0..300).collect::<Vec<_>>());
    assert_eq!(demand(&mut seen).await, 100);
    assert_eq!(demand(&mut seen).await, 50);
}

#[tokio::test]
async fn ends_when_its_producers_stop_normally() {
    let transient = || SubscribeOptions::new().cancel(CancelMode::Transient);
    let a = weir_gen_stage::from_iter(0..5u32).await.expect("producer");
    let b = weir_gen_stage::from_iter(100..103u32)
        .await
        .expect("producer");
    let mut events: Vec<u32> =
        weir_gen_stage::stream([(a.clone(), transient()), (b.clone(), transient())])
            .expect("stream")
            .map(|e| e.expect("event"))
            .collect()
            .await;
    events.sort_unstable();
    assert_eq!(events, vec![0, 1, 2, 3, 4, 100, 101, 102]);
    assert_eq!(a.stopped().await, StopReason::Normal);
    assert_eq!(b.stopped().await, StopReason::Normal);
}

#[tokio::test]
async fn a_permanent_subscription_ending_abnormally_yields_an_error_then_ends() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify).silent())
        .await
        .expect("producer");
    let mut stream =
        weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new())]).expect("stream");
    producer
        .stop(StopReason::custom("boom"))
        .await
        .expect("stopped");
    match stream.next().await {
        Some(Err(Error::SubscriptionCancelled {
            producer: id,
            cancellation,
            ..
        })) => {
            assert_eq!(id, producer.id());
            assert_eq!(cancellation, Cancellation::Down(StopReason::custom("boom")));
        }
        other => panic!("expected the subscription's end, got {other:?}"),
    }
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn a_temporary_subscription_to_a_dead_producer_ends_empty() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    producer.stop(StopReason::Normal).await.expect("stopped");
    let events: Vec<_> = weir_gen_stage::stream([(
        producer.producer(),
        SubscribeOptions::new().cancel(CancelMode::Temporary),
    )])
    .expect("stream")
    .collect()
    .await;
    assert!(events.is_empty());
    let permanent: Vec<_> =
        weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new())])
            .expect("stream")
            .collect()
            .await;
    assert!(
        matches!(
            permanent.as_slice(),
            [Err(Error::SubscriptionCancelled {
                cancellation: Cancellation::Down(StopReason::Noproc),
                ..
            })]
        ),
        "{permanent:?}"
    );
}

#[tokio::test]
async fn a_refused_subscription_yields_the_refusal() {
    let mut producer = RawProducer::<u8>::new();
    let mut stream = weir_gen_stage::stream([(producer.producer_ref(), SubscribeOptions::new())])
        .expect("stream");
    let Some(ToProducer::Subscribe {
        subscription,
        consumer,
        ..
    }) = producer.recv().await
    else {
        panic!("expected a subscription");
    };
    producer.cancel(&consumer, subscription, StopReason::custom("no_thanks"));
    match stream.next().await {
        Some(Err(Error::SubscriptionCancelled { cancellation, .. })) => {
            assert_eq!(
                cancellation,
                Cancellation::Cancel(StopReason::custom("no_thanks"))
            );
        }
        other => panic!("expected the refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn invalid_options_are_refused_before_anything_is_subscribed() {
    let mut producer = RawProducer::<u8>::new();
    let error = weir_gen_stage::stream([(
        producer.producer_ref(),
        SubscribeOptions::new().max_demand(0),
    )])
    .expect_err("refused");
    assert!(matches!(
        error,
        Error::InvalidOption {
            option: "max_demand",
            ..
        }
    ));
    assert!(producer.try_recv().is_none());
}

#[tokio::test]
async fn it_releases_an_accumulating_producer() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(
        Counter::new(0, notify).with_options(ProducerOptions::new().demand(DemandMode::Accumulate)),
    )
    .await
    .expect("producer");
    let stream =
        weir_gen_stage::stream([(producer.producer(), SubscribeOptions::new().max_demand(5))])
            .expect("stream");
    let events: Vec<u64> =
        tokio::time::timeout(TIMEOUT, stream.take(5).map(|e| e.expect("event")).collect())
            .await
            .expect("events flow");
    assert_eq!(events, vec![0, 1, 2, 3, 4]);
    assert_eq!(producer.demand_mode().await, Ok(DemandMode::Forward));
}
