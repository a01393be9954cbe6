//! Everything that can go wrong loading or running a dispatcher plugin.

use std::path::PathBuf;

/// Why a plugin could not be loaded, created or called.
///
/// None of these takes the host down: a library that is missing, is not a
/// plugin, or was built against another interface is refused before any of
/// its code runs (apart from its static initialisers), and a plugin callback
/// that panics is caught inside the plugin and reported here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// No file at that path.
    #[error(
        "no dispatcher plugin at {path}: the file does not exist (build it with `cargo xtask build`)"
    )]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The file exists but the dynamic loader refused it (not a shared
    /// library, wrong architecture, missing dependency, ...).
    #[error("could not open {path} as a shared library: {reason}")]
    OpenFailed {
        /// The path given.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// A shared library without a dispatcher plugin root module.
    #[error(
        "{path} is a shared library but not a Weir dispatcher plugin (it exports no abi_stable root module: {reason})"
    )]
    NotAPlugin {
        /// The path given.
        path: PathBuf,
        /// What was missing.
        reason: String,
    },
    /// The plugin was built against another major version of the plugin
    /// interface.
    #[error(
        "{path} was built against dispatcher plugin interface {found}, but this host speaks interface {expected}; \
         rebuild the plugin against plugin-interface {expected} (versions are compatible only within one major version)"
    )]
    IncompatibleInterface {
        /// The path given.
        path: PathBuf,
        /// The interface version of this host.
        expected: String,
        /// The interface version the plugin was built against.
        found: String,
    },
    /// The plugin declares a compatible interface version, but the types it
    /// exports do not have the layout this host expects.
    #[error(
        "{path} declares a compatible interface version but its types have another layout:\n{details}"
    )]
    LayoutMismatch {
        /// The path given.
        path: PathBuf,
        /// abi_stable's report of what differs.
        details: String,
    },
    /// The plugin was built with another (incompatible) `abi_stable` or Rust
    /// C ABI.
    #[error("{path} was built with an incompatible abi_stable or C ABI: {details}")]
    IncompatibleAbiStable {
        /// The path given.
        path: PathBuf,
        /// What differs.
        details: String,
    },
    /// The plugin's root module could not be initialised.
    #[error("the root module of {path} failed to initialise: {reason}")]
    RootModuleFailed {
        /// The path given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The plugin was built with `panic = "abort"`: any panic in it would
    /// abort the host, so it is refused.
    #[error(
        "plugin `{plugin}` ({path}) was built with panic = \"abort\"; dispatcher plugins must be built with panic = \"unwind\""
    )]
    PanicStrategyAbort {
        /// The path given.
        path: PathBuf,
        /// The plugin's name.
        plugin: String,
    },
    /// The plugin refused its dispatcher options.
    #[error("plugin `{plugin}` refused option `{option}`: {reason}")]
    InvalidOptions {
        /// The plugin's name.
        plugin: String,
        /// The option.
        option: String,
        /// Why.
        reason: String,
    },
    /// The plugin routes by event key, but no key function was given.
    #[error("plugin `{plugin}` routes events by key: create it with `dispatcher_with_key`")]
    KeyFunctionRequired {
        /// The plugin's name.
        plugin: String,
    },
    /// A plugin callback panicked. The panic was caught inside the plugin; the
    /// dispatcher is poisoned and takes no further calls.
    #[error("plugin `{plugin}` panicked in `{operation}`: {message}")]
    Panicked {
        /// The plugin's name.
        plugin: String,
        /// The callback (`subscribe`, `ask`, `dispatch`, ...).
        operation: &'static str,
        /// The panic message.
        message: String,
    },
    /// The dispatcher was poisoned by an earlier fault and takes no calls.
    #[error("plugin `{plugin}` is poisoned by an earlier fault: {message}")]
    Poisoned {
        /// The plugin's name.
        plugin: String,
        /// The earlier fault.
        message: String,
    },
    /// The plugin answered something the dispatcher contract forbids (more
    /// events than a consumer asked for, events to an unknown subscription,
    /// more events than the batch holds, ...). The dispatcher is poisoned.
    #[error("plugin `{plugin}` broke the dispatcher contract in `{operation}`: {detail}")]
    ProtocolViolation {
        /// The plugin's name.
        plugin: String,
        /// The callback.
        operation: &'static str,
        /// What was wrong.
        detail: String,
    },
}
