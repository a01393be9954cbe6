#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! The host side of Weir's dispatcher plugins: load a plugin library at run
//! time and use it as a [`weir_dispatchers::Dispatcher<T>`].
//!
//! A dispatcher plugin is a `cdylib` built against `plugin-interface`
//! (possibly separately, with another compiler). [`load`] opens it, checks
//! its abi_stable layout and interface version, and returns a
//! [`PluginDispatcherFactory`]; each producer gets its own
//! [`PluginDispatcher<T>`] from it, usable wherever a built-in dispatcher is
//! (producer and producer_consumer options).
//!
//! Events never cross the ABI: the plugin sees counts, demand, options and
//! (if it routes by key) one 64-bit key per event from a host-side key
//! function, and answers with routing runs that the host checks and carries
//! out by moving the events. A plugin that panics is caught inside the
//! plugin; the host sees [`PluginError::Panicked`] and the dispatcher is
//! poisoned, never undefined behaviour.
//!
//! Plugins that keep metrics (such as `metrics-dispatcher`) expose them
//! through a [`MetricsHandle`]; [`MetricsSnapshot::to_prometheus`] renders
//! them in the Prometheus text format.
//!
//! # Example
//!
//! ```no_run
//! use weir_dispatchers::{ConsumerId, Dispatcher, Outbox, Subscriber, SubscriptionId, SubscriptionOptions};
//!
//! // Built by `cargo xtask build` (or `cargo build -p weir-metrics-dispatcher`).
//! let factory = weir_plugin_host::load("target/debug/libmetrics_dispatcher.so", &serde_json::json!({}))?;
//! let mut dispatcher = factory.dispatcher::<u64>()?;
//! let metrics = dispatcher.metrics().expect("the metrics plugin keeps metrics");
//!
//! let mut out = Outbox::new();
//! let a = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
//! dispatcher.subscribe(a, &SubscriptionOptions::new(10, 5), &mut out).expect("accepted");
//! dispatcher.ask(a.subscription, 10, &mut out);
//! let leftover = dispatcher.dispatch((0..4).collect(), &mut out);
//! assert!(leftover.is_empty());
//!
//! print!("{}", metrics.snapshot()?.to_prometheus());
//! # Ok::<(), weir_plugin_host::PluginError>(())
//! ```

mod dispatcher;
mod error;
mod load;
mod metrics;
mod prometheus;
mod routing;

pub use dispatcher::{KeyFn, PluginDispatcher};
pub use error::PluginError;
pub use load::{PluginDispatcherFactory, PluginIdentity, load};
pub use metrics::{ConsumerMetrics, Histogram, MetricsHandle, MetricsSnapshot};
pub use prometheus::METRIC_PREFIX;
pub use weir_plugin_interface::INTERFACE_VERSION;
