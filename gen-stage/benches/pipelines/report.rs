//! The figures table: every timed run's rate, gathered while criterion
//! measures, then set against the channel floor of the same run, the Elixir
//! figures of BASELINES.md, and Weir's targets.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use crate::workload::{Flavor, Topology, Workload};

/// Who moved the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mover {
    /// Weir, every stage on its own tokio task.
    Weir,
    /// Weir, every stage of the pipeline in one `StageGroup`.
    Grouped,
    Channel,
    /// The demand-protocol floor (`protocol_floor.rs`).
    Protocol,
}

impl Mover {
    pub fn name(self) -> &'static str {
        match self {
            Mover::Weir => "weir",
            Mover::Grouped => "weir_group",
            Mover::Channel => "channel",
            Mover::Protocol => "protocol",
        }
    }
}

/// Runs and their rates, keyed by (workload, runtime, mover).
#[derive(Debug, Default)]
pub struct Report {
    runs: Mutex<BTreeMap<(Key, Mover), Vec<f64>>>,
}

/// A table row: which workload on which runtime, in BASELINES.md's order
/// (max_demand descending).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    topology: Topology,
    max_demand: Reverse<usize>,
    flavor: Flavor,
    events: u64,
}

impl Key {
    fn new(workload: Workload, flavor: Flavor) -> Self {
        Key {
            topology: workload.topology,
            max_demand: Reverse(workload.max_demand),
            flavor,
            events: workload.events,
        }
    }
}

/// Elixir GenStage's quiet-machine events/s (BASELINES.md).
fn elixir(topology: Topology, max_demand: usize) -> Option<f64> {
    let m = 1e6;
    Some(match (topology, max_demand) {
        (Topology::Chain, 1000) => 17.4 * m,
        (Topology::Chain, 100) => 10.3 * m,
        (Topology::Chain, 10) => 1.98 * m,
        (Topology::Chain, 1) => 0.337 * m,
        (Topology::Demand4, 1000) => 101.8 * m,
        (Topology::Partition4, 1000) => 11.6 * m,
        (Topology::Broadcast4, 1000) => 22.8 * m,
        _ => return None,
    })
}

fn median(rates: &[f64]) -> Option<f64> {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

fn rate(value: f64) -> String {
    if value >= 100e6 {
        format!("{:.0} M", value / 1e6)
    } else if value >= 1e6 {
        format!("{:.1} M", value / 1e6)
    } else {
        format!("{:.3} M", value / 1e6)
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "yes" } else { "**no**" }
}

impl Report {
    /// One timed run of `workload` on `flavor` by `mover`.
    pub fn record(&self, workload: Workload, flavor: Flavor, mover: Mover, elapsed: Duration) {
        let rate = workload.events as f64 / elapsed.as_secs_f64().max(1e-9);
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        runs.entry((Key::new(workload, flavor), mover))
            .or_default()
            .push(rate);
    }

    /// The markdown table of everything recorded (empty if nothing was).
    pub fn table(&self) -> String {
        let runs = self
            .runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut keys: Vec<Key> = runs.keys().map(|(key, _)| *key).collect();
        keys.dedup();
        if keys.is_empty() {
            return String::new();
        }
        let mut out = String::new();
        out.push_str(
            "| workload | max_demand | runtime | events per run | Weir events/s (tasks) \
             | Weir events/s (group) | channel floor events/s | tasks / floor | group / floor \
             | protocol floor events/s | protocol floor / floor | tasks / protocol floor \
             | Elixir events/s | tasks / Elixir | group / Elixir | Elixir target (group) \
             | floor target (group) |\n\
             |---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
        );
        for key in keys {
            let Key {
                topology,
                max_demand: Reverse(max_demand),
                flavor,
                events,
            } = key;
            let weir = runs.get(&(key, Mover::Weir)).and_then(|r| median(r));
            let grouped = runs.get(&(key, Mover::Grouped)).and_then(|r| median(r));
            let floor = runs.get(&(key, Mover::Channel)).and_then(|r| median(r));
            let protocol = runs.get(&(key, Mover::Protocol)).and_then(|r| median(r));
            let protocol_vs_floor = protocol.zip(floor).map(|(p, f)| p / f);
            let vs_protocol = weir.zip(protocol).map(|(w, p)| w / p);
            let elixir = elixir(topology, max_demand);
            let vs_floor = weir.zip(floor).map(|(w, f)| w / f);
            let vs_elixir = weir.zip(elixir).map(|(w, e)| w / e);
            let grouped_vs_floor = grouped.zip(floor).map(|(g, f)| g / f);
            let grouped_vs_elixir = grouped.zip(elixir).map(|(g, e)| g / e);
            // BASELINES.md: current_thread >= 10x Elixir and within 1.5x of
            // the floor; multi_thread >= Elixir and >= the floor. Judged on
            // the grouped pipeline: how a pipeline of cheap stages is meant
            // to run.
            let (elixir_factor, floor_factor) = match flavor {
                Flavor::CurrentThread => (10.0, 1.0 / 1.5),
                Flavor::MultiThread => (1.0, 1.0),
            };
            let elixir_target = grouped_vs_elixir
                .map(|r| format!("{} (>= {elixir_factor}x)", verdict(r >= elixir_factor)))
                .unwrap_or_else(|| "-".to_owned());
            let floor_target = grouped_vs_floor
                .map(|r| {
                    let bound = match flavor {
                        Flavor::CurrentThread => ">= floor / 1.5",
                        Flavor::MultiThread => ">= floor",
                    };
                    format!("{} ({bound})", verdict(r >= floor_factor))
                })
                .unwrap_or_else(|| "-".to_owned());
            let cell =
                |v: Option<f64>, f: fn(f64) -> String| v.map(f).unwrap_or_else(|| "-".to_owned());
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                topology.name(),
                max_demand,
                flavor.name(),
                events,
                cell(weir, rate),
                cell(grouped, rate),
                cell(floor, rate),
                cell(vs_floor, |r| format!("{r:.2}")),
                cell(grouped_vs_floor, |r| format!("{r:.2}")),
                cell(protocol, rate),
                cell(protocol_vs_floor, |r| format!("{r:.2}")),
                cell(vs_protocol, |r| format!("{r:.2}")),
                cell(elixir, rate),
                cell(vs_elixir, |r| format!("{r:.1}x")),
                cell(grouped_vs_elixir, |r| format!("{r:.1}x")),
                elixir_target,
                floor_target,
            );
        }
        out
    }
}
