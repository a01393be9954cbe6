//! A stage's side of a [`Drain`](crate::Drain): entering drain mode,
//! deciding between two messages whether it holds anything still, and its
//! report when it stops.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::Core;
use crate::drain::{DrainOutcome, DrainRequest, DrainSignal, StageDrain, Undelivered};
use crate::message::Msg;
use crate::shared::Kind;
use crate::stage::Callbacks;
use crate::{StageId, StopReason};

/// A draining stage's state.
pub(crate) struct Draining {
    /// The stages being drained with this one.
    members: Arc<HashSet<StageId>>,
    signal: Arc<DrainSignal>,
    /// Where the report goes (one per drain that named this stage).
    reports: Vec<mpsc::UnboundedSender<StageDrain>>,
    /// Round two arrived: producers stop emitting, the stage stops once
    /// drained.
    pub(super) started: bool,
    /// The stage's [`handled`](Core::handled) count when the drain began:
    /// the report says how many events were handed to `handle_events`
    /// since. (The event path counts without looking at the drain.)
    handled_before: usize,
    /// The producer side's [`dispatched`](super::ProducerSide::dispatched)
    /// count when the drain began.
    dispatched_before: usize,
    /// Why the drain stopped the stage, once it did.
    outcome: Option<DrainOutcome>,
}

impl<S: Callbacks> Core<S> {
    pub(super) fn on_drain(&mut self, request: DrainRequest) {
        match request {
            DrainRequest::Prepare(prepare) => match self.drain.as_deref_mut() {
                // Already draining: the first drain's set and deadline
                // stand; the other drain gets the report too.
                Some(draining) => draining.reports.push(prepare.report),
                None => {
                    tracing::debug!("draining: subscriptions ending no longer stop this stage");
                    self.drain = Some(Box::new(Draining {
                        members: prepare.members,
                        signal: prepare.signal,
                        reports: vec![prepare.report],
                        started: false,
                        handled_before: self.handled,
                        dispatched_before: self.dispatched(),
                        outcome: None,
                    }));
                }
            },
            DrainRequest::Start => {
                let Some(draining) = self.drain.as_deref_mut() else {
                    return;
                };
                if draining.started {
                    return;
                }
                draining.started = true;
                if S::KIND == Kind::Producer
                    && let Some(producer) = self.producer.as_mut()
                {
                    // `emitting_stopped` from now on.
                    producer.demand_held = true;
                }
                tracing::debug!("draining: producers stop emitting");
                // Producers outside the set would keep this stage fed: cancel
                // them. Events they sent before the cancel still arrive
                // ahead of its confirmation, and are handled.
                for (sub, upstream) in &self.upstream {
                    if !draining.members.contains(&upstream.subscription.producer) {
                        upstream.producer.inner.cancel(*sub, StopReason::Shutdown);
                    }
                }
            }
            // The signal is what counts; the message only wakes the stage.
            DrainRequest::Deadline => {}
        }
    }

    /// Between two messages of a draining stage: the reason to stop now, if
    /// the stage holds nothing any more or the deadline has passed.
    pub(super) fn drain_check(&mut self) -> Option<StopReason> {
        let draining = self.drain.as_deref()?;
        if !draining.started {
            return None;
        }
        let outcome = if draining.signal.deadline_passed() {
            DrainOutcome::DeadlinePassed
        } else if self.is_drained() {
            DrainOutcome::Drained
        } else {
            return None;
        };
        if let Some(draining) = self.drain.as_deref_mut() {
            draining.outcome = Some(outcome);
        }
        Some(StopReason::Shutdown)
    }

    /// Nothing left: no subscription to a producer (so every event sent to
    /// this stage has been handled), nothing queued, buffered or in flight.
    fn is_drained(&self) -> bool {
        self.upstream.is_empty()
            && self.pc_queue.is_empty()
            && self.pending.is_empty()
            && self.producer.as_ref().is_none_or(|p| p.undelivered() == 0)
            && self.stage.in_flight() == 0
    }

    /// `events` are about to be handed to `handle_events`.
    #[inline]
    pub(super) fn count_handled(&mut self, events: usize) {
        self.handled = self.handled.wrapping_add(events);
    }

    /// Events sent to consumers since the stage started.
    fn dispatched(&self) -> usize {
        self.producer.as_ref().map_or(0, |p| p.dispatched())
    }

    /// The stage is stopping with `reason`: tell the drains what it
    /// delivered and what it still holds (`unhandled` and the mailbox are
    /// dropped with it).
    pub(super) fn report_drain(
        &mut self,
        reason: &StopReason,
        unhandled: &VecDeque<Msg<S>>,
        queued: &VecDeque<Msg<S>>,
    ) {
        let Some(draining) = self.drain.take() else {
            return;
        };
        let in_mailbox = |queue: &VecDeque<Msg<S>>| -> usize {
            queue
                .iter()
                .map(|msg| match msg {
                    Msg::Events { events, .. } => events.len(),
                    _ => 0,
                })
                .sum()
        };
        let undelivered = Undelivered {
            buffered: self.producer.as_ref().map_or(0, |p| p.undelivered()),
            queued: self.consumer_status().1,
            in_mailbox: in_mailbox(unhandled) + in_mailbox(queued),
            in_flight: self.stage.in_flight(),
        };
        let outcome = match draining.outcome {
            Some(outcome) => outcome,
            None if undelivered.is_empty() && reason.is_transient_shutdown() => {
                DrainOutcome::Drained
            }
            None => DrainOutcome::Stopped(reason.clone()),
        };
        if !undelivered.is_empty() {
            tracing::warn!(
                ?outcome,
                buffered = undelivered.buffered,
                queued = undelivered.queued,
                in_mailbox = undelivered.in_mailbox,
                in_flight = undelivered.in_flight,
                "drained stage stopped with events undelivered"
            );
        }
        let report = StageDrain {
            id: self.shared.id(),
            kind: S::KIND.public(),
            outcome,
            handled: self.handled.wrapping_sub(draining.handled_before),
            dispatched: self.dispatched().wrapping_sub(draining.dispatched_before),
            undelivered,
        };
        for tx in &draining.reports {
            let _ = tx.send(report.clone());
        }
    }

    /// A draining producer no longer calls `handle_demand`.
    #[inline]
    pub(super) fn emitting_stopped(&self) -> bool {
        S::KIND == Kind::Producer && self.drain.as_deref().is_some_and(|d| d.started)
    }
}
