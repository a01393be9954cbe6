//! Rendering a [`MetricsSnapshot`] in the Prometheus text exposition format
//! (version 0.0.4).

use std::fmt::Write;

use crate::{ConsumerMetrics, MetricsSnapshot};

/// The prefix of every metric name.
pub const METRIC_PREFIX: &str = "weir_dispatcher_";

/// Reads one sample value of a consumer.
type Sample = fn(&ConsumerMetrics) -> f64;

impl MetricsSnapshot {
    /// The snapshot in the Prometheus text format, one series per consumer
    /// (label `consumer`).
    ///
    /// ```
    /// use weir_dispatchers::ConsumerId;
    /// use weir_plugin_host::{ConsumerMetrics, Histogram, MetricsSnapshot};
    ///
    /// let snapshot = MetricsSnapshot { consumers: vec![ConsumerMetrics {
    ///     consumer: ConsumerId(7), subscriptions: 1, cancellations: 0, demand_asked: 10,
    ///     demand_asked_per_second: 2.5, events_dispatched: 4, outstanding_demand: 6,
    ///     fulfilment_latency: Histogram { bounds_seconds: vec![0.001], counts: vec![1, 0], sum_seconds: 0.0005 },
    /// }]};
    /// let text = snapshot.to_prometheus_with_labels(&[("producer", "numbers")]);
    /// assert!(text.contains("# TYPE weir_dispatcher_events_dispatched_total counter\n"));
    /// assert!(text.contains("weir_dispatcher_events_dispatched_total{producer=\"numbers\",consumer=\"7\"} 4\n"));
    /// assert!(text.contains("weir_dispatcher_fulfilment_latency_seconds_bucket{producer=\"numbers\",consumer=\"7\",le=\"+Inf\"} 1\n"));
    /// ```
    pub fn to_prometheus(&self) -> String {
        self.to_prometheus_with_labels(&[])
    }

    /// The snapshot in the Prometheus text format, with `labels` added to
    /// every series (e.g. `[("producer", "numbers")]`). Label names are
    /// sanitised to `[a-zA-Z_][a-zA-Z0-9_]*`; values are escaped.
    pub fn to_prometheus_with_labels(&self, labels: &[(&str, &str)]) -> String {
        let base: String = labels
            .iter()
            .map(|(name, value)| format!("{}=\"{}\",", label_name(name), escape(value)))
            .collect();
        let mut text = String::new();
        let counters: [(&str, &str, Sample); 4] = [
            (
                "subscriptions_total",
                "Subscriptions made by the consumer.",
                |c| c.subscriptions as f64,
            ),
            (
                "cancellations_total",
                "Subscriptions of the consumer that ended.",
                |c| c.cancellations as f64,
            ),
            (
                "demand_asked_total",
                "Events the consumer asked for.",
                |c| c.demand_asked as f64,
            ),
            (
                "events_dispatched_total",
                "Events dispatched to the consumer.",
                |c| c.events_dispatched as f64,
            ),
        ];
        for (name, help, value) in counters {
            self.family(&mut text, &base, name, help, "counter", value);
        }
        let gauges: [(&str, &str, Sample); 2] = [
            (
                "demand_asked_per_second",
                "Events the consumer asked for per second since the previous snapshot.",
                |c| c.demand_asked_per_second,
            ),
            (
                "outstanding_demand",
                "Events the consumer asked for and has not received yet.",
                |c| c.outstanding_demand as f64,
            ),
        ];
        for (name, help, value) in gauges {
            self.family(&mut text, &base, name, help, "gauge", value);
        }
        self.latency(&mut text, &base);
        text
    }

    fn family(
        &self,
        text: &mut String,
        base: &str,
        name: &str,
        help: &str,
        kind: &str,
        value: Sample,
    ) {
        let _ = writeln!(text, "# HELP {METRIC_PREFIX}{name} {help}");
        let _ = writeln!(text, "# TYPE {METRIC_PREFIX}{name} {kind}");
        for consumer in &self.consumers {
            let _ = writeln!(
                text,
                "{METRIC_PREFIX}{name}{{{base}consumer=\"{}\"}} {}",
                consumer.consumer.0,
                number(value(consumer))
            );
        }
    }

