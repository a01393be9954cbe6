//! The producer side of a stage (producers and producer_consumers): the
//! dispatcher, the buffer, consumers' subscriptions, demand modes.

use weir_dispatchers::{Dispatcher, Emit, InfoId, Outbox, Subscriber, SubscriptionId};

use super::{Core, Flow, Pending, ctx};
use crate::buffer::Buffer;
use crate::ids::IdMap;
use crate::message::{Msg, SubscribeRequest};
use crate::options::{EventsHook, ProducerConfig};
use crate::shared::{Kind, MonitorId};
use crate::stage::Callbacks;
use crate::status::{BufferStatus, ConsumerSubscriptionStatus, ProducerStatus};
use crate::{Cancellation, ConsumerRef, DemandMode, StopReason, Subscription};

/// One consumer's subscription to this stage.
struct Downstream<T> {
    consumer: ConsumerRef<T>,
    subscription: Subscription,
    monitor: Option<MonitorId>,
    span: tracing::Span,
    /// Events the consumer asked for, ever.
    asked: usize,
    /// Events dispatched to the consumer, ever. `asked - sent` is the
    /// demand [`StageStatus`](crate::StageStatus) reports; `sent` also
    /// counts what a drain reports as dispatched. Two plain counters, so
    /// that the event path adds to each without a check.
    sent: usize,
}

impl<T> Downstream<T> {
    /// Demand the consumer has given and not been sent events for (0 if a
    /// dispatcher sent it more than it asked).
    fn demand(&self) -> usize {
        self.asked.saturating_sub(self.sent)
    }
}

/// Recorded while accumulating (GenStage's `events` list in accumulate
/// mode), replayed in order on the switch to forward.
enum Accumulated<T> {
    Demand(usize),
    Dispatch(Vec<T>),
}

/// What upstream demand still needs once the buffer has served it.
enum Upstream {
    /// Nothing: served from the buffer, counted, or recorded while
    /// accumulating.
    Served,
    /// `handle_demand` with what is left.
    HandleDemand(usize),
    /// A producer_consumer's queued events can now be handed over.
    TakeQueued,
}

pub(super) struct ProducerSide<T> {
    dispatcher: Box<dyn Dispatcher<T>>,
    /// Reused by every dispatcher call, drained right after.
    outbox: Outbox<T>,
    consumers: IdMap<SubscriptionId, Downstream<T>>,
    buffer: Buffer<T>,
    /// `Some` while accumulating.
    accumulated: Option<Vec<Accumulated<T>>>,
    /// Upstream demand stops short of `handle_demand`: accumulating, or a
    /// drain stopped this producer emitting. The demand path's one check
    /// for both (`accumulated.is_some() || emitting_stopped()`).
    pub(super) demand_held: bool,
    /// Producer_consumers: downstream demand not yet met (GenStage's
    /// `events: {queue, demand}` counter).
    pub(super) pc_demand: usize,
    /// Events dispatched to consumers whose subscriptions have ended (see
    /// [`dispatched`](Self::dispatched)).
    retired_sent: usize,
    /// Where events that will never be sent go
    /// ([`ProducerOptions::on_undelivered`](crate::ProducerOptions::on_undelivered)).
    undelivered: Option<EventsHook<T>>,
}

