//! Graceful drain: shutting a set of stages down with a deadline, losing
//! nothing that was already produced.
//!
//! [`Drain`] tells every stage of the set, in two rounds, that it is
//! draining: first that a subscription ending no longer stops it by its
//! cancel mode (only the drain does), then to start. From then on a
//! producer's `handle_demand` is no longer called (producers stop
//! emitting), every stage cancels its subscriptions to producers outside the
//! set, and each stage stops itself (with [`StopReason::Shutdown`]) as soon
//! as it holds nothing any more:
//!
//! - no subscription to a producer left (each ends when its producer has
//!   stopped, after the events it sent, which travel ahead of the news in
//!   the same mailbox, have been handled),
//! - nothing queued for downstream demand (producer_consumers),
//! - nothing in its buffer or held by its dispatcher,
//! - no work in flight outside the runtime's view
//!   ([`Consumer::in_flight`](crate::Consumer::in_flight), e.g. a
//!   [`ConsumerSupervisor`](crate::ConsumerSupervisor)'s running children).
//!
//! So the stages stop in order, upstream first, each once everything in
//! front of it has been delivered and handled. If the deadline passes
//! first, every stage still running stops at its next message, and reports
//! what it still held ([`Undelivered`]).
//!
//! The drain is decided by each stage in its own task, between two
//! messages, like [`status`](crate::StageRef::status): there is no lock and
//! no race between "nothing left" and the stop.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::handle::Drainable;
use crate::shared::StageShared;
use crate::stage::Stage;
use crate::{
    ConsumerRef, DEFAULT_TIMEOUT, Error, ProducerRef, StageId, StageKind, StageRef, StopReason,
};

/// Any stage, whatever its type: what a [`Drain`] works on.
///
/// Built from any handle: `AnyStage::from(&stage_ref)`, or from a
/// [`ProducerRef`] or [`ConsumerRef`] (e.g. what
/// [`from_iter`](crate::from_iter) returns). Cheap to clone.
#[derive(Clone)]
pub struct AnyStage {
    inner: Arc<dyn Drainable>,
}

impl AnyStage {
    fn shared(&self) -> &Arc<StageShared> {
        self.inner.shared()
    }

    /// The stage's id.
    pub fn id(&self) -> StageId {
        self.shared().id()
    }

    /// Whether the stage is still running.
    pub fn is_alive(&self) -> bool {
        self.shared().is_alive()
    }

    /// Wait until the stage stops; why it stopped.
    pub async fn stopped(&self) -> StopReason {
        self.shared().stopped().await
    }

    /// Why the stage stopped; `None` while it runs.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.shared().reason()
    }

    /// Ask the stage to stop with `reason` once the messages already in its
    /// mailbox are handled, without waiting (a stop that is no answer to
    /// anything: see [`stopped`](Self::stopped)). Errors if it is not
    /// running.
    pub fn stop(&self, reason: StopReason) -> Result<(), Error> {
        if self.inner.stop(reason) {
            Ok(())
        } else {
            Err(Error::NotAlive { stage: self.id() })
        }
    }
}

impl fmt::Debug for AnyStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyStage")
            .field("id", &self.id())
            .field("kind", &self.shared().kind().name())
            .finish()
    }
}

impl<S: Stage> From<&StageRef<S>> for AnyStage {
    fn from(stage: &StageRef<S>) -> Self {
        AnyStage {
            inner: Arc::new(stage.mailbox.clone()),
        }
    }
}

impl<S: Stage> From<StageRef<S>> for AnyStage {
    fn from(stage: StageRef<S>) -> Self {
        AnyStage {
            inner: Arc::new(stage.mailbox),
        }
    }
}

impl<T: 'static> From<&ProducerRef<T>> for AnyStage {
    fn from(producer: &ProducerRef<T>) -> Self {
        AnyStage {
            inner: Arc::new(producer.clone()),
        }
    }
}

impl<T: 'static> From<ProducerRef<T>> for AnyStage {
    fn from(producer: ProducerRef<T>) -> Self {
        AnyStage {
            inner: Arc::new(producer),
        }
    }
}

impl<T: 'static> From<&ConsumerRef<T>> for AnyStage {
    fn from(consumer: &ConsumerRef<T>) -> Self {
        AnyStage {
            inner: Arc::new(consumer.clone()),
        }
    }
}

impl<T: 'static> From<ConsumerRef<T>> for AnyStage {
    fn from(consumer: ConsumerRef<T>) -> Self {
        AnyStage {
            inner: Arc::new(consumer),
        }
    }
}

impl From<&AnyStage> for AnyStage {
    fn from(stage: &AnyStage) -> Self {
        stage.clone()
    }
}

