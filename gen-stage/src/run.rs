//! The task that runs a stage: its mailbox loop, start and termination.
//!
//! One tokio task per stage. The loop takes the messages waiting in its
//! [mailbox](crate::mailbox) (up to 128) per wake-up and handles them in
//! order; protocol logic lives in [`producer_side`] (dispatcher, buffer,
//! demand modes) and [`consumer_side`] (subscriptions to producers,
//! automatic demand, the producer_consumer queue), the policy in the pure
//! [`demand`](crate::demand) and [`buffer`](crate::buffer) modules.

mod consumer_side;
mod draining;
mod producer_side;

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::oneshot;
use tracing::Instrument;
use weir_dispatchers::InfoId;

use consumer_side::Queued;
pub(crate) use consumer_side::Upstream;
use draining::Draining;
use producer_side::ProducerSide;

use crate::group::StageGroup;
use crate::handle::Mailbox;
use crate::ids::IdMap;
use crate::mailbox::{self, Receiver, WeakSender};
use crate::message::{Msg, SubscribeTo};
use crate::options::{EventsHook, ProducerConfig, Setup};
use crate::shared::{DeadOnDrop, Kind, StageShared};
use crate::stage::Callbacks;
use crate::{Error, Noreply, Reply, ReplyTo, StageRef, StageStatus, StopReason};

/// `Err(reason)`: the stage stops with `reason`.
pub(crate) type Flow = Result<(), StopReason>;

/// Work a message left for right after it: infos released by the dispatcher
/// and asks it gave back (Broadcast selector refunds).
enum Pending {
    Info(InfoId),
    Ask(weir_dispatchers::SubscriptionId, usize),
}

/// Builds the [`Context`] for a callback from the core's fields, borrowing
/// them apart from `stage`.
macro_rules! ctx {
    ($core:ident) => {
        &mut $crate::Context {
            shared: &$core.shared,
            me: &$core.me,
            upstream: &mut $core.upstream,
        }
    };
}
pub(crate) use ctx;

/// A running stage's state, owned by its task.
pub(crate) struct Core<S: Callbacks> {
    pub(crate) stage: S,
    pub(crate) shared: Arc<StageShared>,
    pub(crate) me: WeakSender<Msg<S>>,
    /// Producers and producer_consumers: dispatcher, buffer, consumers.
    producer: Option<ProducerSide<S::Out>>,
    /// Consumers and producer_consumers: subscriptions to producers.
    pub(crate) upstream: IdMap<weir_dispatchers::SubscriptionId, Upstream<S::In>>,
    /// Producer_consumers: incoming events (and the infos and cancellations
    /// behind them) waiting for downstream demand.
    pc_queue: VecDeque<Queued<S::In>>,
    /// Info messages sent through the stage, until delivered.
    infos: IdMap<InfoId, S::Info>,
    next_info: u64,
    pending: VecDeque<Pending>,
    /// The call being handled, so a panic inside it still answers the caller.
    current_call: Option<ReplyTo<S::Reply>>,
    /// `Some` while a [`Drain`](crate::Drain) runs on this stage.
    drain: Option<Box<Draining>>,
    /// Events handed to `handle_events` since the stage started (wrapping),
    /// for a drain's report.
    handled: usize,
    /// Where events received and never handled go when the stage stops
    /// ([`ConsumerOptions::on_unhandled`](crate::ConsumerOptions::on_unhandled)).
    unhandled: Option<EventsHook<S::In>>,
}

/// Start `stage` in its own task and wait for its `init`.
pub(crate) async fn start<S: Callbacks>(stage: S) -> Result<StageRef<S>, Error> {
    start_in(stage, None, None).await
}

