//! GenStage's `demand_dispatcher_test.exs`, scenario by scenario, asserting the
//! same deliveries, returned demands, leftovers and bookkeeping.

use super::*;
use crate::{ConsumerId, Emit, InfoId};

fn subscriber(id: u64) -> Subscriber {
    Subscriber {
        subscription: SubscriptionId(id),
        consumer: ConsumerId(id),
    }
}

fn sub(id: u64) -> SubscriptionId {
    SubscriptionId(id)
}

fn subscribe(d: &mut DemandDispatcher, out: &mut Outbox<char>, id: u64) -> usize {
    Dispatcher::<char>::subscribe(d, subscriber(id), &SubscriptionOptions::new(10, 5), out)
        .expect("the demand dispatcher accepts every subscription")
}

fn demands(d: &DemandDispatcher) -> Vec<(SubscriptionId, usize)> {
    d.demands().collect()
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

#[test]
fn subscribes_and_cancels() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();

    assert_eq!(subscribe(&mut d, &mut out, 1), 0);
    assert_eq!(demands(&d), vec![(sub(1), 0)]);
    assert_eq!((d.pending(), d.max_demand()), (0, None));

    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(demands(&d), vec![]);
    assert_eq!((d.pending(), d.max_demand()), (0, None));
    assert!(out.is_empty());
}

#[test]
fn subscribes_asks_and_cancels() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();

    // Subscribe, ask and cancel and leave some demand.
    subscribe(&mut d, &mut out, 1);
    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(demands(&d), vec![(sub(1), 10)]);
    assert_eq!((d.pending(), d.max_demand()), (0, Some(10)));
    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(demands(&d), vec![]);
    assert_eq!(d.pending(), 10);

    // Subscribe, ask and cancel and leave the same demand.
    subscribe(&mut d, &mut out, 2);
    assert_eq!(demands(&d), vec![(sub(2), 0)]);
    assert_eq!(d.ask(sub(2), 5, &mut out), 0);
    assert_eq!(demands(&d), vec![(sub(2), 5)]);
    assert_eq!(d.pending(), 5);
    assert_eq!(d.cancel(sub(2), &mut out), 0);
    assert_eq!(d.pending(), 10);

    // Now attempt to dispatch with no consumers.
    assert_eq!(d.dispatch(chars("abc"), &mut out), chars("abc"));
    assert_eq!(d.pending(), 7);
    let leftover = d.dispatch(chars("0123456789"), &mut out);
    assert_eq!(leftover.len(), 10);
    assert_eq!(d.pending(), 0);
    assert!(out.is_empty());
}

#[test]
fn subscribes_twice_asks_twice_and_cancels_one() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();

    subscribe(&mut d, &mut out, 1);
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    subscribe(&mut d, &mut out, 2);
    assert_eq!(d.ask(sub(2), 3, &mut out), 3);
    assert_eq!(demands(&d), vec![(sub(1), 3), (sub(2), 3)]);

    // Cancel and leave some demand.
    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(demands(&d), vec![(sub(2), 3)]);
    assert_eq!(d.pending(), 3);

    // Send events for both subscriptions.
    assert_eq!(d.dispatch(chars("abcde"), &mut out), chars("de"));
    assert_eq!(demands(&d), vec![(sub(2), 0)]);
    assert_eq!(d.pending(), 1);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![events(2, "abc")]);
}

#[test]
fn subscribes_asks_and_dispatches() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(demands(&d), vec![(sub(1), 3)]);

    assert_eq!(d.dispatch(chars("a"), &mut out), vec![]);
    assert_eq!(demands(&d), vec![(sub(1), 2)]);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![events(1, "a")]);

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(demands(&d), vec![(sub(1), 5)]);

    assert_eq!(d.dispatch(chars("bcdefgh"), &mut out), chars("gh"));
    assert_eq!(demands(&d), vec![(sub(1), 0)]);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![events(1, "bcdef")]);

    assert_eq!(d.dispatch(chars("ij"), &mut out), chars("ij"));
    assert_eq!(demands(&d), vec![(sub(1), 0)]);
    assert!(out.is_empty());
}

#[test]
fn subscribes_asks_multiple_consumers() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();
    for id in 1..=3 {
        subscribe(&mut d, &mut out, id);
    }

    assert_eq!(d.ask(sub(1), 4, &mut out), 4);
    assert_eq!(d.ask(sub(2), 2, &mut out), 2);
    assert_eq!(d.ask(sub(3), 3, &mut out), 3);
    assert_eq!(demands(&d), vec![(sub(1), 4), (sub(3), 3), (sub(2), 2)]);

    assert_eq!(d.ask(sub(3), 2, &mut out), 2);
    assert_eq!(demands(&d), vec![(sub(3), 5), (sub(1), 4), (sub(2), 2)]);

    assert_eq!(d.ask(sub(2), 4, &mut out), 4);
    assert_eq!(demands(&d), vec![(sub(2), 6), (sub(3), 5), (sub(1), 4)]);
    assert_eq!(d.max_demand(), Some(4));
}

