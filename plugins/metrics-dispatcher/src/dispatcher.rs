//! The plugin: Demand dispatching plus metrics recording.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::clock::{Clock, Stamp};

use weir_plugin_interface::{
    CallError, Decision, DispatcherPlugin, MetricsSource, SubscribeRequest, SubscriptionId,
};

use crate::demand::DemandCore;
use crate::metrics::{ConsumerCounters, Reader, Registry};
use crate::options::Options;

/// GenStage's Demand dispatcher (each batch to the consumer with the largest
/// outstanding demand) that records, per consumer: subscriptions,
/// cancellations, demand asked (total and rate), events dispatched,
/// outstanding demand, and a histogram of the time from each ask to the
/// dispatch of the last event it asked for.
///
/// Options (a JSON object, all optional): `max_demand` (the expected maximum
/// ask; default: the first ask), `shuffle_demands_on_first_dispatch` (bool),
/// `shuffle_seed` (u64, for a reproducible shuffle),
/// `latency_buckets_seconds` (ascending upper bounds),
/// `latency_sample_every` (time one ask in this many per subscription for the
/// histogram, default 1: every ask; each timed ask costs two clock reads),
/// `latency_clock` (`"auto"`, the default: the CPU's time-stamp counter where
/// it is invariant, else `Instant`; `"std"`: always `Instant`).
///
/// # Example
///
/// ```
/// use weir_plugin_interface::{ConsumerId, Decision, DispatcherPlugin, SubscribeRequest, SubscriptionId};
/// use metrics_dispatcher::MetricsDispatcher;
///
/// let mut dispatcher = MetricsDispatcher::from_options("{}")?;
/// let metrics = dispatcher.metrics().expect("the metrics dispatcher keeps metrics");
/// let mut out = Decision::default();
/// dispatcher.subscribe(&SubscribeRequest::new(SubscriptionId(1), ConsumerId(7), 10, 5), &mut out)?;
/// dispatcher.ask(SubscriptionId(1), 10, &mut out);
/// out.clear();
/// dispatcher.dispatch(4, &[], &mut out);
/// assert_eq!(out.routed(), 4);
///
/// let snapshot = metrics.snapshot();
/// assert_eq!(snapshot.consumers[0].demand_asked, 10);
/// assert_eq!(snapshot.consumers[0].events_dispatched, 4);
/// assert_eq!(snapshot.consumers[0].outstanding_demand, 6);
/// # Ok::<(), weir_plugin_interface::CallError>(())
/// ```
#[derive(Debug)]
pub struct MetricsDispatcher {
    /// The Demand bookkeeping, each subscription carrying its metrics.
    core: DemandCore<Tracked>,
    registry: Arc<Registry>,
    /// Times asks for the latency histogram.
    clock: Clock,
    /// Time one ask in this many (per subscription) for the latency
    /// histogram; 1 times every ask.
    sample_every: u64,
}

/// What the dispatcher keeps per live subscription for its metrics.
#[derive(Debug)]
struct Tracked {
    counters: Arc<ConsumerCounters>,
    /// Asks not yet fully served, oldest first: when (for a timed ask), and
    /// how many events are still to come. Consecutive untimed asks share one
    /// entry.
    asks: VecDeque<(Option<Stamp>, u64)>,
    /// Asks to let pass untimed before the next timed one.
    untimed_left: u64,
}

impl Tracked {
    /// An ask of `n`: timed (one clock read) if it is this subscription's
    /// turn, as `sample_every` says.
    #[inline]
    fn asked(&mut self, n: u64, sample_every: u64, clock: &Clock) {
        self.counters.asked(n);
        if self.untimed_left == 0 {
            self.untimed_left = sample_every.saturating_sub(1);
            self.asks.push_back((Some(clock.now()), n));
        } else {
            self.untimed_left -= 1;
            match self.asks.back_mut() {
                Some((None, remaining)) => *remaining += n,
                _ => self.asks.push_back((None, n)),
            }
        }
    }

