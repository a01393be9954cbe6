//! The plugin: consistent-hash key affinity with GenStage demand accounting.

use std::collections::HashMap;

use serde_json::Value;
use weir_plugin_interface::{
    CallError, Decision, DispatcherPlugin, SubscribeRequest, SubscriptionId,
};

use crate::ring::Ring;

/// Default number of points per subscription on the ring.
pub const DEFAULT_VIRTUAL_NODES: u32 = 64;

/// Sends every event to the subscription that owns its key on a
/// consistent-hash ring, as far as that subscription's demand goes; events
/// whose owner has no demand left stay with the host (leftover) and are
/// offered again with the next batch.
///
/// - Events with the same key go to the same subscription as long as the set
///   of subscriptions does not change; a subscription joining or leaving
///   moves only about `1/n` of the keys. A subscription's place on the ring
///   comes from its `affinity` subscription option (a string), or from its
///   consumer id when it gives none, so a consumer that re-subscribes under
///   the same affinity gets its keys back.
/// - Per subscription, events arrive in the order the producer emitted them:
///   once a subscription has no demand left in a batch, every later event for
///   it in that batch is kept too.
/// - Demand accounting is GenStage's: each ask goes upstream as is, and the
///   unmet demand of a cancelled subscription is remembered as pending and
///   taken off later asks.
///
/// Options (dispatcher): `{"virtual_nodes": 64}`. Subscription options:
/// `{"affinity": "billing"}`; two live subscriptions may not share one.
///
/// Like GenStage's Partition dispatcher, a skewed key distribution lets
/// events for a slow consumer pile up in the producer's buffer while the
/// others keep asking.
///
/// # Example
///
/// ```
/// use weir_plugin_interface::{ConsumerId, Decision, DispatcherPlugin, SubscribeRequest, SubscriptionId};
/// use key_affinity_dispatcher::KeyAffinityDispatcher;
///
/// let mut dispatcher = KeyAffinityDispatcher::from_options(r#"{"virtual_nodes": 16}"#)?;
/// let mut out = Decision::default();
/// for id in 1..=2 {
///     let request = SubscribeRequest::new(SubscriptionId(id), ConsumerId(id), 10, 5);
///     dispatcher.subscribe(&request, &mut out)?;
///     dispatcher.ask(SubscriptionId(id), 10, &mut out);
/// }
/// // The same key twice: both events go to the same subscription.
/// out.clear();
/// dispatcher.dispatch(2, &[42, 42], &mut out);
/// assert_eq!(out.runs.len(), 1);
/// assert_eq!(out.routed(), 2);
/// # Ok::<(), weir_plugin_interface::CallError>(())
/// ```
#[derive(Debug)]
pub struct KeyAffinityDispatcher {
    ring: Ring,
    subscriptions: HashMap<SubscriptionId, Subscription>,
    pending: u64,
}

#[derive(Debug)]
struct Subscription {
    affinity: String,
    demand: u64,
}

impl KeyAffinityDispatcher {
    /// The affinity name a subscription is placed by.
    fn affinity(request: &SubscribeRequest) -> Result<String, CallError> {
        let options: Value = serde_json::from_str(request.options.as_str())
            .map_err(|e| CallError::invalid_option("options", format!("not JSON: {e}")))?;
        match options.get("affinity") {
            None | Some(Value::Null) => Ok(format!("consumer:{}", request.consumer.0)),
            Some(Value::String(name)) if !name.is_empty() => Ok(name.clone()),
            Some(other) => Err(CallError::invalid_option(
                "affinity",
                format!("expected a non-empty string, got {other}"),
            )),
        }
    }
}

