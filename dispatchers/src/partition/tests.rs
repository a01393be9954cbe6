//! GenStage's `partition_dispatcher_test.exs`, scenario by scenario, asserting
//! the same deliveries, returned demands, leftovers and `{waiting, pending}`,
//! plus the places where Weir refuses or warns instead of raising.
//!
//! GenStage's tests with the default hash rely on where `:erlang.phash2`
//! puts small integers (1, 2, 5, 6, 7 all land in partition 0 of 2); here the
//! same scenarios name that placement with an explicit hash.

use super::*;
use crate::{ConsumerId, Emit};

fn subscriber(id: u64) -> Subscriber {
    Subscriber {
        subscription: SubscriptionId(id),
        consumer: ConsumerId(id),
    }
}

fn sub(id: u64) -> SubscriptionId {
    SubscriptionId(id)
}

fn subscribe<T: Send>(
    d: &mut PartitionDispatcher<T>,
    out: &mut Outbox<T>,
    id: u64,
    partition: impl Into<PartitionKey>,
) -> usize {
    d.subscribe(
        subscriber(id),
        &SubscriptionOptions::new(10, 5).partition(partition),
        out,
    )
    .expect("a free partition accepts a subscription")
}

/// No leftover events.
const NOTHING: Vec<u32> = Vec::new();

fn waiting_and_pending<T>(d: &PartitionDispatcher<T>) -> (usize, usize) {
    (d.waiting(), d.pending())
}

fn events<T>(to: u64, events: Vec<T>) -> Emit<T> {
    Emit::Events {
        to: sub(to),
        events,
    }
}

fn drain<T>(out: &mut Outbox<T>) -> Vec<Emit<T>> {
    out.drain().collect()
}

/// GenStage's `phash2` placement the scenarios rely on: everything in
/// partition 0.
fn all_to_partition_zero(count: usize) -> PartitionDispatcher<u32> {
    PartitionDispatcher::with_hash(count, |n| Some((n, 0)))
}

fn odd_even() -> PartitionDispatcher<u32> {
    PartitionDispatcher::named(["odd", "even"], |n: u32| {
        Some((n, if n.is_multiple_of(2) { "even" } else { "odd" }))
    })
}

#[test]
fn subscribes_asks_and_cancels() {
    let mut d = PartitionDispatcher::<u32>::new(2);
    let mut out = Outbox::new();

    // Subscribe, ask and cancel and leave some demand.
    assert_eq!(subscribe(&mut d, &mut out, 1, 0), 0);
    assert_eq!(d.ask(sub(1), 10, &mut out), 10);
    assert_eq!(waiting_and_pending(&d), (10, 0));
    assert_eq!(d.cancel(sub(1), &mut out), 0);
    assert_eq!(waiting_and_pending(&d), (10, 10));

    // Subscribe again and the same demand is back.
    assert_eq!(subscribe(&mut d, &mut out, 2, 1), 0);
    assert_eq!(d.ask(sub(2), 5, &mut out), 0);
    assert_eq!(waiting_and_pending(&d), (10, 5));
    assert_eq!(d.cancel(sub(2), &mut out), 0);
    assert_eq!(waiting_and_pending(&d), (10, 10));

    // Now attempt to dispatch with no consumers: the events wait in their
    // partitions.
    assert_eq!(d.dispatch(vec![0, 1, 2, 3], &mut out), NOTHING);
    assert_eq!(waiting_and_pending(&d), (6, 10));
    assert_eq!(Dispatcher::buffered(&d), 4);
    assert!(out.is_empty());
}

#[test]
fn subscribes_asks_and_dispatches() {
    let mut d = PartitionDispatcher::<u32>::new(1);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, 0);

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(d.dispatch(vec![1], &mut out), NOTHING);
    assert_eq!(waiting_and_pending(&d), (2, 0));
    assert_eq!(drain(&mut out), vec![events(1, vec![1])]);

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(waiting_and_pending(&d), (5, 0));

    assert_eq!(
        d.dispatch(vec![2, 5, 6, 7, 8, 9, 11], &mut out),
        vec![9, 11]
    );
    assert_eq!(waiting_and_pending(&d), (0, 0));
    assert_eq!(drain(&mut out), vec![events(1, vec![2, 5, 6, 7, 8])]);
}