    fn latency(&self, text: &mut String, base: &str) {
        let name = "fulfilment_latency_seconds";
        let _ = writeln!(
            text,
            "# HELP {METRIC_PREFIX}{name} Time from an ask to the dispatch of the last event it asked for."
        );
        let _ = writeln!(text, "# TYPE {METRIC_PREFIX}{name} histogram");
        for consumer in &self.consumers {
            let histogram = &consumer.fulfilment_latency;
            let labels = format!("{base}consumer=\"{}\"", consumer.consumer.0);
            let cumulative = histogram.cumulative();
            let bounds = histogram
                .bounds_seconds
                .iter()
                .map(|bound| number(*bound))
                .chain(std::iter::once("+Inf".to_owned()));
            for (bound, count) in bounds.zip(&cumulative) {
                let _ = writeln!(
                    text,
                    "{METRIC_PREFIX}{name}_bucket{{{labels},le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                text,
                "{METRIC_PREFIX}{name}_sum{{{labels}}} {}",
                number(histogram.sum_seconds)
            );
            let _ = writeln!(
                text,
                "{METRIC_PREFIX}{name}_count{{{labels}}} {}",
                histogram.count()
            );
        }
    }
}

/// A sample value as Prometheus writes it.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value == f64::INFINITY {
        "+Inf".to_owned()
    } else if value == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        format!("{value}")
    }
}

/// Escape a label value: backslash, double quote and line feed.
fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Make a valid label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
fn label_name(name: &str) -> String {
    let mut sanitised: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if sanitised.is_empty() || sanitised.starts_with(|c: char| c.is_ascii_digit()) {
        sanitised.insert(0, '_');
    }
    sanitised
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Histogram;
    use weir_dispatchers::ConsumerId;

    fn consumer(id: u64) -> ConsumerMetrics {
        ConsumerMetrics {
            consumer: ConsumerId(id),
            subscriptions: 2,
            cancellations: 1,
            demand_asked: 30,
            demand_asked_per_second: 1.5,
            events_dispatched: 25,
            outstanding_demand: 5,
            fulfilment_latency: Histogram {
                bounds_seconds: vec![0.0001, 0.01],
                counts: vec![3, 1, 2],
                sum_seconds: 0.25,
            },
        }
    }

    #[test]
    fn every_family_has_help_type_and_one_series_per_consumer() {
        let text = MetricsSnapshot {
            consumers: vec![consumer(1), consumer(2)],
        }
        .to_prometheus();
        for (family, kind) in [
            ("subscriptions_total", "counter"),
            ("cancellations_total", "counter"),
            ("demand_asked_total", "counter"),
            ("events_dispatched_total", "counter"),
            ("demand_asked_per_second", "gauge"),
            ("outstanding_demand", "gauge"),
            ("fulfilment_latency_seconds", "histogram"),
        ] {
            assert!(
                text.contains(&format!("# HELP weir_dispatcher_{family} ")),
                "{family}"
            );
            assert!(
                text.contains(&format!("# TYPE weir_dispatcher_{family} {kind}\n")),
                "{family}"
            );
        }
        assert!(text.contains("weir_dispatcher_demand_asked_per_second{consumer=\"2\"} 1.5\n"));
        assert!(text.contains("weir_dispatcher_outstanding_demand{consumer=\"1\"} 5\n"));
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_with_inf_equal_to_count() {
        let text = MetricsSnapshot {
            consumers: vec![consumer(1)],
        }
        .to_prometheus();
        let expected = "\
weir_dispatcher_fulfilment_latency_seconds_bucket{consumer=\"1\",le=\"0.0001\"} 3
weir_dispatcher_fulfilment_latency_seconds_bucket{consumer=\"1\",le=\"0.01\"} 4
weir_dispatcher_fulfilment_latency_seconds_bucket{consumer=\"1\",le=\"+Inf\"} 6
weir_dispatcher_fulfilment_latency_seconds_sum{consumer=\"1\"} 0.25
weir_dispatcher_fulfilment_latency_seconds_count{consumer=\"1\"} 6
";
        assert!(text.ends_with(expected), "{text}");
    }

    #[test]
    fn label_values_are_escaped_and_names_sanitised() {
        let text = MetricsSnapshot {
            consumers: vec![consumer(1)],
        }
        .to_prometheus_with_labels(&[("pro-ducer", "a\"b\\c\nd"), ("1x", "v")]);
        assert!(
            text.contains("{pro_ducer=\"a\\\"b\\\\c\\nd\",_1x=\"v\",consumer=\"1\"}"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_snapshot_still_declares_its_families() {
        let text = MetricsSnapshot::default().to_prometheus();
        assert_eq!(text.lines().count(), 14);
        assert!(text.lines().all(|line| line.starts_with('#')));
    }
}
