//! A gen-stage pipeline whose producer dispatches through a plugin loaded
//! from the command line, printing the plugin's metrics at the end.
//!
//! ```text
//! cargo xtask build
//! cargo run -p weir-plugin-host --example plugin_pipeline -- target/debug/libmetrics_dispatcher.so [EVENTS] [MAX_DEMAND]
//! ```
//!
//! A producer of the numbers `0..EVENTS` feeds three consumers that share the
//! work; the dispatcher deciding who gets which batch is the plugin's. For
//! plugins that route by key (`key-affinity-dispatcher`) the key is the
//! number modulo 16. At the end the example prints the metrics snapshot (for
//! plugins that keep metrics), in the Prometheus text format.

use std::process::ExitCode;

use tokio::sync::mpsc;
use weir_gen_stage::{
    Consumer, ConsumerContext, Dispatcher, Noreply, Producer, ProducerContext, ProducerOptions,
    StopReason, SubscribeOptions, Subscription,
};
use weir_plugin_host::{PluginDispatcherFactory, PluginError};

/// Emits `0..end` as demanded, through the plugin dispatcher.
struct Numbers {
    next: u64,
    end: u64,
    dispatcher: Option<Box<dyn Dispatcher<u64>>>,
}

impl Producer for Numbers {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        let dispatcher = self
            .dispatcher
            .take()
            .ok_or_else(|| StopReason::ShutdownWith("no dispatcher".to_owned()))?;
        Ok(ProducerOptions::new().boxed_dispatcher(dispatcher))
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let end = self.next.saturating_add(demand as u64).min(self.end);
        let events = (self.next..end).collect();
        self.next = end;
        Noreply::Emit(events)
    }
}

/// Reports how many events each batch held.
struct Counter(mpsc::UnboundedSender<usize>);

impl Consumer for Counter {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let _ = self.0.send(events.len());
        Noreply::none()
    }
}

/// A dispatcher from the factory, with a key function if the plugin wants one.
fn dispatcher(
    factory: &PluginDispatcherFactory,
) -> Result<weir_plugin_host::PluginDispatcher<u64>, PluginError> {
    match factory.dispatcher::<u64>() {
        Err(PluginError::KeyFunctionRequired { .. }) => {
            factory.dispatcher_with_key(|n: &u64| n % 16)
        }
        other => other,
    }
}

async fn run(path: &str, events: u64, max_demand: usize) -> Result<(), Box<dyn std::error::Error>> {
    let factory = weir_plugin_host::load(path, &serde_json::json!({}))?;
    let plugin = factory.plugin();
    println!(
        "loaded plugin `{}` {} (interface {}): {}",
        plugin.name, plugin.version, plugin.interface_version, plugin.description
    );
    let dispatcher = dispatcher(&factory)?;
    let metrics = dispatcher.metrics();

    let producer = weir_gen_stage::start_producer(Numbers {
        next: 0,
        end: events,
        dispatcher: Some(Box::new(dispatcher)),
    })
    .await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    for _ in 0..3 {
        let counter = weir_gen_stage::start_consumer(Counter(tx.clone())).await?;
        counter
            .subscribe(
                &producer,
                SubscribeOptions::new()
                    .max_demand(max_demand)
                    .min_demand(max_demand / 2),
            )
            .await?;
    }
    drop(tx);

    let started = std::time::Instant::now();
    let mut received = 0u64;
    while received < events {
        match rx.recv().await {
            Some(n) => received += n as u64,
            None => break,
        }
    }
    let elapsed = started.elapsed();
    println!(
        "{received} of {events} events through 3 consumers (max_demand {max_demand}) in {elapsed:?}"
    );

    match metrics {
        Some(metrics) => {
            let snapshot = metrics.snapshot()?;
            println!("\n# metrics snapshot");
            print!(
                "{}",
                snapshot.to_prometheus_with_labels(&[("producer", "numbers")])
            );
        }
        None => println!("plugin `{}` keeps no metrics", factory.plugin().name),
    }
    producer.stop(StopReason::Shutdown).await?;
    if received == events {
        Ok(())
    } else {
        Err(format!("only {received} of {events} events arrived").into())
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!(
            "usage: plugin_pipeline PLUGIN.so [EVENTS] [MAX_DEMAND]\n\
             hint: `cargo xtask build` builds the plugins and prints their paths"
        );
        return ExitCode::FAILURE;
    };
    let events = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let max_demand = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1000);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: could not start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(path, events, max_demand)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}
