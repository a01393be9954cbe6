//! The subscription protocol between stages: subscribe, ack, ask, events,
//! cancel, and each side noticing when the other goes away.

use crate::harness;

use harness::{Counter, Note, Recorder, RecorderCall, consumed, next, next_matching, notes};
use weir_gen_stage::protocol::{RawConsumer, RawProducer, ToConsumer, ToProducer};
use weir_gen_stage::{
    CancelMode, Cancellation, Error, StopReason, SubscribeOptions, SubscriptionOptions,
    new_subscription_id,
};

#[tokio::test]
async fn consumer_subscribes_and_receives_events_in_order() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(4).min_demand(0),
        )
        .await
        .expect("accepted");
    let subscribed = next_matching(&mut seen, |n| match n {
        Note::ConsumerSubscribed(s) => Some(s),
        _ => None,
    })
    .await;
    assert_eq!(subscribed.id, sub);
    assert_eq!(
        (subscribed.producer, subscribed.consumer),
        (producer.id(), consumer.id())
    );
    assert_eq!(consumed(&mut seen).await, vec![0, 1, 2, 3]);
    assert_eq!(consumed(&mut seen).await, vec![4, 5, 6, 7]);
}

#[tokio::test]
async fn consumer_asks_max_demand_right_after_subscribing_without_waiting_for_the_ack() {
    let mut producer = RawProducer::<u32>::new();
    let (notify, _seen) = notes();
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .async_subscribe(
            &producer.producer_ref(),
            SubscribeOptions::new().max_demand(7),
        )
        .expect("valid options");
    let Some(ToProducer::Subscribe {
        subscription,
        options,
        ..
    }) = producer.recv().await
    else {
        panic!("expected a subscription first");
    };
    assert_eq!((options.max_demand, options.min_demand), (7, 3));
    // No ack was sent, yet the ask is already there.
    match producer.recv().await {
        Some(ToProducer::Ask {
            subscription: asked,
            n,
        }) => {
            assert_eq!(asked, subscription);
            assert_eq!(n, 7);
        }
        other => panic!("expected the initial ask, got {other:?}"),
    }
}

#[tokio::test]
async fn sync_subscribe_waits_for_the_producers_ack() {
    let mut producer = RawProducer::<u32>::new();
    let (notify, _seen) = notes();
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let target = producer.producer_ref();
    // A `ConsumerRef`: a handle whose stage's message types hold a lifetime
    // (`&'static str`) cannot be moved into a task (rustc's Send check).
    let handle = consumer.consumer();
    let subscribing =
        tokio::spawn(async move { handle.subscribe(&target, SubscribeOptions::new()).await });
    let Some(ToProducer::Subscribe {
        subscription,
        consumer,
        ..
    }) = producer.recv().await
    else {
        panic!("expected a subscription");
    };
    assert!(!subscribing.is_finished());
    producer.ack(&consumer, subscription);
    let accepted = subscribing.await.expect("task").expect("accepted");
    assert_eq!(accepted, subscription);
}

