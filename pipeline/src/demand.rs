//! The demand each stage of a pipeline asks of its producers, as a pure
//! state machine: gen-stage's automatic demand (ask `max_demand`, then again
//! as many as were handled once that reaches `max_demand - min_demand`),
//! kept by the pipeline itself so that the asks can go through the rate
//! limiter and be counted in the metrics.

use std::sync::Arc;

use weir_gen_stage::SubscriptionId;

use crate::metrics::Counters;

/// One subscription's demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Demand {
    /// Asked and not yet received (granted by the rate limiter, if any).
    outstanding: usize,
    /// Handled since the last ask, not asked again yet.
    handled: usize,
    /// Ask again once `handled` reaches this: `max_demand - min_demand`.
    threshold: usize,
    max_demand: usize,
}

impl Demand {
    /// A subscription asking `max_demand` at a time, again once
    /// `max_demand - min_demand` are handled (at least one).
    pub fn new(max_demand: usize, min_demand: usize) -> Self {
        let max_demand = max_demand.max(1);
        Self {
            outstanding: 0,
            handled: 0,
            threshold: max_demand.saturating_sub(min_demand).max(1),
            max_demand,
        }
    }

    /// The first ask: `max_demand`.
    pub fn initial(&mut self) -> usize {
        self.max_demand
    }

    /// `n` events arrived and were handled: how many to ask for now (0:
    /// wait for more).
    pub fn handled(&mut self, n: usize) -> usize {
        self.outstanding = self.outstanding.saturating_sub(n);
        self.handled += n;
        if self.handled >= self.threshold {
            std::mem::take(&mut self.handled)
        } else {
            0
        }
    }

    /// `n` were asked of the producer (all of an ask, or the part of it the
    /// rate limiter granted).
    pub fn asked(&mut self, n: usize) {
        self.outstanding += n;
    }

    /// Asked of the producer and not received yet.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }
}

/// Every manual-demand subscription of one stage, and the stage's
/// outstanding demand in its metrics.
#[derive(Debug)]
pub(crate) struct Upstreams {
    subscriptions: Vec<(SubscriptionId, Demand)>,
    outstanding: usize,
    counters: Arc<Counters>,
}

impl Upstreams {
    pub fn new(counters: Arc<Counters>) -> Self {
        Self {
            subscriptions: Vec::new(),
            outstanding: 0,
            counters,
        }
    }

    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// A new subscription: what to ask first.
    pub fn subscribe(
        &mut self,
        subscription: SubscriptionId,
        max_demand: usize,
        min_demand: usize,
    ) -> usize {
        let mut demand = Demand::new(max_demand, min_demand);
        let first = demand.initial();
        self.subscriptions.push((subscription, demand));
        first
    }

    fn find(&mut self, subscription: SubscriptionId) -> Option<&mut Demand> {
        self.subscriptions
            .iter_mut()
            .find(|(id, _)| *id == subscription)
            .map(|(_, demand)| demand)
    }

    /// `n` events of `subscription` arrived and were handled: what to ask
    /// for now.
    pub fn received(&mut self, subscription: SubscriptionId, n: usize) -> usize {
        let Some(demand) = self.find(subscription) else {
            return 0;
        };
        let before = demand.outstanding();
        let ask = demand.handled(n);
        self.outstanding -= before - demand.outstanding();
        self.counters.set_outstanding(self.outstanding);
        ask
    }

    /// `n` were asked of `subscription`'s producer; `false` if the
    /// subscription is gone (nothing to ask).
    pub fn asked(&mut self, subscription: SubscriptionId, n: usize) -> bool {
        let Some(demand) = self.find(subscription) else {
            return false;
        };
        demand.asked(n);
        self.outstanding += n;
        self.counters.set_outstanding(self.outstanding);
        true
    }

    /// Whether `subscription` is one of these.
    pub fn contains(&self, subscription: SubscriptionId) -> bool {
        self.subscriptions.iter().any(|(id, _)| *id == subscription)
    }

    /// The subscription ended; `false` if it was not one of these.
    pub fn cancelled(&mut self, subscription: SubscriptionId) -> bool {
        let Some(index) = self
            .subscriptions
            .iter()
            .position(|(id, _)| *id == subscription)
        else {
            return false;
        };
        let (_, demand) = self.subscriptions.swap_remove(index);
        self.outstanding -= demand.outstanding();
        self.counters.set_outstanding(self.outstanding);
        true
    }

    /// Every subscription still open.
    pub fn ids(&self) -> impl Iterator<Item = SubscriptionId> + '_ {
        self.subscriptions.iter().map(|(id, _)| *id)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn asks_max_demand_then_again_at_the_threshold() {
        let mut demand = Demand::new(10, 5);
        let first = demand.initial();
        assert_eq!(first, 10);
        demand.asked(first);
        assert_eq!(demand.handled(3), 0);
        assert_eq!(demand.handled(2), 5);
        demand.asked(5);
        assert_eq!(demand.outstanding(), 10);
        assert_eq!(demand.handled(10), 10);
        assert_eq!(demand.outstanding(), 0);
    }

    #[test]
    fn max_demand_one_asks_after_each_event() {
        let mut demand = Demand::new(1, 0);
        assert_eq!(demand.initial(), 1);
        assert_eq!(demand.handled(1), 1);
    }

    proptest! {
        /// Whatever the producer sends (never more than asked), the asks
        /// keep at most `max_demand` outstanding, and once everything asked
        /// was received and handled, `max_demand - (handled, not asked
        /// again)` is outstanding: no demand is lost.
        #[test]
        fn outstanding_stays_within_max_demand(
            max_demand in 1usize..50,
            min_frac in 0usize..100,
            sends in proptest::collection::vec(1usize..60, 0..60),
        ) {
            let min_demand = max_demand * min_frac / 100;
            let mut demand = Demand::new(max_demand, min_demand);
            let first = demand.initial();
            demand.asked(first);
            for send in sends {
                let n = send.min(demand.outstanding());
                if n == 0 {
                    continue;
                }
                let ask = demand.handled(n);
                demand.asked(ask);
                prop_assert!(demand.outstanding() <= max_demand);
                prop_assert_eq!(demand.outstanding() + demand.handled, max_demand);
            }
        }
    }
}
