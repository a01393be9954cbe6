//! [`PluginDispatcher`]: a loaded plugin behind the `Dispatcher<T>` contract.

use std::fmt;
use std::sync::Arc;

use abi_stable::std_types::{RResult, RSlice};
use weir_dispatchers::{
    Dispatcher, InfoId, Outbox, PartitionKey, SubscribeError, Subscriber, SubscriptionId,
    SubscriptionOptions, Warning,
};
use weir_plugin_interface as ffi;
use weir_plugin_interface::{CallError, Decision, DispatcherObject, PluginWarning};

use crate::routing::{Ledger, route};
use crate::{MetricsHandle, PluginError, PluginIdentity};

/// A host-side key function: the 64-bit key a plugin routes an event by.
pub type KeyFn<T> = Arc<dyn Fn(&T) -> u64 + Send + Sync>;

/// A dispatcher whose decisions come from a plugin library, usable wherever a
/// built-in dispatcher is (it implements [`Dispatcher<T>`]).
///
/// The events stay here: for each batch the plugin gets a count (and, if it
/// routes by key, one key per event from the key function) and answers with
/// runs of events per subscription; the events are then moved into batches,
/// never cloned or serialised. Every answer is checked: a plugin can never
/// make a producer send a consumer more than it asked for, send to an
/// unknown subscription, or lose an event.
///
/// # Faults
///
/// A plugin callback that panics (caught inside the plugin) or breaks the
/// contract *poisons* the dispatcher: it logs the fault, [`fault`](Self::fault)
/// returns it, and from then on it asks for nothing, returns every event it is
/// given as leftover (nothing is lost), refuses new subscriptions and releases
/// infos at once. With [`panic_on_fault`](Self::panic_on_fault) it instead
/// panics on the host side, outside the plugin, so that a gen-stage producer
/// stops with a "panicked" reason as for any other callback panic.
///
/// # Example
///
/// ```no_run
/// use weir_dispatchers::{ConsumerId, Dispatcher, Emit, Outbox, Subscriber, SubscriptionId,
///                   SubscriptionOptions};
///
/// let factory = weir_plugin_host::load("target/debug/libmetrics_dispatcher.so", &serde_json::json!({}))?;
/// let mut dispatcher = factory.dispatcher::<u64>()?;
/// let mut out = Outbox::new();
/// let a = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
/// dispatcher.subscribe(a, &SubscriptionOptions::new(10, 5), &mut out).expect("accepted");
/// dispatcher.ask(a.subscription, 10, &mut out);
/// let leftover = dispatcher.dispatch((0..12).collect(), &mut out);
/// assert_eq!(leftover, vec![10, 11]);
/// assert_eq!(out.drain().collect::<Vec<_>>(),
///            vec![Emit::Events { to: a.subscription, events: (0..10).collect() }]);
/// assert!(dispatcher.fault().is_none());
/// # Ok::<(), weir_plugin_host::PluginError>(())
/// ```
pub struct PluginDispatcher<T> {
    plugin: Arc<PluginIdentity>,
    object: DispatcherObject,
    /// Set when the plugin routes by key.
    key: Option<KeyFn<T>>,
    metrics: Option<MetricsHandle>,
    /// Reused for every call, so steady-state calls allocate nothing.
    decision: Decision,
    keys: Vec<u64>,
    ledger: Ledger,
    /// Infos handed to the plugin and not released yet.
    pending_infos: Vec<InfoId>,
    fault: Option<PluginError>,
    panic_on_fault: bool,
}

impl<T> fmt::Debug for PluginDispatcher<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginDispatcher")
            .field("plugin", &self.plugin.name)
            .field("routes_by_key", &self.key.is_some())
            .field("fault", &self.fault)
            .finish_non_exhaustive()
    }
}

impl<T> PluginDispatcher<T> {
    pub(crate) fn new(
        plugin: Arc<PluginIdentity>,
        object: DispatcherObject,
        key: Option<KeyFn<T>>,
        metrics: Option<MetricsHandle>,
    ) -> Self {
        Self {
            plugin,
            object,
            key,
            metrics,
            decision: Decision::default(),
            keys: Vec::new(),
            ledger: Ledger::default(),
            pending_infos: Vec::new(),
            fault: None,
            panic_on_fault: false,
        }
    }

    /// Panic (on the host side) at the first fault instead of degrading, so
    /// that the stage running this dispatcher stops with a "panicked" reason.
    pub fn panic_on_fault(mut self) -> Self {
        self.panic_on_fault = true;
        self
    }

    /// Who the plugin is.
    pub fn plugin(&self) -> &PluginIdentity {
        &self.plugin
    }

