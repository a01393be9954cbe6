//! `key-affinity-dispatcher`: a Weir dispatcher plugin that routes by key on
//! a consistent-hash ring, so that events with the same key always reach the
//! same consumer (a session, an account, a partition of a topic) while
//! consumers come and go with minimal reshuffling.
//!
//! It shows the part of the plugin interface the Demand-like
//! `metrics-dispatcher` does not use: per-event 64-bit keys computed by a
//! host-side key function, and routing runs that interleave subscriptions
//! and kept (leftover) events. See [`KeyAffinityDispatcher`] for the exact
//! behaviour and options.
//!
//! Built as a `cdylib` (`libkey_affinity_dispatcher.so`) and loaded with
//! `weir_plugin_host::load`; create dispatchers with
//! `PluginDispatcherFactory::dispatcher_with_key` since it routes by key.
//!
//! # Example
//!
//! ```
//! let module = key_affinity_dispatcher::root_module();
//! assert_eq!(module.info().name.as_str(), "key-affinity");
//! ```

mod dispatcher;
mod ring;

pub use dispatcher::{DEFAULT_VIRTUAL_NODES, KeyAffinityDispatcher};
use weir_plugin_interface::{DispatcherModuleRef, PluginInfo};

/// The root module this library exports.
#[abi_stable::export_root_module]
pub fn root_module() -> DispatcherModuleRef {
    weir_plugin_interface::root_module::<KeyAffinityDispatcher>(PluginInfo::new(
        "key-affinity",
        env!("CARGO_PKG_VERSION"),
        "Consistent-hash key affinity: the same key always reaches the same consumer",
    ))
}
