//! Per-consumer metrics: written by the dispatcher, read from any thread.
//!
//! Only the dispatcher writes (it is called through `&mut`, on one thread at
//! a time), so counters are updated with a relaxed load and store instead of a
//! locked read-modify-write; readers only load. A snapshot may therefore mix
//! values from just before and just after a call, never a torn value.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::clock::TickScale;
use abi_stable::std_types::RVec;
use weir_plugin_interface::{
    ConsumerId, ConsumerMetrics, Histogram, MetricsSnapshot, MetricsSource,
};

/// Add to a counter that only one thread writes.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Subtract from a gauge that only one thread writes.
fn drop_by(gauge: &AtomicU64, n: u64) {
    gauge.store(gauge.load(Relaxed).saturating_sub(n), Relaxed);
}

/// The counters of one consumer.
#[derive(Debug)]
pub(crate) struct ConsumerCounters {
    consumer: ConsumerId,
    first_subscribed: Instant,
    subscriptions: AtomicU64,
    cancellations: AtomicU64,
    demand_asked: AtomicU64,
    events_dispatched: AtomicU64,
    outstanding_demand: AtomicU64,
    latency: LatencyHistogram,
}

impl ConsumerCounters {
    fn new(consumer: ConsumerId, bounds: Arc<Bounds>, now: Instant) -> Self {
        Self {
            consumer,
            first_subscribed: now,
            subscriptions: AtomicU64::new(0),
            cancellations: AtomicU64::new(0),
            demand_asked: AtomicU64::new(0),
            events_dispatched: AtomicU64::new(0),
            outstanding_demand: AtomicU64::new(0),
            latency: LatencyHistogram::new(bounds),
        }
    }

    pub(crate) fn subscribed(&self) {
        bump(&self.subscriptions, 1);
    }

    /// A subscription ended with `unmet` demand.
    pub(crate) fn cancelled(&self, unmet: u64) {
        bump(&self.cancellations, 1);
        drop_by(&self.outstanding_demand, unmet);
    }

    pub(crate) fn asked(&self, n: u64) {
        bump(&self.demand_asked, n);
        bump(&self.outstanding_demand, n);
    }

    pub(crate) fn dispatched(&self, n: u64) {
        bump(&self.events_dispatched, n);
        drop_by(&self.outstanding_demand, n);
    }

    /// An ask was fulfilled `ticks` (of the registry's clock) after it was
    /// made.
    pub(crate) fn fulfilled_after(&self, ticks: u64) {
        self.latency.observe(ticks);
    }
}

/// A histogram of durations with fixed bounds, single writer. Observations
/// stay in clock ticks (bounds are converted once, the sum at snapshot
/// time), so recording one is integer compares and two stores.
#[derive(Debug)]
struct LatencyHistogram {
    bounds: Arc<Bounds>,
    /// One per bound, plus `+Inf`.
    counts: Box<[AtomicU64]>,
    sum_ticks: AtomicU64,
}

/// A histogram's upper bounds, in seconds and in ticks of the clock.
#[derive(Debug)]
struct Bounds {
    seconds: Box<[f64]>,
    ticks: Box<[u64]>,
    scale: TickScale,
}

impl LatencyHistogram {
    fn new(bounds: Arc<Bounds>) -> Self {
        let counts = (0..=bounds.ticks.len())
            .map(|_| AtomicU64::new(0))
            .collect();
        Self {
            bounds,
            counts,
            sum_ticks: AtomicU64::new(0),
        }
    }

    fn observe(&self, ticks: u64) {
        let bucket = self
            .bounds
            .ticks
            .iter()
            .position(|bound| ticks <= *bound)
            .unwrap_or(self.bounds.ticks.len());
        if let Some(count) = self.counts.get(bucket) {
            bump(count, 1);
        }
        bump(&self.sum_ticks, ticks);
    }

    fn snapshot(&self) -> Histogram {
        Histogram {
            bounds_seconds: self.bounds.seconds.iter().copied().collect(),
            counts: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
            sum_seconds: self
                .bounds
                .scale
                .duration(self.sum_ticks.load(Relaxed))
                .as_secs_f64(),
        }
    }
}

/// Every consumer's counters, shared between the dispatcher and readers.
#[derive(Debug)]
pub(crate) struct Registry {
    bounds: Arc<Bounds>,
    consumers: Mutex<BTreeMap<ConsumerId, Arc<ConsumerCounters>>>,
}

