//! Metrics a plugin can expose to the host, as FFI-safe data.

use abi_stable::StableAbi;
use abi_stable::std_types::RVec;

use crate::ConsumerId;

/// A point-in-time copy of a plugin's per-consumer metrics.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// One entry per consumer that ever subscribed, in consumer order.
    pub consumers: RVec<ConsumerMetrics>,
}

/// What a dispatcher saw of one consumer (summed over its subscriptions).
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq)]
pub struct ConsumerMetrics {
    /// The consumer.
    pub consumer: ConsumerId,
    /// Subscriptions it made (counter).
    pub subscriptions: u64,
    /// Subscriptions of it that ended (counter).
    pub cancellations: u64,
    /// Events it asked for (counter).
    pub demand_asked: u64,
    /// Events it asked for per second, over the time since the previous
    /// snapshot from the same reader (since it first subscribed, for the
    /// first snapshot).
    pub demand_asked_per_second: f64,
    /// Events dispatched to it (counter).
    pub events_dispatched: u64,
    /// Demand it asked for that has not been served yet (gauge).
    pub outstanding_demand: u64,
    /// Time from an ask to the dispatch of the last event it asked for.
    pub fulfilment_latency: Histogram,
}

/// A latency histogram with fixed upper bounds, in seconds.
///
/// `counts` has one entry per bound plus one for everything above the last
/// bound (`+Inf`); entries are **not** cumulative (the Prometheus rendering
/// cumulates them).
///
/// ```
/// use weir_plugin_interface::Histogram;
///
/// let mut latency = Histogram::with_bounds(&[0.001, 0.01]);
/// latency.observe(0.0005);
/// latency.observe(0.02);
/// assert_eq!(latency.counts.as_slice(), &[1, 0, 1]);
/// assert_eq!(latency.count(), 2);
/// ```
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Upper bounds of the buckets, ascending, in seconds.
    pub bounds_seconds: RVec<f64>,
    /// Observations per bucket; `bounds_seconds.len() + 1` entries.
    pub counts: RVec<u64>,
    /// Sum of all observations, in seconds.
    pub sum_seconds: f64,
}

impl Histogram {
    /// An empty histogram with these ascending upper bounds.
    pub fn with_bounds(bounds_seconds: &[f64]) -> Self {
        Self {
            bounds_seconds: bounds_seconds.iter().copied().collect(),
            counts: std::iter::repeat_n(0, bounds_seconds.len() + 1).collect(),
            sum_seconds: 0.0,
        }
    }

    /// Record one observation.
    pub fn observe(&mut self, seconds: f64) {
        let bucket = self
            .bounds_seconds
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(self.bounds_seconds.len());
        if let Some(count) = self.counts.get_mut(bucket) {
            *count += 1;
        }
        self.sum_seconds += seconds;
    }

    /// How many observations in total.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}