/// Start `stage` in `group` (or, without one, in its own task) and wait for
/// its `init`, which `options` (the start's) are the base for.
pub(crate) async fn start_in<S: Callbacks>(
    stage: S,
    group: Option<&StageGroup>,
    options: Option<Setup<S::In, S::Out>>,
) -> Result<StageRef<S>, Error> {
    // A group checks for a runtime itself (it spawns its task once).
    let place = match group {
        Some(group) => Place::Group(group),
        None => Place::Task(tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?),
    };
    let (tx, rx) = mailbox::channel();
    let shared = Arc::new(StageShared::new(S::KIND));
    let span = tracing::info_span!(
        "stage",
        stage = %shared.id(),
        kind = S::KIND.name(),
        stage_type = stage.type_name()
    );
    let (started_tx, started_rx) = oneshot::channel();
    let core = Core {
        stage,
        shared: shared.clone(),
        me: tx.downgrade(),
        producer: None,
        upstream: IdMap::default(),
        pc_queue: VecDeque::new(),
        infos: IdMap::default(),
        next_info: 0,
        pending: VecDeque::new(),
        current_call: None,
        drain: None,
        handled: 0,
        unhandled: None,
    };
    // No subscriber wants the span: entering it on every poll would only
    // cost time.
    let instrument = !span.is_disabled();
    let task = run(core, options, rx, started_tx);
    match place {
        Place::Task(runtime) if instrument => drop(runtime.spawn(task.instrument(span))),
        Place::Task(runtime) => drop(runtime.spawn(task)),
        Place::Group(group) if instrument => group.spawn(Box::pin(task.instrument(span)))?,
        Place::Group(group) => group.spawn(Box::pin(task))?,
    }
    match started_rx.await {
        Ok(Ok(())) => Ok(StageRef {
            mailbox: Mailbox { tx, shared },
        }),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(Error::InitFailed {
            stage: shared.id(),
            reason: shared.reason().unwrap_or(StopReason::Killed),
        }),
    }
}

/// Where a stage's task runs.
enum Place<'a> {
    /// A tokio task of its own, on this runtime.
    Task(tokio::runtime::Handle),
    Group(&'a StageGroup),
}

async fn run<S: Callbacks>(
    mut core: Core<S>,
    options: Option<Setup<S::In, S::Out>>,
    mut rx: Receiver<Msg<S>>,
    started: oneshot::Sender<Result<(), Error>>,
) {
    let _dead_on_drop = DeadOnDrop(core.shared.clone());
    let init = match AssertUnwindSafe(core.init(options)).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(Error::InitFailed {
            stage: core.shared.id(),
            reason: StopReason::from_panic(&*panic),
        }),
    };
    if let Err(error) = init {
        let reason = match &error {
            Error::InitFailed { reason, .. } => reason.clone(),
            other => StopReason::Custom(format!("bad options: {other}")),
        };
        tracing::warn!(%error, "stage failed to start");
        core.shared.mark_dead(reason);
        let _ = started.send(Err(error));
        return;
    }
    tracing::debug!("stage started");
    let _ = started.send(Ok(()));

    let mut batch = VecDeque::new();
    let reason = match AssertUnwindSafe(core.main_loop::<false>(&mut rx, &mut batch))
        .catch_unwind()
        .await
    {
        Ok(reason) => reason,
        Err(panic) => StopReason::from_panic(&*panic),
    };
    core.terminate(reason, rx, batch).await;
}

impl<S: Callbacks> Core<S> {
    async fn init(&mut self, options: Option<Setup<S::In, S::Out>>) -> Result<(), Error> {
        let stage_id = self.shared.id();
        let mut setup = self
            .stage
            .init(ctx!(self))
            .await
            .map_err(|reason| Error::InitFailed {
                stage: stage_id,
                reason,
            })?;
        if let Some(options) = options {
            setup = setup.over(options);
        }
        setup.validate()?;
        self.unhandled = setup.unhandled.take();
        if let Some(producer) = setup.producer {
            let config = ProducerConfig::new(producer, S::KIND == Kind::ProducerConsumer);
            config.validate()?;
            self.producer = Some(ProducerSide::new(config));
        }
        for (producer, options) in setup.subscribe_to {
            let request = SubscribeTo {
                producer,
                options,
                cancel: None,
                reply: None,
            };
            self.subscribe_to(request)
                .await
                .map_err(|reason| Error::InitFailed {
                    stage: stage_id,
                    reason,
                })?;
        }
        Ok(())
    }