impl Registry {
    /// Histograms with upper `bounds` in seconds, observed in ticks of
    /// `scale`.
    pub(crate) fn new(bounds: &[f64], scale: TickScale) -> Self {
        Self {
            bounds: Arc::new(Bounds {
                seconds: bounds.into(),
                ticks: bounds.iter().map(|b| scale.ticks(*b)).collect(),
                scale,
            }),
            consumers: Mutex::new(BTreeMap::new()),
        }
    }

    /// The counters of `consumer`, created at its first subscription.
    pub(crate) fn consumer(&self, consumer: ConsumerId, now: Instant) -> Arc<ConsumerCounters> {
        let mut consumers = self
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        consumers
            .entry(consumer)
            .or_insert_with(|| Arc::new(ConsumerCounters::new(consumer, self.bounds.clone(), now)))
            .clone()
    }

    fn all(&self) -> Vec<Arc<ConsumerCounters>> {
        let consumers = self
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        consumers.values().cloned().collect()
    }
}

/// Reads snapshots; remembers the previous one to report demand rates.
#[derive(Debug)]
pub(crate) struct Reader {
    registry: Arc<Registry>,
    /// Per consumer: when the previous snapshot was taken and the demand
    /// asked then.
    previous: Mutex<HashMap<ConsumerId, (Instant, u64)>>,
}

impl Reader {
    pub(crate) fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            previous: Mutex::new(HashMap::new()),
        }
    }
}

impl MetricsSource for Reader {
    fn snapshot(&self) -> MetricsSnapshot {
        let now = Instant::now();
        let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
        let consumers: RVec<ConsumerMetrics> = self
            .registry
            .all()
            .iter()
            .map(|counters| {
                let demand_asked = counters.demand_asked.load(Relaxed);
                let (since, asked_before) = previous
                    .insert(counters.consumer, (now, demand_asked))
                    .unwrap_or((counters.first_subscribed, 0));
                let elapsed = now.saturating_duration_since(since).as_secs_f64();
                let demand_asked_per_second = if elapsed > 0.0 {
                    demand_asked.saturating_sub(asked_before) as f64 / elapsed
                } else {
                    0.0
                };
                ConsumerMetrics {
                    consumer: counters.consumer,
                    subscriptions: counters.subscriptions.load(Relaxed),
                    cancellations: counters.cancellations.load(Relaxed),
                    demand_asked,
                    demand_asked_per_second,
                    events_dispatched: counters.events_dispatched.load(Relaxed),
                    outstanding_demand: counters.outstanding_demand.load(Relaxed),
                    fulfilment_latency: counters.latency.snapshot(),
                }
            })
            .collect();
        MetricsSnapshot { consumers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn histogram_puts_observations_in_the_first_bucket_that_holds_them() {
        let registry = Registry::new(&[0.001, 0.01], TickScale::NANOS);
        let histogram = LatencyHistogram::new(registry.bounds.clone());
        histogram.observe(500_000);
        histogram.observe(1_000_000);
        histogram.observe(5_000_000);
        histogram.observe(1_000_000_000);
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.counts.as_slice(), &[2, 1, 1]);
        assert!((snapshot.sum_seconds - 1.0065).abs() < 1e-9);
    }

    #[test]
    fn bounds_and_sums_follow_the_clock_scale() {
        // A 4 GHz counter: 4 ticks a nanosecond.
        let registry = Registry::new(&[0.001], TickScale::with_nanos_per_tick(0.25));
        let histogram = LatencyHistogram::new(registry.bounds.clone());
        histogram.observe(4_000_000); // exactly 1 ms
        histogram.observe(4_000_001);
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.counts.as_slice(), &[1, 1]);
        assert!((snapshot.sum_seconds - 0.002).abs() < 1e-9);
    }

    #[test]
    fn rate_is_measured_since_the_previous_snapshot() {
        let registry = Arc::new(Registry::new(&[1.0], TickScale::NANOS));
        let start = Instant::now() - Duration::from_secs(2);
        let counters = registry.consumer(ConsumerId(1), start);
        counters.subscribed();
        counters.asked(100);
        let reader = Reader::new(registry.clone());
        let first = reader.snapshot();
        let rate = first.consumers[0].demand_asked_per_second;
        // 100 events over (at least) 2 seconds since the first subscription.
        assert!(rate > 0.0 && rate <= 50.0, "rate {rate}");
        let second = reader.snapshot();
        assert_eq!(second.consumers[0].demand_asked_per_second, 0.0);
        assert_eq!(second.consumers[0].demand_asked, 100);
        assert_eq!(second.consumers[0].outstanding_demand, 100);
    }
}