#[test]
fn subscribes_asks_and_dispatches_to_multiple_consumers() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);
    subscribe(&mut d, &mut out, 2);

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(d.ask(sub(2), 2, &mut out), 2);
    assert_eq!(demands(&d), vec![(sub(1), 3), (sub(2), 2)]);

    // One batch fits all.
    assert_eq!(d.dispatch(chars("abcde"), &mut out), vec![]);
    assert_eq!(
        out.drain().collect::<Vec<_>>(),
        vec![events(1, "abc"), events(2, "de")]
    );

    assert_eq!(d.dispatch(chars("abc"), &mut out), chars("abc"));
    assert_eq!(demands(&d), vec![(sub(1), 0), (sub(2), 0)]);
    assert!(out.is_empty());

    // Two batches with left over.
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(d.ask(sub(2), 3, &mut out), 3);
    assert_eq!(demands(&d), vec![(sub(1), 3), (sub(2), 3)]);

    assert_eq!(d.dispatch(chars("ab"), &mut out), vec![]);
    assert_eq!(demands(&d), vec![(sub(2), 3), (sub(1), 1)]);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![events(1, "ab")]);

    assert_eq!(d.dispatch(chars("cd"), &mut out), vec![]);
    assert_eq!(demands(&d), vec![(sub(1), 1), (sub(2), 1)]);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![events(2, "cd")]);

    // Eliminate the left-over.
    assert_eq!(d.dispatch(chars("efg"), &mut out), chars("g"));
    assert_eq!(demands(&d), vec![(sub(1), 0), (sub(2), 0)]);
    assert_eq!(
        out.drain().collect::<Vec<_>>(),
        vec![events(1, "e"), events(2, "f")]
    );
}

#[test]
fn subscribes_asks_and_dispatches_to_multiple_consumers_with_shuffled_demands() {
    let mut kept = 0;
    let mut swapped = 0;
    for seed in 0..64 {
        let mut d = DemandDispatcher::new().shuffle_demands_on_first_dispatch_with_seed(seed);
        let mut out = Outbox::new();
        subscribe(&mut d, &mut out, 1);
        subscribe(&mut d, &mut out, 2);
        assert_eq!(d.ask(sub(1), 3, &mut out), 3);
        assert_eq!(d.ask(sub(2), 2, &mut out), 2);
        assert_eq!(demands(&d), vec![(sub(1), 3), (sub(2), 2)]);

        // Demands are shuffled at the first dispatch.
        assert_eq!(d.dispatch(chars("abcde"), &mut out), vec![]);
        let sent: Vec<_> = out.drain().collect();
        match demands(&d).as_slice() {
            [(first, 0), (second, 0)] if (*first, *second) == (sub(1), sub(2)) => {
                kept += 1;
                assert_eq!(sent, vec![events(1, "abc"), events(2, "de")]);
            }
            [(first, 0), (second, 0)] if (*first, *second) == (sub(2), sub(1)) => {
                swapped += 1;
                assert_eq!(sent, vec![events(2, "ab"), events(1, "cde")]);
            }
            other => panic!("unexpected demands {other:?}"),
        }

        // The shuffle happens once: later dispatches keep the demand order.
        assert!(d.shuffle.is_none());
    }
    assert!(kept > 0 && swapped > 0, "kept {kept}, swapped {swapped}");
}

#[test]
fn shuffled_demands_are_the_same_for_the_same_seed() {
    let run = |seed| {
        let mut d = DemandDispatcher::new().shuffle_demands_on_first_dispatch_with_seed(seed);
        let mut out = Outbox::new();
        for id in 1..=5 {
            subscribe(&mut d, &mut out, id);
            d.ask(sub(id), 2, &mut out);
        }
        d.dispatch(chars("abcdefghij"), &mut out);
        out.drain().collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    assert!((0..16).any(|seed| run(seed) != run(3)));
}

#[test]
fn delivers_info_to_current_process() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);
    subscribe(&mut d, &mut out, 2);
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    let before = demands(&d);

    d.info(InfoId(7), &mut out);
    assert_eq!(demands(&d), before);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![Emit::Info(InfoId(7))]);
}

#[test]
fn warns_on_demand_mismatch() {
    let mut d = DemandDispatcher::new().with_max_demand(3);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);
    subscribe(&mut d, &mut out, 2);

    assert_eq!(d.ask(sub(2), 4, &mut out), 4);
    assert_eq!(
        out.drain().collect::<Vec<_>>(),
        vec![Emit::Warning(Warning::AskLargerThanMaxDemand {
            subscription: sub(2),
            asked: 4,
            expected: 3,
        })]
    );
}

