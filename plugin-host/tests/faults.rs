//! A plugin that panics or breaks the dispatcher contract never takes the
//! host down, never loses an event, and says what happened.

use crate::support;

use serde_json::json;
use weir_dispatchers::{
    ConsumerId, Dispatcher, Emit, InfoId, Outbox, SubscribeError, Subscriber, SubscriptionId,
    SubscriptionOptions,
};
use weir_plugin_host::{PluginDispatcher, PluginError, load};

fn trap(options: serde_json::Value) -> PluginDispatcher<u64> {
    load(&support::fixtures().panicking, &options)
        .expect("the panicking plugin loads")
        .dispatcher::<u64>()
        .expect("a dispatcher")
}

const A: Subscriber = Subscriber {
    subscription: SubscriptionId(1),
    consumer: ConsumerId(1),
};

/// Subscribe A and ask for 10.
fn subscribed(dispatcher: &mut PluginDispatcher<u64>, out: &mut Outbox<u64>) {
    dispatcher
        .subscribe(A, &SubscriptionOptions::new(10, 5), out)
        .expect("subscribed");
    assert_eq!(dispatcher.ask(A.subscription, 10, out), 10);
}

fn assert_panicked_in(dispatcher: &PluginDispatcher<u64>, callback: &'static str) {
    match dispatcher.fault() {
        Some(PluginError::Panicked {
            plugin,
            operation,
            message,
        }) => {
            assert_eq!(plugin, "panicking");
            assert_eq!(*operation, callback);
            assert!(
                message.contains(&format!("trap set off in {callback}")),
                "{message}"
            );
        }
        other => panic!("expected a panic in {callback}, got {other:?}"),
    }
}

