//! Finding, checking and opening a plugin library.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::library::{LibraryError, RootModule, lib_header_from_path};
use abi_stable::std_types::{RResult, RStr};
use weir_plugin_interface::{CallError, DispatcherModuleRef, INTERFACE_VERSION, NewDispatcher};

use crate::{MetricsHandle, PluginDispatcher, PluginError};

/// Load the dispatcher plugin at `path` and check that it can be used with
/// `options` (its dispatcher options, any JSON value; `{}` for none).
///
/// Checks, in order: the file exists; it is a shared library; it exports an
/// abi_stable root module; that module was built against a compatible
/// [`INTERFACE_VERSION`] (same major) with the same type layouts; the plugin
/// was built with `panic = "unwind"`; and the plugin accepts `options` (one
/// instance is created and dropped). Each failure is a specific
/// [`PluginError`] naming the path and, for versions, both versions.
///
/// The library stays loaded for the rest of the process (plugins hand out
/// objects whose code lives in the library, so it is never unloaded).
///
/// # Example
///
/// ```no_run
/// use weir_dispatchers::{ConsumerId, Dispatcher, Outbox, Subscriber, SubscriptionId, SubscriptionOptions};
///
/// let factory = weir_plugin_host::load("target/debug/libmetrics_dispatcher.so", &serde_json::json!({}))?;
/// let mut dispatcher = factory.dispatcher::<u64>()?;
/// let mut out = Outbox::new();
/// let a = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
/// dispatcher.subscribe(a, &SubscriptionOptions::new(10, 5), &mut out).expect("accepted");
/// assert_eq!(dispatcher.ask(a.subscription, 10, &mut out), 10);
/// # Ok::<(), weir_plugin_host::PluginError>(())
/// ```
pub fn load(
    path: impl AsRef<Path>,
    options: &serde_json::Value,
) -> Result<PluginDispatcherFactory, PluginError> {
    let path = path.as_ref();
    let _span = tracing::info_span!("load_plugin", path = %path.display()).entered();
    match path.try_exists() {
        Ok(true) => {}
        Ok(false) => {
            return Err(PluginError::NotFound {
                path: path.to_path_buf(),
            });
        }
        Err(e) => {
            return Err(PluginError::OpenFailed {
                path: path.to_path_buf(),
                reason: e.to_string(),
            });
        }
    }
    let header = lib_header_from_path(path).map_err(|e| library_error(path, e))?;
    let found_version = header.version_strings().version.as_str().to_owned();
    let module = header
        .init_root_module::<DispatcherModuleRef>()
        .map_err(|e| library_error(path, e))?;
    let info = module.info();
    let plugin = PluginIdentity {
        name: info.name.as_str().to_owned(),
        version: info.version.as_str().to_owned(),
        description: info.description.as_str().to_owned(),
        interface_version: found_version,
        path: path.to_path_buf(),
    };
    if !info.panic_unwind {
        return Err(PluginError::PanicStrategyAbort {
            path: path.to_path_buf(),
            plugin: plugin.name,
        });
    }
    let factory = PluginDispatcherFactory {
        module,
        plugin: Arc::new(plugin),
        options: Arc::from(options.to_string()),
    };
    // Create one instance so that bad options fail here, not in a producer.
    drop(factory.create()?);
    tracing::info!(
        plugin = %factory.plugin.name,
        version = %factory.plugin.version,
        interface = %factory.plugin.interface_version,
        "loaded dispatcher plugin"
    );
    Ok(factory)
}

/// Map abi_stable's loading errors to ours.
fn library_error(path: &Path, error: LibraryError) -> PluginError {
    let path = path.to_path_buf();
    match error {
        LibraryError::OpenError { err, .. } => PluginError::OpenFailed {
            path,
            reason: err.to_string(),
        },
        LibraryError::GetSymbolError { err, .. } => PluginError::NotAPlugin {
            path,
            reason: err.to_string(),
        },
        LibraryError::ParseVersionError(e) => PluginError::NotAPlugin {
            path,
            reason: format!("its interface version is unreadable: {e}"),
        },
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => PluginError::IncompatibleInterface {
            path,
            expected: expected_version.to_string(),
            found: actual_version.to_string(),
        },
        LibraryError::RootModule { err, .. } => PluginError::RootModuleFailed {
            path,
            reason: err.to_string(),
        },
        LibraryError::AbiInstability(details) => PluginError::LayoutMismatch {
            path,
            details: details.to_string(),
        },
        LibraryError::InvalidAbiHeader(header) => PluginError::IncompatibleAbiStable {
            path,
            details: format!("{header:?}"),
        },
        LibraryError::InvalidCAbi { expected, found } => PluginError::IncompatibleAbiStable {
            path,
            details: format!("expected C ABI {expected}, found {found}"),
        },
        LibraryError::Many(errors) => match errors.into_iter().next() {
            Some(first) => library_error(&path, first),
            None => PluginError::NotAPlugin {
                path,
                reason: "abi_stable reported an empty list of errors".to_owned(),
            },
        },
    }
}

