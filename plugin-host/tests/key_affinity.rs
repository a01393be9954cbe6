//! The consistent-hash key-affinity plugin, loaded from its `.so`: the same
//! key always reaches the same consumer, no event is lost or duplicated, and
//! no consumer ever gets more than it asked for.

use crate::support;

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::json;
use weir_dispatchers::{
    ConsumerId, Dispatcher, Emit, Outbox, Subscriber, SubscriptionId, SubscriptionOptions,
};
use weir_plugin_host::{PluginDispatcher, load};

/// Events are `(key, sequence number)`; the plugin routes by key.
type Event = (u64, u64);

fn dispatcher() -> PluginDispatcher<Event> {
    load(
        support::key_affinity_plugin(),
        &json!({"virtual_nodes": 32}),
    )
    .expect("loads")
    .dispatcher_with_key(|event: &Event| event.0)
    .expect("a dispatcher")
}

fn subscriber(id: u64) -> Subscriber {
    Subscriber {
        subscription: SubscriptionId(id),
        consumer: ConsumerId(id),
    }
}

/// Who received which events.
fn deliveries(out: &mut Outbox<Event>) -> Vec<(SubscriptionId, Vec<Event>)> {
    out.drain()
        .filter_map(|emit| match emit {
            Emit::Events { to, events } => Some((to, events)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_same_key_always_reaches_the_same_consumer() {
    let mut d = dispatcher();
    let mut out = Outbox::new();
    for id in 1..=3 {
        d.subscribe(
            subscriber(id),
            &SubscriptionOptions::new(1000, 500),
            &mut out,
        )
        .expect("subscribed");
        assert_eq!(d.ask(SubscriptionId(id), 1000, &mut out), 1000);
    }
    let batch: Vec<Event> = (0..300).map(|i| (i % 20, i)).collect();
    assert!(d.dispatch(batch, &mut out).is_empty());
    let mut owner: HashMap<u64, SubscriptionId> = HashMap::new();
    let got = deliveries(&mut out);
    assert!(got.len() > 1, "20 keys spread over more than one consumer");
    for (to, events) in got {
        assert!(events.windows(2).all(|w| w[0].1 < w[1].1), "in order");
        for (key, _) in events {
            assert_eq!(
                *owner.entry(key).or_insert(to),
                to,
                "key {key} went to two consumers"
            );
        }
    }
}

#[test]
fn the_affinity_option_brings_a_resubscribed_consumers_keys_back() {
    let mut d = dispatcher();
    let mut out = Outbox::new();
    let with = |name: &str| SubscriptionOptions::new(100, 50).extra("affinity", name);
    d.subscribe(subscriber(1), &with("billing"), &mut out)
        .expect("subscribed");
    d.subscribe(subscriber(2), &with("search"), &mut out)
        .expect("subscribed");
    d.ask(SubscriptionId(1), 100, &mut out);
    d.ask(SubscriptionId(2), 100, &mut out);
    let keys: Vec<Event> = (0..40).map(|k| (k, k)).collect();
    assert!(d.dispatch(keys.clone(), &mut out).is_empty());
    let billing_before: Vec<u64> = deliveries(&mut out)
        .into_iter()
        .filter(|(to, _)| *to == SubscriptionId(1))
        .flat_map(|(_, events)| events.into_iter().map(|e| e.0))
        .collect();
    assert!(!billing_before.is_empty());
    // "billing" leaves and comes back under a new subscription id.
    d.cancel(SubscriptionId(1), &mut out);
    d.subscribe(subscriber(3), &with("billing"), &mut out)
        .expect("subscribed");
    d.ask(SubscriptionId(3), 100, &mut out);
    assert!(d.dispatch(keys, &mut out).is_empty());
    let billing_after: Vec<u64> = deliveries(&mut out)
        .into_iter()
        .filter(|(to, _)| *to == SubscriptionId(3))
        .flat_map(|(_, events)| events.into_iter().map(|e| e.0))
        .collect();
    assert_eq!(billing_before, billing_after);
}

#[test]
fn events_for_a_consumer_without_demand_are_left_over_in_order() {
    let mut d = dispatcher();
    let mut out = Outbox::new();
    d.subscribe(subscriber(1), &SubscriptionOptions::new(2, 1), &mut out)
        .expect("subscribed");
    d.ask(SubscriptionId(1), 2, &mut out);
    let leftover = d.dispatch(vec![(5, 0), (6, 1), (7, 2), (8, 3)], &mut out);
    assert_eq!(leftover, vec![(7, 2), (8, 3)]);
    assert_eq!(
        deliveries(&mut out),
        vec![(SubscriptionId(1), vec![(5, 0), (6, 1)])]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_event_is_lost_or_duplicated_and_demand_is_never_exceeded(
        demands in proptest::collection::vec(0usize..15, 1..5),
        keys in proptest::collection::vec(0u64..30, 0..60),
    ) {
        let mut d = dispatcher();
        let mut out = Outbox::new();
        for (id, demand) in demands.iter().enumerate() {
            let id = id as u64;
            d.subscribe(subscriber(id), &SubscriptionOptions::new(20, 10), &mut out).expect("subscribed");
            d.ask(SubscriptionId(id), *demand, &mut out);
        }
        let batch: Vec<Event> = keys.iter().enumerate().map(|(i, k)| (*k, i as u64)).collect();
        let leftover = d.dispatch(batch.clone(), &mut out);
        let got = deliveries(&mut out);
        let mut seen: Vec<Event> = leftover.clone();
        for (to, events) in &got {
            prop_assert!(events.len() <= demands[to.0 as usize]);
            seen.extend(events.iter().copied());
        }
        seen.sort_unstable_by_key(|e| e.1);
        prop_assert_eq!(seen, batch);
        prop_assert!(d.fault().is_none());
    }
}
