//! The plugin-backed Demand dispatcher (`metrics-dispatcher`, loaded from its
//! `.so`, recording its metrics) against the built-in `DemandDispatcher`, in
//! real gen-stage pipelines on a current_thread tokio runtime:
//!
//! - chain: producer -> producer_consumer (x * 2) -> consumer; both the
//!   producer and the producer_consumer dispatch through the dispatcher
//!   under test;
//! - demand4: producer -> 4 consumers sharing the work.
//!
//! At max_demand 1000 and 1 (min_demand = max_demand / 2). The clock runs
//! from releasing the producer's demand until the consumers counted every
//! event. Targets: plugin at most 1.2x slower at max_demand 1000, at most 2x
//! at max_demand 1. `cargo bench -p plugin-host --bench plugin_dispatch -- --quick`
//! for a sanity run; figures in docs/benchmarks-plugins.md.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gen_stage::{
    Consumer, ConsumerContext, DemandDispatcher, DemandMode, Dispatcher, Noreply, Producer,
    ProducerConsumer, ProducerConsumerContext, ProducerConsumerOptions, ProducerContext,
    ProducerOptions, StopReason, SubscribeOptions, Subscription,
};
use plugin_host::PluginDispatcherFactory;
use tokio::sync::Notify;

#[derive(Clone, Copy, Debug)]
enum Topology {
    Chain,
    Demand4,
}

#[derive(Clone)]
enum Which {
    Builtin,
    Plugin(PluginDispatcherFactory),
}

impl Which {
    fn dispatcher(&self) -> Box<dyn Dispatcher<u64>> {
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
    type Event = u64;
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = ();

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
    type In = u64;
    type Out = u64;
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = ();

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
    type Event = u64;
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = ();

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
async fn run(topology: Topology, which: &Which, events: u64, max_demand: usize) -> Duration {
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
    let producer = gen_stage::start_producer(Numbers {
        next: 0,
        end: events,
        dispatcher: Some(which.dispatcher()),
    })
    .await
    .expect("the producer starts");
    match topology {
        Topology::Chain => {
            let doubler = gen_stage::start_producer_consumer(Doubler {
                dispatcher: Some(which.dispatcher()),
            })
            .await
            .expect("the producer_consumer starts");
            doubler
                .subscribe(&producer, options())
                .await
                .expect("subscribes");
            let counter = gen_stage::start_consumer(Counter(tally.clone()))
                .await
                .expect("the consumer starts");
            counter
                .subscribe(&doubler, options())
                .await
                .expect("subscribes");
        }
        Topology::Demand4 => {
            for _ in 0..4 {
                let counter = gen_stage::start_consumer(Counter(tally.clone()))
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
fn metrics_plugin() -> PathBuf {
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
            "metrics-dispatcher",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(root)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building metrics-dispatcher failed");
    target.join("release").join(file)
}

fn benches(c: &mut Criterion) {
    let factory = plugin_host::load(metrics_plugin(), &serde_json::json!({}))
        .expect("the metrics plugin loads");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    for (topology, name) in [(Topology::Chain, "chain"), (Topology::Demand4, "demand4")] {
        for (max_demand, events) in [(1000usize, 1_000_000u64), (1, 50_000)] {
            let mut group = c.benchmark_group(format!("{name}/max_demand_{max_demand}"));
            group.throughput(Throughput::Elements(events));
            group.sample_size(10);
            for (label, which) in [
                ("builtin", Which::Builtin),
                ("plugin", Which::Plugin(factory.clone())),
            ] {
                group.bench_function(BenchmarkId::from_parameter(label), |b| {
                    b.iter_custom(|iterations| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iterations {
                            total += runtime.block_on(run(topology, &which, events, max_demand));
                        }
                        total
                    });
                });
            }
            group.finish();
        }
    }
}

/// The dispatchers alone, without a runtime: one consumer asks `n` and a
/// batch of `n` events is dispatched, over and over. This isolates the cost
/// of crossing the ABI (and of the metrics) per call.
fn dispatch_loop(c: &mut Criterion) {
    use dispatchers::{ConsumerId, Outbox, Subscriber, SubscriptionId, SubscriptionOptions};
    let factory = plugin_host::load(metrics_plugin(), &serde_json::json!({}))
        .expect("the metrics plugin loads");
    for n in [500usize, 1] {
        let rounds = 100_000 / n.max(1) as u64 * 10;
        let mut group = c.benchmark_group(format!("dispatch_loop/batch_{n}"));
        group.throughput(Throughput::Elements(rounds * n as u64));
        group.sample_size(10);
        for (label, which) in [
            ("builtin", Which::Builtin),
            ("plugin", Which::Plugin(factory.clone())),
        ] {
            group.bench_function(BenchmarkId::from_parameter(label), |b| {
                b.iter(|| {
                    let mut dispatcher = which.dispatcher();
                    let mut out = Outbox::new();
                    let a = Subscriber {
                        subscription: SubscriptionId(1),
                        consumer: ConsumerId(1),
                    };
                    dispatcher
                        .subscribe(a, &SubscriptionOptions::new(n, n / 2), &mut out)
                        .expect("subscribed");
                    let mut next = 0u64;
                    for _ in 0..rounds {
                        dispatcher.ask(a.subscription, n, &mut out);
                        let batch: Vec<u64> = (next..next + n as u64).collect();
                        next += n as u64;
                        let leftover = dispatcher.dispatch(batch, &mut out);
                        debug_assert!(leftover.is_empty());
                        out.drain().for_each(drop);
                    }
                    next
                });
            });
        }
        group.finish();
    }
}

criterion_group!(plugin_dispatch, benches, dispatch_loop);
criterion_main!(plugin_dispatch);