    /// `n` events went out: they serve the oldest asks first. The clock is
    /// read (at most once per dispatch, into `now`) only when a timed ask is
    /// fulfilled.
    #[inline]
    fn served(&mut self, mut n: u64, clock: &Clock, now: &mut Option<Stamp>) {
        self.counters.dispatched(n);
        while n > 0 {
            let Some((asked_at, remaining)) = self.asks.front_mut() else {
                break;
            };
            let taken = (*remaining).min(n);
            *remaining -= taken;
            n -= taken;
            if *remaining == 0 {
                if let Some(asked_at) = *asked_at {
                    let now = *now.get_or_insert_with(|| clock.now());
                    self.counters
                        .fulfilled_after(Clock::ticks_between(asked_at, now));
                }
                self.asks.pop_front();
            }
        }
    }
}

impl DispatcherPlugin for MetricsDispatcher {
    fn from_options(options: &str) -> Result<Self, CallError> {
        let options = Options::parse(options)?;
        let clock = if options.std_clock {
            Clock::std()
        } else {
            Clock::new()
        };
        Ok(Self {
            core: DemandCore::new(options.max_demand, options.shuffle_seed),
            registry: Arc::new(Registry::new(&options.latency_bounds, clock.scale())),
            clock,
            sample_every: options.latency_sample_every,
        })
    }

    fn metrics(&self) -> Option<Arc<dyn MetricsSource>> {
        Some(Arc::new(Reader::new(self.registry.clone())))
    }

    fn subscribe(
        &mut self,
        request: &SubscribeRequest,
        _out: &mut Decision,
    ) -> Result<(), CallError> {
        if self.core.contains(request.subscription) {
            return Err(CallError::refused(format!(
                "{} is already subscribed",
                request.subscription
            )));
        }
        let counters = self.registry.consumer(request.consumer, Instant::now());
        counters.subscribed();
        self.core.subscribe(
            request.subscription,
            Tracked {
                counters,
                asks: VecDeque::new(),
                untimed_left: 0,
            },
        );
        Ok(())
    }

    fn cancel(&mut self, subscription: SubscriptionId, _out: &mut Decision) {
        if let Some((unmet, tracked)) = self.core.cancel(subscription) {
            tracked.counters.cancelled(unmet);
        }
    }

    #[inline]
    fn ask(&mut self, subscription: SubscriptionId, n: u64, out: &mut Decision) {
        if let Some(tracked) = self.core.ask(subscription, n, out) {
            tracked.asked(n, self.sample_every, &self.clock);
        }
    }

