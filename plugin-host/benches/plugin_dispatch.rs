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
//! one ask in 64 (`latency_sample_every`).
//!
//! Criterion measures each variant on its own, one after the other, so a
//! load change on a shared machine (or the order itself) skews ratios taken
//! between them. The `paired` case therefore runs builtin, plugin and
//! plugin_sampled back to back in every iteration; the ratios table printed
//! at the end (and written to `$WEIR_BENCH_REPORT_DIR/plugin-host.md`) is the
//! median of those per-round ratios. `cargo bench -p weir-plugin-host --bench
//! plugin_dispatch -- --quick` for a sanity run; figures in
//! docs/benchmarks.md.

#[path = "plugin_dispatch/pipeline.rs"]
mod pipeline;

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use pipeline::{Topology, Which, metrics_plugin, run};

/// Per workload, the times of every paired round: builtin, plugin,
/// plugin_sampled.
#[derive(Default)]
struct Pairs {
    rounds: Mutex<Vec<(String, [Duration; 3])>>,
}

impl Pairs {
    fn record(&self, workload: &str, times: [Duration; 3]) {
        self.rounds
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((workload.to_owned(), times));
    }

    /// The markdown table: per workload, the median time of each variant
    /// and the median of the per-round ratios to builtin.
    fn table(&self) -> String {
        let rounds = self
            .rounds
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut workloads: Vec<&str> = rounds.iter().map(|(w, _)| w.as_str()).collect();
        workloads.dedup();
        let mut out = String::from(
            "| workload | rounds | builtin (median) | plugin (median) | plugin_sampled (median) \
             | plugin / builtin | plugin_sampled / builtin |\n|---|---:|---:|---:|---:|---:|---:|\n",
        );
        for workload in workloads {
            let times: Vec<[Duration; 3]> = rounds
                .iter()
                .filter(|(w, _)| w == workload)
                .map(|(_, t)| *t)
                .collect();
            let column = |i: usize| median(times.iter().map(|t| t[i].as_secs_f64()).collect());
            let ratio = |i: usize| {
                median(
                    times
                        .iter()
                        .map(|t| t[i].as_secs_f64() / t[0].as_secs_f64().max(1e-12))
                        .collect(),
                )
            };
            let _ = writeln!(
                out,
                "| {workload} | {} | {:.3} ms | {:.3} ms | {:.3} ms | {:.2}x | {:.2}x |",
                times.len(),
                column(0) * 1e3,
                column(1) * 1e3,
                column(2) * 1e3,
                ratio(1),
                ratio(2),
            );
        }
        out
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn benches(c: &mut Criterion, pairs: &Pairs, measuring: bool) {
    let factory = weir_plugin_host::load(metrics_plugin(), &serde_json::json!({}))
        .expect("the metrics plugin loads");
    let sampled = weir_plugin_host::load(
        metrics_plugin(),
        &serde_json::json!({"latency_sample_every": 64}),
    )
    .expect("the metrics plugin loads");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let variants = [
        ("builtin", Which::Builtin),
        ("plugin", Which::Plugin(factory)),
        ("plugin_sampled", Which::Plugin(sampled)),
    ];
    for (topology, name) in [(Topology::Chain, "chain"), (Topology::Demand4, "demand4")] {
        for (max_demand, events) in [(1000usize, 1_000_000u64), (1, 50_000)] {
            // `cargo test`'s smoke run (a debug build, no `--bench`): a hundredth of the events.
            let events = if measuring { events } else { events / 100 };
            let workload = format!("{name}/max_demand_{max_demand}");
            let mut group = c.benchmark_group(&workload);
            group.throughput(Throughput::Elements(events));
            group.sample_size(10);
            for (label, which) in &variants {
                group.bench_function(BenchmarkId::from_parameter(label), |b| {
                    b.iter_custom(|iterations| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iterations {
                            total += runtime.block_on(run(topology, which, events, max_demand));
                        }
                        total
                    });
                });
            }
            // All three back to back per iteration; criterion's time is
            // their sum, the ratios go to the table.
            group.throughput(Throughput::Elements(3 * events));
            group.bench_function(BenchmarkId::from_parameter("paired"), |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let times = variants.each_ref().map(|(_, which)| {
                            runtime.block_on(run(topology, which, events, max_demand))
                        });
                        pairs.record(&workload, times);
                        total += times.iter().sum::<Duration>();
                    }
                    total
                });
            });
            group.finish();
        }
    }
}

/// The dispatchers alone, without a runtime: one consumer asks `n` and a
/// batch of `n` events is dispatched, over and over. This isolates the cost
/// of crossing the ABI (and of the metrics) per call.
fn dispatch_loop(c: &mut Criterion) {
    use weir_dispatchers::{ConsumerId, Outbox, Subscriber, SubscriptionId, SubscriptionOptions};
    let factory = weir_plugin_host::load(metrics_plugin(), &serde_json::json!({}))
        .expect("the metrics plugin loads");
    let sampled = weir_plugin_host::load(
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

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not (then every case
    // runs once, as a smoke test, and no table is printed).
    let measuring = std::env::args().any(|arg| arg == "--bench");
    let mut criterion = Criterion::default().configure_from_args();
    let pairs = Pairs::default();
    benches(&mut criterion, &pairs, measuring);
    dispatch_loop(&mut criterion);
    criterion.final_summary();
    if !measuring {
        return;
    }
    let table = pairs.table();
    println!("\n## plugin-host: paired rounds (median of per-round ratios)\n\n{table}");
    if let Some(dir) = std::env::var_os("WEIR_BENCH_REPORT_DIR") {
        let dir = std::path::PathBuf::from(dir);
        let path = dir.join("plugin-host.md");
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &table)) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(error) => eprintln!("cannot write {}: {error}", path.display()),
        }
    }
}
