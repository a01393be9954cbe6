//! What a plugin author implements, and the function that exports it.

use std::sync::Arc;

use abi_stable::prefix_type::PrefixTypeTrait;

use crate::guard::new_dispatcher;
use crate::{
    CallError, Decision, DispatcherModule, DispatcherModuleRef, InfoId, MetricsSnapshot,
    PluginInfo, SubscribeRequest, SubscriptionId,
};

/// A dispatcher plugin, in plain Rust.
///
/// This is GenStage's dispatcher behaviour without the events: the host keeps
/// every event and only tells the plugin how many there are (and, if
/// [`needs_keys`](Self::needs_keys), one 64-bit key per event). The plugin
/// answers each call by filling a [`Decision`]: runs of events per
/// subscription, upstream demand, warnings, released infos.
///
/// A panic in any method is caught inside the plugin and reaches the host as
/// [`CallError::Panicked`]; the instance takes no further calls.
///
/// # Example
///
/// A dispatcher that sends every batch to the subscription with the most
/// demand, as far as that demand goes:
///
/// ```
/// use std::collections::BTreeMap;
/// use weir_plugin_interface::{CallError, Decision, DispatcherPlugin, SubscribeRequest, SubscriptionId};
///
/// #[derive(Default)]
/// struct Greedy { demand: BTreeMap<SubscriptionId, u64> }
///
/// impl DispatcherPlugin for Greedy {
///     fn from_options(_options: &str) -> Result<Self, CallError> {
///         Ok(Greedy::default())
///     }
///     fn subscribe(&mut self, request: &SubscribeRequest, _out: &mut Decision) -> Result<(), CallError> {
///         self.demand.insert(request.subscription, 0);
///         Ok(())
///     }
///     fn cancel(&mut self, subscription: SubscriptionId, _out: &mut Decision) {
///         self.demand.remove(&subscription);
///     }
///     fn ask(&mut self, subscription: SubscriptionId, n: u64, out: &mut Decision) {
///         if let Some(demand) = self.demand.get_mut(&subscription) {
///             *demand += n;
///             out.ask_upstream(n);
///         }
///     }
///     fn dispatch(&mut self, count: u64, _keys: &[u64], out: &mut Decision) {
///         if let Some((subscription, demand)) = self.demand.iter_mut().max_by_key(|(_, d)| **d) {
///             let sent = count.min(*demand);
///             *demand -= sent;
///             out.send(*subscription, sent);
///         }
///     }
/// }
///
/// let mut greedy = Greedy::from_options("{}").unwrap();
/// let mut out = Decision::default();
/// let request = SubscribeRequest::new(SubscriptionId(1), weir_plugin_interface::ConsumerId(1), 10, 5);
/// greedy.subscribe(&request, &mut out).unwrap();
/// greedy.ask(SubscriptionId(1), 3, &mut out);
/// greedy.dispatch(5, &[], &mut out);
/// assert_eq!(out.routed(), 3); // the other 2 events are leftover
/// ```
pub trait DispatcherPlugin: Send + Sized + 'static {
    /// Build an instance from the dispatcher options, a JSON value (`{}` when
    /// the host gave none).
    fn from_options(options: &str) -> Result<Self, CallError>;

    /// Whether [`dispatch`](Self::dispatch) needs one key per event. Asked
    /// once, right after [`from_options`](Self::from_options).
    fn needs_keys(&self) -> bool {
        false
    }

    /// A source of metrics the host can read from any thread, if this
    /// dispatcher keeps any. Asked once, right after
    /// [`from_options`](Self::from_options).
    fn metrics(&self) -> Option<Arc<dyn MetricsSource>> {
        None
    }

    /// A consumer subscribes. Push upstream demand into `out` if any, or
    /// refuse with [`CallError::Refused`] or [`CallError::InvalidOption`].
    fn subscribe(
        &mut self,
        request: &SubscribeRequest,
        out: &mut Decision,
    ) -> Result<(), CallError>;

    /// A subscription ended (unknown subscriptions must be ignored).
    fn cancel(&mut self, subscription: SubscriptionId, out: &mut Decision);

    /// The consumer of `subscription` asks for `n` more events (unknown
    /// subscriptions must be ignored).
    fn ask(&mut self, subscription: SubscriptionId, n: u64, out: &mut Decision);

    /// Route `count` events, in order, with [`Decision::send`] and
    /// [`Decision::keep`]; events not covered are leftover. Never send a
    /// subscription more than it asked for: the host checks and treats that
    /// as a broken plugin.
    fn dispatch(&mut self, count: u64, keys: &[u64], out: &mut Decision);

    /// An info message reached the front of the producer's buffer. The default
    /// releases it at once (the plugin holds no events of its own).
    fn info(&mut self, info: InfoId, out: &mut Decision) {
        out.release(info);
    }
}

/// Metrics a plugin keeps, readable from any thread while it dispatches.
pub trait MetricsSource: Send + Sync + 'static {
    /// A snapshot of the metrics now.
    fn snapshot(&self) -> MetricsSnapshot;
}

/// The root module for the plugin `D`: export it from the plugin's `cdylib`.
///
/// ```
/// use weir_plugin_interface::{CallError, Decision, DispatcherModuleRef, DispatcherPlugin, PluginInfo,
///                        SubscribeRequest, SubscriptionId};
///
/// struct KeepAll;
/// impl DispatcherPlugin for KeepAll {
///     fn from_options(_: &str) -> Result<Self, CallError> { Ok(KeepAll) }
///     fn subscribe(&mut self, _: &SubscribeRequest, _: &mut Decision) -> Result<(), CallError> { Ok(()) }
///     fn cancel(&mut self, _: SubscriptionId, _: &mut Decision) {}
///     fn ask(&mut self, _: SubscriptionId, _: u64, _: &mut Decision) {}
///     fn dispatch(&mut self, _: u64, _: &[u64], _: &mut Decision) {}
/// }
///
/// // In the plugin crate (crate-type = ["cdylib"]):
/// #[abi_stable::export_root_module]
/// pub fn root() -> DispatcherModuleRef {
///     weir_plugin_interface::root_module::<KeepAll>(PluginInfo::new(
///         "keep-all",
///         env!("CARGO_PKG_VERSION"),
///         "Keeps every event on the host",
///     ))
/// }
/// # assert_eq!(root().info().name.as_str(), "keep-all");
/// ```
pub fn root_module<D: DispatcherPlugin>(info: PluginInfo) -> DispatcherModuleRef {
    DispatcherModule {
        info,
        new_dispatcher: new_dispatcher::<D>,
    }
    .leak_into_prefix()
}