#[test]
fn subscribes_asks_and_dispatches_to_custom_partitions() {
    let mut d = odd_even();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, "odd");

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(d.dispatch(vec![1], &mut out), NOTHING);
    assert_eq!(waiting_and_pending(&d), (2, 0));
    assert_eq!(drain(&mut out), vec![events(1, vec![1])]);

    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(waiting_and_pending(&d), (5, 0));

    assert_eq!(
        d.dispatch(vec![5, 7, 9, 11, 13, 15, 17], &mut out),
        vec![15, 17]
    );
    assert_eq!(waiting_and_pending(&d), (0, 0));
    assert_eq!(drain(&mut out), vec![events(1, vec![5, 7, 9, 11, 13])]);
}

#[test]
fn subscribes_asks_and_dispatches_to_partitions_or_none() {
    let mut d = PartitionDispatcher::named(["odd", "even"], |n: u32| {
        if n.is_multiple_of(3) {
            None
        } else if n.is_multiple_of(2) {
            Some((n, "even"))
        } else {
            Some((n, "odd"))
        }
    });
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, "even");
    subscribe(&mut d, &mut out, 2, "odd");

    assert_eq!(d.ask(sub(1), 4, &mut out), 4);
    assert_eq!(d.ask(sub(2), 4, &mut out), 4);
    assert_eq!(d.dispatch((1..=12).collect(), &mut out), vec![12]);

    let sent = drain(&mut out);
    assert!(sent.contains(&events(1, vec![2, 4, 8, 10])));
    assert!(sent.contains(&events(2, vec![1, 5, 7, 11])));
    assert_eq!(sent.len(), 2);
    assert_eq!(waiting_and_pending(&d), (0, 0));
}

#[test]
fn buffers_events_before_subscription() {
    let mut d = all_to_partition_zero(2);
    let mut out = Outbox::new();

    // Use one subscription to queue.
    subscribe(&mut d, &mut out, 1, 1);
    assert_eq!(d.ask(sub(1), 5, &mut out), 5);
    assert_eq!(d.dispatch(vec![1, 2, 5, 6, 7], &mut out), NOTHING);
    assert_eq!(waiting_and_pending(&d), (0, 0));
    assert!(out.is_empty());

    assert_eq!(d.dispatch(vec![8, 9], &mut out), vec![8, 9]);
    assert_eq!(waiting_and_pending(&d), (0, 0));

    // Use another subscription to get events back.
    subscribe(&mut d, &mut out, 2, 0);
    assert_eq!(d.ask(sub(2), 5, &mut out), 5);
    assert_eq!(waiting_and_pending(&d), (5, 0));
    assert_eq!(drain(&mut out), vec![events(2, vec![1, 2, 5, 6, 7])]);

    assert_eq!(d.dispatch(vec![1, 2], &mut out), NOTHING);
    assert_eq!(waiting_and_pending(&d), (3, 0));
}

#[test]
fn buffers_events_after_subscription() {
    let mut d = all_to_partition_zero(2);
    let mut out = Outbox::new();

    subscribe(&mut d, &mut out, 0, 0);
    assert_eq!(d.ask(sub(0), 5, &mut out), 5);
    assert_eq!(waiting_and_pending(&d), (5, 0));

    subscribe(&mut d, &mut out, 1, 1);
    assert_eq!(d.ask(sub(1), 5, &mut out), 5);
    assert_eq!(waiting_and_pending(&d), (10, 0));

    // Send all events to the same partition, half of them will be buffered.
    assert_eq!(d.dispatch(vec![1, 2], &mut out), NOTHING);
    assert_eq!(d.dispatch(vec![5, 6, 7, 1, 2, 5, 6, 7], &mut out), NOTHING);
    assert_eq!(waiting_and_pending(&d), (0, 0));
    assert_eq!(
        drain(&mut out),
        vec![events(0, vec![1, 2]), events(0, vec![5, 6, 7])]
    );
    assert_eq!(Dispatcher::buffered(&d), 5);

    assert_eq!(d.ask(sub(0), 5, &mut out), 5);
    assert_eq!(waiting_and_pending(&d), (5, 0));
    assert_eq!(drain(&mut out), vec![events(0, vec![1, 2, 5, 6, 7])]);
    assert_eq!(Dispatcher::buffered(&d), 0);
}

