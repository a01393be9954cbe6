//! Every engine this process runs outside itself — containers and child processes — in one
//! process-wide register, so that a signal handler can end them all ([`shutdown`]) before the
//! process exits. A process that exits on SIGTERM without calling it runs no destructors, and its
//! containers would keep running until the next start removes them as orphans.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::process::Child;

use crate::container::daemon::DockerDaemon;
use crate::error::RuntimeError;

/// How long [`shutdown`] waits for a killed engine process to be gone.
const REAP_LIMIT: Duration = Duration::from_secs(5);

/// The engines alive in this process.
struct Live {
    /// Set by [`shutdown`]: no engine starts after it.
    shutting_down: bool,
    next_key: u64,
    /// Container name → the daemon it runs on. Registered before the container is created, removed
    /// once it is gone.
    containers: BTreeMap<String, DockerDaemon>,
    /// Engine processes; weak, so that the register never keeps a child alive.
    processes: BTreeMap<u64, Weak<tokio::sync::Mutex<Child>>>,
    /// Removals running on threads of their own (dropped handles).
    removals_in_flight: usize,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    shutting_down: false,
    next_key: 0,
    containers: BTreeMap::new(),
    processes: BTreeMap::new(),
    removals_in_flight: 0,
});

/// Signalled whenever `removals_in_flight` drops.
static REMOVAL_DONE: Condvar = Condvar::new();

fn live() -> MutexGuard<'static, Live> {
    // The register holds no invariant a panicking holder could break half-way.
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A container in the register; [`ContainerEntry::removed`] takes it out.
#[derive(Debug)]
pub(crate) struct ContainerEntry {
    name: String,
}

impl ContainerEntry {
    /// Registers container `name` of `engine` before it is created, unless the process is shutting
    /// down.
    pub(crate) fn register(
        engine: &str,
        name: &str,
        daemon: &DockerDaemon,
    ) -> Result<Self, RuntimeError> {
        let mut live = live();
        if live.shutting_down {
            return Err(RuntimeError::ShuttingDown {
                engine: engine.to_owned(),
            });
        }
        live.containers.insert(name.to_owned(), daemon.clone());
        Ok(Self {
            name: name.to_owned(),
        })
    }

    /// The container is gone.
    pub(crate) fn removed(self) {
        live().containers.remove(&self.name);
    }
}

/// An engine process in the register, taken out when dropped.
#[derive(Debug)]
pub(crate) struct ProcessEntry {
    key: u64,
}

impl ProcessEntry {
    /// Registers a child process of `engine`, unless the process is shutting down (the child is
    /// then killed when the caller drops it).
    pub(crate) fn register(
        engine: &str,
        child: Weak<tokio::sync::Mutex<Child>>,
    ) -> Result<Self, RuntimeError> {
        let mut live = live();
        if live.shutting_down {
            return Err(RuntimeError::ShuttingDown {
                engine: engine.to_owned(),
            });
        }
        let key = live.next_key;
        live.next_key += 1;
        live.processes.insert(key, child);
        Ok(Self { key })
    }
}

impl Drop for ProcessEntry {
    fn drop(&mut self) {
        live().processes.remove(&self.key);
    }
}

/// Fails with [`RuntimeError::ShuttingDown`] once [`shutdown`] was called.
/// Marks the process as shutting down, at once and from any thread: no engine starts any more, and long work
/// under way (hashing an engine binary) stops. [`shutdown`] does this too before it stops what runs; a
/// signal handler that cannot run [`shutdown`] yet (the thread that would is busy) calls this first.
pub fn begin_shutdown() {
    live().shutting_down = true;
}

/// Whether [`shutdown`] has begun: long work (hashing a binary) stops at once.
pub(crate) fn is_shutting_down() -> bool {
    live().shutting_down
}

pub(crate) fn check_not_shutting_down(engine: &str) -> Result<(), RuntimeError> {
    if live().shutting_down {
        Err(RuntimeError::ShuttingDown {
            engine: engine.to_owned(),
        })
    } else {
        Ok(())
    }
}