impl DispatcherPlugin for KeyAffinityDispatcher {
    fn from_options(options: &str) -> Result<Self, CallError> {
        let value: Value = serde_json::from_str(options)
            .map_err(|e| CallError::invalid_option("options", format!("not JSON: {e}")))?;
        let mut virtual_nodes = DEFAULT_VIRTUAL_NODES;
        match value {
            Value::Null => {}
            Value::Object(map) => {
                for (key, value) in map {
                    match key.as_str() {
                        "virtual_nodes" => {
                            virtual_nodes = value
                                .as_u64()
                                .filter(|n| (1..=4096).contains(n))
                                .and_then(|n| u32::try_from(n).ok())
                                .ok_or_else(|| {
                                    CallError::invalid_option(
                                        "virtual_nodes",
                                        format!("expected an integer from 1 to 4096, got {value}"),
                                    )
                                })?;
                        }
                        other => {
                            return Err(CallError::invalid_option(
                                other,
                                "unknown option (known: virtual_nodes)",
                            ));
                        }
                    }
                }
            }
            other => {
                return Err(CallError::invalid_option(
                    "options",
                    format!("expected a JSON object, got {other}"),
                ));
            }
        }
        Ok(Self {
            ring: Ring::new(virtual_nodes),
            subscriptions: HashMap::new(),
            pending: 0,
        })
    }

    fn needs_keys(&self) -> bool {
        true
    }

    fn subscribe(
        &mut self,
        request: &SubscribeRequest,
        _out: &mut Decision,
    ) -> Result<(), CallError> {
        let affinity = Self::affinity(request)?;
        if self.subscriptions.contains_key(&request.subscription) {
            return Err(CallError::refused(format!(
                "{} is already subscribed",
                request.subscription
            )));
        }
        if let Some((holder, _)) = self
            .subscriptions
            .iter()
            .find(|(_, s)| s.affinity == affinity)
        {
            return Err(CallError::refused(format!(
                "affinity `{affinity}` is already held by {holder}"
            )));
        }
        self.ring.insert(&affinity, request.subscription);
        self.subscriptions.insert(
            request.subscription,
            Subscription {
                affinity,
                demand: 0,
            },
        );
        Ok(())
    }

    fn cancel(&mut self, subscription: SubscriptionId, _out: &mut Decision) {
        if let Some(cancelled) = self.subscriptions.remove(&subscription) {
            self.ring.remove(&cancelled.affinity, subscription);
            self.pending += cancelled.demand;
        }
    }

    fn ask(&mut self, subscription: SubscriptionId, n: u64, out: &mut Decision) {
        if let Some(s) = self.subscriptions.get_mut(&subscription) {
            s.demand += n;
            let already_sent = self.pending.min(n);
            self.pending -= already_sent;
            out.ask_upstream(n - already_sent);
        }
    }

