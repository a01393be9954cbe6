//! Producer_consumers: incoming events wait in a queue for downstream
//! demand, and so do the infos and cancellations that arrive behind them.

use crate::harness;

use harness::{
    Counter, Doubler, Note, Recorder, RecorderCall, TIMEOUT, consumed, demand, drain, next,
    next_matching, notes,
};
use weir_gen_stage::{CancelMode, Cancellation, StopReason, SubscribeOptions};

#[tokio::test]
async fn without_downstream_demand_it_takes_at_most_max_demand_and_holds_them() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let doubler = weir_gen_stage::start_producer_consumer(Doubler {
        notify: notify.clone(),
    })
    .await
    .expect("producer_consumer");
    doubler
        .subscribe(&producer, SubscribeOptions::new().max_demand(10))
        .await
        .expect("accepted");
    // The producer answered the only ask (10); the events wait in the queue.
    assert_eq!(demand(&mut seen).await, 10);
    producer
        .call(harness::CounterCall::Queue(vec![]), TIMEOUT)
        .await
        .expect("barrier");
    doubler
        .call(RecorderCall::Ping, TIMEOUT)
        .await
        .expect("barrier");
    let held = drain(&mut seen);
    assert!(
        held.is_empty(),
        "no more demand and no handle_events: {held:?}"
    );

    // A consumer's demand releases them, doubled, in order.
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(
            &doubler,
            SubscribeOptions::new().max_demand(4).min_demand(0),
        )
        .await
        .expect("accepted");
    let mut received = Vec::new();
    while received.len() < 20 {
        received.extend(consumed(&mut seen).await);
    }
    assert_eq!(received, (0..20).map(|n| n * 2).collect::<Vec<u64>>());
}

#[tokio::test]
async fn a_sync_info_behind_queued_events_waits_for_them() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let doubler = weir_gen_stage::start_producer_consumer(Doubler {
        notify: notify.clone(),
    })
    .await
    .expect("producer_consumer");
    doubler
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(5).min_demand(0),
        )
        .await
        .expect("accepted");
    assert_eq!(demand(&mut seen).await, 5);
    producer
        .call(harness::CounterCall::Queue(vec![]), TIMEOUT)
        .await
        .expect("barrier");
    doubler
        .sync_info("behind the events")
        .await
        .expect("queued");
    doubler
        .call(RecorderCall::Ping, TIMEOUT)
        .await
        .expect("barrier");
    assert!(
        drain(&mut seen).is_empty(),
        "the info waits behind the queued events"
    );

    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(
            &doubler,
            SubscribeOptions::new().max_demand(5).min_demand(0),
        )
        .await
        .expect("accepted");
    let mut order = Vec::new();
    loop {
        match next(&mut seen).await {
            Note::PcConsumed(events) => order.push(format!("handled {events:?}")),
            Note::Consumed(events) => order.push(format!("received {events:?}")),
            Note::Info(label) => {
                order.push(label.to_owned());
                break;
            }
            _ => {}
        }
    }
    assert_eq!(
        order,
        vec![
            "handled [0, 1, 2, 3, 4]".to_owned(),
            "received [0, 2, 4, 6, 8]".to_owned(),
            "behind the events".to_owned()
        ]
    );
}

#[tokio::test]
async fn a_cancellation_behind_queued_events_waits_for_them() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let doubler = weir_gen_stage::start_producer_consumer(Doubler {
        notify: notify.clone(),
    })
    .await
    .expect("producer_consumer");
    doubler
        .subscribe(
            &producer,
            SubscribeOptions::new()
                .max_demand(3)
                .min_demand(0)
                .cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    assert_eq!(demand(&mut seen).await, 3);
    producer
        .call(harness::CounterCall::Queue(vec![]), TIMEOUT)
        .await
        .expect("barrier");
    // The producer goes away while its last events are still queued.
    producer
        .stop(StopReason::custom("gone"))
        .await
        .expect("stopped");
    let _ = next_matching(&mut seen, |n| {
        matches!(n, Note::Terminated(_)).then_some(())
    })
    .await;
    doubler
        .call(RecorderCall::Ping, TIMEOUT)
        .await
        .expect("barrier");
    assert!(
        drain(&mut seen).is_empty(),
        "handle_cancel waits behind the queued events"
    );

    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(&doubler, SubscribeOptions::new())
        .await
        .expect("accepted");
    let handled = next_matching(&mut seen, |n| match n {
        Note::PcConsumed(events) => Some(events),
        _ => None,
    })
    .await;
    assert_eq!(handled, vec![0, 1, 2]);
    let cancellation = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(s, c) if s.consumer == doubler.id() => Some(c),
        _ => None,
    })
    .await;
    assert_eq!(cancellation, Cancellation::Down(StopReason::custom("gone")));
}

#[tokio::test]
async fn its_own_consumers_cancellations_reach_the_same_handle_cancel() {
    let (notify, mut seen) = notes();
    let doubler = weir_gen_stage::start_producer_consumer(Doubler {
        notify: notify.clone(),
    })
    .await
    .expect("producer_consumer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(
            &doubler,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    consumer.stop(StopReason::Shutdown).await.expect("stopped");
    let (subscription, cancellation) = next_matching(&mut seen, |n| match n {
        Note::ConsumerCancelled(s, c) if s.producer == doubler.id() => Some((s, c)),
        _ => None,
    })
    .await;
    assert_eq!(subscription.id, sub);
    assert_eq!(cancellation, Cancellation::Down(StopReason::Shutdown));
}