#[tokio::test]
async fn refused_subscription_is_reported_and_stops_a_permanent_consumer() {
    let mut producer = RawProducer::<u32>::new();
    let (notify, mut seen) = notes();
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let target = producer.producer_ref();
    let handle = consumer.consumer();
    let subscribing =
        tokio::spawn(async move { handle.subscribe(&target, SubscribeOptions::new()).await });
    let Some(ToProducer::Subscribe {
        subscription,
        consumer: to,
        ..
    }) = producer.recv().await
    else {
        panic!("expected a subscription");
    };
    producer.cancel(&to, subscription, StopReason::custom("no_thanks"));
    match subscribing.await.expect("task") {
        Err(Error::SubscriptionRefused { cancellation, .. }) => {
            assert_eq!(
                cancellation,
                Cancellation::Cancel(StopReason::custom("no_thanks"))
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(consumer.stopped().await, StopReason::custom("no_thanks"));
    let cancelled = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(_, c) => Some(c),
        _ => None,
    })
    .await;
    assert_eq!(
        cancelled,
        Cancellation::Cancel(StopReason::custom("no_thanks"))
    );
}

#[tokio::test]
async fn refused_temporary_subscription_leaves_the_consumer_running() {
    let mut producer = RawProducer::<u32>::new();
    let (notify, _seen) = notes();
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let target = producer.producer_ref();
    let handle = consumer.consumer();
    let subscribing = tokio::spawn(async move {
        handle
            .subscribe(
                &target,
                SubscribeOptions::new().cancel(CancelMode::Temporary),
            )
            .await
    });
    let Some(ToProducer::Subscribe {
        subscription,
        consumer: to,
        ..
    }) = producer.recv().await
    else {
        panic!("expected a subscription");
    };
    producer.cancel(&to, subscription, StopReason::custom("no_thanks"));
    assert!(matches!(
        subscribing.await.expect("task"),
        Err(Error::SubscriptionRefused { .. })
    ));
    consumer
        .call(RecorderCall::Ping, harness::TIMEOUT)
        .await
        .expect("still running");
}

#[tokio::test]
async fn duplicated_subscription_is_refused_and_the_first_keeps_working() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    let mut consumer = RawConsumer::<u64>::new();
    let sub = new_subscription_id();
    consumer.subscribe(&producer, sub, SubscriptionOptions::new(10, 5));
    assert_eq!(
        consumer.recv().await,
        Some(ToConsumer::Ack { subscription: sub })
    );
    consumer.subscribe(&producer, sub, SubscriptionOptions::new(10, 5));
    assert_eq!(
        consumer.recv().await,
        Some(ToConsumer::Cancel {
            subscription: sub,
            reason: StopReason::DuplicatedSubscription
        })
    );
    consumer.ask(&producer, sub, 2);
    assert_eq!(
        consumer.recv().await,
        Some(ToConsumer::Events {
            subscription: sub,
            events: vec![0, 1]
        })
    );
}

#[tokio::test]
async fn ask_for_an_unknown_subscription_is_answered_with_cancel() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    let mut consumer = RawConsumer::<u64>::new();
    let sub = new_subscription_id();
    consumer.ask(&producer, sub, 10);
    assert_eq!(
        consumer.recv().await,
        Some(ToConsumer::Cancel {
            subscription: sub,
            reason: StopReason::UnknownSubscription
        })
    );
}

#[tokio::test]
async fn events_for_an_unknown_subscription_are_answered_with_cancel() {
    let mut producer = RawProducer::<u32>::new();
    let (notify, _seen) = notes();
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let sub = new_subscription_id();
    producer.send_events(&consumer.consumer(), sub, vec![1, 2, 3]);
    match producer.recv().await {
        Some(ToProducer::Cancel {
            subscription,
            reason,
        }) => {
            assert_eq!(subscription, sub);
            assert_eq!(reason, StopReason::UnknownSubscription);
        }
        other => panic!("expected a cancel, got {other:?}"),
    }
}

#[tokio::test]
async fn producer_sees_its_consumer_go_down_with_its_reason() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    consumer
        .stop(StopReason::custom("gone"))
        .await
        .expect("stopped");
    let (subscription, cancellation) = next_matching(&mut seen, |n| match n {
        Note::ProducerCancelled(s, c) => Some((s, c)),
        _ => None,
    })
    .await;
    assert_eq!(subscription.id, sub);
    assert_eq!(subscription.consumer, consumer.id());
    assert_eq!(cancellation, Cancellation::Down(StopReason::custom("gone")));
}

#[tokio::test]
async fn consumer_sees_its_producer_go_down_with_its_reason() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    producer
        .stop(StopReason::custom("oops"))
        .await
        .expect("stopped");
    let cancellation = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(_, c) => Some(c),
        _ => None,
    })
    .await;
    assert_eq!(cancellation, Cancellation::Down(StopReason::custom("oops")));
    consumer
        .call(RecorderCall::Ping, harness::TIMEOUT)
        .await
        .expect("temporary: still running");
}