    fn dispatch(&mut self, count: u64, keys: &[u64], out: &mut Decision) {
        let mut kept = 0;
        for key in keys.iter().take(count as usize) {
            let owner = self
                .ring
                .owner(*key)
                .and_then(|owner| Some((owner, self.subscriptions.get_mut(&owner)?)));
            match owner {
                Some((owner, s)) if s.demand > 0 => {
                    s.demand -= 1;
                    out.send(owner, 1);
                }
                _ => {
                    out.keep(1);
                    kept += 1;
                }
            }
        }
        // Events without a key (never from a correct host) are leftover too.
        kept += count.saturating_sub(keys.len() as u64);
        self.pending = self.pending.saturating_sub(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use weir_plugin_interface::ConsumerId;

    fn subscribed(ids: &[u64], demand: u64) -> KeyAffinityDispatcher {
        let mut d = KeyAffinityDispatcher::from_options("{}").expect("default options");
        let mut out = Decision::default();
        for id in ids {
            let request = SubscribeRequest::new(SubscriptionId(*id), ConsumerId(*id), 10, 5);
            d.subscribe(&request, &mut out).expect("accepted");
            d.ask(SubscriptionId(*id), demand, &mut out);
        }
        d
    }

    /// Who got each event (`None`: kept).
    fn route(d: &mut KeyAffinityDispatcher, keys: &[u64]) -> Vec<Option<u64>> {
        let mut out = Decision::default();
        d.dispatch(keys.len() as u64, keys, &mut out);
        out.runs
            .iter()
            .flat_map(|run| {
                std::iter::repeat_n(run.to.into_option().map(|s| s.0), run.count as usize)
            })
            .collect()
    }

    #[test]
    fn the_same_key_always_reaches_the_same_subscription() {
        let mut d = subscribed(&[1, 2, 3], 1_000);
        let first = route(&mut d, &(0..100).collect::<Vec<_>>());
        let again = route(&mut d, &(0..100).collect::<Vec<_>>());
        assert_eq!(first, again);
        assert!(first.iter().all(Option::is_some));
    }

    #[test]
    fn events_whose_owner_has_no_demand_are_kept_in_order() {
        let mut d = subscribed(&[1], 2);
        assert_eq!(
            route(&mut d, &[5, 6, 7, 8]),
            vec![Some(1), Some(1), None, None]
        );
    }

    #[test]
    fn with_no_subscription_everything_is_kept() {
        let mut d = KeyAffinityDispatcher::from_options("{}").expect("default options");
        assert_eq!(route(&mut d, &[1, 2]), vec![None, None]);
    }

    #[test]
    fn a_shared_affinity_is_refused() {
        let mut d = KeyAffinityDispatcher::from_options("{}").expect("default options");
        let mut out = Decision::default();
        let with = |id| {
            SubscribeRequest::new(SubscriptionId(id), ConsumerId(id), 10, 5)
                .with_options(r#"{"affinity": "billing"}"#)
        };
        d.subscribe(&with(1), &mut out).expect("accepted");
        assert!(matches!(
            d.subscribe(&with(2), &mut out),
            Err(CallError::Refused { .. })
        ));
        d.cancel(SubscriptionId(1), &mut out);
        d.subscribe(&with(2), &mut out).expect("free again");
    }

    #[test]
    fn a_cancelled_subscriptions_unmet_demand_is_pending_and_taken_off_later_asks() {
        let mut d = subscribed(&[1], 5);
        let mut out = Decision::default();
        d.cancel(SubscriptionId(1), &mut out);
        let request = SubscribeRequest::new(SubscriptionId(2), ConsumerId(2), 10, 5);
        d.subscribe(&request, &mut out).expect("accepted");
        d.ask(SubscriptionId(2), 3, &mut out);
        assert_eq!(out.upstream_demand, 0);
        out.clear();
        d.ask(SubscriptionId(2), 3, &mut out);
        assert_eq!(out.upstream_demand, 1);
    }

    #[test]
    fn bad_options_name_the_option() {
        for (json, option) in [
            (r#"{"virtual_nodes": 0}"#, "virtual_nodes"),
            (r#"{"replicas": 3}"#, "replicas"),
            ("[]", "options"),
        ] {
            match KeyAffinityDispatcher::from_options(json) {
                Err(CallError::InvalidOption { option: got, .. }) => {
                    assert_eq!(got.as_str(), option)
                }
                other => panic!("{json}: expected InvalidOption, got {other:?}"),
            }
        }
    }

    proptest! {
        #[test]
        fn never_exceeds_demand_and_routes_every_event_once(
            demands in proptest::collection::vec(0u64..20, 1..5),
            keys in proptest::collection::vec(0u64..50, 0..80),
        ) {
            let mut d = KeyAffinityDispatcher::from_options("{}").expect("default options");
            let mut out = Decision::default();
            for (id, demand) in demands.iter().enumerate() {
                let id = id as u64;
                let request = SubscribeRequest::new(SubscriptionId(id), ConsumerId(id), 20, 10);
                d.subscribe(&request, &mut out).expect("accepted");
                d.ask(SubscriptionId(id), *demand, &mut out);
            }
            let routed = route(&mut d, &keys);
            prop_assert_eq!(routed.len(), keys.len());
            for (id, demand) in demands.iter().enumerate() {
                let got = routed.iter().filter(|to| **to == Some(id as u64)).count() as u64;
                prop_assert!(got <= *demand);
            }
            // Same key, same fate within one batch order: once kept, a key's
            // owner never receives a later event in this batch.
            for (i, to) in routed.iter().enumerate() {
                if to.is_none() {
                    let owner = d.ring.owner(keys[i]);
                    for later in &routed[i + 1..] {
                        prop_assert!(owner.is_none() || later.map(SubscriptionId) != owner);
                    }
                }
            }
        }
    }
}