impl<T: 'static> ProducerSide<T> {
    pub(super) fn new(setup: ProducerConfig<T>) -> Self {
        Self {
            dispatcher: setup.dispatcher,
            outbox: Outbox::new(),
            consumers: IdMap::default(),
            buffer: Buffer::new(setup.buffer_size, setup.buffer_keep),
            accumulated: match setup.demand {
                DemandMode::Forward => None,
                DemandMode::Accumulate => Some(Vec::new()),
            },
            demand_held: setup.demand == DemandMode::Accumulate,
            pc_demand: 0,
            retired_sent: 0,
            undelivered: setup.undelivered,
        }
    }

    /// Hand `events`, which will never be sent, to the undelivered hook
    /// (a panic in it is logged), or drop them.
    pub(super) fn give_up(&mut self, events: Vec<T>, reason: &StopReason) {
        give_up(&mut self.undelivered, events, reason);
    }

    /// Every event produced and not sent (buffered, held by the
    /// dispatcher, recorded while accumulating), in the order each would
    /// have gone out; the producer side holds none afterwards.
    pub(super) fn take_undelivered(&mut self) -> Vec<T> {
        let mut events = self.dispatcher.take_held();
        events.extend(self.buffer.take_all());
        if let Some(accumulated) = self.accumulated.as_mut() {
            for entry in accumulated.drain(..) {
                if let Accumulated::Dispatch(dispatched) = entry {
                    events.extend(dispatched);
                }
            }
        }
        events
    }

    /// Events dispatched to consumers since the stage started (a drain
    /// reports the difference from when it began). Counted per consumer on
    /// the event path and summed only here.
    pub(super) fn dispatched(&self) -> usize {
        self.consumers
            .values()
            .fold(self.retired_sent, |sum, downstream| {
                sum.wrapping_add(downstream.sent)
            })
    }

    pub(super) fn buffered_count(&self) -> usize {
        self.buffer.len() + self.dispatcher.buffered()
    }

    /// Events produced and not sent: buffered, held by the dispatcher, or
    /// recorded while accumulating.
    pub(super) fn undelivered(&self) -> usize {
        let accumulated = self.accumulated.as_ref().map_or(0, |accumulated| {
            accumulated
                .iter()
                .map(|entry| match entry {
                    Accumulated::Dispatch(events) => events.len(),
                    Accumulated::Demand(_) => 0,
                })
                .sum()
        });
        self.buffered_count() + accumulated
    }

    /// The producer side's part of [`StageStatus`](crate::StageStatus): its
    /// consumers' subscriptions (in id order) and its dispatcher and buffer.
    pub(super) fn status(&self) -> (Vec<ConsumerSubscriptionStatus>, ProducerStatus) {
        let mut consumers: Vec<ConsumerSubscriptionStatus> = self
            .consumers
            .values()
            .map(|downstream| ConsumerSubscriptionStatus {
                subscription: downstream.subscription,
                demand: downstream.demand(),
            })
            .collect();
        consumers.sort_by_key(|c| c.subscription.id.0);
        let producer = ProducerStatus {
            dispatcher: self.dispatcher.name().to_owned(),
            demand_mode: match self.accumulated {
                Some(_) => DemandMode::Accumulate,
                None => DemandMode::Forward,
            },
            buffer: BufferStatus {
                len: self.buffer.len(),
                held_by_dispatcher: self.dispatcher.buffered(),
                waiting_infos: self.buffer.waiting_infos(),
                size: self.buffer.size(),
                keep: self.buffer.keep(),
                discarded: self.buffer.discarded(),
            },
        };
        (consumers, producer)
    }

    pub(super) fn demonitor_all(&mut self) {
        for downstream in self.consumers.values_mut() {
            if let Some(monitor) = downstream.monitor.take() {
                downstream.consumer.shared().demonitor(monitor);
            }
        }
    }
}

/// [`ProducerSide::give_up`] with the hook borrowed apart.
#[cold]
fn give_up<T>(hook: &mut Option<EventsHook<T>>, events: Vec<T>, reason: &StopReason) {
    if events.is_empty() {
        return;
    }
    match hook.as_mut() {
        Some(hook) => {
            let count = events.len();
            let call = std::panic::AssertUnwindSafe(|| hook(events, reason));
            if let Err(panic) = std::panic::catch_unwind(call) {
                tracing::error!(
                    count,
                    panic = %StopReason::from_panic(&*panic),
                    "the undelivered-events hook panicked"
                );
            }
        }
        None => tracing::debug!(count = events.len(), %reason, "undelivered events dropped"),
    }
}

impl<S: Callbacks> Core<S> {
    pub(super) fn current_demand_mode(&self) -> DemandMode {
        match self.producer.as_ref().and_then(|p| p.accumulated.as_ref()) {
            Some(_) => DemandMode::Accumulate,
            None => DemandMode::Forward,
        }
    }

