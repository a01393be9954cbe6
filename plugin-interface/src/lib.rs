#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! The stable-ABI interface between Weir and dispatcher plugins.
//!
//! A dispatcher plugin is a `cdylib`, built separately (possibly with another
//! compiler version), that a Weir producer loads from a file at run time, the
//! way an Elixir user swaps a producer's dispatcher module. This crate is the
//! only thing a plugin and the host (`plugin-host`) share. It is built with
//! [`abi_stable`], which checks at load time that both sides agree on the
//! layout of every type that crosses.
//!
//! **Events never cross the ABI.** The host keeps them, typed and unmoved;
//! the plugin sees subscription and consumer ids, counts, demand, options (as
//! JSON) and, if it asks for them, one 64-bit key per event computed by a
//! host-side key function. It answers each call with a [`Decision`]: runs of
//! consecutive events per subscription, upstream demand, warnings, released
//! info messages. The host then moves the events accordingly.
//!
//! What is here:
//! - [`DispatcherPlugin`]: the plain Rust trait a plugin implements, and
//!   [`root_module`], which wraps it in a [`DispatcherModule`] to export with
//!   `#[abi_stable::export_root_module]`.
//! - The FFI-safe types: [`SubscriptionId`], [`ConsumerId`], [`InfoId`],
//!   [`SubscribeRequest`], [`Decision`]/[`Run`], [`PluginWarning`],
//!   [`CallError`], [`MetricsSnapshot`].
//! - The `#[sabi_trait]` objects the host calls: [`FfiDispatcher`] and
//!   [`FfiMetricsReader`]. The glue behind them runs every plugin callback
//!   under `catch_unwind`: a panic becomes [`CallError::Panicked`] and
//!   poisons that instance, instead of unwinding across the ABI.
//! - [`INTERFACE_VERSION`] and its versioning rules.
//!
//! # Example
//!
//! A plugin that sends every batch to the first subscription, as far as its
//! demand goes, driven here in-process through the same FFI object the host
//! gets from a loaded library:
//!
//! ```
//! use weir_plugin_interface::{CallError, ConsumerId, Decision, DispatcherModuleRef, DispatcherPlugin,
//!                        PluginInfo, SubscribeRequest, SubscriptionId};
//! use abi_stable::std_types::{RSlice, RStr};
//!
//! #[derive(Default)]
//! struct First { subscriptions: Vec<(SubscriptionId, u64)> }
//!
//! impl DispatcherPlugin for First {
//!     fn from_options(_options: &str) -> Result<Self, CallError> { Ok(First::default()) }
//!     fn subscribe(&mut self, r: &SubscribeRequest, _: &mut Decision) -> Result<(), CallError> {
//!         self.subscriptions.push((r.subscription, 0));
//!         Ok(())
//!     }
//!     fn cancel(&mut self, s: SubscriptionId, _: &mut Decision) {
//!         self.subscriptions.retain(|(id, _)| *id != s);
//!     }
//!     fn ask(&mut self, s: SubscriptionId, n: u64, out: &mut Decision) {
//!         if let Some((_, demand)) = self.subscriptions.iter_mut().find(|(id, _)| *id == s) {
//!             *demand += n;
//!             out.ask_upstream(n);
//!         }
//!     }
//!     fn dispatch(&mut self, count: u64, _keys: &[u64], out: &mut Decision) {
//!         if let Some((id, demand)) = self.subscriptions.first_mut() {
//!             let sent = count.min(*demand);
//!             *demand -= sent;
//!             out.send(*id, sent);
//!         }
//!     }
//! }
//!
//! // What the plugin's cdylib exports:
//! #[abi_stable::export_root_module]
//! pub fn root() -> DispatcherModuleRef {
//!     weir_plugin_interface::root_module::<First>(PluginInfo::new("first", "0.1.0", "All to the first"))
//! }
//!
//! // What the host does with it (weir_plugin_host::load wraps all of this):
//! let module = root();
//! let mut created = (module.new_dispatcher())(RStr::from("{}")).unwrap();
//! let mut out = Decision::default();
//! let request = SubscribeRequest::new(SubscriptionId(1), ConsumerId(1), 10, 5);
//! created.dispatcher.subscribe(&request, &mut out).unwrap();
//! out.clear();
//! created.dispatcher.ask(SubscriptionId(1), 4, &mut out).unwrap();
//! assert_eq!(out.upstream_demand, 4);
//! out.clear();
//! created.dispatcher.dispatch(6, RSlice::from_slice(&[]), &mut out).unwrap();
//! assert_eq!(out.routed(), 4); // 4 events to subscription 1, 2 left over
//! ```

pub use abi_stable;

mod decision;
mod error;
mod guard;
mod ids;
mod metrics;
mod module;
mod object;
mod plugin;
mod request;

pub use decision::{Decision, PluginWarning, Run};
pub use error::CallError;
pub use ids::{ConsumerId, InfoId, SubscriptionId};
pub use metrics::{ConsumerMetrics, Histogram, MetricsSnapshot};
pub use module::{
    DispatcherModule, DispatcherModuleRef, INTERFACE_VERSION, NewDispatcher, PluginInfo,
};
pub use object::{
    DispatcherObject, FfiDispatcher, FfiDispatcher_TO, FfiMetricsReader, FfiMetricsReader_TO,
    MetricsReaderObject,
};
pub use plugin::{DispatcherPlugin, MetricsSource, root_module};
pub use request::SubscribeRequest;