/// Shut a set of stages down gracefully, within a deadline.
///
/// Producers stop emitting, everything already produced is delivered and
/// handled, the stages stop in order (upstream first, each with
/// [`StopReason::Shutdown`]), and [`run`](Self::run) says for every stage
/// whether it drained and what it still held if the deadline passed. See
/// the [module documentation](crate::drain) for the rules.
///
/// Downstream stages left out of the set keep running and see their
/// producers stop with `Shutdown` (so a [`Transient`](crate::CancelMode::Transient)
/// subscription keeps them running); producers left out of the set are
/// cancelled by the stages of the set that subscribed to them.
///
/// ```
/// use std::time::Duration;
/// use weir_gen_stage::{Drain, DrainOutcome, SubscribeOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let numbers = weir_gen_stage::from_iter(0..u64::MAX).await?;
/// let (seen, mut received) = tokio::sync::mpsc::unbounded_channel();
/// let printer = weir_gen_stage::for_each(move |n: u64| {
///     let _ = seen.send(n);
/// })
/// .await?;
/// printer.subscribe(&numbers, SubscribeOptions::new().max_demand(10)).await?;
/// assert_eq!(received.recv().await, Some(0));
///
/// let report = Drain::new(Duration::from_secs(5)).stage(&numbers).stage(&printer).run().await;
/// assert!(report.is_complete());
/// // The producer stopped first, then the consumer, which handled every
/// // event the producer had sent.
/// assert_eq!(report.stages[0].id, numbers.id());
/// assert_eq!(report.stages[1].outcome, DrainOutcome::Drained);
/// assert_eq!(report.undelivered(), 0);
/// // Nothing more arrives: the stages have stopped.
/// while received.recv().await.is_some() {}
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "nothing is drained until `run` is awaited"]
pub struct Drain {
    stages: Vec<AnyStage>,
    deadline: Duration,
    grace: Duration,
}

impl Drain {
    /// A drain that gives the stages `deadline` to stop on their own.
    pub fn new(deadline: Duration) -> Self {
        Self {
            stages: Vec::new(),
            deadline,
            grace: DEFAULT_TIMEOUT,
        }
    }

    /// Add a stage to the set (a stage added twice counts once).
    pub fn stage(mut self, stage: impl Into<AnyStage>) -> Self {
        self.stages.push(stage.into());
        self
    }

    /// Add stages to the set.
    pub fn stages<I>(mut self, stages: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<AnyStage>,
    {
        self.stages.extend(stages.into_iter().map(Into::into));
        self
    }

    /// How long to wait, once the deadline has passed, for the stages still
    /// running to stop (default [`DEFAULT_TIMEOUT`]). A stage stops at its
    /// next message; one whose callback runs for longer than this is
    /// reported [`DrainOutcome::Unresponsive`].
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Drain the stages and report on each.
    pub async fn run(self) -> DrainReport {
        let deadline = tokio::time::Instant::now() + self.deadline;
        let mut seen = HashSet::new();
        let stages: Vec<AnyStage> = self
            .stages
            .into_iter()
            .filter(|stage| seen.insert(stage.id()))
            .collect();
        let members = Arc::new(seen);
        let signal = Arc::new(DrainSignal::default());
        let (reports_tx, mut reports) = mpsc::unbounded_channel();

        let mut report = DrainReport {
            stages: Vec::with_capacity(stages.len()),
            deadline_passed: false,
        };
        // Round one: every stage learns it is draining before any stage
        // starts, so no stage stops by cancel mode because its producer
        // drained first.
        let mut draining = Vec::with_capacity(stages.len());
        for stage in stages {
            let prepare = DrainRequest::Prepare(Box::new(Prepare {
                members: members.clone(),
                signal: signal.clone(),
                report: reports_tx.clone(),
            }));
            match stage.inner.drain(prepare) {
                Ok(()) => draining.push(stage),
                Err(error) => report.stages.push(StageDrain::not_drained(
                    &stage,
                    match error {
                        Error::NotAlive { .. } => DrainOutcome::AlreadyStopped(
                            stage.shared().reason().unwrap_or(StopReason::Noproc),
                        ),
                        _ => DrainOutcome::NotAStage,
                    },
                )),
            }
        }
        drop(reports_tx);
        for stage in &draining {
            let _ = stage.inner.drain(DrainRequest::Start);
        }

        let mut waiting: HashSet<StageId> = draining.iter().map(AnyStage::id).collect();
        let reported = collect(&mut reports, &mut waiting, &mut report.stages);
        if tokio::time::timeout_at(deadline, reported).await.is_err() {
            report.deadline_passed = true;
            signal.passed.store(true, Ordering::Release);
            for stage in draining.iter().filter(|s| waiting.contains(&s.id())) {
                let _ = stage.inner.drain(DrainRequest::Deadline);
            }
            let reported = collect(&mut reports, &mut waiting, &mut report.stages);
            let _ = tokio::time::timeout(self.grace, reported).await;
        }
        // A stage reports just before it is marked dead: once `run`
        // returns, every stage that reported has stopped.
        for stage in draining.iter().filter(|s| !waiting.contains(&s.id())) {
            let _ = tokio::time::timeout(self.grace, stage.stopped()).await;
        }
        // Stages that never answered: still running a callback, or their
        // task was dropped.
        for stage in draining.iter().filter(|s| waiting.contains(&s.id())) {
            let outcome = match stage.shared().reason() {
                Some(reason) => DrainOutcome::Stopped(reason),
                None => DrainOutcome::Unresponsive,
            };
            report.stages.push(StageDrain::not_drained(stage, outcome));
        }
        report
    }
}

/// Receives stage reports until none is awaited or every stage is gone.
async fn collect(
    reports: &mut mpsc::UnboundedReceiver<StageDrain>,
    waiting: &mut HashSet<StageId>,
    into: &mut Vec<StageDrain>,
) {
    while !waiting.is_empty() {
        let Some(stage) = reports.recv().await else {
            return;
        };
        if waiting.remove(&stage.id) {
            into.push(stage);
        }
    }
}

/// What a [`Drain`] found, stage by stage.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// One entry per stage, in the order they stopped (those already
    /// stopped, or not stages, first; those that never answered last).
    pub stages: Vec<StageDrain>,
    /// The deadline passed before every stage had drained.
    pub deadline_passed: bool,
}