    /// Carries out what the dispatcher pushed into the outbox, in order.
    fn flush(&mut self) {
        let Some(producer) = self.producer.as_mut() else {
            return;
        };
        if producer.outbox.is_empty() {
            return;
        }
        let ProducerSide {
            outbox,
            consumers,
            undelivered,
            ..
        } = producer;
        for emit in outbox.drain() {
            match emit {
                Emit::Events { to, events } => match consumers.get_mut(&to) {
                    Some(downstream) => {
                        downstream.sent = downstream.sent.wrapping_add(events.len());
                        if let Some(bounced) = downstream.consumer.inner.events(to, events, None) {
                            // The consumer stopped before this reached it.
                            let reason = downstream
                                .consumer
                                .shared()
                                .reason()
                                .unwrap_or(StopReason::Noproc);
                            give_up(undelivered, bounced, &reason);
                        }
                    }
                    None => tracing::warn!(
                        subscription = %to,
                        count = events.len(),
                        "dispatcher sent events to an unknown subscription; dropped"
                    ),
                },
                Emit::Discarded { events, reason } => {
                    if undelivered.is_none() {
                        tracing::warn!(
                            count = events.len(),
                            reason,
                            "the dispatcher dropped {} events",
                            events.len()
                        );
                    }
                    give_up(undelivered, events, &StopReason::custom(reason));
                }
                Emit::Info(id) => self.pending.push_back(Pending::Info(id)),
                Emit::Ask { subscription, n } => {
                    self.pending.push_back(Pending::Ask(subscription, n))
                }
                Emit::Warning(warning) => tracing::warn!(?warning, "dispatcher warning"),
            }
        }
    }

    /// Dispatch events a callback emitted (or that left the buffer); what
    /// the dispatcher cannot place is buffered. While accumulating, records
    /// them instead.
    pub(super) fn dispatch_events(&mut self, events: Vec<S::Out>) {
        if events.is_empty() {
            return;
        }
        let Some(producer) = self.producer.as_mut() else {
            tracing::error!("a consumer cannot dispatch events");
            return;
        };
        if let Some(accumulated) = producer.accumulated.as_mut() {
            accumulated.push(Accumulated::Dispatch(events));
            return;
        }
        let count = events.len();
        let leftover = producer.dispatcher.dispatch(events, &mut producer.outbox);
        if S::KIND == Kind::ProducerConsumer {
            producer.pc_demand = producer.pc_demand.saturating_sub(count - leftover.len());
        }
        self.flush();
        if !leftover.is_empty() {
            self.buffer_events(leftover);
        }
    }

    fn buffer_events(&mut self, events: Vec<S::Out>) {
        let Some(producer) = self.producer.as_mut() else {
            return;
        };
        let held = producer.dispatcher.buffered();
        let stored = producer.buffer.store(events, held);
        if stored.discarded > 0 && self.stage.handle_discarded(stored.discarded) {
            tracing::warn!(
                discarded = stored.discarded,
                "producer has discarded {} events from its buffer",
                stored.discarded
            );
        }
        for info in stored.released {
            self.dispatch_info(info);
        }
    }

    /// Hand an info to the dispatcher, which releases it once the events it
    /// holds before it have gone out.
    fn dispatch_info(&mut self, id: InfoId) {
        match self.producer.as_mut() {
            Some(producer) => {
                producer.dispatcher.info(id, &mut producer.outbox);
                self.flush();
            }
            None => self.pending.push_back(Pending::Info(id)),
        }
    }

    pub(super) fn buffer_or_dispatch_info(&mut self, id: InfoId) {
        let Some(producer) = self.producer.as_mut() else {
            self.pending.push_back(Pending::Info(id));
            return;
        };
        if let Some(id) = producer.buffer.store_info(id) {
            self.dispatch_info(id);
        }
    }

    /// Serve up to `counter` from the buffer (releasing infos in their
    /// place); returns what is left.
    fn take_from_buffer(&mut self, mut counter: usize) -> usize {
        loop {
            let Some(producer) = self.producer.as_mut() else {
                return counter;
            };
            if counter == 0 || producer.buffer.is_empty() {
                return counter;
            }
            let taken = producer.buffer.take(counter);
            counter -= taken.events.len();
            self.dispatch_events(taken.events);
            for info in taken.released {
                self.dispatch_info(info);
            }
        }
    }

    /// The dispatcher returned upstream demand `counter`: serve it from the
    /// buffer, then from `handle_demand` (producers) or the queue of
    /// incoming events (producer_consumers).
    pub(super) async fn after_upstream_demand(&mut self, counter: usize) -> Flow {
        match self.serve_upstream_demand(counter) {
            Upstream::Served => Ok(()),
            Upstream::HandleDemand(demand) => {
                let result = self.stage.handle_demand(demand, ctx!(self)).await;
                self.noreply(result)
            }
            Upstream::TakeQueued => self.take_pc_events().await,
        }
    }

