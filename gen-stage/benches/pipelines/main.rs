//! Throughput of gen-stage pipelines against the hand-written channel floor,
//! on the workloads of `shared/BASELINES.md`.
//!
//! Every case runs on a current_thread runtime and on a multi_thread runtime
//! with 2 workers, with Weir's stages on their own tasks (`weir`) and all in
//! one `StageGroup` (`weir_group`). The clock starts once every stage is subscribed (the
//! producer holds demand in accumulate mode until then) and stops when the
//! consumers have counted every event; each run checks the sum of what the
//! consumers received. At the end the figures table for
//! `docs/benchmarks.md` is printed, and written to
//! `$WEIR_BENCH_REPORT_DIR/gen-stage.md` when that is set (`cargo xtask
//! bench` sets it).
//!
//! ```sh
//! cargo xtask bench -p weir-gen-stage                  # everything, N = 10 000 000
//! cargo xtask bench -p weir-gen-stage --quick chain/   # a short run of the chain cases
//! WEIR_BENCH_EVENTS=1000000 cargo bench -p weir-gen-stage --bench pipelines
//! ```
//!
//! Without `--bench` (as under `cargo test --all-targets`) each case runs once
//! with 10 000 events, as a smoke test.

mod channel_floor;
mod protocol_floor;
mod report;
mod weir;
mod workload;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use tokio::runtime::Runtime;

use report::{Mover, Report};
use workload::{Flavor, Topology, Workload};

/// Events per case in test mode.
const SMOKE_EVENTS: u64 = 10_000;

fn workloads(smoke: bool) -> Vec<Workload> {
    let events = if smoke {
        SMOKE_EVENTS
    } else {
        workload::events_per_run()
    };
    let chain = [1000, 100, 10, 1].map(|max_demand| Workload {
        topology: Topology::Chain,
        max_demand,
        events,
    });
    let fan_out = [
        Topology::Demand4,
        Topology::Partition4,
        Topology::Broadcast4,
    ]
    .map(|topology| Workload {
        topology,
        max_demand: 1000,
        events,
    });
    chain.into_iter().chain(fan_out).collect()
}

fn bench_flavor(criterion: &mut Criterion, report: &Report, flavor: Flavor, smoke: bool) {
    let runtime: Runtime = flavor.runtime();
    for workload in workloads(smoke) {
        let mut group =
            criterion.benchmark_group(format!("{}/{}", workload.topology.name(), flavor.name()));
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .throughput(Throughput::Elements(workload.events));
        if workload::quick() {
            group
                .warm_up_time(Duration::from_millis(200))
                .measurement_time(Duration::from_secs(1));
        } else {
            group
                .warm_up_time(Duration::from_secs(1))
                .measurement_time(Duration::from_secs(4));
        }

        let mut movers = vec![Mover::Weir, Mover::Grouped, Mover::Channel];
        if workload.topology == Topology::Chain {
            movers.push(Mover::Protocol);
        }
        for mover in movers {
            let id = BenchmarkId::new(mover.name(), workload.max_demand);
            group.bench_function(id, |bencher| {
                bencher.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let elapsed = match mover {
                            Mover::Weir => {
                                runtime.block_on(weir::run(workload, weir::Placement::Tasks))
                            }
                            Mover::Grouped => {
                                runtime.block_on(weir::run(workload, weir::Placement::Group))
                            }
                            Mover::Channel => runtime.block_on(channel_floor::run(workload)),
                            Mover::Protocol => {
                                runtime.block_on(protocol_floor::run_chain(workload))
                            }
                        };
                        report.record(workload, flavor, mover, elapsed);
                        total += elapsed;
                    }
                    total
                })
            });
        }
        group.finish();
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let mut criterion = Criterion::default().configure_from_args();
    let report = Report::default();
    for flavor in [Flavor::CurrentThread, Flavor::MultiThread] {
        bench_flavor(&mut criterion, &report, flavor, smoke);
    }
    criterion.final_summary();

    let table = report.table();
    if smoke || table.is_empty() {
        return;
    }
    println!("\n## gen-stage figures (events/s: median of the timed runs)\n\n{table}");
    if let Some(dir) = std::env::var_os("WEIR_BENCH_REPORT_DIR") {
        let dir = std::path::PathBuf::from(dir);
        let path = dir.join("gen-stage.md");
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &table)) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(error) => eprintln!("cannot write {}: {error}", path.display()),
        }
    }
}
