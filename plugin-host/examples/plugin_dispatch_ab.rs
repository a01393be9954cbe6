//! The `plugin_dispatch` bench pipelines, run interleaved outside criterion:
//! each round runs every variant once, so a load change on a shared machine
//! hits all of them alike. Prints the minimum and median time per variant and
//! its ratio to the first one.
//!
//! ```sh
//! cargo build --profile bench -p weir-plugin-host --example plugin_dispatch_ab
//! target/release/examples/plugin_dispatch_ab chain 1000 1000000 60 \
//!     builtin plugin 'plugin:{"latency_sample_every": 64}'
//! ```
//!
//! Arguments: topology (`chain`, `demand4`), max_demand, events, rounds, then
//! the variants: `builtin`, or `plugin` with optional JSON options after a
//! colon. The plugin is found as in the bench (`$WEIR_PLUGIN_DIR`, or built
//! in release). A single round with one variant also suits callgrind.

#[path = "../benches/plugin_dispatch/pipeline.rs"]
mod pipeline;

use std::process::ExitCode;

use pipeline::{Topology, Which, metrics_plugin, run};

fn usage() -> ExitCode {
    eprintln!(
        "usage: plugin_dispatch_ab chain|demand4 MAX_DEMAND EVENTS ROUNDS \
         builtin|plugin[:JSON]..."
    );
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [topology, max_demand, events, rounds, variants @ ..] = args.as_slice() else {
        return usage();
    };
    let topology = match topology.as_str() {
        "chain" => Topology::Chain,
        "demand4" => Topology::Demand4,
        _ => return usage(),
    };
    let (Ok(max_demand), Ok(events), Ok(rounds)) = (
        max_demand.parse::<usize>(),
        events.parse::<u64>(),
        rounds.parse::<usize>(),
    ) else {
        return usage();
    };
    if max_demand == 0 || events == 0 || rounds == 0 || variants.is_empty() {
        return usage();
    }
    let mut which = Vec::new();
    for variant in variants {
        let (kind, options) = variant.split_once(':').unwrap_or((variant, "{}"));
        match kind {
            "builtin" => which.push(Which::Builtin),
            "plugin" => {
                let Ok(options) = serde_json::from_str::<serde_json::Value>(options) else {
                    eprintln!("not JSON: {options}");
                    return usage();
                };
                match weir_plugin_host::load(metrics_plugin(), &options) {
                    Ok(factory) => which.push(Which::Plugin(factory)),
                    Err(error) => {
                        eprintln!("{error}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            _ => return usage(),
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); which.len()];
    for _ in 0..rounds {
        for (w, t) in which.iter().zip(&mut times) {
            let elapsed = runtime.block_on(run(topology, w, events, max_demand));
            t.push(elapsed.as_secs_f64() * 1e3);
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    let (base_min, base_median) = (times[0][0], times[0][rounds / 2]);
    for (variant, t) in variants.iter().zip(&times) {
        let (min, median) = (t[0], t[rounds / 2]);
        println!(
            "{topology:?} max_demand {max_demand}, {variant}: min {min:.3} ms ({:.2}x), \
             median {median:.3} ms ({:.2}x)",
            min / base_min,
            median / base_median
        );
    }
    ExitCode::SUCCESS
}
