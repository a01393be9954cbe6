//! `--dispatcher-plugin`: a branch of the progress hub through a dispatcher loaded from a dynamic library.
//! The relay stage's dispatcher is the plugin's; the sink counts what it delivered. A plugin that panics or
//! breaks the dispatcher contract stops its relay (instead of degrading quietly), and the pull fails naming
//! the plugin.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;
use weir_gen_stage::{
    Consumer, ConsumerContext, ConsumerHandle, Drain, DrainOutcome, DrainReport, Noreply,
    ProducerConsumer, ProducerConsumerContext, ProducerConsumerHandle, ProducerConsumerOptions,
    ProducerHandle, StopReason, SubscribeOptions, Subscription,
};

use super::pipeline_err;
use super::progress::{ProgressEvent, ProgressHub};
use crate::commands::error::CommandError;

/// Forwards progress through the plugin's dispatcher.
struct PluginRelay {
    dispatcher: Option<weir_plugin_host::PluginDispatcher<ProgressEvent>>,
}

impl ProducerConsumer for PluginRelay {
    type Messages = ();
    type In = ProgressEvent;
    type Out = ProgressEvent;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<ProgressEvent, ProgressEvent>, weir_gen_stage::StopReason>
    {
        let d = self
            .dispatcher
            .take()
            .ok_or(weir_gen_stage::StopReason::Normal)?;
        Ok(ProducerConsumerOptions::new().dispatcher(d))
    }

    async fn handle_events(
        &mut self,
        events: Vec<ProgressEvent>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<ProgressEvent> {
        Noreply::Emit(events)
    }
}

/// The end of the plugin's branch: counts what the plugin delivered.
struct PluginSink {
    delivered: Arc<Mutex<u64>>,
}

impl Consumer for PluginSink {
    type Messages = ();
    type Event = ProgressEvent;

    async fn handle_events(
        &mut self,
        events: Vec<ProgressEvent>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        if let Ok(mut n) = self.delivered.lock() {
            *n += events.len() as u64;
        }
        Noreply::none()
    }
}

/// A dataset's 64-bit routing key for dispatcher plugins: FNV-1a of its name, the same in every run.
pub(super) fn dataset_key(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The plugin's branch, running.
pub(super) struct PluginBranch {
    path: PathBuf,
    relay: ProducerConsumerHandle<PluginRelay>,
    sink: ConsumerHandle<PluginSink>,
    metrics: Option<weir_plugin_host::MetricsHandle>,
    delivered: Arc<Mutex<u64>>,
}

impl PluginBranch {
    /// Loads the plugin at `path` with `options` (a JSON object; `null` for none) and subscribes its
    /// branch to `hub`.
    pub(super) async fn start(
        path: &Path,
        options: &serde_json::Value,
        hub: &ProducerHandle<ProgressHub>,
    ) -> Result<Self, CommandError> {
        let plugin_err = |e: weir_plugin_host::PluginError| CommandError::Plugin {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let options = match options {
            serde_json::Value::Null => json!({}),
            given => given.clone(),
        };
        let factory = weir_plugin_host::load(path, &options).map_err(plugin_err)?;
        // Progress events are keyed by their dataset, for plugins that route by key (key-affinity).
        let dispatcher = factory
            .dispatcher_with_key(|e: &ProgressEvent| dataset_key(e.dataset()))
            .map_err(plugin_err)?
            .panic_on_fault();
        let metrics = dispatcher.metrics();
        let relay = weir_gen_stage::start_producer_consumer(PluginRelay {
            dispatcher: Some(dispatcher),
        })
        .await
        .map_err(pipeline_err)?;
        relay
            .subscribe(hub, SubscribeOptions::new().max_demand(100))
            .await
            .map_err(pipeline_err)?;
        let delivered = Arc::new(Mutex::new(0u64));
        let sink = weir_gen_stage::start_consumer(PluginSink {
            delivered: delivered.clone(),
        })
        .await
        .map_err(pipeline_err)?;
        sink.subscribe(&relay, SubscribeOptions::new().max_demand(100))
            .await
            .map_err(pipeline_err)?;
        Ok(Self {
            path: path.to_path_buf(),
            relay,
            sink,
            metrics,
            delivered,
        })
    }

    /// Adds the branch's stages to a drain, relay first.
    pub(super) fn drain(&self, drain: Drain) -> Drain {
        drain.stage(&self.relay).stage(&self.sink)
    }

    /// After the drain: the plugin's fault, if its relay stopped on one; otherwise what it delivered and its
    /// metrics (Prometheus text), for the summary.
    pub(super) fn outcome(&self, drained: &DrainReport) -> Result<PluginOutcome, CommandError> {
        let fault = drained
            .stage(self.relay.id())
            .and_then(|s| match &s.outcome {
                DrainOutcome::Stopped(StopReason::Panicked(m))
                | DrainOutcome::AlreadyStopped(StopReason::Panicked(m)) => Some(m.clone()),
                _ => None,
            });
        if let Some(message) = fault {
            return Err(CommandError::Plugin {
                path: self.path.display().to_string(),
                message,
            });
        }
        let metrics = match &self.metrics {
            Some(m) => Some(
                m.snapshot()
                    .map_err(|e| CommandError::Plugin {
                        path: self.path.display().to_string(),
                        message: e.to_string(),
                    })?
                    .to_prometheus(),
            ),
            None => None,
        };
        Ok(PluginOutcome {
            path: self.path.clone(),
            delivered: self.delivered.lock().map(|d| *d).unwrap_or(0),
            metrics,
        })
    }
}

/// What the plugin did during a pull.
#[derive(Debug, Clone)]
pub(super) struct PluginOutcome {
    /// The plugin's file.
    pub(super) path: PathBuf,
    /// Events its dispatcher delivered.
    pub(super) delivered: u64,
    /// Its metrics as Prometheus text, if it keeps any.
    pub(super) metrics: Option<String>,
}