    /// The plugin's metrics, readable from any thread, if it keeps any. Take
    /// it before handing the dispatcher to a producer.
    pub fn metrics(&self) -> Option<MetricsHandle> {
        self.metrics.clone()
    }

    /// The fault that poisoned this dispatcher, if any.
    pub fn fault(&self) -> Option<&PluginError> {
        self.fault.as_ref()
    }

    /// Call the plugin with a cleared decision; on error, poison.
    #[inline]
    fn call(
        &mut self,
        operation: &'static str,
        f: impl FnOnce(&mut DispatcherObject, &mut Decision) -> RResult<(), CallError>,
    ) -> Result<(), CallError> {
        self.decision.clear();
        match f(&mut self.object, &mut self.decision) {
            RResult::ROk(()) => Ok(()),
            RResult::RErr(error) => {
                if let CallError::Panicked { message } | CallError::Poisoned { message } = &error {
                    self.poison(PluginError::Panicked {
                        plugin: self.plugin.name.clone(),
                        operation,
                        message: message.to_string(),
                    });
                }
                Err(error)
            }
        }
    }

    #[cold]
    fn poison(&mut self, error: PluginError) {
        tracing::error!(plugin = %self.plugin.name, error = %error, "dispatcher plugin poisoned");
        if self.panic_on_fault {
            panic!("{error}");
        }
        if self.fault.is_none() {
            self.fault = Some(error);
        }
        self.decision.clear();
    }

    fn violation(&mut self, operation: &'static str, detail: String) {
        self.poison(PluginError::ProtocolViolation {
            plugin: self.plugin.name.clone(),
            operation,
            detail,
        });
    }

    /// Carry out the non-routing parts of a decision: warnings and released
    /// infos. Returns upstream demand, or `None` (poisoned) on a violation.
    #[inline]
    fn settle_common(&mut self, operation: &'static str, out: &mut Outbox<T>) -> Option<usize> {
        // The common case: nothing but demand (and, for a dispatch, runs).
        if self.decision.warnings.is_empty()
            && self.decision.released_infos.is_empty()
            && (operation == "dispatch" || self.decision.runs.is_empty())
        {
            return Some(to_usize(self.decision.upstream_demand));
        }
        self.settle_rest(operation, out)
    }

    /// [`settle_common`](Self::settle_common) when there are warnings,
    /// released infos or unexpected runs.
    #[cold]
    #[inline(never)]
    fn settle_rest(&mut self, operation: &'static str, out: &mut Outbox<T>) -> Option<usize> {
        if operation != "dispatch" && !self.decision.runs.is_empty() {
            self.violation(operation, "only dispatch may route events".to_owned());
            return None;
        }
        for info in self.decision.released_infos.iter() {
            let info = InfoId(info.0);
            let Some(index) = self.pending_infos.iter().position(|i| *i == info) else {
                let detail = format!("it released info {} which it was not given", info.0);
                self.violation(operation, detail);
                return None;
            };
            self.pending_infos.remove(index);
        }
        for warning in self.decision.warnings.iter() {
            match warning {
                PluginWarning::AskLargerThanMaxDemand {
                    subscription,
                    asked,
                    expected,
                } => out.warn(Warning::AskLargerThanMaxDemand {
                    subscription: SubscriptionId(subscription.0),
                    asked: to_usize(*asked),
                    expected: to_usize(*expected),
                }),
                PluginWarning::Message { text } => {
                    tracing::warn!(plugin = %self.plugin.name, "{text}");
                }
            }
        }
        for info in self.decision.released_infos.iter() {
            out.info(InfoId(info.0));
        }
        Some(to_usize(self.decision.upstream_demand))
    }
}

impl<T> Dispatcher<T> for PluginDispatcher<T> {
    fn subscribe(
        &mut self,
        subscriber: Subscriber,
        options: &SubscriptionOptions<T>,
        out: &mut Outbox<T>,
    ) -> Result<usize, SubscribeError> {
        if let Some(fault) = &self.fault {
            // Not this subscription's fault: an earlier callback poisoned the dispatcher.
            return Err(SubscribeError::Refused(format!(
                "the dispatcher takes no new subscriptions since an earlier callback failed: {fault}"
            )));
        }
        if self.ledger.contains(subscriber.subscription) {
            return Err(SubscribeError::Refused(format!(
                "{} is already subscribed",
                subscriber.subscription
            )));
        }
        let request = subscribe_request(subscriber, options)?;
        let plugin = self.plugin.name.clone();
        match self.call("subscribe", |object, decision| {
            object.subscribe(&request, decision)
        }) {
            Ok(()) => {}
            Err(CallError::InvalidOption { option, reason }) => {
                return Err(SubscribeError::InvalidOption {
                    option: option.into_string(),
                    reason: reason.into_string(),
                });
            }
            Err(CallError::Refused { reason }) => {
                return Err(SubscribeError::Refused(reason.into_string()));
            }
            Err(error) => {
                return Err(SubscribeError::Refused(format!(
                    "dispatcher plugin `{plugin}`: {error}"
                )));
            }
        }
        self.ledger.subscribe(subscriber.subscription);
        Ok(self.settle_common("subscribe", out).unwrap_or(0))
    }