impl DrainReport {
    /// Every stage drained (or had already stopped before the drain), and
    /// nothing was left undelivered.
    pub fn is_complete(&self) -> bool {
        self.stages.iter().all(|stage| {
            matches!(
                stage.outcome,
                DrainOutcome::Drained | DrainOutcome::AlreadyStopped(_)
            ) && stage.undelivered.is_empty()
        })
    }

    /// The report on one stage.
    pub fn stage(&self, id: StageId) -> Option<&StageDrain> {
        self.stages.iter().find(|stage| stage.id == id)
    }

    /// Events the stages still held when they stopped, all stages together.
    pub fn undelivered(&self) -> usize {
        self.stages.iter().map(|s| s.undelivered.total()).sum()
    }
}

/// How one stage's drain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DrainOutcome {
    /// The stage stopped holding nothing: every event that reached it was
    /// handled, every event it produced was sent on. (Also a stage that
    /// stopped on its own with a normal or shutdown reason and nothing
    /// left, e.g. a [`from_iter`](crate::from_iter) producer at the end of
    /// its iterator.)
    Drained,
    /// The deadline passed: the stage was stopped with what it still held
    /// ([`StageDrain::undelivered`]).
    DeadlinePassed,
    /// The stage stopped for another reason during the drain (a callback
    /// returned a stop, panicked, someone called `stop`).
    Stopped(StopReason),
    /// The stage had stopped before the drain began.
    AlreadyStopped(StopReason),
    /// The stage did not stop within the grace period after the deadline
    /// (a callback still running). It will stop at its next message.
    Unresponsive,
    /// Not a stage: a raw protocol end ([`protocol`](crate::protocol)) or an
    /// [`EventStream`](crate::EventStream), which the drain cannot reach.
    NotAStage,
}

/// One stage's part of a [`DrainReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StageDrain {
    /// The stage.
    pub id: StageId,
    /// Its kind.
    pub kind: StageKind,
    /// How its drain ended.
    pub outcome: DrainOutcome,
    /// Events handed to its `handle_events` during the drain.
    pub handled: usize,
    /// Events it sent to its consumers during the drain.
    pub dispatched: usize,
    /// What it still held when it stopped.
    pub undelivered: Undelivered,
}

impl StageDrain {
    fn not_drained(stage: &AnyStage, outcome: DrainOutcome) -> Self {
        StageDrain {
            id: stage.id(),
            kind: stage.shared().kind().public(),
            outcome,
            handled: 0,
            dispatched: 0,
            undelivered: Undelivered::default(),
        }
    }
}

/// Events a stage still held when it stopped: lost with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Undelivered {
    /// Produced and never sent: in the producer's buffer, held by its
    /// dispatcher (partition queues), or recorded while accumulating.
    pub buffered: usize,
    /// Producer_consumers: received and never handed to `handle_events`
    /// (waiting for downstream demand).
    pub queued: usize,
    /// Sent to the stage and still in its mailbox.
    pub in_mailbox: usize,
    /// Work the stage reported in flight
    /// ([`Consumer::in_flight`](crate::Consumer::in_flight)).
    pub in_flight: usize,
}

impl Undelivered {
    /// All of it.
    pub fn total(&self) -> usize {
        self.buffered + self.queued + self.in_mailbox + self.in_flight
    }

    /// Nothing was left.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// Shared by a drain and its stages: whether the deadline has passed.
#[derive(Debug, Default)]
pub(crate) struct DrainSignal {
    passed: AtomicBool,
}

impl DrainSignal {
    pub(crate) fn deadline_passed(&self) -> bool {
        self.passed.load(Ordering::Acquire)
    }
}

/// What a drain sends a stage.
pub(crate) enum DrainRequest {
    /// Round one: the stage is draining (its subscriptions' ends no longer
    /// stop it); report to `report` when it stops.
    Prepare(Box<Prepare>),
    /// Round two: stop emitting, cancel subscriptions to producers outside
    /// the set, stop once drained.
    Start,
    /// The deadline passed (the signal says so): wakes the stage, which
    /// stops at once.
    Deadline,
}

pub(crate) struct Prepare {
    /// The stages being drained.
    pub(crate) members: Arc<HashSet<StageId>>,
    pub(crate) signal: Arc<DrainSignal>,
    pub(crate) report: mpsc::UnboundedSender<StageDrain>,
}
