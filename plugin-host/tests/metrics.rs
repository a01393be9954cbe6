//! The metrics plugin's snapshot, read through the ABI from the real `.so`,
//! and its Prometheus rendering.

use crate::support;

use std::time::Duration;

use serde_json::json;
use weir_dispatchers::{
    ConsumerId, Dispatcher, Outbox, Subscriber, SubscriptionId, SubscriptionOptions,
};
use weir_plugin_host::load;

fn subscriber(subscription: u64, consumer: u64) -> Subscriber {
    Subscriber {
        subscription: SubscriptionId(subscription),
        consumer: ConsumerId(consumer),
    }
}

#[test]
fn snapshot_counts_per_consumer_what_the_dispatcher_did() {
    let factory = load(support::metrics_plugin(), &json!({})).expect("loads");
    let mut dispatcher = factory.dispatcher::<u64>().expect("a dispatcher");
    let metrics = dispatcher
        .metrics()
        .expect("the metrics plugin keeps metrics");
    let mut out = Outbox::new();
    let options = SubscriptionOptions::new(10, 5);
    // Consumer 7 holds two subscriptions, consumer 8 one.
    dispatcher
        .subscribe(subscriber(1, 7), &options, &mut out)
        .expect("subscribed");
    dispatcher
        .subscribe(subscriber(2, 7), &options, &mut out)
        .expect("subscribed");
    dispatcher
        .subscribe(subscriber(3, 8), &options, &mut out)
        .expect("subscribed");
    dispatcher.ask(SubscriptionId(1), 10, &mut out);
    dispatcher.ask(SubscriptionId(2), 10, &mut out);
    dispatcher.ask(SubscriptionId(3), 10, &mut out);
    std::thread::sleep(Duration::from_millis(5));
    assert!(dispatcher.dispatch((0..25).collect(), &mut out).is_empty());
    dispatcher.cancel(SubscriptionId(2), &mut out);

    let snapshot = metrics.snapshot().expect("a snapshot");
    let seven = snapshot.consumer(ConsumerId(7)).expect("consumer 7");
    assert_eq!((seven.subscriptions, seven.cancellations), (2, 1));
    assert_eq!(seven.demand_asked, 20);
    assert_eq!(seven.events_dispatched, 20);
    assert_eq!(seven.outstanding_demand, 0);
    assert!(seven.demand_asked_per_second > 0.0);
    // Both asks of consumer 7 were fully served, at least 5 ms after asking.
    assert_eq!(seven.fulfilment_latency.count(), 2);
    assert!(
        seven.fulfilment_latency.sum_seconds >= 0.010,
        "{:?}",
        seven.fulfilment_latency
    );
    let eight = snapshot.consumer(ConsumerId(8)).expect("consumer 8");
    assert_eq!((eight.subscriptions, eight.cancellations), (1, 0));
    assert_eq!((eight.events_dispatched, eight.outstanding_demand), (5, 5));
    assert_eq!(eight.fulfilment_latency.count(), 0);

    // The rate is measured since the previous snapshot: nothing asked since.
    let later = metrics.snapshot().expect("another snapshot");
    assert_eq!(
        later
            .consumer(ConsumerId(7))
            .map(|c| c.demand_asked_per_second),
        Some(0.0)
    );
}

#[test]
fn metrics_can_be_read_from_another_thread_while_dispatching() {
    let factory = load(support::metrics_plugin(), &json!({})).expect("loads");
    let mut dispatcher = factory.dispatcher::<u64>().expect("a dispatcher");
    let metrics = dispatcher.metrics().expect("metrics");
    let reader = std::thread::spawn(move || {
        let mut last = 0;
        for _ in 0..200 {
            let snapshot = metrics.snapshot().expect("a snapshot");
            let now = snapshot
                .consumer(ConsumerId(1))
                .map_or(0, |c| c.events_dispatched);
            assert!(now >= last, "a counter went backwards");
            last = now;
        }
    });
    let mut out = Outbox::new();
    dispatcher
        .subscribe(subscriber(1, 1), &SubscriptionOptions::new(1, 0), &mut out)
        .expect("subscribed");
    for event in 0..10_000u64 {
        dispatcher.ask(SubscriptionId(1), 1, &mut out);
        assert!(dispatcher.dispatch(vec![event], &mut out).is_empty());
        out.drain().for_each(drop);
    }
    reader.join().expect("the reader thread finished");
}

#[test]
fn custom_latency_buckets_reach_the_prometheus_text() {
    let factory = load(
        support::metrics_plugin(),
        &json!({"latency_buckets_seconds": [0.5, 30]}),
    )
    .expect("loads");
    let mut dispatcher = factory.dispatcher::<u64>().expect("a dispatcher");
    let metrics = dispatcher.metrics().expect("metrics");
    let mut out = Outbox::new();
    dispatcher
        .subscribe(subscriber(1, 4), &SubscriptionOptions::new(2, 1), &mut out)
        .expect("subscribed");
    dispatcher.ask(SubscriptionId(1), 2, &mut out);
    assert!(dispatcher.dispatch(vec![1, 2], &mut out).is_empty());

    let text = metrics
        .snapshot()
        .expect("a snapshot")
        .to_prometheus_with_labels(&[("producer", "numbers")]);
    for line in [
        "weir_dispatcher_subscriptions_total{producer=\"numbers\",consumer=\"4\"} 1",
        "weir_dispatcher_events_dispatched_total{producer=\"numbers\",consumer=\"4\"} 2",
        "weir_dispatcher_outstanding_demand{producer=\"numbers\",consumer=\"4\"} 0",
        "weir_dispatcher_fulfilment_latency_seconds_bucket{producer=\"numbers\",consumer=\"4\",le=\"0.5\"} 1",
        "weir_dispatcher_fulfilment_latency_seconds_bucket{producer=\"numbers\",consumer=\"4\",le=\"30\"} 1",
        "weir_dispatcher_fulfilment_latency_seconds_bucket{producer=\"numbers\",consumer=\"4\",le=\"+Inf\"} 1",
        "weir_dispatcher_fulfilment_latency_seconds_count{producer=\"numbers\",consumer=\"4\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in:\n{text}"
        );
    }
}