    /// The synchronous part of [`after_upstream_demand`](Self::after_upstream_demand):
    /// serves from the buffer, counts a producer_consumer's demand, records
    /// demand while accumulating, and says which callback work is left.
    #[inline]
    fn serve_upstream_demand(&mut self, counter: usize) -> Upstream {
        let Some(producer) = self.producer.as_mut() else {
            return Upstream::Served;
        };
        let buffered = !producer.buffer.is_empty();
        if S::KIND == Kind::ProducerConsumer {
            producer.pc_demand += counter;
            let demand = producer.pc_demand;
            if buffered {
                self.take_from_buffer(demand);
            }
            return if self.pc_queue.is_empty() {
                Upstream::Served
            } else {
                Upstream::TakeQueued
            };
        }
        let rest = if buffered {
            self.take_from_buffer(counter)
        } else {
            counter
        };
        if rest == 0 {
            return Upstream::Served;
        }
        if self.producer.as_ref().is_some_and(|p| p.demand_held) {
            self.hold_demand(rest)
        } else {
            debug_assert!(
                !self.emitting_stopped() && self.current_demand_mode() == DemandMode::Forward
            );
            Upstream::HandleDemand(rest)
        }
    }

    /// Upstream demand while [`demand_held`](ProducerSide::demand_held):
    /// dropped once a drain stopped emitting, recorded while accumulating.
    #[cold]
    fn hold_demand(&mut self, rest: usize) -> Upstream {
        if self.emitting_stopped() {
            return Upstream::Served;
        }
        if let Some(accumulated) = self.producer.as_mut().and_then(|p| p.accumulated.as_mut()) {
            accumulated.push(Accumulated::Demand(rest));
            return Upstream::Served;
        }
        Upstream::HandleDemand(rest)
    }

    /// A consumer asks for `n` more events.
    pub(super) async fn on_ask(
        &mut self,
        sub: SubscriptionId,
        n: usize,
        from: Option<ConsumerRef<S::Out>>,
    ) -> Flow {
        let Some(producer) = self.producer.as_mut() else {
            tracing::error!(subscription = %sub, "a consumer received an ask");
            return Ok(());
        };
        let Some(downstream) = producer.consumers.get_mut(&sub) else {
            match from {
                Some(consumer) => {
                    consumer.inner.cancel(sub, StopReason::UnknownSubscription);
                }
                None => tracing::debug!(subscription = %sub, "ask for an unknown subscription"),
            }
            return Ok(());
        };
        downstream.asked = downstream.asked.wrapping_add(n);
        let counter = producer.dispatcher.ask(sub, n, &mut producer.outbox);
        self.flush();
        // `after_upstream_demand`, spelled out: on the event path its own
        // future costs more than the match.
        match self.serve_upstream_demand(counter) {
            Upstream::Served => Ok(()),
            Upstream::HandleDemand(demand) => {
                let result = self.stage.handle_demand(demand, ctx!(self)).await;
                self.noreply(result)
            }
            Upstream::TakeQueued => self.take_pc_events().await,
        }
    }

    /// The dispatcher asks again on a consumer's behalf ([`Emit::Ask`]: a
    /// Broadcast selector rejected events, which must not consume demand).
    /// Unlike [`on_ask`](Self::on_ask), this is no new demand from the
    /// consumer: the events were never sent to it.
    pub(super) async fn on_dispatcher_ask(&mut self, sub: SubscriptionId, n: usize) -> Flow {
        let Some(producer) = self.producer.as_mut() else {
            return Ok(());
        };
        if !producer.consumers.contains_key(&sub) {
            return Ok(());
        }
        let counter = producer.dispatcher.ask(sub, n, &mut producer.outbox);
        self.flush();
        self.after_upstream_demand(counter).await
    }