/// Counts a removal running on a thread of its own until dropped.
#[derive(Debug)]
pub(crate) struct RemovalInFlight(());

impl RemovalInFlight {
    pub(crate) fn begin() -> Self {
        live().removals_in_flight += 1;
        Self(())
    }
}

impl Drop for RemovalInFlight {
    fn drop(&mut self) {
        let mut live = live();
        live.removals_in_flight = live.removals_in_flight.saturating_sub(1);
        REMOVAL_DONE.notify_all();
    }
}

/// What [`shutdown`] ended.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Containers removed (killed first when they ran).
    pub removed_containers: Vec<String>,
    /// Engine processes killed.
    pub killed_processes: usize,
    /// Containers that could not be removed, and why. The next start of a process using this
    /// crate removes them as orphans.
    pub failures: Vec<(String, RuntimeError)>,
}

/// Ends every engine this process started that still runs — kills engine processes (SIGKILL),
/// removes containers (killing them first) — and refuses every later start with
/// [`RuntimeError::ShuttingDown`]. Call it from the handler of SIGTERM and SIGINT before the
/// process exits: a process ended by a signal runs no destructors, so without it the containers
/// would run on until the next start removes them as orphans.
///
/// Engine handles still held afterwards fail their calls (the engine is gone); dropping or stopping
/// them is harmless.
///
/// ```no_run
/// # async fn example() {
/// let mut terminate =
///     tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
/// terminate.recv().await;
/// let report = weir_engine_runtime::shutdown().await;
/// eprintln!("removed {:?}", report.removed_containers);
/// // Handles dropped while the async runtime shuts down remove their containers on threads of
/// // their own: wait for them before exiting.
/// weir_engine_runtime::wait_for_removals(std::time::Duration::from_secs(15));
/// std::process::exit(143);
/// # }
/// ```
pub async fn shutdown() -> ShutdownReport {
    let (containers, processes) = {
        let mut live = live();
        live.shutting_down = true;
        (
            std::mem::take(&mut live.containers),
            live.processes.values().cloned().collect::<Vec<_>>(),
        )
    };
    let mut report = ShutdownReport::default();
    for child in processes.iter().filter_map(Weak::upgrade) {
        let mut child = child.lock().await;
        if matches!(child.try_wait(), Ok(None)) && child.start_kill().is_ok() {
            report.killed_processes += 1;
            // Reaped, so it is gone (its sockets closed) when this returns; SIGKILL cannot be
            // ignored, the bound is for a process stuck in the kernel.
            let _ = tokio::time::timeout(REAP_LIMIT, child.wait()).await;
        }
    }
    let removals = containers.into_iter().map(|(name, daemon)| async move {
        let removed = daemon.force_remove(&name).await;
        (name, removed)
    });
    for (name, removed) in futures::future::join_all(removals).await {
        match removed {
            Ok(()) => report.removed_containers.push(name),
            Err(error) => report.failures.push((name, error)),
        }
    }
    if !report.removed_containers.is_empty() || report.killed_processes > 0 {
        tracing::info!(
            containers = ?report.removed_containers,
            processes = report.killed_processes,
            "shutdown: engines ended"
        );
    }
    for (name, error) in &report.failures {
        tracing::error!(container = %name, %error, "shutdown: could not remove an engine container");
    }
    report
}

/// The names of the containers this process runs engines in (created, or being created, and not
/// yet removed).
pub fn live_containers() -> Vec<String> {
    live().containers.keys().cloned().collect()
}

/// Blocks until every container removal started by a dropped engine handle has finished, or
/// `limit` passed; `true` when none is left. Call it before the process exits (e.g. after the async
/// runtime was shut down), since those removals run on threads of their own.
pub fn wait_for_removals(limit: Duration) -> bool {
    let live = live();
    let (live, _) = REMOVAL_DONE
        .wait_timeout_while(live, limit, |live| live.removals_in_flight > 0)
        .unwrap_or_else(PoisonError::into_inner);
    live.removals_in_flight == 0
}