#[test]
fn subscribes_asks_and_cancels_with_buffer() {
    let mut d = all_to_partition_zero(2);
    let mut out = Outbox::new();

    subscribe(&mut d, &mut out, 1, 1);
    assert_eq!(d.ask(sub(1), 5, &mut out), 5);
    assert_eq!(waiting_and_pending(&d), (5, 0));

    subscribe(&mut d, &mut out, 0, 0);
    assert_eq!(d.dispatch(vec![1, 2, 5, 6, 7], &mut out), NOTHING);
    assert_eq!(waiting_and_pending(&d), (0, 0));
    assert!(out.is_empty());

    // The info does not count as an event; the dropped events are asked
    // for again.
    d.info(InfoId(1), &mut out);
    assert!(out.is_empty());
    assert_eq!(d.cancel(sub(0), &mut out), 5);
    assert_eq!(waiting_and_pending(&d), (5, 0));
    assert_eq!(Dispatcher::buffered(&d), 0);
    assert_eq!(
        drain(&mut out),
        vec![
            Emit::Info(InfoId(1)),
            Emit::Discarded {
                events: vec![1, 2, 5, 6, 7],
                reason: DROPPED_ON_CANCEL,
            },
        ]
    );
}

#[test]
fn delivers_info_to_current_process() {
    let mut d = PartitionDispatcher::<u32>::new(2);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 0, 0);
    subscribe(&mut d, &mut out, 1, 1);
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);

    d.info(InfoId(1), &mut out);
    assert_eq!(drain(&mut out), vec![Emit::Info(InfoId(1))]);
    assert!(d.infos.is_empty());
}

#[test]
fn does_not_queue_info_for_non_existing_consumers() {
    let mut d = PartitionDispatcher::<u32>::new(2);
    let mut out = Outbox::new();
    d.info(InfoId(1), &mut out);
    assert_eq!(drain(&mut out), vec![Emit::Info(InfoId(1))]);
}

#[test]
fn queues_info_to_backed_up_consumers() {
    let mut d = all_to_partition_zero(2);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 0, 0);
    subscribe(&mut d, &mut out, 1, 1);
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    assert_eq!(d.dispatch(vec![1, 2, 5], &mut out), NOTHING);

    d.info(InfoId(1), &mut out);
    assert!(out.is_empty());

    assert_eq!(d.ask(sub(0), 5, &mut out), 5);
    assert_eq!(
        drain(&mut out),
        vec![events(0, vec![1, 2, 5]), Emit::Info(InfoId(1))]
    );
}

#[test]
fn drops_events_hashed_to_an_unknown_partition() {
    // GenStage raises ("unknown partition :oops"); Weir drops the events
    // with a warning and the producer keeps running.
    let mut d = PartitionDispatcher::named(["foo", "bar"], |n: u32| Some((n, "oops")));
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, "foo");
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);

    assert_eq!(d.dispatch(vec![1, 2, 5], &mut out), NOTHING);
    assert_eq!(
        drain(&mut out),
        vec![Emit::Warning(Warning::EventsDropped {
            count: 3,
            reason: DROPPED_UNKNOWN_PARTITION,
        })]
    );
    // Dropped events do not use up demand.
    assert_eq!(waiting_and_pending(&d), (3, 0));
}

