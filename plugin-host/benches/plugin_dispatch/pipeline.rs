//! The pipelines of the `plugin_dispatch` bench, shared with the
//! `plugin_dispatch_ab` example (which runs them interleaved, outside
//! criterion).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use weir_gen_stage::{
    Consumer, ConsumerContext, DemandDispatcher, DemandMode, Dispatcher, Noreply, Producer,
    ProducerConsumer, ProducerConsumerContext, ProducerConsumerOptions, ProducerContext,
    ProducerOptions, StopReason, SubscribeOptions, Subscription,
};
use weir_plugin_host::PluginDispatcherFactory;

#[derive(Clone, Copy, Debug)]
pub enum Topology {
    Chain,
    Demand4,
}

#[derive(Clone)]
pub enum Which {
    Builtin,
    Plugin(PluginDispatcherFactory),
}

impl Which {
    pub fn dispatcher(&self) -> Box<dyn Dispatcher<u64>> {
        match self {
            Which::Builtin => Box::new(DemandDispatcher::new()),
            Which::Plugin(factory) => Box::new(
                factory
                    .dispatcher::<u64>()
                    .expect("the metrics plugin makes a dispatcher"),
            ),
        }
    }
}

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
            .unwrap_or_else(|| Box::new(DemandDispatcher::new()));
        Ok(ProducerOptions::new()
            .boxed_dispatcher(dispatcher)
            .demand(DemandMode::Accumulate))
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

struct Doubler {
    dispatcher: Option<Box<dyn Dispatcher<u64>>>,
}

impl ProducerConsumer for Doubler {
    type Messages = ();
    type In = u64;
    type Out = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<u64, u64>, StopReason> {
        let dispatcher = self
            .dispatcher
            .take()
            .unwrap_or_else(|| Box::new(DemandDispatcher::new()));
        Ok(ProducerConsumerOptions::new().boxed_dispatcher(dispatcher))
    }

    async fn handle_events(
        &mut self,
        mut events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        for event in &mut events {
            *event = event.wrapping_mul(2);
        }
        Noreply::Emit(events)
    }
}

struct Tally {
    seen: AtomicU64,
    expected: u64,
    done: Notify,
}

struct Counter(Arc<Tally>);

impl Consumer for Counter {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let n = events.len() as u64;
        if self.0.seen.fetch_add(n, Ordering::Relaxed) + n >= self.0.expected {
            self.0.done.notify_one();
        }
        Noreply::none()
    }
}

/// One run: build, subscribe, then time the flow of `events` events.
pub async fn run(topology: Topology, which: &Which, events: u64, max_demand: usize) -> Duration {
    let tally = Arc::new(Tally {
        seen: AtomicU64::new(0),
        expected: events,
        done: Notify::new(),
    });
    let options = || {
        SubscribeOptions::new()
            .max_demand(max_demand)
            .min_demand(max_demand / 2)
    };
    let producer = weir_gen_stage::start_producer(Numbers {
        next: 0,
        end: events,
        dispatcher: Some(which.dispatcher()),
    })
    .await
    .expect("the producer starts");
    match topology {
        Topology::Chain => {
            let doubler = weir_gen_stage::start_producer_consumer(Doubler {
                dispatcher: Some(which.dispatcher()),
            })
            .await
            .expect("the producer_consumer starts");
            doubler
                .subscribe(&producer, options())
                .await
                .expect("subscribes");
            let counter = weir_gen_stage::start_consumer(Counter(tally.clone()))
                .await
                .expect("the consumer starts");
            counter
                .subscribe(&doubler, options())
                .await
                .expect("subscribes");
        }
        Topology::Demand4 => {
            for _ in 0..4 {
                let counter = weir_gen_stage::start_consumer(Counter(tally.clone()))
                    .await
                    .expect("a consumer starts");
                counter
                    .subscribe(&producer, options())
                    .await
                    .expect("subscribes");
            }
        }
    }
    let start = Instant::now();
    producer
        .producer()
        .async_set_demand_mode(DemandMode::Forward)
        .expect("the producer is alive");
    tally.done.notified().await;
    let elapsed = start.elapsed();
    producer
        .stop(StopReason::Shutdown)
        .await
        .expect("the producer stops");
    elapsed
}

/// `$WEIR_PLUGIN_DIR/libmetrics_dispatcher.so`, or build it (release, into
/// this bench's target directory) and use that.
pub fn metrics_plugin() -> PathBuf {
    let file = format!(
        "{}metrics_dispatcher{}",
        env::consts::DLL_PREFIX,
        env::consts::DLL_SUFFIX
    );
    if let Some(dir) = env::var_os("WEIR_PLUGIN_DIR") {
        return PathBuf::from(dir).join(file);
    }
    let exe = env::current_exe().expect("the bench binary has a path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the bench binary lives in <target>/<profile>/deps")
        .to_path_buf();
    // Its own target directory, as in the tests: building a cdylib + rlib
    // crate with other features would overwrite the workspace's rlib.
    let target = profile_dir
        .parent()
        .expect("a target directory")
        .join("plugin-builds");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "weir-metrics-dispatcher",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(root)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building metrics-dispatcher failed");
    target.join("release").join(file)
}