#[tokio::test]
async fn subscribing_to_a_dead_producer_is_down_with_noproc() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    producer.stop(StopReason::Normal).await.expect("stopped");

    let temporary = weir_gen_stage::start_consumer(Recorder::new(notify.clone()))
        .await
        .expect("consumer");
    let refused = temporary
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await;
    assert_eq!(
        refused.map_err(|e| match e {
            Error::SubscriptionRefused { cancellation, .. } => cancellation,
            other => panic!("unexpected {other:?}"),
        }),
        Err(Cancellation::Down(StopReason::Noproc))
    );
    temporary
        .call(RecorderCall::Ping, harness::TIMEOUT)
        .await
        .expect("still running");

    let permanent = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    permanent
        .async_subscribe(&producer, SubscribeOptions::new())
        .expect("valid options");
    assert_eq!(permanent.stopped().await, StopReason::Noproc);
    let _ = next(&mut seen).await;
}

#[tokio::test]
async fn either_side_can_cancel_a_subscription() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let temporary = || SubscribeOptions::new().cancel(CancelMode::Temporary);

    // From the producer's side (GenStage's `cancel({producer, ref}, reason)`).
    let first = consumer
        .subscribe(&producer, temporary())
        .await
        .expect("accepted");
    producer
        .producer()
        .cancel(first, StopReason::custom("from_producer"))
        .expect("sent");
    let (sub, cancellation) = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(s, c) => Some((s.id, c)),
        _ => None,
    })
    .await;
    assert_eq!(sub, first);
    assert_eq!(
        cancellation,
        Cancellation::Cancel(StopReason::custom("from_producer"))
    );

    // From the consumer's side: it asks the producer, which confirms.
    let second = consumer
        .subscribe(&producer, temporary())
        .await
        .expect("accepted");
    consumer
        .cancel_upstream(second, StopReason::custom("from_consumer"))
        .expect("sent");
    let (sub, cancellation) = next_matching(&mut seen, |n| match n {
        Note::ProducerCancelled(s, c) if s.id == second => Some((s.id, c)),
        _ => None,
    })
    .await;
    assert_eq!(sub, second);
    assert_eq!(
        cancellation,
        Cancellation::Cancel(StopReason::custom("from_consumer"))
    );
    let cancellation = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(s, c) if s.id == second => Some(c),
        _ => None,
    })
    .await;
    assert_eq!(
        cancellation,
        Cancellation::Cancel(StopReason::custom("from_consumer"))
    );
}

#[tokio::test]
async fn resubscribe_cancels_the_old_subscription_and_returns_a_new_one() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let old = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    let new = consumer
        .resubscribe(
            old,
            StopReason::custom("resubscribe"),
            &producer,
            SubscribeOptions::new().max_demand(10),
        )
        .await
        .expect("accepted");
    assert_ne!(old, new);
    let (sub, cancellation) = next_matching(&mut seen, |n| match n {
        Note::ProducerCancelled(s, c) => Some((s.id, c)),
        _ => None,
    })
    .await;
    assert_eq!(
        (sub, cancellation),
        (old, Cancellation::Cancel(StopReason::custom("resubscribe")))
    );
    // The producer then sees the new subscription.
    let subscribed = next_matching(&mut seen, |n| match n {
        Note::ProducerSubscribed(s, _) => Some(s.id),
        _ => None,
    })
    .await;
    assert_eq!(subscribed, new);
}

