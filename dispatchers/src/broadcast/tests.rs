//! GenStage's `broadcast_dispatcher_test.exs`, scenario by scenario, asserting
//! the same deliveries, returned demands, leftovers and bookkeeping
//! (`{counters, waiting, requested, subscribed}`).

use super::*;
use crate::{Emit, InfoId};

fn subscriber(id: u64) -> Subscriber {
    Subscriber {
        subscription: SubscriptionId(id),
        consumer: ConsumerId(id),
    }
}

fn sub(id: u64) -> SubscriptionId {
    SubscriptionId(id)
}

fn subscribe<T: Clone>(d: &mut BroadcastDispatcher<T>, out: &mut Outbox<T>, id: u64) -> usize {
    d.subscribe(subscriber(id), &SubscriptionOptions::new(10, 5), out)
        .expect("a first subscription of a consumer is accepted")
}

/// GenStage's state tuple: `{[{counter, ref}], waiting, requested, subscribed}`.
type State = (Vec<(u64, usize)>, usize, usize, Vec<u64>);

fn state<T>(d: &BroadcastDispatcher<T>) -> State {
    (
        d.demands
            .iter()
            .map(|s| (s.subscriber.subscription.0, s.counter))
            .collect(),
        d.waiting,
        d.requested,
        d.subscribed.iter().map(|c| c.0).collect(),
    )
}

fn events(to: u64, events: &str) -> Emit<char> {
    Emit::Events {
        to: sub(to),
        events: events.chars().collect(),
    }
}

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

fn drain<T>(out: &mut Outbox<T>) -> Vec<Emit<T>> {
    out.drain().collect()
}

#[test]
fn subscribes_and_cancels() {
    let mut d = BroadcastDispatcher::<char>::new();
    let mut out = Outbox::new();

    assert_eq!(subscribe(&mut d, &mut out, 1), 0);
    assert_eq!(state(&d), (vec![(1, 0)], 0, 0, vec![1]));

    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(state(&d), (vec![], 0, 0, vec![]));
}

#[test]
fn subscribes_asks_and_cancels() {
    let mut d = BroadcastDispatcher::new();
    let mut out = Outbox::new();

    assert_eq!(subscribe(&mut d, &mut out, 1), 0);
    assert_eq!(state(&d), (vec![(1, 0)], 0, 0, vec![1]));

    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(state(&d), (vec![(1, 0)], 10, 10, vec![1]));

    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(state(&d), (vec![], 0, 10, vec![]));

    // Now attempt to dispatch with no consumers.
    assert_eq!(d.dispatch(vec![1, 2, 3], &mut out), vec![1, 2, 3]);
    assert_eq!(state(&d), (vec![], 0, 10, vec![]));
    assert!(out.is_empty());
}

#[test]
fn multiple_subscriptions_with_early_demand() {
    let mut d = BroadcastDispatcher::<char>::new();
    let mut out = Outbox::new();

    assert_eq!(subscribe(&mut d, &mut out, 1), 0);
    assert_eq!(state(&d), (vec![(1, 0)], 0, 0, vec![1]));

    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(state(&d), (vec![(1, 0)], 10, 10, vec![1]));

    assert_eq!(subscribe(&mut d, &mut out, 2), 0);
    assert_eq!(state(&d), (vec![(2, 0), (1, 10)], 0, 10, vec![1, 2]));

    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(state(&d), (vec![(2, 0)], 0, 10, vec![2]));

    assert_eq!(d.ask(sub(2), 10, &mut out), 0);
    assert_eq!(state(&d), (vec![(2, 0)], 10, 10, vec![2]));
}

#[test]
fn multiple_subscriptions_with_late_demand() {
    let mut d = BroadcastDispatcher::<char>::new();
    let mut out = Outbox::new();

    assert_eq!(subscribe(&mut d, &mut out, 1), 0);
    assert_eq!(state(&d), (vec![(1, 0)], 0, 0, vec![1]));

    assert_eq!(subscribe(&mut d, &mut out, 2), 0);
    assert_eq!(state(&d), (vec![(2, 0), (1, 0)], 0, 0, vec![1, 2]));

    assert_eq!(d.ask(sub(1), 10, &mut out), 0);
    assert_eq!(state(&d), (vec![(1, 10), (2, 0)], 0, 0, vec![1, 2]));

    assert_eq!(d.cancel(sub(2), &mut out), 10);
    assert_eq!(state(&d), (vec![(1, 0)], 10, 10, vec![1]));

    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(state(&d), (vec![(1, 0)], 20, 20, vec![1]));
}

