//! Reading a plugin's metrics on the host side.

use std::fmt;
use std::sync::Arc;

use abi_stable::std_types::RResult;
use weir_dispatchers::ConsumerId;
use weir_plugin_interface::{CallError, MetricsReaderObject};

use crate::{PluginError, PluginIdentity};

/// Reads a plugin dispatcher's metrics from any thread while a producer runs
/// it. Cheap to clone.
#[derive(Clone)]
pub struct MetricsHandle {
    plugin: Arc<PluginIdentity>,
    reader: Arc<MetricsReaderObject>,
}

impl fmt::Debug for MetricsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsHandle")
            .field("plugin", &self.plugin.name)
            .finish_non_exhaustive()
    }
}

impl MetricsHandle {
    pub(crate) fn new(plugin: Arc<PluginIdentity>, reader: MetricsReaderObject) -> Self {
        Self {
            plugin,
            reader: Arc::new(reader),
        }
    }

    /// A snapshot of the metrics now, read through the ABI. Demand rates are
    /// measured since the previous snapshot taken through any clone of this
    /// handle.
    pub fn snapshot(&self) -> Result<MetricsSnapshot, PluginError> {
        match self.reader.snapshot() {
            RResult::ROk(snapshot) => Ok(MetricsSnapshot::from_ffi(snapshot)),
            RResult::RErr(CallError::Panicked { message } | CallError::Poisoned { message }) => {
                Err(PluginError::Panicked {
                    plugin: self.plugin.name.clone(),
                    operation: "metrics snapshot",
                    message: message.into_string(),
                })
            }
            RResult::RErr(other) => Err(PluginError::ProtocolViolation {
                plugin: self.plugin.name.clone(),
                operation: "metrics snapshot",
                detail: other.to_string(),
            }),
        }
    }
}

/// A plugin's per-consumer metrics at one point in time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// One entry per consumer that ever subscribed, in consumer order.
    pub consumers: Vec<ConsumerMetrics>,
}

/// What a dispatcher saw of one consumer, summed over its subscriptions.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerMetrics {
    /// The consumer.
    pub consumer: ConsumerId,
    /// Subscriptions it made.
    pub subscriptions: u64,
    /// Subscriptions of it that ended.
    pub cancellations: u64,
    /// Events it asked for.
    pub demand_asked: u64,
    /// Events it asked for per second since the previous snapshot (since it
    /// first subscribed, for the first snapshot).
    pub demand_asked_per_second: f64,
    /// Events dispatched to it.
    pub events_dispatched: u64,
    /// Demand asked and not served yet.
    pub outstanding_demand: u64,
    /// Time from an ask to the dispatch of the last event it asked for.
    pub fulfilment_latency: Histogram,
}

/// A latency histogram: per-bucket (not cumulative) counts for each upper
/// bound, plus one for `+Inf`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Upper bounds, ascending, in seconds.
    pub bounds_seconds: Vec<f64>,
    /// Observations per bucket; one more entry than `bounds_seconds`.
    pub counts: Vec<u64>,
    /// Sum of all observations, in seconds.
    pub sum_seconds: f64,
}

impl Histogram {
    /// Observations in total.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Cumulative counts per upper bound, the last one for `+Inf` (the
    /// Prometheus `_bucket` series).
    ///
    /// ```
    /// let h = weir_plugin_host::Histogram { bounds_seconds: vec![0.1, 1.0], counts: vec![2, 0, 1], sum_seconds: 2.5 };
    /// assert_eq!(h.cumulative(), vec![2, 2, 3]);
    /// ```
    pub fn cumulative(&self) -> Vec<u64> {
        self.counts
            .iter()
            .scan(0u64, |total, count| {
                *total += count;
                Some(*total)
            })
            .collect()
    }
}

impl MetricsSnapshot {
    fn from_ffi(snapshot: weir_plugin_interface::MetricsSnapshot) -> Self {
        Self {
            consumers: snapshot
                .consumers
                .into_iter()
                .map(|c| ConsumerMetrics {
                    consumer: ConsumerId(c.consumer.0),
                    subscriptions: c.subscriptions,
                    cancellations: c.cancellations,
                    demand_asked: c.demand_asked,
                    demand_asked_per_second: c.demand_asked_per_second,
                    events_dispatched: c.events_dispatched,
                    outstanding_demand: c.outstanding_demand,
                    fulfilment_latency: Histogram {
                        bounds_seconds: c.fulfilment_latency.bounds_seconds.into_vec(),
                        counts: c.fulfilment_latency.counts.into_vec(),
                        sum_seconds: c.fulfilment_latency.sum_seconds,
                    },
                })
                .collect(),
        }
    }

    /// The metrics of `consumer`, if it ever subscribed.
    pub fn consumer(&self, consumer: ConsumerId) -> Option<&ConsumerMetrics> {
        self.consumers.iter().find(|c| c.consumer == consumer)
    }
}
