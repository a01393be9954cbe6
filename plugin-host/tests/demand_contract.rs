//! The plugin-backed Demand dispatcher (`metrics-dispatcher`, loaded from its
//! `.so`) passes the same behavioural tests as the built-in
//! `weir_dispatchers::DemandDispatcher`: every scenario below runs against both,
//! and a property test drives both with the same random calls and compares
//! every answer.

use crate::support;

use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::json;
use weir_dispatchers::{
    ConsumerId, DemandDispatcher, Dispatcher, Emit, InfoId, Outbox, Subscriber, SubscriptionId,
    SubscriptionOptions, Warning,
};
use weir_plugin_host::{PluginDispatcherFactory, load};

/// How a scenario wants its dispatcher configured.
#[derive(Clone, Copy, Default)]
struct Config {
    max_demand: Option<usize>,
    shuffle_seed: Option<u64>,
}

type Make = fn(Config) -> Box<dyn Dispatcher<u64>>;

fn builtin(config: Config) -> Box<dyn Dispatcher<u64>> {
    let mut dispatcher = DemandDispatcher::new();
    if let Some(max) = config.max_demand {
        dispatcher = dispatcher.with_max_demand(max);
    }
    if let Some(seed) = config.shuffle_seed {
        dispatcher = dispatcher.shuffle_demands_on_first_dispatch_with_seed(seed);
    }
    Box::new(dispatcher)
}

fn plugin(config: Config) -> Box<dyn Dispatcher<u64>> {
    static DEFAULT: OnceLock<PluginDispatcherFactory> = OnceLock::new();
    let factory = if config.max_demand.is_none() && config.shuffle_seed.is_none() {
        DEFAULT
            .get_or_init(|| load(support::metrics_plugin(), &json!({})).expect("loads"))
            .clone()
    } else {
        let mut options = serde_json::Map::new();
        if let Some(max) = config.max_demand {
            options.insert("max_demand".into(), json!(max));
        }
        if let Some(seed) = config.shuffle_seed {
            options.insert("shuffle_demands_on_first_dispatch".into(), json!(true));
            options.insert("shuffle_seed".into(), json!(seed));
        }
        load(
            support::metrics_plugin(),
            &serde_json::Value::Object(options),
        )
        .expect("loads")
    };
    Box::new(factory.dispatcher::<u64>().expect("a dispatcher"))
}

fn subscriber(id: u64) -> Subscriber {
    Subscriber {
        subscription: SubscriptionId(id),
        consumer: ConsumerId(id),
    }
}

fn subscribe(d: &mut dyn Dispatcher<u64>, out: &mut Outbox<u64>, id: u64) -> usize {
    d.subscribe(subscriber(id), &SubscriptionOptions::new(10, 5), out)
        .expect("subscribed")
}

fn events(to: u64, events: impl IntoIterator<Item = u64>) -> Emit<u64> {
    Emit::Events {
        to: SubscriptionId(to),
        events: events.into_iter().collect(),
    }
}

fn drained(out: &mut Outbox<u64>) -> Vec<Emit<u64>> {
    out.drain().collect()
}

// The scenarios: GenStage's demand_dispatcher_test.exs, observed from outside.

fn subscribes_asks_and_cancels_remembering_pending_demand(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    assert_eq!(subscribe(&mut *d, &mut out, 1), 0);
    assert_eq!(d.ask(SubscriptionId(1), 10, &mut out), 10);
    assert_eq!(d.cancel(SubscriptionId(1), &mut out), 0);
    // The 10 asked events are on their way: a new ask takes from them first.
    assert_eq!(subscribe(&mut *d, &mut out, 2), 0);
    assert_eq!(d.ask(SubscriptionId(2), 5, &mut out), 0);
    assert_eq!(d.cancel(SubscriptionId(2), &mut out), 0);
    // No consumers: everything is leftover, which uses up pending demand.
    assert_eq!(d.dispatch(vec![1, 2, 3], &mut out), vec![1, 2, 3]);
    assert_eq!(subscribe(&mut *d, &mut out, 3), 0);
    assert_eq!(d.ask(SubscriptionId(3), 10, &mut out), 3);
    assert!(out.is_empty());
}

fn subscribes_twice_asks_twice_and_cancels_one(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    subscribe(&mut *d, &mut out, 1);
    assert_eq!(d.ask(SubscriptionId(1), 3, &mut out), 3);
    subscribe(&mut *d, &mut out, 2);
    assert_eq!(d.ask(SubscriptionId(2), 3, &mut out), 3);
    assert_eq!(d.cancel(SubscriptionId(1), &mut out), 0);
    assert_eq!(d.dispatch(vec![1, 2, 3, 4, 5], &mut out), vec![4, 5]);
    assert_eq!(drained(&mut out), vec![events(2, [1, 2, 3])]);
    // Pending was 3, 2 events were left over: 1 remains pending.
    assert_eq!(d.ask(SubscriptionId(2), 3, &mut out), 2);
}