    /// Handles messages until one stops the stage. Messages received but
    /// not handled stay in `batch`, so their callers learn the stop reason.
    ///
    /// With `DRAINING` (a [`Drain`](crate::Drain) runs on this stage), the
    /// loop checks after every message whether the stage is drained. Only
    /// [`on_other`](Self::on_other) starts a drain, so the loop without it
    /// looks for one after those messages alone and then goes on as the
    /// draining loop: the event path pays nothing for drains.
    async fn main_loop<const DRAINING: bool>(
        &mut self,
        rx: &mut Receiver<Msg<S>>,
        batch: &mut VecDeque<Msg<S>>,
    ) -> StopReason {
        loop {
            // The draining loop starts with what the main loop left of its
            // batch.
            let leftover = DRAINING && !batch.is_empty();
            if !leftover && rx.recv_all(batch).await == 0 {
                // Nothing can reach this stage any more: no handle, no
                // subscription.
                return StopReason::Normal;
            }
            while let Some(msg) = batch.pop_front() {
                let step = match msg {
                    Msg::Events { sub, events, from } => self.on_events(sub, events, from).await,
                    Msg::Ask { sub, n, from } => self.on_ask(sub, n, from).await,
                    // Rare and large: boxed, so that the loop's own future
                    // stays small.
                    other => {
                        let step = Box::pin(self.on_other(other)).await;
                        if !DRAINING && self.drain.is_some() {
                            // A drain began: what follows this message as
                            // below, then the rest in the draining loop.
                            if let Err(reason) = step {
                                return reason;
                            }
                            if let Err(reason) = Box::pin(self.run_pending()).await {
                                return reason;
                            }
                            if let Some(reason) = self.drain_check() {
                                return reason;
                            }
                            return Box::pin(self.main_loop::<true>(rx, batch)).await;
                        }
                        step
                    }
                };
                if let Err(reason) = step {
                    return reason;
                }
                if !self.pending.is_empty()
                    && let Err(reason) = Box::pin(self.run_pending()).await
                {
                    return reason;
                }
                if DRAINING && let Some(reason) = self.drain_check() {
                    return reason;
                }
            }
        }
    }

    /// Everything but the event path.
    async fn on_other(&mut self, msg: Msg<S>) -> Flow {
        match msg {
            Msg::Events { sub, events, from } => self.on_events(sub, events, from).await,
            Msg::Ask { sub, n, from } => self.on_ask(sub, n, from).await,
            Msg::Subscribe(request) => self.on_subscribe(*request).await,
            Msg::Cancel { sub, reason } => {
                self.producer_cancel(sub, crate::Cancellation::Cancel(reason))
                    .await
            }
            Msg::ConsumerDown { sub, reason } => {
                self.producer_cancel(sub, crate::Cancellation::Down(reason))
                    .await
            }
            Msg::Ack { sub } => {
                self.on_ack(sub);
                Ok(())
            }
            Msg::ProducerCancel { sub, reason } => {
                self.consumer_cancel(sub, crate::Cancellation::Cancel(reason))
                    .await
            }
            Msg::ProducerDown { sub, reason } => {
                self.consumer_cancel(sub, crate::Cancellation::Down(reason))
                    .await
            }
            Msg::SubscribeTo(request) => self.subscribe_to(*request).await,
            Msg::CancelUpstream { sub, reason } => {
                self.cancel_upstream(sub, reason);
                Ok(())
            }
            Msg::AskUpstream { sub, n, reply } => {
                self.manual_ask(sub, n, reply);
                Ok(())
            }
            Msg::Call { request, from } => self.on_call(request, from).await,
            Msg::Cast(request) => {
                let result = self.stage.handle_cast(request, ctx!(self)).await;
                self.noreply(result)
            }
            Msg::Info(info) => {
                let result = self.stage.handle_info(info, ctx!(self)).await;
                self.noreply(result)
            }
            Msg::InfoThrough { info, ack } => {
                if let Some(ack) = ack {
                    let _ = ack.send(());
                }
                self.info_through(info);
                Ok(())
            }
            Msg::DemandMode { set, reply } => self.demand_mode(set, reply).await,
            Msg::EstimateBufferedCount { reply } => {
                let _ = reply.send(self.estimate_buffered_count());
                Ok(())
            }
            Msg::Status { reply } => {
                let _ = reply.send(self.status());
                Ok(())
            }
            Msg::Stop { reason } => Err(reason),
            Msg::Drain(request) => {
                self.on_drain(request);
                Ok(())
            }
        }
    }

