//! The workloads of `shared/BASELINES.md`, the runtimes they run on, and the
//! events count.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

/// Events per run when `WEIR_BENCH_EVENTS` is unset (BASELINES.md's N).
pub const DEFAULT_EVENTS: u64 = 10_000_000;

/// A topology from BASELINES.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Topology {
    /// producer -> producer_consumer (x * 2) -> consumer (counts).
    Chain,
    /// producer with the Demand dispatcher -> 4 consumers.
    Demand4,
    /// producer with the Partition dispatcher (4 partitions, default hash) -> 4 consumers.
    Partition4,
    /// producer with the Broadcast dispatcher -> 4 consumers, each receiving all events.
    Broadcast4,
}

impl Topology {
    pub fn name(self) -> &'static str {
        match self {
            Topology::Chain => "chain",
            Topology::Demand4 => "demand4",
            Topology::Partition4 => "partition4",
            Topology::Broadcast4 => "broadcast4",
        }
    }

    /// Events the consumers receive in all for `events` produced.
    pub fn deliveries(self, events: u64) -> u64 {
        match self {
            Topology::Broadcast4 => 4 * events,
            _ => events,
        }
    }

    /// The sum of every value the consumers receive when the producer emits
    /// `0..events`: what a run must add up to, lost or duplicated events
    /// would change it.
    pub fn checksum(self, events: u64) -> u64 {
        // Wrapping, as the consumers add up.
        let sum = (u128::from(events) * u128::from(events.saturating_sub(1)) / 2) as u64;
        match self {
            Topology::Chain => sum.wrapping_mul(2),
            Topology::Broadcast4 => sum.wrapping_mul(4),
            Topology::Demand4 | Topology::Partition4 => sum,
        }
    }
}

/// The tokio runtime a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flavor {
    CurrentThread,
    /// Two workers, as many as the machine's cores.
    MultiThread,
}

impl Flavor {
    pub fn name(self) -> &'static str {
        match self {
            Flavor::CurrentThread => "current_thread",
            Flavor::MultiThread => "multi_thread",
        }
    }

    pub fn runtime(self) -> Runtime {
        let mut builder = match self {
            Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Flavor::MultiThread => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(2);
                builder
            }
        };
        match builder.enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => panic!("cannot build a {} runtime: {error}", self.name()),
        }
    }
}

/// One benchmarked case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    pub topology: Topology,
    pub max_demand: usize,
    /// Events the producer emits per run.
    pub events: u64,
}

impl Workload {
    /// `min_demand` as in BASELINES.md.
    pub fn min_demand(&self) -> usize {
        self.max_demand / 2
    }

    /// The channel floor's batch: `max_demand / 2`, at least 1.
    pub fn batch(&self) -> usize {
        (self.max_demand / 2).max(1)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topology.name(), self.max_demand)
    }
}

/// How many events a run emits: 10 000 000 for every case, as BASELINES.md
/// measures, or `WEIR_BENCH_EVENTS` when set. `WEIR_BENCH_QUICK` divides the
/// default by 10. The slowest cases (max_demand 1, tasks or the protocol
/// floor on multi_thread) take several seconds per run at 10 000 000 on the
/// 2-core machine, so a full run lasts about a quarter of an hour; a rate
/// does not depend on the count once a run outlasts the start-up, so
/// `WEIR_BENCH_EVENTS` can shorten it.
pub fn events_per_run() -> u64 {
    if let Some(events) = events_from_env() {
        return events;
    }
    if quick() {
        DEFAULT_EVENTS / 10
    } else {
        DEFAULT_EVENTS
    }
}

fn events_from_env() -> Option<u64> {
    let raw = std::env::var("WEIR_BENCH_EVENTS").ok()?;
    match raw.replace('_', "").parse::<u64>() {
        Ok(events) if events > 0 => Some(events),
        _ => panic!("WEIR_BENCH_EVENTS must be a positive integer, got {raw:?}"),
    }
}

/// Whether `cargo xtask bench --quick` asked for a short run.
pub fn quick() -> bool {
    std::env::var_os("WEIR_BENCH_QUICK").is_some()
}

/// What the consumers of one run share: the deliveries still expected, the
/// sum of what they received, and the signal that the last one arrived.
#[derive(Debug)]
pub struct Tally {
    remaining: AtomicU64,
    sum: AtomicU64,
    done: Notify,
}

impl Tally {
    pub fn new(deliveries: u64) -> Arc<Self> {
        Arc::new(Self {
            remaining: AtomicU64::new(deliveries),
            sum: AtomicU64::new(0),
            done: Notify::new(),
        })
    }

    /// Counts one batch; wakes [`finished`](Self::finished) on the last.
    pub fn count(&self, events: &[u64]) {
        let n = events.len() as u64;
        self.sum.fetch_add(
            events.iter().copied().fold(0, u64::wrapping_add),
            Ordering::Relaxed,
        );
        if self.remaining.fetch_sub(n, Ordering::AcqRel) == n {
            self.done.notify_one();
        }
    }

    /// Waits until every expected event was counted, or a generous timeout
    /// for `deliveries` passed (a stalled pipeline fails the benchmark
    /// instead of hanging it).
    pub async fn finished(&self, what: &str, deliveries: u64) {
        let timeout = Duration::from_secs(30 + deliveries / 20_000);
        if tokio::time::timeout(timeout, self.done.notified())
            .await
            .is_err()
        {
            panic!(
                "{what}: stalled with {} deliveries missing after {timeout:?}",
                self.remaining.load(Ordering::Acquire)
            );
        }
    }

    /// Panics unless the consumers received exactly the expected values.
    pub fn check(&self, what: &str, expected_sum: u64) {
        let sum = self.sum.load(Ordering::Acquire);
        assert_eq!(
            sum, expected_sum,
            "{what}: events lost, duplicated or altered"
        );
    }
}

/// The clocked part of a hand-written pipeline (the floors): releases the
/// producer through `go`, times until `tally` has every delivery of
/// `workload`, checks what arrived and waits for the pipeline's `tasks` to
/// end.
pub async fn time_floor(
    what: &str,
    workload: Workload,
    tally: &Tally,
    go: oneshot::Sender<()>,
    tasks: impl IntoIterator<Item = JoinHandle<()>>,
) -> Duration {
    let topology = workload.topology;
    let start = Instant::now();
    go.send(()).expect("the producer task waits for the start");
    tally
        .finished(what, topology.deliveries(workload.events))
        .await;
    let elapsed = start.elapsed();

    tally.check(what, topology.checksum(workload.events));
    for task in tasks {
        task.await.expect("a floor task ends cleanly");
    }
    elapsed
}
