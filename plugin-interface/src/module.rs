//! The root module a plugin library exports, and its interface version.

use abi_stable::StableAbi;
use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{ROption, RResult, RStr};

use crate::{CallError, DispatcherObject, MetricsReaderObject};

/// The version of this interface, checked by the host when it loads a plugin.
///
/// Versioning rules (semver on the ABI, not on the crate):
/// - **major** changes when the layout of anything that crosses the ABI
///   changes incompatibly (a field or method removed, retyped or reordered, a
///   variant added to an FFI enum). Hosts refuse plugins of another major.
/// - **minor** changes when a method is appended after the last prefix field
///   of [`FfiDispatcher`](crate::FfiDispatcher) or a field after the last
///   prefix field of [`DispatcherModule`]: older plugins still load (the host
///   sees the new items as absent), newer plugins load in older hosts.
/// - **patch** changes for anything that does not touch the ABI.
pub const INTERFACE_VERSION: &str = "1.0.0";

/// Who a plugin is, for logs and errors.
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug, PartialEq, Eq)]
pub struct PluginInfo {
    /// A short name, e.g. `"metrics"`.
    pub name: RStr<'static>,
    /// The plugin crate's own version.
    pub version: RStr<'static>,
    /// One line about what it does.
    pub description: RStr<'static>,
    /// Whether the plugin was built with `panic = "unwind"`. A plugin built
    /// with `panic = "abort"` would take the host down on any panic, so hosts
    /// refuse it.
    pub panic_unwind: bool,
}

impl PluginInfo {
    /// Describe a plugin. `panic_unwind` is filled in from the build of this
    /// crate inside the plugin.
    ///
    /// ```
    /// use weir_plugin_interface::PluginInfo;
    ///
    /// let info = PluginInfo::new("metrics", "0.1.0", "Demand dispatching with metrics");
    /// assert_eq!(info.name.as_str(), "metrics");
    /// ```
    pub const fn new(name: &'static str, version: &'static str, description: &'static str) -> Self {
        Self {
            name: RStr::from_str(name),
            version: RStr::from_str(version),
            description: RStr::from_str(description),
            panic_unwind: cfg!(panic = "unwind"),
        }
    }
}

/// A new dispatcher instance, with what the host needs to drive it.
#[repr(C)]
#[derive(StableAbi)]
pub struct NewDispatcher {
    /// The instance.
    pub dispatcher: DispatcherObject,
    /// Whether `dispatch` needs one key per event (the host then runs its
    /// key function over every batch).
    pub needs_keys: bool,
    /// A reader for the instance's metrics, if it keeps any.
    pub metrics: ROption<MetricsReaderObject>,
}

/// The root module of a dispatcher plugin library.
///
/// Plugins build it with [`root_module`](crate::root_module) and export it
/// with `#[abi_stable::export_root_module]`; hosts load it with
/// `weir_plugin_host::load`.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = DispatcherModuleRef)))]
pub struct DispatcherModule {
    /// Who the plugin is.
    pub info: PluginInfo,
    /// Create a dispatcher from the dispatcher options (a JSON value).
    #[sabi(last_prefix_field)]
    pub new_dispatcher: extern "C" fn(options: RStr<'_>) -> RResult<NewDispatcher, CallError>,
}

impl RootModule for DispatcherModuleRef {
    abi_stable::declare_root_module_statics! {DispatcherModuleRef}
    const BASE_NAME: &'static str = "weir_dispatcher_plugin";
    const NAME: &'static str = "weir dispatcher plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new(INTERFACE_VERSION);
}

impl std::fmt::Debug for NewDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewDispatcher")
            .field("needs_keys", &self.needs_keys)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for DispatcherModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatcherModule")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}
