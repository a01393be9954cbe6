//! GenStage's Demand dispatcher bookkeeping, over counts instead of events.
//!
//! Consumers are kept in a list ordered by outstanding demand, highest first;
//! a consumer whose demand changes goes behind every other consumer with the
//! same or a larger demand; a new subscriber goes last with zero demand. A
//! dispatch serves the head of the list as far as its demand goes, re-inserts
//! it, and repeats until the events run out or the head has no demand. Unmet
//! demand of a cancelled consumer stays *pending* and is taken off later asks.
//! The optional shuffle at the first dispatch keeps consumers without demand
//! behind the others, as Weir's built-in `DemandDispatcher` does.
//!
//! Each subscription carries a payload `P` (the metrics dispatcher keeps its
//! per-subscription metrics there), so one scan finds both.

use weir_plugin_interface::{Decision, PluginWarning, SubscriptionId};

use crate::shuffle::SplitMix64;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Demand<P> {
    counter: u64,
    subscription: SubscriptionId,
    payload: P,
}

/// The Demand dispatcher's state (GenStage's `{demands, pending, max, shuffle}`).
#[derive(Debug, Clone)]
pub(crate) struct DemandCore<P> {
    demands: Vec<Demand<P>>,
    pending: u64,
    max_demand: Option<u64>,
    shuffle: Option<SplitMix64>,
}

impl<P> DemandCore<P> {
    pub(crate) fn new(max_demand: Option<u64>, shuffle_seed: Option<u64>) -> Self {
        Self {
            demands: Vec::new(),
            pending: 0,
            max_demand,
            shuffle: shuffle_seed.map(SplitMix64::new),
        }
    }

    /// Whether `subscription` is subscribed.
    pub(crate) fn contains(&self, subscription: SubscriptionId) -> bool {
        self.demands.iter().any(|d| d.subscription == subscription)
    }

    /// A new subscriber goes last with zero demand; nothing is asked upstream.
    pub(crate) fn subscribe(&mut self, subscription: SubscriptionId, payload: P) {
        self.demands.push(Demand {
            counter: 0,
            subscription,
            payload,
        });
    }

    /// Returns the cancelled subscription's unmet demand (now pending) and
    /// its payload, or `None` for an unknown subscription.
    pub(crate) fn cancel(&mut self, subscription: SubscriptionId) -> Option<(u64, P)> {
        let index = self.index_of(subscription)?;
        let Demand {
            counter, payload, ..
        } = self.demands.remove(index);
        self.pending += counter;
        Some((counter, payload))
    }

    /// Returns the subscription's payload, or `None` for an unknown
    /// subscription (ignored).
    pub(crate) fn ask(
        &mut self,
        subscription: SubscriptionId,
        n: u64,
        out: &mut Decision,
    ) -> Option<&mut P> {
        let index = self.index_of(subscription)?;
        let current = self.demands[index].counter;
        let expected = *self.max_demand.get_or_insert(n);
        if n > expected {
            out.warn(PluginWarning::AskLargerThanMaxDemand {
                subscription,
                asked: n,
                expected,
            });
        }
        let already_sent = self.pending.min(n);
        self.pending -= already_sent;
        out.ask_upstream(n - already_sent);
        let index = self.set_demand(index, current + n);
        Some(&mut self.demands[index].payload)
    }

    /// Route `count` events: `send(subscription, n, payload)` for each
    /// batch, in order; whatever is not sent is leftover.
    pub(crate) fn dispatch(
        &mut self,
        count: u64,
        mut send: impl FnMut(SubscriptionId, u64, &mut P),
    ) {
        if let Some(mut rng) = self.shuffle.take() {
            rng.shuffle(&mut self.demands);
            // As Weir's built-in Demand dispatcher (unlike GenStage):
            // consumers without demand go behind the others, so one of them at
            // the head cannot hold events back from consumers that asked.
            self.demands.sort_by_key(|d| d.counter == 0);
        }
        let mut left = count;
        // Serve the head until it has no demand: consumers without demand are
        // always behind those with some, so then nobody has.
        while left > 0 {
            let Some(head) = self.demands.first_mut() else {
                break;
            };
            if head.counter == 0 {
                break;
            }
            let now = head.counter.min(left);
            send(head.subscription, now, &mut head.payload);
            left -= now;
            let counter = head.counter - now;
            self.set_demand(0, counter);
        }
        self.pending = self.pending.saturating_sub(left);
    }

    fn index_of(&self, subscription: SubscriptionId) -> Option<usize> {
        self.demands
            .iter()
            .position(|d| d.subscription == subscription)
    }

    /// Give the consumer at `index` the demand `counter` and move it behind
    /// every other consumer with the same or a larger demand (GenStage takes
    /// it out and inserts it before the first one with a smaller demand).
    /// Done in place, by rotating the consumers in between, so a consumer
    /// that keeps its place (always the case for a lone one) moves nothing.
    /// Returns its new index.
    #[inline]
    fn set_demand(&mut self, index: usize, counter: u64) -> usize {
        if let [only] = self.demands.as_mut_slice() {
            only.counter = counter;
            return 0;
        }
        self.move_demand(index, counter)
    }