    async fn run_pending(&mut self) -> Flow {
        while let Some(pending) = self.pending.pop_front() {
            match pending {
                Pending::Info(id) => {
                    if let Some(info) = self.infos.remove(&id) {
                        let result = self.stage.handle_info(info, ctx!(self)).await;
                        self.noreply(result)?;
                    }
                }
                Pending::Ask(sub, n) => self.on_dispatcher_ask(sub, n).await?,
            }
        }
        Ok(())
    }

    /// Carries out what a callback returned.
    pub(crate) fn noreply(&mut self, result: Noreply<S::Out>) -> Flow {
        match result {
            Noreply::Emit(events) => {
                self.dispatch_events(events);
                Ok(())
            }
            Noreply::Stop(reason) => Err(reason),
        }
    }

    async fn on_call(&mut self, request: S::Call, from: ReplyTo<S::Reply>) -> Flow {
        self.current_call = Some(from.clone());
        let result = self.stage.handle_call(request, from, ctx!(self)).await;
        let from = self.current_call.take();
        match result {
            Reply::Reply(reply, events) => {
                // Events go out before the reply.
                self.dispatch_events(events);
                if let Some(from) = from {
                    from.reply(reply);
                }
                Ok(())
            }
            Reply::Noreply(events) => {
                self.dispatch_events(events);
                Ok(())
            }
            Reply::Stop(reason, reply) => {
                if let Some(from) = from {
                    match reply {
                        Some(reply) => {
                            from.reply(reply);
                        }
                        None => from.fail(reason.clone()),
                    }
                }
                Err(reason)
            }
        }
    }

    /// An info sent through the stage: behind buffered (producer) or queued
    /// (producer_consumer) events; at once for consumers.
    fn info_through(&mut self, info: S::Info) {
        let id = InfoId(self.next_info);
        self.next_info += 1;
        self.infos.insert(id, info);
        match S::KIND {
            Kind::ProducerConsumer if !self.pc_queue.is_empty() => {
                self.pc_queue.push_back(Queued::Info(id));
            }
            Kind::Producer | Kind::ProducerConsumer => self.buffer_or_dispatch_info(id),
            _ => self.pending.push_back(Pending::Info(id)),
        }
    }

    async fn terminate(
        mut self,
        reason: StopReason,
        mut rx: Receiver<Msg<S>>,
        unhandled: VecDeque<Msg<S>>,
    ) {
        if let Some(from) = self.current_call.take() {
            from.fail(reason.clone());
        }
        let terminated = AssertUnwindSafe(self.stage.terminate(&reason, ctx!(self)))
            .catch_unwind()
            .await;
        if let Err(panic) = terminated {
            tracing::error!(panic = %StopReason::from_panic(&*panic), "terminate panicked");
        }
        match &reason {
            StopReason::Normal | StopReason::Shutdown | StopReason::ShutdownWith(_) => {
                tracing::debug!(%reason, "stage stopped");
            }
            StopReason::Panicked(_) => tracing::error!(%reason, "stage stopped"),
            _ => tracing::warn!(%reason, "stage stopped"),
        }
        // Our monitors on others are no longer needed; theirs on us fire now.
        for upstream in self.upstream.values_mut() {
            if let Some(monitor) = upstream.monitor.take() {
                upstream.producer.shared().demonitor(monitor);
            }
        }
        if let Some(producer) = &mut self.producer {
            producer.demonitor_all();
        }
        // Closed now: a producer sending more gets its events back.
        let queued = rx.close();
        // Before the stage is marked dead: a drain learns of the stops in
        // the order they happened.
        self.report_drain(&reason, &unhandled, &queued);
        self.give_back(&reason, unhandled, queued);
        self.shared.mark_dead(reason);
        drop(rx);
    }

