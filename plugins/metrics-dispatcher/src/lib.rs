//! `metrics-dispatcher`: a Weir dispatcher plugin that dispatches exactly
//! like GenStage's Demand dispatcher and records per-consumer metrics.
//!
//! Built as a `cdylib` (`libmetrics_dispatcher.so`), it is loaded at run time
//! by `weir_plugin_host::load` and used wherever a built-in dispatcher is. The host
//! reads a [`MetricsSnapshot`](weir_plugin_interface::MetricsSnapshot) through the
//! ABI at any time and can render it in the Prometheus text format. Per
//! consumer it records:
//!
//! - subscriptions and cancellations,
//! - demand asked, total and per second (since the previous snapshot),
//! - events dispatched and outstanding demand,
//! - a histogram of the time from each ask to the dispatch of the last event
//!   it asked for.
//!
//! The rlib of this crate exists for its own tests; hosts load the `.so`.
//!
//! # Example
//!
//! A host loads the built library with `weir_plugin_host::load` (see that crate).
//! In-process, the exported root module describes the plugin:
//!
//! ```
//! let module = metrics_dispatcher::root_module();
//! assert_eq!(module.info().name.as_str(), "metrics");
//! assert!(module.info().panic_unwind);
//! ```

mod clock;
mod demand;
mod dispatcher;
mod metrics;
mod options;
mod shuffle;

pub use dispatcher::MetricsDispatcher;
use weir_plugin_interface::{DispatcherModuleRef, PluginInfo};

/// The root module this library exports.
#[abi_stable::export_root_module]
pub fn root_module() -> DispatcherModuleRef {
    weir_plugin_interface::root_module::<MetricsDispatcher>(PluginInfo::new(
        "metrics",
        env!("CARGO_PKG_VERSION"),
        "GenStage's Demand dispatcher, recording per-consumer metrics",
    ))
}