    /// A consumer subscribes.
    pub(super) async fn on_subscribe(&mut self, request: SubscribeRequest<S::Out>) -> Flow {
        let SubscribeRequest {
            sub,
            consumer,
            options,
            cancel,
        } = request;
        let Some(producer) = self.producer.as_mut() else {
            tracing::error!(subscription = %sub, consumer = %consumer.id(), "a consumer cannot be subscribed to");
            consumer
                .inner
                .cancel(sub, StopReason::custom("not_a_producer"));
            return Ok(());
        };
        if producer.consumers.contains_key(&sub) {
            tracing::error!(subscription = %sub, consumer = %consumer.id(), "duplicated subscription");
            consumer
                .inner
                .cancel(sub, StopReason::DuplicatedSubscription);
            return Ok(());
        }
        if let Some((old, reason)) = cancel {
            self.producer_cancel(old, Cancellation::Cancel(reason))
                .await?;
        }
        let subscription = Subscription {
            id: sub,
            producer: self.shared.id(),
            consumer: consumer.id(),
        };
        let me = self.me.clone();
        let monitor = consumer
            .shared()
            .monitor(Box::new(move |reason: &StopReason| {
                if let Some(tx) = me.upgrade() {
                    let _ = tx.send(Msg::ConsumerDown {
                        sub,
                        reason: reason.clone(),
                    });
                }
            }));
        let span = tracing::debug_span!(
            "subscription",
            subscription = %sub,
            producer = %subscription.producer,
            consumer = %subscription.consumer
        );
        span.in_scope(|| tracing::debug!(max_demand = options.max_demand, "consumer subscribed"));
        if let Some(producer) = self.producer.as_mut() {
            producer.consumers.insert(
                sub,
                Downstream {
                    consumer,
                    subscription,
                    monitor,
                    span: span.clone(),
                    asked: 0,
                    sent: 0,
                },
            );
        }
        let result = tracing::Instrument::instrument(
            self.stage
                .handle_subscribe_consumer(subscription, &options, ctx!(self)),
            span.clone(),
        )
        .await;
        result?;
        let Some(producer) = self.producer.as_mut() else {
            return Ok(());
        };
        let subscriber = Subscriber {
            subscription: sub,
            consumer: subscription.consumer.into(),
        };
        match producer
            .dispatcher
            .subscribe(subscriber, &options, &mut producer.outbox)
        {
            Ok(counter) => {
                if let Some(downstream) = producer.consumers.get(&sub) {
                    downstream.consumer.inner.ack(sub);
                }
                self.flush();
                self.after_upstream_demand(counter).await
            }
            Err(error) => {
                span.in_scope(|| tracing::warn!(%error, "the dispatcher refused the subscription"));
                self.flush();
                self.producer_cancel(
                    sub,
                    Cancellation::Cancel(StopReason::SubscriptionRefused(error)),
                )
                .await
            }
        }
    }

    /// A consumer's subscription ends: tell the consumer, `handle_cancel`,
    /// then the dispatcher (which may give back demand).
    pub(super) async fn producer_cancel(
        &mut self,
        sub: SubscriptionId,
        cancellation: Cancellation,
    ) -> Flow {
        let Some(producer) = self.producer.as_mut() else {
            return Ok(());
        };
        let Some(downstream) = producer.consumers.remove(&sub) else {
            return Ok(());
        };
        producer.retired_sent = producer.retired_sent.wrapping_add(downstream.sent);
        if let Some(monitor) = downstream.monitor {
            downstream.consumer.shared().demonitor(monitor);
        }
        downstream
            .consumer
            .inner
            .cancel(sub, cancellation.reason().clone());
        downstream
            .span
            .in_scope(|| tracing::debug!(%cancellation, "consumer subscription ended"));
        let result = tracing::Instrument::instrument(
            self.stage
                .handle_cancel(cancellation, downstream.subscription, ctx!(self)),
            downstream.span,
        )
        .await;
        self.noreply(result)?;
        let Some(producer) = self.producer.as_mut() else {
            return Ok(());
        };
        let counter = producer.dispatcher.cancel(sub, &mut producer.outbox);
        self.flush();
        self.after_upstream_demand(counter).await
    }

    /// Switch the demand mode; switching to forward replays what was
    /// accumulated, each demand separately, in order.
    pub(super) async fn set_demand_mode(&mut self, mode: DemandMode) -> Flow {
        let emitting_stopped = self.emitting_stopped();
        let Some(producer) = self.producer.as_mut() else {
            return Ok(());
        };
        match mode {
            DemandMode::Accumulate => {
                if producer.accumulated.is_none() {
                    producer.accumulated = Some(Vec::new());
                }
                producer.demand_held = true;
                Ok(())
            }
            DemandMode::Forward => {
                let Some(accumulated) = producer.accumulated.take() else {
                    return Ok(());
                };
                producer.demand_held = emitting_stopped;
                for entry in accumulated {
                    match entry {
                        Accumulated::Demand(demand) => self.after_upstream_demand(demand).await?,
                        Accumulated::Dispatch(events) => self.dispatch_events(events),
                    }
                }
                Ok(())
            }
        }
    }
}
