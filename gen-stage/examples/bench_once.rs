//! One run of one `pipelines` bench case, outside criterion: the same
//! stages and channel floor as `benches/pipelines` (the modules are shared),
//! for profilers whose counts only make sense for a fixed amount of work,
//! such as callgrind.
//!
//! ```sh
//! cargo build --profile bench -p weir-gen-stage --example bench_once
//! valgrind --tool=callgrind target/release/examples/bench_once chain 1000 current_thread weir 1000000
//! ```
//!
//! Arguments, in order: topology (`chain`, `demand4`, `partition4`,
//! `broadcast4`), max_demand, runtime (`current_thread`, `multi_thread`),
//! mover (`weir`, `group` for Weir with every stage in one `StageGroup`,
//! `channel`, `protocol`; the protocol floor is the chain only),
//! events. Prints
//! the rate of the run.

#[path = "../benches/pipelines/channel_floor.rs"]
mod channel_floor;
#[path = "../benches/pipelines/protocol_floor.rs"]
mod protocol_floor;
#[path = "../benches/pipelines/weir.rs"]
mod weir;
#[path = "../benches/pipelines/workload.rs"]
#[allow(dead_code)]
mod workload;

use std::process::ExitCode;

use workload::{Flavor, Topology, Workload};

fn usage() -> ExitCode {
    eprintln!(
        "usage: bench_once chain|demand4|partition4|broadcast4 MAX_DEMAND \
         current_thread|multi_thread weir|group|channel|protocol EVENTS"
    );
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [topology, max_demand, flavor, mover, events] = args.as_slice() else {
        return usage();
    };
    let topology = match topology.as_str() {
        "chain" => Topology::Chain,
        "demand4" => Topology::Demand4,
        "partition4" => Topology::Partition4,
        "broadcast4" => Topology::Broadcast4,
        _ => return usage(),
    };
    let flavor = match flavor.as_str() {
        "current_thread" => Flavor::CurrentThread,
        "multi_thread" => Flavor::MultiThread,
        _ => return usage(),
    };
    let (Ok(max_demand), Ok(events)) = (max_demand.parse::<usize>(), events.parse::<u64>()) else {
        return usage();
    };
    if max_demand == 0 || events == 0 {
        return usage();
    }
    let workload = Workload {
        topology,
        max_demand,
        events,
    };
    let runtime = flavor.runtime();
    let elapsed = match (mover.as_str(), topology) {
        ("weir", _) => runtime.block_on(weir::run(workload, weir::Placement::Tasks)),
        ("group", _) => runtime.block_on(weir::run(workload, weir::Placement::Group)),
        ("channel", _) => runtime.block_on(channel_floor::run(workload)),
        ("protocol", Topology::Chain) => runtime.block_on(protocol_floor::run_chain(workload)),
        _ => return usage(),
    };
    println!(
        "{mover} {workload} {}: {events} events in {elapsed:?}, {:.1} M events/s",
        flavor.name(),
        events as f64 / elapsed.as_secs_f64() / 1e6
    );
    ExitCode::SUCCESS
}