#[test]
fn subscribes_asks_and_dispatches_to_multiple_consumers() {
    let mut d = BroadcastDispatcher::new();
    let mut out = Outbox::new();

    subscribe(&mut d, &mut out, 1);
    subscribe(&mut d, &mut out, 2);
    assert_eq!(d.ask(sub(1), 3, &mut out), 0);
    assert_eq!(d.ask(sub(2), 2, &mut out), 2);
    assert_eq!(state(&d), (vec![(2, 0), (1, 1)], 2, 2, vec![1, 2]));

    // One batch fits all.
    assert_eq!(d.dispatch(chars("ab"), &mut out), vec![]);
    assert_eq!(state(&d), (vec![(2, 0), (1, 1)], 0, 0, vec![1, 2]));
    assert_eq!(drain(&mut out), vec![events(2, "ab"), events(1, "ab")]);

    // A batch with left-over.
    assert_eq!(d.ask(sub(2), 2, &mut out), 1);
    assert_eq!(d.dispatch(chars("cd"), &mut out), chars("d"));
    assert_eq!(state(&d), (vec![(2, 1), (1, 0)], 0, 0, vec![1, 2]));
    assert_eq!(drain(&mut out), vec![events(2, "c"), events(1, "c")]);

    // A batch with no demand.
    assert_eq!(d.dispatch(chars("d"), &mut out), chars("d"));
    assert_eq!(state(&d), (vec![(2, 1), (1, 0)], 0, 0, vec![1, 2]));
    assert!(out.is_empty());

    // Add a late subscriber.
    assert_eq!(d.ask(sub(1), 1, &mut out), 1);
    assert_eq!(subscribe(&mut d, &mut out, 3), 0);
    assert_eq!(d.dispatch(chars("de"), &mut out), chars("de"));
    assert_eq!(
        state(&d),
        (vec![(3, 0), (1, 1), (2, 1)], 0, 1, vec![1, 2, 3])
    );
    assert!(out.is_empty());

    // Even out.
    assert_eq!(d.ask(sub(1), 2, &mut out), 0);
    assert_eq!(d.ask(sub(2), 2, &mut out), 0);
    assert_eq!(d.ask(sub(3), 3, &mut out), 2);
    assert_eq!(d.dispatch(chars("def"), &mut out), vec![]);
    assert_eq!(
        state(&d),
        (vec![(3, 0), (2, 0), (1, 0)], 0, 0, vec![1, 2, 3])
    );
    assert_eq!(
        drain(&mut out),
        vec![events(3, "def"), events(2, "def"), events(1, "def")]
    );
}

#[test]
fn subscribes_asks_dispatches_and_repeats() {
    let mut d = BroadcastDispatcher::new();
    let mut out = Outbox::new();

    subscribe(&mut d, &mut out, 1);
    assert_eq!(state(&d), (vec![(1, 0)], 0, 0, vec![1]));

    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(state(&d), (vec![(1, 0)], 10, 10, vec![1]));

    assert_eq!(d.dispatch(chars("abc"), &mut out), vec![]);
    assert_eq!(state(&d), (vec![(1, 0)], 7, 7, vec![1]));
    assert_eq!(drain(&mut out), vec![events(1, "abc")]);

    subscribe(&mut d, &mut out, 2);
    assert_eq!(state(&d), (vec![(2, 0), (1, 7)], 0, 7, vec![1, 2]));

    assert_eq!(d.ask(sub(2), 20, &mut out), 0);
    assert_eq!(state(&d), (vec![(2, 13), (1, 0)], 7, 7, vec![1, 2]));

    assert_eq!(d.dispatch(chars("defghij"), &mut out), vec![]);
    assert_eq!(state(&d), (vec![(2, 13), (1, 0)], 0, 0, vec![1, 2]));
    assert_eq!(
        drain(&mut out),
        vec![events(2, "defghij"), events(1, "defghij")]
    );
}

#[test]
fn subscribes_asks_cancels_and_dispatcher_reuses_events_for_another_subscriber() {
    let mut d = BroadcastDispatcher::new();
    let mut out = Outbox::new();

    subscribe(&mut d, &mut out, 1);
    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(state(&d), (vec![(1, 0)], 10, 10, vec![1]));

    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(state(&d), (vec![], 0, 10, vec![]));

    subscribe(&mut d, &mut out, 2);
    assert_eq!(state(&d), (vec![(2, 0)], 0, 10, vec![2]));

    // The 10 events requested for the first subscriber cover this ask.
    assert_eq!(d.ask(sub(2), 5, &mut out), 0);
    assert_eq!(state(&d), (vec![(2, 0)], 5, 10, vec![2]));

    assert_eq!(d.dispatch(chars("abc"), &mut out), vec![]);
    assert_eq!(state(&d), (vec![(2, 0)], 2, 7, vec![2]));
    assert_eq!(drain(&mut out), vec![events(2, "abc")]);
}

#[test]
fn cancels_blocking_subscriber_while_there_is_already_a_requested_demand() {
    let mut d = BroadcastDispatcher::<char>::new();
    let mut out = Outbox::new();

    subscribe(&mut d, &mut out, 1);
    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(state(&d), (vec![(1, 0)], 10, 10, vec![1]));

    subscribe(&mut d, &mut out, 2);
    assert_eq!(state(&d), (vec![(2, 0), (1, 10)], 0, 10, vec![1, 2]));

    assert_eq!(d.ask(sub(1), 5, &mut out), 0);
    assert_eq!(state(&d), (vec![(1, 15), (2, 0)], 0, 10, vec![1, 2]));

    // Only what was not requested yet is asked upstream.
    assert_eq!(d.cancel(sub(2), &mut out), 5);
    assert_eq!(state(&d), (vec![(1, 0)], 15, 15, vec![1]));
}