/// A poisoned dispatcher asks for nothing, keeps every event and refuses
/// subscriptions.
fn assert_poisoned(dispatcher: &mut PluginDispatcher<u64>) {
    let mut out = Outbox::new();
    assert_eq!(dispatcher.ask(A.subscription, 5, &mut out), 0);
    assert_eq!(dispatcher.dispatch(vec![7, 8, 9], &mut out), vec![7, 8, 9]);
    let b = Subscriber {
        subscription: SubscriptionId(2),
        consumer: ConsumerId(2),
    };
    match dispatcher.subscribe(b, &SubscriptionOptions::new(10, 5), &mut out) {
        Err(SubscribeError::Refused(reason)) => assert!(
            reason.contains("since an earlier callback failed") && reason.contains("plugin `"),
            "a later refusal says why: {reason}"
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(dispatcher.cancel(A.subscription, &mut out), 0);
    dispatcher.info(InfoId(3), &mut out);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![Emit::Info(InfoId(3))]);
}

#[test]
fn a_panic_in_from_options_is_an_error_at_load() {
    let error = load(
        &support::fixtures().panicking,
        &json!({"panic_in": "from_options"}),
    )
    .expect_err("the constructor panics");
    match error {
        PluginError::Panicked {
            operation, message, ..
        } => {
            assert_eq!(operation, "from_options");
            assert!(message.contains("trap set off in from_options"));
        }
        other => panic!("expected Panicked, got {other:?}"),
    }
}

#[test]
fn a_panic_in_dispatch_poisons_the_dispatcher_and_loses_no_event() {
    let mut dispatcher = trap(json!({"panic_in": "dispatch"}));
    let mut out = Outbox::new();
    subscribed(&mut dispatcher, &mut out);
    let leftover = dispatcher.dispatch((0..4).collect(), &mut out);
    assert_eq!(leftover, vec![0, 1, 2, 3]);
    assert!(out.drain().all(|emit| !matches!(emit, Emit::Events { .. })));
    assert_panicked_in(&dispatcher, "dispatch");
    assert_poisoned(&mut dispatcher);
}

#[test]
fn a_panic_in_subscribe_refuses_that_subscription_and_poisons() {
    let mut dispatcher = trap(json!({"panic_in": "subscribe"}));
    let mut out = Outbox::new();
    match dispatcher.subscribe(A, &SubscriptionOptions::new(10, 5), &mut out) {
        Err(SubscribeError::Refused(reason)) => {
            assert!(reason.contains("trap set off"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_panicked_in(&dispatcher, "subscribe");
    assert_poisoned(&mut dispatcher);
}

#[test]
fn a_panic_in_ask_asks_for_nothing_and_poisons() {
    let mut dispatcher = trap(json!({"panic_in": "ask"}));
    let mut out = Outbox::new();
    dispatcher
        .subscribe(A, &SubscriptionOptions::new(10, 5), &mut out)
        .expect("subscribed");
    assert_eq!(dispatcher.ask(A.subscription, 10, &mut out), 0);
    assert_panicked_in(&dispatcher, "ask");
    assert_poisoned(&mut dispatcher);
}

#[test]
fn a_panic_in_cancel_poisons() {
    let mut dispatcher = trap(json!({"panic_in": "cancel"}));
    let mut out = Outbox::new();
    subscribed(&mut dispatcher, &mut out);
    assert_eq!(dispatcher.cancel(A.subscription, &mut out), 0);
    assert_panicked_in(&dispatcher, "cancel");
    assert_poisoned(&mut dispatcher);
}

#[test]
fn a_panic_in_info_still_releases_the_info() {
    let mut dispatcher = trap(json!({"panic_in": "info"}));
    let mut out = Outbox::new();
    dispatcher.info(InfoId(1), &mut out);
    assert_eq!(out.drain().collect::<Vec<_>>(), vec![Emit::Info(InfoId(1))]);
    assert_panicked_in(&dispatcher, "info");
}

#[test]
fn a_panic_in_the_plugins_destructor_stays_in_the_plugin() {
    let dispatcher = trap(json!({"panic_in": "drop"}));
    drop(dispatcher);
    // Still here: the destructor's panic was caught inside the plugin.
    let mut dispatcher = trap(json!({}));
    let mut out = Outbox::new();
    subscribed(&mut dispatcher, &mut out);
}

#[test]
fn a_panic_while_reading_metrics_is_an_error() {
    let dispatcher = trap(json!({"panic_in": "metrics"}));
    let metrics = dispatcher.metrics().expect("the trap exposes metrics");
    match metrics.snapshot() {
        Err(PluginError::Panicked {
            operation, message, ..
        }) => {
            assert_eq!(operation, "metrics snapshot");
            assert!(message.contains("trap set off in metrics"));
        }
        other => panic!("expected Panicked, got {other:?}"),
    }
    // The reader is not poisoned by it, and neither is the dispatcher.
    assert!(metrics.snapshot().is_err());
    assert!(dispatcher.fault().is_none());
}

#[test]
fn panic_on_fault_resumes_the_panic_on_the_host_side() {
    let mut dispatcher = trap(json!({"panic_in": "dispatch"})).panic_on_fault();
    let mut out = Outbox::new();
    subscribed(&mut dispatcher, &mut out);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dispatcher.dispatch(vec![1, 2], &mut out)
    }));
    let payload = caught.expect_err("the host-side panic");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("panicked in `dispatch`"), "{message}");
}

fn assert_violation(violate: &str, operation: &str, detail_part: &str) {
    let mut dispatcher = trap(json!({"violate": violate}));
    let mut out = Outbox::new();
    dispatcher
        .subscribe(A, &SubscriptionOptions::new(10, 5), &mut out)
        .expect("subscribed");
    dispatcher.ask(A.subscription, 2, &mut out);
    if operation == "dispatch" {
        assert_eq!(dispatcher.dispatch(vec![1, 2, 3], &mut out), vec![1, 2, 3]);
    } else if operation == "info" {
        dispatcher.info(InfoId(1), &mut out);
    }
    assert!(
        out.drain().all(|emit| !matches!(emit, Emit::Events { .. })),
        "no events may go out"
    );
    match dispatcher.fault() {
        Some(PluginError::ProtocolViolation {
            operation: op,
            detail,
            ..
        }) => {
            assert_eq!(*op, operation);
            assert!(detail.contains(detail_part), "{detail}");
        }
        other => panic!("{violate}: expected ProtocolViolation, got {other:?}"),
    }
    assert_poisoned(&mut dispatcher);
}

#[test]
fn sending_a_consumer_more_than_it_asked_for_is_a_violation() {
    assert_violation("over_send", "dispatch", "which asked for 2");
}

#[test]
fn sending_to_an_unknown_subscription_is_a_violation() {
    assert_violation("unknown_subscription", "dispatch", "unknown");
}

#[test]
fn routing_more_events_than_the_batch_holds_is_a_violation() {
    assert_violation("too_many_events", "dispatch", "the batch holds 3");
}

#[test]
fn routing_events_from_ask_is_a_violation() {
    assert_violation("route_in_ask", "ask", "only dispatch may route events");
}

#[test]
fn releasing_an_info_it_was_not_given_is_a_violation() {
    assert_violation("unknown_info", "info", "was not given");
}