#[test]
fn drops_events_hashed_to_an_index_beyond_the_count() {
    let mut d = PartitionDispatcher::with_hash(2, |n: u32| Some((n, n as usize)));
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, 1);
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);

    assert_eq!(d.dispatch(vec![1, 2, 1], &mut out), NOTHING);
    assert_eq!(
        drain(&mut out),
        vec![
            events(1, vec![1, 1]),
            Emit::Warning(Warning::EventsDropped {
                count: 1,
                reason: DROPPED_UNKNOWN_PARTITION,
            }),
        ]
    );
}

#[test]
fn errors_on_subscribe() {
    let mut d = PartitionDispatcher::<u32>::new(2);
    let mut out = Outbox::new();
    let available = "[0, 1]".to_owned();

    assert_eq!(
        d.subscribe(subscriber(1), &SubscriptionOptions::new(10, 5), &mut out),
        Err(SubscribeError::PartitionMissing {
            available: available.clone()
        })
    );

    subscribe(&mut d, &mut out, 1, 0);
    assert_eq!(
        d.subscribe(
            subscriber(2),
            &SubscriptionOptions::new(10, 5).partition(0),
            &mut out
        ),
        Err(SubscribeError::PartitionTaken {
            partition: PartitionKey::Index(0)
        })
    );

    for partition in [PartitionKey::Index(2), PartitionKey::from("oops")] {
        assert_eq!(
            d.subscribe(
                subscriber(3),
                &SubscriptionOptions::new(10, 5).partition(partition.clone()),
                &mut out
            ),
            Err(SubscribeError::PartitionUnknown {
                partition,
                available: available.clone()
            })
        );
    }
    assert_eq!(d.consumer(&PartitionKey::Index(0)), Some(sub(1)));
    assert_eq!(d.consumer(&PartitionKey::Index(1)), None);
}

#[test]
fn named_partitions_refuse_indexes_and_unknown_names() {
    let mut d = odd_even();
    let mut out = Outbox::new();
    let err = d
        .subscribe(
            subscriber(1),
            &SubscriptionOptions::new(10, 5).partition(0),
            &mut out,
        )
        .expect_err("named partitions have no index");
    assert_eq!(
        err,
        SubscribeError::PartitionUnknown {
            partition: PartitionKey::Index(0),
            available: r#"["odd", "even"]"#.to_owned(),
        }
    );
    assert_eq!(
        err.to_string(),
        r#"unknown partition 0 (the partitions are ["odd", "even"])"#
    );
}

#[test]
fn partition_is_free_again_after_its_consumer_cancels() {
    let mut d = odd_even();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, "odd");
    d.cancel(sub(1), &mut out);
    assert_eq!(subscribe(&mut d, &mut out, 2, "odd"), 0);
    assert_eq!(d.consumer(&PartitionKey::from("odd")), Some(sub(2)));
}

#[test]
fn events_for_a_partition_without_consumer_wait_until_one_subscribes_and_asks() {
    let mut d = odd_even();
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, "odd");
    assert_eq!(d.ask(sub(1), 4, &mut out), 4);

    assert_eq!(d.dispatch(vec![1, 2, 3, 4], &mut out), NOTHING);
    assert_eq!(drain(&mut out), vec![events(1, vec![1, 3])]);
    assert_eq!(d.queued(&PartitionKey::from("even")), Some(2));

    subscribe(&mut d, &mut out, 2, "even");
    assert!(out.is_empty());
    // An ask larger than the queue empties it and keeps the rest as demand.
    assert_eq!(d.ask(sub(2), 3, &mut out), 3);
    assert_eq!(drain(&mut out), vec![events(2, vec![2, 4])]);
    assert_eq!(d.demand(sub(2)), Some(1));
    assert_eq!(d.queued(&PartitionKey::from("even")), Some(0));
}