/// Who a loaded plugin is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginIdentity {
    /// Its short name (`"metrics"`).
    pub name: String,
    /// Its own crate version.
    pub version: String,
    /// One line about what it does.
    pub description: String,
    /// The interface version it was built against.
    pub interface_version: String,
    /// Where it was loaded from.
    pub path: PathBuf,
}

/// A loaded, checked plugin with its dispatcher options: makes one
/// [`PluginDispatcher`] per producer.
///
/// Cheap to clone and shareable between threads.
#[derive(Clone)]
pub struct PluginDispatcherFactory {
    module: DispatcherModuleRef,
    plugin: Arc<PluginIdentity>,
    options: Arc<str>,
}

impl fmt::Debug for PluginDispatcherFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginDispatcherFactory")
            .field("plugin", &self.plugin)
            .field("options", &self.options)
            .finish()
    }
}

impl PluginDispatcherFactory {
    /// Who the plugin is.
    pub fn plugin(&self) -> &PluginIdentity {
        &self.plugin
    }

    /// The interface version this host speaks.
    pub fn host_interface_version() -> &'static str {
        INTERFACE_VERSION
    }

    /// The name abi_stable knows the interface by.
    pub fn interface_name() -> &'static str {
        DispatcherModuleRef::NAME
    }

    /// A new dispatcher for a producer of `T`, for plugins that do not route
    /// by key. Fails with [`PluginError::KeyFunctionRequired`] for plugins
    /// that do.
    pub fn dispatcher<T>(&self) -> Result<PluginDispatcher<T>, PluginError> {
        let created = self.create()?;
        if created.needs_keys {
            return Err(PluginError::KeyFunctionRequired {
                plugin: self.plugin.name.clone(),
            });
        }
        Ok(self.wrap(created, None))
    }

    /// A new dispatcher for a producer of `T`; `key` gives each event the
    /// 64-bit key the plugin routes by (it is only called for plugins that
    /// ask for keys).
    pub fn dispatcher_with_key<T>(
        &self,
        key: impl Fn(&T) -> u64 + Send + Sync + 'static,
    ) -> Result<PluginDispatcher<T>, PluginError> {
        let created = self.create()?;
        Ok(self.wrap(created, Some(Arc::new(key))))
    }

    fn wrap<T>(&self, created: NewDispatcher, key: Option<crate::KeyFn<T>>) -> PluginDispatcher<T> {
        let NewDispatcher {
            dispatcher,
            needs_keys,
            metrics,
        } = created;
        let metrics = metrics
            .into_option()
            .map(|reader| MetricsHandle::new(self.plugin.clone(), reader));
        PluginDispatcher::new(
            self.plugin.clone(),
            dispatcher,
            if needs_keys { key } else { None },
            metrics,
        )
    }

    fn create(&self) -> Result<NewDispatcher, PluginError> {
        match (self.module.new_dispatcher())(RStr::from(&*self.options)) {
            RResult::ROk(created) => Ok(created),
            RResult::RErr(error) => Err(match error {
                CallError::InvalidOption { option, reason } => PluginError::InvalidOptions {
                    plugin: self.plugin.name.clone(),
                    option: option.into_string(),
                    reason: reason.into_string(),
                },
                CallError::Refused { reason } => PluginError::InvalidOptions {
                    plugin: self.plugin.name.clone(),
                    option: "options".to_owned(),
                    reason: reason.into_string(),
                },
                CallError::Panicked { message } | CallError::Poisoned { message } => {
                    PluginError::Panicked {
                        plugin: self.plugin.name.clone(),
                        operation: "from_options",
                        message: message.into_string(),
                    }
                }
            }),
        }
    }
}
