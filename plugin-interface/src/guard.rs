//! The glue between [`DispatcherPlugin`] and the FFI traits: every call runs
//! under `catch_unwind`, so a panic becomes [`CallError::Panicked`] instead of
//! unwinding across the ABI (which abi_stable would turn into an abort).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, ROption, RResult, RSlice, RStr, RString};

use crate::{
    CallError, Decision, DispatcherPlugin, FfiDispatcher, FfiDispatcher_TO, FfiMetricsReader,
    FfiMetricsReader_TO, InfoId, MetricsSnapshot, MetricsSource, NewDispatcher, SubscribeRequest,
    SubscriptionId,
};

/// The message of a panic payload (`&str` or `String`, as `panic!` makes).
fn panic_message(payload: &(dyn Any + Send)) -> RString {
    if let Some(text) = payload.downcast_ref::<&str>() {
        RString::from(*text)
    } else if let Some(text) = payload.downcast_ref::<String>() {
        RString::from(text.as_str())
    } else {
        RString::from("a panic with a non-string payload")
    }
}

/// Run `f`, turning a panic into [`CallError::Panicked`]. The payload is
/// dropped under `catch_unwind` too, since its destructor may panic.
#[inline]
fn catching<R>(f: impl FnOnce() -> Result<R, CallError>) -> Result<R, CallError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => panicked(payload),
    }
}

/// The error for a caught panic.
#[cold]
#[inline(never)]
fn panicked<R>(payload: Box<dyn Any + Send>) -> Result<R, CallError> {
    let message = panic_message(&*payload);
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    Err(CallError::Panicked { message })
}

/// The factory behind [`DispatcherModule::new_dispatcher`](crate::DispatcherModule).
pub(crate) extern "C" fn new_dispatcher<D: DispatcherPlugin>(
    options: RStr<'_>,
) -> RResult<NewDispatcher, CallError> {
    catching(|| {
        let plugin = D::from_options(options.as_str())?;
        let needs_keys = plugin.needs_keys();
        let metrics = plugin
            .metrics()
            .map(|source| FfiMetricsReader_TO::from_value(GuardedMetrics { source }, TD_Opaque));
        Ok(NewDispatcher {
            dispatcher: FfiDispatcher_TO::from_value(Guarded::new(plugin), TD_Opaque),
            needs_keys,
            metrics: ROption::from(metrics),
        })
    })
    .into()
}

/// A [`DispatcherPlugin`] behind the FFI trait, poisoned by its first panic.
struct Guarded<D> {
    /// `None` once dropped (see `Drop`).
    plugin: Option<D>,
    /// The first panic's message; set, the instance refuses every call.
    poisoned: Option<RString>,
}

impl<D: DispatcherPlugin> Guarded<D> {
    fn new(plugin: D) -> Self {
        Self {
            plugin: Some(plugin),
            poisoned: None,
        }
    }

    #[inline]
    fn call(&mut self, f: impl FnOnce(&mut D) -> Result<(), CallError>) -> RResult<(), CallError> {
        if let Some(message) = &self.poisoned {
            return RErr(CallError::Poisoned {
                message: message.clone(),
            });
        }
        let Some(plugin) = self.plugin.as_mut() else {
            return RErr(CallError::Poisoned {
                message: RString::from("the dispatcher was dropped"),
            });
        };
        match catching(|| f(plugin)) {
            Ok(()) => ROk(()),
            Err(error) => {
                if let CallError::Panicked { message } = &error {
                    self.poisoned = Some(message.clone());
                }
                RErr(error)
            }
        }
    }
}

impl<D: DispatcherPlugin> FfiDispatcher for Guarded<D> {
    fn subscribe(
        &mut self,
        request: &SubscribeRequest,
        out: &mut Decision,
    ) -> RResult<(), CallError> {
        self.call(|plugin| plugin.subscribe(request, out))
    }

    fn cancel(
        &mut self,
        subscription: SubscriptionId,
        out: &mut Decision,
    ) -> RResult<(), CallError> {
        self.call(|plugin| {
            plugin.cancel(subscription, out);
            Ok(())
        })
    }

    #[inline]
    fn ask(
        &mut self,
        subscription: SubscriptionId,
        n: u64,
        out: &mut Decision,
    ) -> RResult<(), CallError> {
        self.call(|plugin| {
            plugin.ask(subscription, n, out);
            Ok(())
        })
    }

    #[inline]
    fn dispatch(
        &mut self,
        count: u64,
        keys: RSlice<'_, u64>,
        out: &mut Decision,
    ) -> RResult<(), CallError> {
        self.call(|plugin| {
            plugin.dispatch(count, keys.as_slice(), out);
            Ok(())
        })
    }

    fn info(&mut self, info: InfoId, out: &mut Decision) -> RResult<(), CallError> {
        self.call(|plugin| {
            plugin.info(info, out);
            Ok(())
        })
    }
}

impl<D> Drop for Guarded<D> {
    /// The plugin's destructor runs under `catch_unwind` too: the drop glue
    /// abi_stable generates would abort on a panic.
    fn drop(&mut self) {
        if let Some(plugin) = self.plugin.take() {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(plugin)));
        }
    }
}

/// A [`MetricsSource`] behind the FFI trait.
struct GuardedMetrics {
    source: Arc<dyn MetricsSource>,
}

impl FfiMetricsReader for GuardedMetrics {
    fn snapshot(&self) -> RResult<MetricsSnapshot, CallError> {
        catching(|| Ok(self.source.snapshot())).into()
    }
}

impl Drop for GuardedMetrics {
    fn drop(&mut self) {
        let source = std::mem::replace(&mut self.source, Arc::new(NoMetrics));
        let _ = catch_unwind(AssertUnwindSafe(move || drop(source)));
    }
}

/// Stands in for a dropped metrics source.
struct NoMetrics;

impl MetricsSource for NoMetrics {
    fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot::default()
    }
}