#[test]
fn info_waits_for_every_backed_up_partition() {
    let mut d = PartitionDispatcher::with_hash(3, |n: u32| Some((n, (n % 3) as usize)));
    let mut out = Outbox::new();
    for i in 0..3 {
        subscribe(&mut d, &mut out, i, i as usize);
    }
    // Partition 2 asks; the events land in partitions 0 and 1, which have no
    // demand and back up.
    assert_eq!(d.ask(sub(2), 4, &mut out), 4);
    assert_eq!(d.dispatch(vec![0, 3, 1, 4], &mut out), NOTHING);
    assert!(out.is_empty());
    assert_eq!(Dispatcher::buffered(&d), 4);

    d.info(InfoId(9), &mut out);
    assert!(out.is_empty());

    // Partition 0 catches up (with demand to spare); partition 1 still
    // holds the info.
    assert_eq!(d.ask(sub(0), 3, &mut out), 3);
    assert_eq!(drain(&mut out), vec![events(0, vec![0, 3])]);

    // Events after the info do not hold it.
    assert_eq!(d.dispatch(vec![6], &mut out), NOTHING);
    assert_eq!(drain(&mut out), vec![events(0, vec![6])]);

    assert_eq!(d.ask(sub(1), 1, &mut out), 1);
    assert_eq!(drain(&mut out), vec![events(1, vec![1])]);
    assert_eq!(d.ask(sub(1), 1, &mut out), 1);
    assert_eq!(
        drain(&mut out),
        vec![events(1, vec![4]), Emit::Info(InfoId(9))]
    );
    assert!(d.infos.is_empty());
}

#[test]
fn info_is_released_right_after_the_last_event_before_it() {
    let mut d = all_to_partition_zero(1);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, 0);
    // Three events upstream, no demand left for them in the partition.
    assert_eq!(d.ask(sub(1), 3, &mut out), 3);
    d.cancel(sub(1), &mut out);
    subscribe(&mut d, &mut out, 2, 0);
    assert_eq!(d.dispatch(vec![1, 2, 3], &mut out), NOTHING);
    assert_eq!(d.queued(&PartitionKey::Index(0)), Some(3));

    d.info(InfoId(1), &mut out);
    assert!(out.is_empty());
    d.ask(sub(2), 2, &mut out);
    assert_eq!(drain(&mut out), vec![events(2, vec![1, 2])]);
    // The ask that takes the last event before the info releases it, even
    // though it leaves no demand.
    d.ask(sub(2), 1, &mut out);
    assert_eq!(
        drain(&mut out),
        vec![events(2, vec![3]), Emit::Info(InfoId(1))]
    );
    assert_eq!(d.demand(sub(2)), Some(0));

    // With nothing queued, the next info goes straight out.
    d.info(InfoId(2), &mut out);
    assert_eq!(drain(&mut out), vec![Emit::Info(InfoId(2))]);
}

#[test]
fn info_waits_for_events_of_a_partition_without_consumer() {
    let mut d = all_to_partition_zero(2);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, 1);
    d.ask(sub(1), 2, &mut out);
    assert_eq!(d.dispatch(vec![1, 2], &mut out), NOTHING);

    d.info(InfoId(1), &mut out);
    assert!(out.is_empty());

    subscribe(&mut d, &mut out, 2, 0);
    d.ask(sub(2), 2, &mut out);
    assert_eq!(
        drain(&mut out),
        vec![events(2, vec![1, 2]), Emit::Info(InfoId(1))]
    );
}

#[test]
fn unknown_subscriptions_are_ignored() {
    let mut d = PartitionDispatcher::<u32>::new(2);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, 0);
    assert_eq!(d.ask(sub(9), 4, &mut out), 0);
    assert_eq!(d.cancel(sub(9), &mut out), 0);
    assert_eq!(waiting_and_pending(&d), (0, 0));
    assert!(out.is_empty());
}