fn subscribes_asks_and_dispatches(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    subscribe(&mut *d, &mut out, 1);
    assert_eq!(d.ask(SubscriptionId(1), 3, &mut out), 3);
    assert_eq!(d.dispatch(vec![1], &mut out), Vec::<u64>::new());
    assert_eq!(drained(&mut out), vec![events(1, [1])]);
    assert_eq!(d.ask(SubscriptionId(1), 3, &mut out), 3);
    assert_eq!(d.dispatch(vec![2, 3, 4, 5, 6, 7, 8], &mut out), vec![7, 8]);
    assert_eq!(drained(&mut out), vec![events(1, [2, 3, 4, 5, 6])]);
    assert_eq!(d.dispatch(vec![9, 10], &mut out), vec![9, 10]);
    assert!(out.is_empty());
}

fn dispatches_to_the_largest_demand_first(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    subscribe(&mut *d, &mut out, 1);
    subscribe(&mut *d, &mut out, 2);
    d.ask(SubscriptionId(1), 3, &mut out);
    d.ask(SubscriptionId(2), 2, &mut out);
    // One batch fits all.
    assert!(d.dispatch(vec![1, 2, 3, 4, 5], &mut out).is_empty());
    assert_eq!(
        drained(&mut out),
        vec![events(1, [1, 2, 3]), events(2, [4, 5])]
    );
    assert_eq!(d.dispatch(vec![1, 2, 3], &mut out), vec![1, 2, 3]);
    assert!(out.is_empty());
    // Equal demand: served in the order the demand arrived.
    d.ask(SubscriptionId(1), 3, &mut out);
    d.ask(SubscriptionId(2), 3, &mut out);
    assert!(d.dispatch(vec![1, 2], &mut out).is_empty());
    assert_eq!(drained(&mut out), vec![events(1, [1, 2])]);
    assert!(d.dispatch(vec![3, 4], &mut out).is_empty());
    assert_eq!(drained(&mut out), vec![events(2, [3, 4])]);
    // 1 each left: the remainder is split, the third event is leftover.
    assert_eq!(d.dispatch(vec![5, 6, 7], &mut out), vec![7]);
    assert_eq!(drained(&mut out), vec![events(1, [5]), events(2, [6])]);
}

fn asks_reorder_consumers_by_demand(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    for id in 1..=3 {
        subscribe(&mut *d, &mut out, id);
    }
    d.ask(SubscriptionId(1), 4, &mut out);
    d.ask(SubscriptionId(2), 2, &mut out);
    d.ask(SubscriptionId(3), 3, &mut out);
    d.ask(SubscriptionId(3), 2, &mut out);
    d.ask(SubscriptionId(2), 4, &mut out);
    // Demands are now 2: 6, 3: 5, 1: 4.
    assert!(d.dispatch((1..=15).collect(), &mut out).is_empty());
    assert_eq!(
        drained(&mut out),
        vec![events(2, 1..=6), events(3, 7..=11), events(1, 12..=15)]
    );
}

fn shuffled_demands_still_serve_every_consumer(make: Make) {
    for seed in 0..8 {
        let mut d = make(Config {
            shuffle_seed: Some(seed),
            ..Config::default()
        });
        let mut out = Outbox::new();
        subscribe(&mut *d, &mut out, 1);
        subscribe(&mut *d, &mut out, 2);
        subscribe(&mut *d, &mut out, 3);
        d.ask(SubscriptionId(1), 3, &mut out);
        d.ask(SubscriptionId(2), 2, &mut out);
        assert!(d.dispatch(vec![1, 2, 3, 4, 5], &mut out).is_empty());
        let sent = drained(&mut out);
        // Either order, but each gets what it asked for, in one batch.
        assert!(
            sent == vec![events(1, [1, 2, 3]), events(2, [4, 5])]
                || sent == vec![events(2, [1, 2]), events(1, [3, 4, 5])],
            "seed {seed}: {sent:?}"
        );
    }
}

fn delivers_info_at_once(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    subscribe(&mut *d, &mut out, 1);
    d.ask(SubscriptionId(1), 3, &mut out);
    d.info(InfoId(9), &mut out);
    assert_eq!(drained(&mut out), vec![Emit::Info(InfoId(9))]);
}

fn warns_on_demand_mismatch(make: Make) {
    let mut d = make(Config {
        max_demand: Some(3),
        ..Config::default()
    });
    let mut out = Outbox::new();
    subscribe(&mut *d, &mut out, 1);
    subscribe(&mut *d, &mut out, 2);
    assert_eq!(d.ask(SubscriptionId(2), 4, &mut out), 4);
    assert_eq!(
        drained(&mut out),
        vec![Emit::Warning(Warning::AskLargerThanMaxDemand {
            subscription: SubscriptionId(2),
            asked: 4,
            expected: 3
        })]
    );
}