    fn cancel(&mut self, subscription: SubscriptionId, out: &mut Outbox<T>) -> usize {
        if self.fault.is_some() || !self.ledger.cancel(subscription) {
            return 0;
        }
        let id = ffi::SubscriptionId(subscription.0);
        if self
            .call("cancel", |object, decision| object.cancel(id, decision))
            .is_err()
        {
            return 0;
        }
        self.settle_common("cancel", out).unwrap_or(0)
    }

    fn ask(&mut self, subscription: SubscriptionId, n: usize, out: &mut Outbox<T>) -> usize {
        if self.fault.is_some() || !self.ledger.ask(subscription, n as u64) {
            return 0;
        }
        let id = ffi::SubscriptionId(subscription.0);
        if self
            .call("ask", |object, decision| object.ask(id, n as u64, decision))
            .is_err()
        {
            return 0;
        }
        self.settle_common("ask", out).unwrap_or(0)
    }

    fn dispatch(&mut self, events: Vec<T>, out: &mut Outbox<T>) -> Vec<T> {
        if self.fault.is_some() || events.is_empty() {
            return events;
        }
        self.keys.clear();
        if let Some(key) = &self.key {
            self.keys.extend(events.iter().map(|event| key(event)));
        }
        self.decision.clear();
        let result = self.object.dispatch(
            events.len() as u64,
            RSlice::from_slice(&self.keys),
            &mut self.decision,
        );
        if let RResult::RErr(error) = result {
            match error {
                CallError::Panicked { message } | CallError::Poisoned { message } => {
                    self.poison(PluginError::Panicked {
                        plugin: self.plugin.name.clone(),
                        operation: "dispatch",
                        message: message.into_string(),
                    });
                }
                other => self.violation("dispatch", format!("it failed the dispatch: {other}")),
            }
            return events;
        }
        if let Err(detail) = self.ledger.settle(&self.decision.runs, events.len()) {
            self.violation("dispatch", detail);
            return events;
        }
        if self.settle_common("dispatch", out).is_none() {
            return events;
        }
        route(events, &self.decision.runs, out)
    }

    fn info(&mut self, info: InfoId, out: &mut Outbox<T>) {
        if self.fault.is_some() {
            out.info(info);
            return;
        }
        self.pending_infos.push(info);
        let id = ffi::InfoId(info.0);
        if self
            .call("info", |object, decision| object.info(id, decision))
            .is_err()
            || self.settle_common("info", out).is_none()
        {
            // Poisoned: the plugin holds no events, so nothing can be queued
            // before this info any more.
            self.pending_infos.retain(|i| *i != info);
            out.info(info);
        }
    }

    fn name(&self) -> &str {
        &self.plugin.name
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The subscription as the plugin sees it: typed demand bounds, everything
/// else as a JSON object. A selector is a closure over `T` and cannot cross.
fn subscribe_request<T>(
    subscriber: Subscriber,
    options: &SubscriptionOptions<T>,
) -> Result<ffi::SubscribeRequest, SubscribeError> {
    if options.selector.is_some() {
        return Err(SubscribeError::InvalidOption {
            option: "selector".to_owned(),
            reason: "a selector is a closure over the events and cannot reach a dispatcher \
                     plugin; route by the key function instead"
                .to_owned(),
        });
    }
    let mut object = serde_json::Map::new();
    for (key, value) in &options.extra {
        object.insert(key.clone(), value.clone());
    }
    if let Some(partition) = &options.partition {
        let value = match partition {
            PartitionKey::Index(i) => serde_json::Value::from(*i),
            PartitionKey::Name(name) => serde_json::Value::from(name.as_str()),
        };
        object.insert("partition".to_owned(), value);
    }
    Ok(ffi::SubscribeRequest::new(
        ffi::SubscriptionId(subscriber.subscription.0),
        ffi::ConsumerId(subscriber.consumer.0),
        options.max_demand as u64,
        options.min_demand as u64,
    )
    .with_options(serde_json::Value::Object(object).to_string()))
}