    #[inline]
    fn dispatch(&mut self, count: u64, _keys: &[u64], out: &mut Decision) {
        let mut now = None;
        let clock = &self.clock;
        self.core.dispatch(count, |subscription, n, tracked| {
            out.send(subscription, n);
            tracked.served(n, clock, &mut now);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use weir_plugin_interface::ConsumerId;

    fn request(subscription: u64, consumer: u64) -> SubscribeRequest {
        SubscribeRequest::new(SubscriptionId(subscription), ConsumerId(consumer), 10, 5)
    }

    #[test]
    fn metrics_are_summed_per_consumer_over_its_subscriptions() {
        let mut d = MetricsDispatcher::from_options("{}").expect("default options");
        let reader = d.metrics().expect("keeps metrics");
        let mut out = Decision::default();
        d.subscribe(&request(1, 7), &mut out).expect("accepted");
        d.subscribe(&request(2, 7), &mut out).expect("accepted");
        d.subscribe(&request(3, 8), &mut out).expect("accepted");
        d.ask(SubscriptionId(1), 5, &mut out);
        d.ask(SubscriptionId(2), 5, &mut out);
        d.ask(SubscriptionId(3), 2, &mut out);
        out.clear();
        d.dispatch(8, &[], &mut out);
        d.cancel(SubscriptionId(2), &mut out);

        let snapshot = reader.snapshot();
        let seven = &snapshot.consumers[0];
        assert_eq!(seven.consumer, ConsumerId(7));
        assert_eq!((seven.subscriptions, seven.cancellations), (2, 1));
        assert_eq!(seven.demand_asked, 10);
        assert_eq!(seven.events_dispatched, 8);
        // Subscription 1 got 5, subscription 2 got 3 then left with 2 unmet.
        assert_eq!(seven.outstanding_demand, 0);
        assert_eq!(seven.fulfilment_latency.count(), 1);
        let eight = &snapshot.consumers[1];
        assert_eq!(
            (
                eight.demand_asked,
                eight.events_dispatched,
                eight.outstanding_demand
            ),
            (2, 0, 2)
        );
        assert_eq!(eight.fulfilment_latency.count(), 0);
    }

    #[test]
    fn an_ask_is_fulfilled_when_its_last_event_goes_out() {
        for options in ["{}", r#"{"latency_clock": "std"}"#] {
            let mut d = MetricsDispatcher::from_options(options).expect("valid options");
            let reader = d.metrics().expect("keeps metrics");
            let mut out = Decision::default();
            d.subscribe(&request(1, 1), &mut out).expect("accepted");
            d.ask(SubscriptionId(1), 3, &mut out);
            d.ask(SubscriptionId(1), 3, &mut out);
            d.dispatch(2, &[], &mut out);
            assert_eq!(reader.snapshot().consumers[0].fulfilment_latency.count(), 0);
            std::thread::sleep(Duration::from_millis(3));
            d.dispatch(2, &[], &mut out);
            let latency = reader.snapshot().consumers[0].fulfilment_latency.clone();
            assert_eq!(latency.count(), 1);
            // At least the sleep (the clock is calibrated within a few per cent).
            assert!(latency.sum_seconds >= 0.0025, "{options}: {latency:?}");
            assert!(latency.sum_seconds < 10.0, "{options}: {latency:?}");
            d.dispatch(10, &[], &mut out);
            assert_eq!(reader.snapshot().consumers[0].fulfilment_latency.count(), 2);
        }
    }

    #[test]
    fn with_latency_sampling_one_ask_in_n_is_timed_and_counters_stay_exact() {
        let mut d = MetricsDispatcher::from_options(r#"{"latency_sample_every": 3}"#)
            .expect("valid options");
        let reader = d.metrics().expect("keeps metrics");
        let mut out = Decision::default();
        d.subscribe(&request(1, 1), &mut out).expect("accepted");
        // Asks 1 and 4 are timed; 2 and 3 share one untimed entry.
        for _ in 0..4 {
            d.ask(SubscriptionId(1), 2, &mut out);
        }
        d.dispatch(7, &[], &mut out);
        // Ask 4 still waits for its last event.
        assert_eq!(reader.snapshot().consumers[0].fulfilment_latency.count(), 1);
        d.dispatch(1, &[], &mut out);
        assert_eq!(reader.snapshot().consumers[0].fulfilment_latency.count(), 2);
        for _ in 0..3 {
            d.ask(SubscriptionId(1), 2, &mut out);
            d.dispatch(2, &[], &mut out);
        }
        // Ask 7 is the third timed one.
        let consumer = &reader.snapshot().consumers[0];
        assert_eq!(consumer.fulfilment_latency.count(), 3);
        assert_eq!(
            (
                consumer.demand_asked,
                consumer.events_dispatched,
                consumer.outstanding_demand
            ),
            (14, 14, 0)
        );
    }

    #[test]
    fn a_duplicated_subscription_is_refused() {
        let mut d = MetricsDispatcher::from_options("{}").expect("default options");
        let mut out = Decision::default();
        d.subscribe(&request(1, 1), &mut out).expect("accepted");
        assert!(matches!(
            d.subscribe(&request(1, 2), &mut out),
            Err(CallError::Refused { .. })
        ));
    }
}