fn the_first_ask_sets_the_expected_max_demand(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    subscribe(&mut *d, &mut out, 1);
    d.ask(SubscriptionId(1), 5, &mut out);
    d.ask(SubscriptionId(1), 5, &mut out);
    assert!(out.is_empty());
    d.ask(SubscriptionId(1), 6, &mut out);
    assert_eq!(
        drained(&mut out),
        vec![Emit::Warning(Warning::AskLargerThanMaxDemand {
            subscription: SubscriptionId(1),
            asked: 6,
            expected: 5
        })]
    );
}

fn unknown_subscriptions_are_ignored(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    assert_eq!(d.ask(SubscriptionId(7), 5, &mut out), 0);
    assert_eq!(d.cancel(SubscriptionId(7), &mut out), 0);
    assert!(out.is_empty());
    // Nothing was remembered from them.
    subscribe(&mut *d, &mut out, 1);
    assert_eq!(d.ask(SubscriptionId(1), 2, &mut out), 2);
}

fn dispatch_without_consumers_returns_every_event(make: Make) {
    let mut d = make(Config::default());
    let mut out = Outbox::new();
    assert_eq!(d.dispatch(vec![1, 2, 3], &mut out), vec![1, 2, 3]);
    subscribe(&mut *d, &mut out, 1);
    assert_eq!(d.dispatch(vec![4], &mut out), vec![4]);
    assert!(out.is_empty());
}

macro_rules! for_both {
    ($($scenario:ident),* $(,)?) => {
        mod builtin_demand_dispatcher {
            $(#[test] fn $scenario() { super::$scenario(super::builtin) })*
        }
        mod metrics_plugin {
            $(#[test] fn $scenario() { super::$scenario(super::plugin) })*
        }
    };
}

for_both!(
    subscribes_asks_and_cancels_remembering_pending_demand,
    subscribes_twice_asks_twice_and_cancels_one,
    subscribes_asks_and_dispatches,
    dispatches_to_the_largest_demand_first,
    asks_reorder_consumers_by_demand,
    shuffled_demands_still_serve_every_consumer,
    delivers_info_at_once,
    warns_on_demand_mismatch,
    the_first_ask_sets_the_expected_max_demand,
    unknown_subscriptions_are_ignored,
    dispatch_without_consumers_returns_every_event,
);

/// One call to a dispatcher, on subscription slot `0..4`.
#[derive(Debug, Clone)]
enum Call {
    Subscribe(u64),
    Cancel(u64),
    Ask(u64, usize),
    Dispatch(usize),
    Info,
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (0u64..4).prop_map(Call::Subscribe),
        (0u64..4).prop_map(Call::Cancel),
        (0u64..4, 1usize..12).prop_map(|(s, n)| Call::Ask(s, n)),
        (0usize..30).prop_map(Call::Dispatch),
        Just(Call::Info),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Same calls, same answers: upstream demand, leftovers and everything
    /// pushed into the outbox, in order.
    #[test]
    fn plugin_and_builtin_answer_every_call_alike(
        max_demand in proptest::option::of(1usize..10),
        calls in proptest::collection::vec(call(), 0..60),
    ) {
        let config = Config { max_demand, shuffle_seed: None };
        let mut a = builtin(config);
        let mut b = plugin(config);
        let (mut out_a, mut out_b) = (Outbox::new(), Outbox::new());
        let mut live = [false; 4];
        let mut next_event = 0u64;
        let mut info = 0u64;
        for call in calls {
            match call {
                Call::Subscribe(slot) => {
                    // The runtime never reuses a live subscription id.
                    if live[slot as usize] { continue; }
                    live[slot as usize] = true;
                    let options = SubscriptionOptions::new(10, 5);
                    prop_assert_eq!(
                        a.subscribe(subscriber(slot), &options, &mut out_a),
                        b.subscribe(subscriber(slot), &options, &mut out_b)
                    );
                }
                Call::Cancel(slot) => {
                    live[slot as usize] = false;
                    prop_assert_eq!(
                        a.cancel(SubscriptionId(slot), &mut out_a),
                        b.cancel(SubscriptionId(slot), &mut out_b)
                    );
                }
                Call::Ask(slot, n) => prop_assert_eq!(
                    a.ask(SubscriptionId(slot), n, &mut out_a),
                    b.ask(SubscriptionId(slot), n, &mut out_b)
                ),
                Call::Dispatch(len) => {
                    let batch: Vec<u64> = (next_event..next_event + len as u64).collect();
                    next_event += len as u64;
                    prop_assert_eq!(
                        a.dispatch(batch.clone(), &mut out_a),
                        b.dispatch(batch, &mut out_b)
                    );
                }
                Call::Info => {
                    info += 1;
                    a.info(InfoId(info), &mut out_a);
                    b.info(InfoId(info), &mut out_b);
                }
            }
            prop_assert_eq!(drained(&mut out_a), drained(&mut out_b));
        }
    }
}