#[test]
fn subscribing_with_a_selector_function() {
    let mut d = BroadcastDispatcher::<&'static str>::new();
    let mut out = Outbox::new();
    let pre = SubscriptionOptions::new(10, 5).selector(|key: &&str| key.starts_with("pre"));
    let pref = SubscriptionOptions::new(10, 5).selector(|key: &&str| key.starts_with("pref"));

    assert_eq!(d.subscribe(subscriber(1), &pre, &mut out), Ok(0));
    assert_eq!(d.subscribe(subscriber(2), &pref, &mut out), Ok(0));
    assert_eq!(state(&d).0, vec![(2, 0), (1, 0)]);

    assert_eq!(d.ask(sub(2), 4, &mut out), 0);
    assert_eq!(d.ask(sub(1), 4, &mut out), 4);

    let events = vec!["pref-1234", "pref-5678", "pre0000", "foo0000"];
    assert_eq!(d.dispatch(events, &mut out), Vec::<&str>::new());
    assert_eq!(
        drain(&mut out),
        vec![
            Emit::Events {
                to: sub(1),
                events: vec!["pref-1234", "pref-5678", "pre0000"],
            },
            Emit::Events {
                to: sub(2),
                events: vec!["pref-1234", "pref-5678"],
            },
            Emit::Ask {
                subscription: sub(1),
                n: 1,
            },
            Emit::Ask {
                subscription: sub(2),
                n: 2,
            },
        ]
    );

    // The host carries out the asks: rejected events consumed no demand, so
    // subscription 1 can take one more event, subscription 2 two more.
    assert_eq!(d.ask(sub(1), 1, &mut out), 0);
    assert_eq!(d.ask(sub(2), 2, &mut out), 1);
    assert_eq!(d.demand(sub(1)), Some(1));
    assert_eq!(d.demand(sub(2)), Some(2));
}

#[test]
fn selector_rejecting_every_event_gives_all_demand_back() {
    let mut d = BroadcastDispatcher::<u32>::new();
    let mut out = Outbox::new();
    let none = SubscriptionOptions::new(10, 5).selector(|_: &u32| false);
    d.subscribe(subscriber(1), &none, &mut out)
        .expect("a first subscription is accepted");

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(d.dispatch(vec![1, 2, 3], &mut out), Vec::<u32>::new());
    assert_eq!(
        drain(&mut out),
        vec![Emit::Ask {
            subscription: sub(1),
            n: 3
        }]
    );
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
}

#[test]
fn delivers_info_to_current_process() {
    let mut d = BroadcastDispatcher::<char>::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);
    subscribe(&mut d, &mut out, 2);
    assert_eq!(d.ask(sub(1), 3, &mut out), 0);
    let before = state(&d);

    d.info(InfoId(1), &mut out);
    assert_eq!(state(&d), before);
    assert_eq!(drain(&mut out), vec![Emit::Info(InfoId(1))]);
}

#[test]
fn subscribing_is_idempotent() {
    let mut d = BroadcastDispatcher::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);

    let again = Subscriber {
        subscription: sub(2),
        consumer: ConsumerId(1),
    };
    assert_eq!(
        d.subscribe(again, &SubscriptionOptions::new(10, 5), &mut out),
        Err(SubscribeError::AlreadySubscribed {
            consumer: ConsumerId(1)
        })
    );
    assert_eq!(state(&d), (vec![(1, 0)], 0, 0, vec![1]));

    // The refused subscription is unknown; the first one keeps working.
    assert_eq!(d.ask(again.subscription, 5, &mut out), 0);
    assert_eq!(d.cancel(again.subscription, &mut out), 0);
    assert_eq!(d.ask(sub(1), 5, &mut out), 5);
    assert_eq!(d.dispatch(chars("xy"), &mut out), vec![]);
    assert_eq!(drain(&mut out), vec![events(1, "xy")]);
}

#[test]
fn consumer_may_subscribe_again_after_cancelling() {
    let mut d = BroadcastDispatcher::<char>::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);
    d.cancel(sub(1), &mut out);

    let again = Subscriber {
        subscription: sub(2),
        consumer: ConsumerId(1),
    };
    assert_eq!(
        d.subscribe(again, &SubscriptionOptions::new(10, 5), &mut out),
        Ok(0)
    );
}

#[test]
fn late_subscriber_does_not_get_earlier_events() {
    let mut d = BroadcastDispatcher::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);
    assert_eq!(d.ask(sub(1), 4, &mut out), 4);
    assert_eq!(d.dispatch(chars("ab"), &mut out), vec![]);
    drain(&mut out);

    subscribe(&mut d, &mut out, 2);
    // Nobody receives anything until the newcomer asks.
    assert_eq!(d.dispatch(chars("cd"), &mut out), chars("cd"));
    assert!(out.is_empty());
    assert_eq!(d.ask(sub(2), 2, &mut out), 0);
    assert_eq!(d.dispatch(chars("cd"), &mut out), vec![]);
    assert_eq!(drain(&mut out), vec![events(2, "cd"), events(1, "cd")]);
}