#[test]
fn default_hash_puts_equal_events_in_the_same_partition() {
    let mut d = PartitionDispatcher::<String>::new(4);
    let mut out = Outbox::new();
    for i in 0..4 {
        subscribe(&mut d, &mut out, i, i as usize);
        d.ask(sub(i), 100, &mut out);
    }
    let words: Vec<String> = ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .flat_map(|w| [w.to_string(), w.to_string()])
        .collect();
    assert_eq!(d.dispatch(words, &mut out), Vec::<String>::new());
    let sent = drain(&mut out);
    for emit in &sent {
        let Emit::Events { events, .. } = emit else {
            panic!("only events expected, got {emit:?}");
        };
        for w in events {
            assert_eq!(events.iter().filter(|e| *e == w).count(), 2);
        }
    }
    assert!(sent.len() >= 2, "8 distinct words should spread: {sent:?}");
}

#[test]
fn queued_events_of_several_dispatches_leave_in_order_around_an_info() {
    // Queued events are kept in the batches they came in: asks that take a
    // part of one, all of one, or run across two must still send them in
    // order, and the info between two dispatches goes out right after the
    // events queued before it.
    let mut d = all_to_partition_zero(1);
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, 0);
    assert_eq!(d.ask(sub(1), 7, &mut out), 7);
    d.cancel(sub(1), &mut out);
    subscribe(&mut d, &mut out, 2, 0);
    assert_eq!(d.dispatch(vec![1, 2, 3], &mut out), NOTHING);
    d.info(InfoId(1), &mut out);
    assert_eq!(d.dispatch(vec![4, 5], &mut out), NOTHING);
    assert_eq!(d.dispatch(vec![6, 7], &mut out), NOTHING);
    assert!(out.is_empty());
    assert_eq!(d.queued(&PartitionKey::Index(0)), Some(7));
    assert_eq!(d.buffered(), 7);

    // Part of the first batch.
    d.ask(sub(2), 2, &mut out);
    assert_eq!(drain(&mut out), vec![events(2, vec![1, 2])]);
    // The rest of it, the info, then across the next two batches.
    d.ask(sub(2), 4, &mut out);
    assert_eq!(
        drain(&mut out),
        vec![
            events(2, vec![3]),
            Emit::Info(InfoId(1)),
            events(2, vec![4, 5, 6])
        ]
    );
    assert_eq!(d.queued(&PartitionKey::Index(0)), Some(1));
    // The last one, with demand to spare.
    d.ask(sub(2), 3, &mut out);
    assert_eq!(drain(&mut out), vec![events(2, vec![7])]);
    assert_eq!(d.demand(sub(2)), Some(2));
    assert_eq!(d.buffered(), 0);
}

#[test]
fn a_dispatch_beyond_the_demand_returns_the_rest_in_order() {
    let mut d = PartitionDispatcher::with_hash(2, |n: u32| Some((n, (n % 2) as usize)));
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 1, 0);
    subscribe(&mut d, &mut out, 2, 1);
    d.ask(sub(1), 2, &mut out);
    d.ask(sub(2), 1, &mut out);
    // Three events fill the upstream demand of three; the rest is leftover.
    assert_eq!(d.dispatch(vec![1, 2, 4, 3, 5, 6], &mut out), vec![3, 5, 6]);
    assert_eq!(
        drain(&mut out),
        vec![events(1, vec![2, 4]), events(2, vec![1])]
    );
    assert_eq!(waiting_and_pending(&d), (0, 0));
}

#[test]
fn take_held_hands_over_every_queued_event() {
    let mut d = PartitionDispatcher::with_hash(2, |n: u32| Some((n, (n % 2) as usize)));
    let mut out = Outbox::new();
    subscribe(&mut d, &mut out, 0, 0);
    subscribe(&mut d, &mut out, 1, 1);
    assert_eq!(d.ask(sub(0), 3, &mut out), 3);
    assert_eq!(d.ask(sub(1), 1, &mut out), 1);
    // 1 goes out; 3, 5 and 7 wait in partition 1.
    assert_eq!(d.dispatch(vec![1, 3, 5, 7], &mut out), NOTHING);
    assert_eq!(Dispatcher::buffered(&d), 3);
    assert_eq!(d.take_held(), vec![3, 5, 7]);
    assert_eq!(Dispatcher::buffered(&d), 0);
    assert_eq!(d.take_held(), Vec::<u32>::new());
}