    /// The stage is stopping: hand what it still holds to its hooks (the
    /// events it produced and never sent, those it received and never
    /// handled); what has no hook is dropped with it.
    fn give_back(
        &mut self,
        reason: &StopReason,
        unhandled: VecDeque<Msg<S>>,
        queued: VecDeque<Msg<S>>,
    ) {
        if let Some(producer) = self.producer.as_mut() {
            let events = producer.take_undelivered();
            producer.give_up(events, reason);
        }
        let Some(hook) = self.unhandled.as_mut() else {
            return;
        };
        let mut events = Vec::new();
        for queued in std::mem::take(&mut self.pc_queue) {
            if let Queued::Events { events: queued, .. } = queued {
                events.extend(queued);
            }
        }
        for msg in unhandled.into_iter().chain(queued) {
            if let Msg::Events { events: sent, .. } = msg {
                events.extend(sent);
            }
        }
        if events.is_empty() {
            return;
        }
        let count = events.len();
        let call = AssertUnwindSafe(|| hook(events, reason));
        if let Err(panic) = std::panic::catch_unwind(call) {
            tracing::error!(
                count,
                panic = %StopReason::from_panic(&*panic),
                "the unhandled-events hook panicked"
            );
        }
    }
}

impl<S: Callbacks> Core<S> {
    /// Reads, and optionally sets, the demand mode (GenStage's `demand/1,2`).
    async fn demand_mode(
        &mut self,
        set: Option<crate::DemandMode>,
        reply: Option<oneshot::Sender<Result<crate::DemandMode, Error>>>,
    ) -> Flow {
        let result = match S::KIND {
            Kind::Producer => {
                if let Some(mode) = set {
                    self.set_demand_mode(mode).await?;
                }
                Ok(self.current_demand_mode())
            }
            Kind::ProducerConsumer => match set {
                Some(crate::DemandMode::Accumulate) => {
                    tracing::error!(
                        "demand mode can only be set for producers; this stage is a producer_consumer"
                    );
                    Err(self.wrong_kind("setting the demand mode to accumulate", "producers"))
                }
                _ => Ok(crate::DemandMode::Forward),
            },
            _ => Err(self.wrong_kind("the demand mode", "producers")),
        };
        if let Some(reply) = reply {
            let _ = reply.send(result);
        }
        Ok(())
    }

    fn wrong_kind(&self, operation: &'static str, expected: &'static str) -> Error {
        Error::WrongKind {
            stage: self.shared.id(),
            kind: S::KIND.name(),
            operation,
            expected,
        }
    }

    /// A snapshot of this stage, between two callbacks.
    fn status(&self) -> StageStatus {
        let (consumers, producer) = match &self.producer {
            Some(producer) => {
                let (consumers, status) = producer.status();
                (consumers, Some(status))
            }
            None => (Vec::new(), None),
        };
        let (producers, queued_events) = self.consumer_status();
        StageStatus {
            id: self.shared.id(),
            kind: S::KIND.public(),
            consumers,
            producers,
            producer,
            queued_events,
        }
    }

    fn estimate_buffered_count(&self) -> Result<usize, Error> {
        match &self.producer {
            Some(producer) => Ok(producer.buffered_count()),
            None => {
                tracing::error!("buffered count can only be requested for producers");
                Err(self.wrong_kind(
                    "estimate_buffered_count",
                    "producers and producer_consumers",
                ))
            }
        }
    }
}