#[tokio::test]
async fn invalid_subscription_options_are_refused_naming_option_and_value() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::<u64>::new(notify))
        .await
        .expect("consumer");
    let error = consumer
        .subscribe(&producer, SubscribeOptions::new().max_demand(0))
        .await
        .expect_err("refused");
    assert_eq!(
        error.to_string(),
        "invalid option `max_demand`: expected a value equal to or greater than 1, got: 0"
    );
    let error = consumer
        .subscribe(&producer, SubscribeOptions::new().min_demand(2000))
        .await
        .expect_err("refused");
    assert_eq!(
        error,
        Error::InvalidOption {
            option: "min_demand",
            value: "2000".to_owned(),
            expected: "a value equal to or less than 999".to_owned()
        }
    );
    // Invalid options in `init` make the start fail.
    let error = weir_gen_stage::start_consumer(
        Recorder::<u64>::new(notes().0)
            .subscribe_on_init(&producer, SubscribeOptions::new().max_demand(0)),
    )
    .await
    .expect_err("refused");
    assert!(matches!(
        error,
        Error::InvalidOption {
            option: "max_demand",
            ..
        }
    ));
}

#[tokio::test]
async fn extra_options_reach_the_producers_handle_subscribe() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new().extra("tag", "metrics"))
        .await
        .expect("accepted");
    let extra = next_matching(&mut seen, |n| match n {
        Note::ProducerSubscribed(_, extra) => Some(extra),
        _ => None,
    })
    .await;
    assert_eq!(
        extra,
        vec![("tag".to_owned(), serde_json::Value::from("metrics"))]
    );
}

#[tokio::test]
async fn manual_demand_asks_only_when_told_and_hands_whole_messages() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify).manual())
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new().max_demand(10))
        .await
        .expect("accepted");
    consumer
        .call(RecorderCall::Ping, harness::TIMEOUT)
        .await
        .expect("ping");
    assert!(
        harness::drain(&mut seen)
            .iter()
            .all(|n| !matches!(n, Note::Demand(_))),
        "manual demand asks nothing by itself"
    );
    // 50 events arrive as one batch, not cut into pieces of max - min.
    consumer.ask_and_wait(sub, 50).await.expect("asked");
    assert_eq!(consumed(&mut seen).await, (0..50).collect::<Vec<_>>());
    consumer.ask(sub, 50).expect("asked");
    assert_eq!(consumed(&mut seen).await, (50..100).collect::<Vec<_>>());
    assert!(matches!(
        consumer.ask_and_wait(new_subscription_id(), 1).await,
        Err(Error::UnknownSubscription { .. })
    ));
}

/// `cancel` and `cancel_consumer`, the old names of `cancel_upstream` and
/// `cancel_downstream`, still cancel on the same side.
#[tokio::test(flavor = "current_thread")]
#[allow(deprecated)]
async fn the_deprecated_cancel_names_still_cancel_the_same_side() {
    let numbers = weir_gen_stage::from_iter(0..u64::MAX)
        .await
        .expect("producer");
    let middle = weir_gen_stage::map(|n: u64| n).await.expect("map");
    let temporary = || SubscribeOptions::new().cancel(CancelMode::Temporary);
    let upstream = middle
        .subscribe(&numbers, temporary())
        .await
        .expect("accepted");
    let sink = weir_gen_stage::for_each(|_: u64| {})
        .await
        .expect("consumer");
    let downstream = sink
        .subscribe(&middle, temporary())
        .await
        .expect("accepted");

    // `cancel` on a producer_consumer: its subscription to its producer.
    middle
        .cancel(upstream, StopReason::custom("old name"))
        .expect("sent");
    // Answered once `middle` has passed the cancel on; `numbers` answers
    // once it has handled it.
    middle.status().await.expect("running");
    assert!(
        numbers
            .status()
            .await
            .expect("running")
            .consumers
            .is_empty()
    );

    // `cancel_consumer`: a consumer's subscription to it.
    middle
        .cancel_consumer(downstream, StopReason::custom("old name"))
        .expect("sent");
    assert!(middle.status().await.expect("running").consumers.is_empty());
    assert!(middle.is_alive() && sink.is_alive());
}
