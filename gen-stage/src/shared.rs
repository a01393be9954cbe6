//! What every handle of a stage shares: its id, whether it is alive, and its
//! monitors (who to tell when it stops).

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::{StageId, StopReason};

/// The kinds of stage, for logs and errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Producer,
    ProducerConsumer,
    Consumer,
    /// A consumer that is not a stage: an [`EventStream`](crate::EventStream)
    /// or a [`RawConsumer`](crate::protocol::RawConsumer).
    RawConsumer,
    /// A [`RawProducer`](crate::protocol::RawProducer).
    RawProducer,
}

impl Kind {
    /// The public kind of a stage run by the runtime (the raw ends never
    /// are: they have no task to ask).
    pub(crate) fn public(self) -> crate::StageKind {
        match self {
            Kind::Producer | Kind::RawProducer => crate::StageKind::Producer,
            Kind::ProducerConsumer => crate::StageKind::ProducerConsumer,
            Kind::Consumer | Kind::RawConsumer => crate::StageKind::Consumer,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Producer => "producer",
            Kind::ProducerConsumer => "producer_consumer",
            Kind::Consumer => "consumer",
            Kind::RawConsumer => "raw consumer",
            Kind::RawProducer => "raw producer",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Called once with the reason when the monitored stage stops.
pub(crate) type Monitor = Box<dyn FnOnce(&StopReason) + Send>;

/// Identifies a monitor, to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct MonitorId(u64);

enum Life {
    Alive {
        monitors: HashMap<u64, Monitor>,
        next: u64,
    },
    Dead(StopReason),
}

/// A stage's identity and life, shared by its task and all its handles.
///
/// Monitors are Erlang's: a monitor set on a live stage is called with its
/// stop reason; one set on a dead stage is called at once with
/// [`StopReason::Noproc`]. The lock is only taken to add or remove monitors
/// and to die, never on the event path.
pub(crate) struct StageShared {
    id: StageId,
    kind: Kind,
    life: Mutex<Life>,
    stopped: watch::Sender<Option<StopReason>>,
}

impl StageShared {
    pub(crate) fn new(kind: Kind) -> Self {
        Self {
            id: StageId::next(),
            kind,
            life: Mutex::new(Life::Alive {
                monitors: HashMap::new(),
                next: 0,
            }),
            stopped: watch::Sender::new(None),
        }
    }

    pub(crate) fn id(&self) -> StageId {
        self.id
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Life> {
        // A poisoned lock only means a monitor panicked while we held it,
        // which cannot happen (monitors run outside the lock); carry on.
        self.life
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Call `monitor` when this stage stops (at once with `Noproc` if it
    /// already has). Returns the id to remove it, or `None` if it already ran.
    pub(crate) fn monitor(&self, monitor: Monitor) -> Option<MonitorId> {
        let mut life = self.lock();
        match &mut *life {
            Life::Alive { monitors, next } => {
                let id = *next;
                *next += 1;
                monitors.insert(id, monitor);
                Some(MonitorId(id))
            }
            Life::Dead(_) => {
                drop(life);
                monitor(&StopReason::Noproc);
                None
            }
        }
    }

    /// Remove a monitor that has not run.
    pub(crate) fn demonitor(&self, id: MonitorId) {
        if let Life::Alive { monitors, .. } = &mut *self.lock() {
            monitors.remove(&id.0);
        }
    }

    /// Record the stop and run the monitors. Only the first call counts;
    /// returns whether this was it.
    pub(crate) fn mark_dead(&self, reason: StopReason) -> bool {
        let monitors = {
            let mut life = self.lock();
            match std::mem::replace(&mut *life, Life::Dead(reason.clone())) {
                Life::Alive { monitors, .. } => monitors,
                dead @ Life::Dead(_) => {
                    *life = dead;
                    return false;
                }
            }
        };
        let mut monitors: Vec<(u64, Monitor)> = monitors.into_iter().collect();
        monitors.sort_by_key(|(id, _)| *id);
        for (_, monitor) in monitors {
            monitor(&reason);
        }
        self.stopped.send_replace(Some(reason));
        true
    }

    /// The stop reason, once stopped.
    pub(crate) fn reason(&self) -> Option<StopReason> {
        match &*self.lock() {
            Life::Alive { .. } => None,
            Life::Dead(reason) => Some(reason.clone()),
        }
    }

    pub(crate) fn is_alive(&self) -> bool {
        matches!(&*self.lock(), Life::Alive { .. })
    }

    /// Wait until the stage has stopped; its reason.
    pub(crate) async fn stopped(&self) -> StopReason {
        let mut rx = self.stopped.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or(StopReason::Killed),
            // The sender lives in `self`, so this cannot happen while we borrow it.
            Err(_) => StopReason::Killed,
        }
    }
}

impl fmt::Debug for StageShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StageShared")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("stopped", &self.reason())
            .finish()
    }
}

/// Marks the stage dead with [`StopReason::Killed`] if its task is dropped
/// before it could stop on its own (e.g. the runtime shut down).
pub(crate) struct DeadOnDrop(pub(crate) std::sync::Arc<StageShared>);

impl Drop for DeadOnDrop {
    fn drop(&mut self) {
        self.0.mark_dead(StopReason::Killed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn monitors_run_once_with_the_reason() {
        let shared = StageShared::new(Kind::Producer);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        shared.monitor(Box::new(move |r| log.lock().expect("lock").push(r.clone())));
        assert!(shared.mark_dead(StopReason::Shutdown));
        assert!(!shared.mark_dead(StopReason::Normal));
        assert_eq!(*seen.lock().expect("lock"), vec![StopReason::Shutdown]);
        assert_eq!(shared.reason(), Some(StopReason::Shutdown));
    }

    #[test]
    fn monitoring_a_dead_stage_reports_noproc_at_once() {
        let shared = StageShared::new(Kind::Consumer);
        shared.mark_dead(StopReason::Normal);
        let seen = Arc::new(Mutex::new(None));
        let log = seen.clone();
        let id = shared.monitor(Box::new(move |r| {
            *log.lock().expect("lock") = Some(r.clone())
        }));
        assert!(id.is_none());
        assert_eq!(*seen.lock().expect("lock"), Some(StopReason::Noproc));
    }

    #[test]
    fn removed_monitors_do_not_run() {
        let shared = StageShared::new(Kind::Consumer);
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let id = shared
            .monitor(Box::new(move |_| {
                c.fetch_add(1, Ordering::SeqCst);
            }))
            .expect("alive");
        shared.demonitor(id);
        shared.mark_dead(StopReason::Normal);
        assert_eq!(count.load(Ordering::SeqCst), 0);
    }
}