#[test]
fn first_ask_sets_the_expected_max_demand() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1);
    subscribe(&mut d, &mut out, 2);

    assert_eq!(d.ask(sub(1), 5, &mut out), 5);
    assert_eq!(d.ask(sub(2), 5, &mut out), 5);
    assert!(out.is_empty());
    assert_eq!(d.ask(sub(2), 6, &mut out), 6);
    assert_eq!(
        out.drain().collect::<Vec<_>>(),
        vec![Emit::Warning(Warning::AskLargerThanMaxDemand {
            subscription: sub(2),
            asked: 6,
            expected: 5,
        })]
    );
}

#[test]
fn pending_demand_is_used_up_before_asking_upstream_again() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::<char>::new();
    subscribe(&mut d, &mut out, 1);
    subscribe(&mut d, &mut out, 2);
    d.ask(sub(1), 4, &mut out);
    d.cancel(sub(1), &mut out);
    assert_eq!(d.pending(), 4);

    // The 4 events already asked for cover the next asks first.
    assert_eq!(d.ask(sub(2), 3, &mut out), 0);
    assert_eq!(d.ask(sub(2), 3, &mut out), 2);
    assert_eq!(d.pending(), 0);
    assert_eq!(d.demand(sub(2)), Some(6));
}

#[test]
fn unknown_subscriptions_are_ignored() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::<char>::new();
    subscribe(&mut d, &mut out, 1);

    assert_eq!(d.ask(sub(9), 5, &mut out), 0);
    assert_eq!(d.cancel(sub(9), &mut out), 0);
    assert_eq!(demands(&d), vec![(sub(1), 0)]);
    assert_eq!((d.pending(), d.max_demand()), (0, None));
    assert!(out.is_empty());
}

#[test]
fn dispatch_without_consumers_returns_every_event() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();
    assert_eq!(d.dispatch(chars("xyz"), &mut out), chars("xyz"));
    assert!(out.is_empty());
}

#[test]
fn consumer_with_equal_demand_goes_behind_the_others() {
    let mut d = DemandDispatcher::new();
    let mut out = Outbox::new();
    for id in 1..=3 {
        subscribe(&mut d, &mut out, id);
        d.ask(sub(id), 2, &mut out);
    }
    // Each batch of 2 empties the head, which moves to the back.
    assert_eq!(d.dispatch(chars("abcdef"), &mut out), vec![]);
    assert_eq!(
        out.drain().collect::<Vec<_>>(),
        vec![events(1, "ab"), events(2, "cd"), events(3, "ef")]
    );
    d.ask(sub(3), 2, &mut out);
    d.ask(sub(1), 2, &mut out);
    assert_eq!(demands(&d), vec![(sub(3), 2), (sub(1), 2), (sub(2), 0)]);
}

#[test]
fn shuffle_puts_consumers_without_demand_behind_those_with_demand() {
    for seed in 0..32 {
        let mut d = DemandDispatcher::new().shuffle_demands_on_first_dispatch_with_seed(seed);
        let mut out = Outbox::new();
        for id in 1..=3 {
            subscribe(&mut d, &mut out, id);
        }
        // Only subscription 2 asked before the first dispatch.
        d.ask(sub(2), 4, &mut out);
        assert_eq!(d.dispatch(chars("ab"), &mut out), vec![]);
        assert_eq!(out.drain().collect::<Vec<_>>(), vec![events(2, "ab")]);
        assert_eq!(d.demands().next(), Some((sub(2), 2)));
    }
}

proptest::proptest! {
    /// Changing a consumer's demand in place puts it exactly where GenStage
    /// puts it: taken out of the list, then inserted before the first
    /// consumer with a smaller demand.
    #[test]
    fn set_demand_moves_a_consumer_where_remove_and_insert_would(
        counters in proptest::collection::vec(0usize..6, 1..8),
        pick in 0usize..8,
        counter in 0usize..8,
    ) {
        let mut d = DemandDispatcher::new();
        d.demands = counters
            .iter()
            .enumerate()
            .map(|(i, &counter)| Demand { counter, subscription: sub(i as u64) })
            .collect();
        let index = pick % counters.len();

        let mut expected = d.demands.clone();
        let moved = expected.remove(index);
        let at = expected
            .iter()
            .position(|other| counter > other.counter)
            .unwrap_or(expected.len());
        expected.insert(at, Demand { counter, subscription: moved.subscription });

        d.set_demand(index, counter);
        proptest::prop_assert_eq!(d.demands, expected);
    }
}