    /// [`set_demand`](Self::set_demand) among several consumers.
    fn move_demand(&mut self, index: usize, counter: u64) -> usize {
        // The insertion point among the others, as an index into the list
        // without this consumer.
        let target = self
            .demands
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != index)
            .position(|(_, d)| counter > d.counter)
            .unwrap_or(self.demands.len() - 1);
        match target.cmp(&index) {
            std::cmp::Ordering::Less => self.demands[target..=index].rotate_right(1),
            std::cmp::Ordering::Greater => self.demands[index..=target].rotate_left(1),
            std::cmp::Ordering::Equal => {}
        }
        self.demands[target].counter = counter;
        target
    }

    #[cfg(test)]
    fn state(&self) -> (Vec<(u64, u64)>, u64, Option<u64>) {
        (
            self.demands
                .iter()
                .map(|d| (d.counter, d.subscription.0))
                .collect(),
            self.pending,
            self.max_demand,
        )
    }
}

impl<P> Default for DemandCore<P> {
    fn default() -> Self {
        Self::new(None, None)
    }
}

#[cfg(test)]
mod tests {
    //! GenStage's own `demand_dispatcher_test.exs`, state for state.
    use super::*;

    fn s(id: u64) -> SubscriptionId {
        SubscriptionId(id)
    }

    /// The payload is the subscription id, to check it travels with it.
    type Core = DemandCore<u64>;

    fn subscribe(core: &mut Core, id: u64) {
        core.subscribe(s(id), id);
    }

    fn ask(core: &mut Core, id: u64, n: u64) -> u64 {
        let mut out = Decision::default();
        assert_eq!(core.ask(s(id), n, &mut out).copied(), Some(id));
        out.upstream_demand
    }

    fn dispatch(core: &mut Core, count: u64) -> Vec<(u64, u64)> {
        let mut sent = Vec::new();
        core.dispatch(count, |to, n, payload| {
            assert_eq!(*payload, to.0);
            sent.push((to.0, n));
        });
        sent
    }

    #[test]
    fn subscribes_asks_and_cancels_keeping_pending_demand() {
        let mut core = Core::default();
        subscribe(&mut core, 1);
        assert_eq!(ask(&mut core, 1, 10), 10);
        assert_eq!(core.state(), (vec![(10, 1)], 0, Some(10)));
        assert_eq!(core.cancel(s(1)), Some((10, 1)));
        assert_eq!(core.state(), (vec![], 10, Some(10)));

        subscribe(&mut core, 1);
        assert_eq!(ask(&mut core, 1, 5), 0);
        assert_eq!(core.state(), (vec![(5, 1)], 5, Some(10)));
        assert_eq!(core.cancel(s(1)), Some((5, 1)));
        assert_eq!(core.state(), (vec![], 10, Some(10)));

        assert_eq!(dispatch(&mut core, 3), vec![]);
        assert_eq!(core.state(), (vec![], 7, Some(10)));
        dispatch(&mut core, 10);
        assert_eq!(core.state(), (vec![], 0, Some(10)));
    }

    #[test]
    fn subscribes_asks_and_dispatches_to_multiple_consumers() {
        let mut core = Core::default();
        subscribe(&mut core, 1);
        subscribe(&mut core, 2);
        assert_eq!(ask(&mut core, 1, 3), 3);
        assert_eq!(ask(&mut core, 2, 2), 2);
        assert_eq!(dispatch(&mut core, 5), vec![(1, 3), (2, 2)]);
        assert_eq!(dispatch(&mut core, 3), vec![]);
        assert_eq!(ask(&mut core, 1, 3), 3);
        assert_eq!(ask(&mut core, 2, 3), 3);
        assert_eq!(dispatch(&mut core, 2), vec![(1, 2)]);
        assert_eq!(core.state().0, vec![(3, 2), (1, 1)]);
        assert_eq!(dispatch(&mut core, 2), vec![(2, 2)]);
        assert_eq!(core.state().0, vec![(1, 1), (1, 2)]);
        assert_eq!(dispatch(&mut core, 3), vec![(1, 1), (2, 1)]);
        assert_eq!(core.state().0, vec![(0, 1), (0, 2)]);
    }

    #[test]
    fn asks_reorder_consumers_by_demand() {
        let mut core = Core::default();
        for id in 1..=3 {
            subscribe(&mut core, id);
        }
        ask(&mut core, 1, 4);
        ask(&mut core, 2, 2);
        ask(&mut core, 3, 3);
        assert_eq!(core.state().0, vec![(4, 1), (3, 3), (2, 2)]);
        ask(&mut core, 3, 2);
        assert_eq!(core.state().0, vec![(5, 3), (4, 1), (2, 2)]);
        ask(&mut core, 2, 4);
        assert_eq!(core.state().0, vec![(6, 2), (5, 3), (4, 1)]);
    }

    #[test]
    fn unknown_subscriptions_are_ignored() {
        let mut core = Core::default();
        let mut out = Decision::default();
        assert!(core.ask(s(9), 3, &mut out).is_none());
        assert_eq!(core.cancel(s(9)), None);
        assert_eq!(out, Decision::default());
        assert_eq!(core.state(), (vec![], 0, None));
    }

    #[test]
    fn a_larger_ask_than_the_expected_max_demand_warns() {
        let mut core = Core::new(Some(3), None);
        subscribe(&mut core, 1);
        let mut out = Decision::default();
        core.ask(s(1), 4, &mut out);
        assert_eq!(
            out.warnings.as_slice(),
            &[PluginWarning::AskLargerThanMaxDemand {
                subscription: s(1),
                asked: 4,
                expected: 3
            }]
        );
        assert_eq!(out.upstream_demand, 4);
    }
}
