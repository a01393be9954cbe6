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
//! at max_demand 1. `plugin` uses the default options (every ask timed for
//! the latency histogram, two clock reads per ask); `plugin_sampled` times
//! one ask in 64 (`latency_sample_every`). `cargo bench -p plugin-host
//! --bench plugin_dispatch -- --quick` for a sanity run; figures in
//! docs/benchmarks.md. Criterion runs the variants one after the other, so
//! load changes on a shared machine skew the ratios: the
//! `plugin_dispatch_ab` example runs them interleaved.

#[path = "plugin_dispatch/pipeline.rs"]
mod pipeline;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pipeline::{Topology, Which, metrics_plugin, run};

fn benches(c: &mut Criterion) {
    let factory = plugin_host::load(metrics_plugin(), &serde_json::json!({}))
        .expect("the metrics plugin loads");
    let sampled = plugin_host::load(
        metrics_plugin(),
        &serde_json::json!({"latency_sample_every": 64}),
    )
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
                ("plugin_sampled", Which::Plugin(sampled.clone())),
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
    let sampled = plugin_host::load(
        metrics_plugin(),
        &serde_json::json!({"latency_sample_every": 64}),
    )
    .expect("the metrics plugin loads");
    for n in [500usize, 1] {
        let rounds = 100_000 / n.max(1) as u64 * 10;
        let mut group = c.benchmark_group(format!("dispatch_loop/batch_{n}"));
        group.throughput(Throughput::Elements(rounds * n as u64));
        group.sample_size(10);
        for (label, which) in [
            ("builtin", Which::Builtin),
            ("plugin", Which::Plugin(factory.clone())),
            ("plugin_sampled", Which::Plugin(sampled.clone())),
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
