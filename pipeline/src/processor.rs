//! Processors: run `handle_message` on each message; failed messages are
//! acked here, the others go to their batcher (or are acked here when the
//! pipeline has no batchers).
//!
//! A processor asks its producers itself (manual demand, gen-stage's
//! automatic algorithm in [`Upstreams`]), so that each ask can go through the
//! rate limiter and its outstanding demand is in the metrics.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use weir_gen_stage::{
    Cancellation, Consumer, ConsumerContext, ConsumerDemand, Noreply, ProducerConsumer,
    ProducerConsumerContext, StopReason, SubscribeOptions, Subscription, SubscriptionId,
};

use crate::Message;
use crate::demand::Upstreams;
use crate::handlers::{
    HandleFailed, HandleMessage, PrepareMessages, ack_with_failed_hook, fail_panicked,
    run_prepare_messages,
};
use crate::message::panic_reason;
use crate::rate_limit::{Grant, RateLimiter};

/// A `partition_by` function: a message to a number, taken modulo the
/// partitions.
pub(crate) type PartitionBy<T> = Arc<dyn Fn(&Message<T>) -> u64 + Send + Sync>;

/// Where a batcher's messages go: its stages are partitions
/// `first..first + stages` of the processors' dispatcher.
pub(crate) struct BatcherRoute<T> {
    pub first: usize,
    pub stages: usize,
    /// Which of the stages, when there are several.
    pub partition_by: Option<PartitionBy<T>>,
}

/// The partition of `message` among `partitions` by `partition_by`; a
/// panic fails the message (partition 0).
pub(crate) fn partition_of<T>(
    partition_by: &PartitionBy<T>,
    message: &mut Message<T>,
    partitions: usize,
) -> usize {
    match catch_unwind(AssertUnwindSafe(|| partition_by(message))) {
        Ok(key) => (key % partitions.max(1) as u64) as usize,
        Err(payload) => {
            let reason = panic_reason(payload.as_ref());
            tracing::warn!(target: "weir_pipeline", %reason, "partition_by panicked: the message fails");
            message.fail(reason);
            0
        }
    }
}

/// Every batcher's route by name, with the default batcher's found without
/// a comparison (a message whose handler named no batcher).
pub(crate) struct Routes<T> {
    routes: Vec<(String, BatcherRoute<T>)>,
    /// The index of the default batcher's route, if there is one.
    default: Option<usize>,
    /// By name, when there are too many routes to compare them in turn.
    by_name: Option<HashMap<String, usize>>,
}

impl<T> Routes<T> {
    /// Beyond this many batchers, names are looked up in a map.
    const LINEAR: usize = 16;

    pub fn new(routes: Vec<(String, BatcherRoute<T>)>) -> Self {
        let default = routes
            .iter()
            .position(|(name, _)| name == crate::DEFAULT_BATCHER);
        let by_name = (routes.len() > Self::LINEAR).then(|| {
            routes
                .iter()
                .enumerate()
                .map(|(index, (name, _))| (name.clone(), index))
                .collect()
        });
        Self {
            routes,
            default,
            by_name,
        }
    }

    /// The route of the message's batcher, if it names one there is.
    fn get(&self, message: &Message<T>) -> Option<&BatcherRoute<T>> {
        let index = match message.custom_batcher() {
            None => self.default,
            Some(name) => match &self.by_name {
                Some(by_name) => by_name.get(name).copied(),
                None => self.routes.iter().position(|(n, _)| n == name),
            },
        };
        index.map(|index| &self.routes[index].1)
    }
}

/// What every processor of a pipeline shares.
pub(crate) struct Processor<T> {
    pub name: Arc<str>,
    pub prepare_messages: Option<PrepareMessages<T>>,
    pub handle_message: HandleMessage<T>,
    pub handle_failed: Option<HandleFailed<T>>,
    /// Batcher name to route; `None`: no batchers, ack here.
    pub batchers: Option<Arc<Routes<T>>>,
    pub limiter: Option<Arc<RateLimiter>>,
    pub max_demand: usize,
    pub min_demand: usize,
}

impl<T> Clone for Processor<T> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            prepare_messages: self.prepare_messages.clone(),
            handle_message: self.handle_message.clone(),
            handle_failed: self.handle_failed.clone(),
            batchers: self.batchers.clone(),
            limiter: self.limiter.clone(),
            max_demand: self.max_demand,
            min_demand: self.min_demand,
        }
    }
}

/// Demand granted by the rate limiter in a later interval, sent to the
/// processor that asked.
#[derive(Debug)]
pub(crate) struct Granted {
    subscription: SubscriptionId,
    n: usize,
}

/// One processor: the shared part and its own.
pub(crate) struct ProcessorState<T> {
    shared: Processor<T>,
    index: usize,
    upstreams: Upstreams,
}

impl<T: 'static> ProcessorState<T> {
    pub fn new(shared: Processor<T>, index: usize, upstreams: Upstreams) -> Self {
        Self {
            shared,
            index,
            upstreams,
        }
    }

    /// Handle the messages; ack what ends here, return what goes on to a
    /// batcher (the same `Vec`, changed in place, when nothing failed).
    fn process(&self, mut messages: Vec<Message<T>>) -> Vec<Message<T>> {
        let _span = tracing::debug_span!(
            target: "weir_pipeline",
            "processor",
            name = %self.shared.name,
            processor = self.index,
            messages = messages.len(),
        )
        .entered();
        let counters = self.upstreams.counters();
        counters.processed(messages.len());
        if let Some(prepare) = &self.shared.prepare_messages {
            run_prepare_messages(prepare, &mut messages);
        }
        // One look at the level for the whole group: a `handle_message`
        // span per message only when a subscriber may want trace spans.
        let trace = tracing::level_enabled!(tracing::Level::TRACE);
        // One `catch_unwind` around the whole group; after a panic (which
        // fails the message it came from) the rest goes on under a new one.
        let mut next = 0;
        while next < messages.len() {
            let handled = catch_unwind(AssertUnwindSafe(|| {
                while next < messages.len() {
                    let message = &mut messages[next];
                    next += 1;
                    self.handle(message, trace);
                }
            }));
            if let Err(payload) = handled {
                fail_panicked(&mut messages[next - 1], payload.as_ref());
            }
        }
        let failed_count = messages.iter().filter(|m| !m.is_ok()).count();
        counters.failed(failed_count);
        let failed: Vec<Message<T>> = if failed_count == 0 {
            Vec::new()
        } else {
            messages.extract_if(.., |m| !m.is_ok()).collect()
        };
        let (successful, forward) = match self.shared.batchers {
            None => (messages, Vec::new()),
            Some(_) => (Vec::new(), messages),
        };
        ack_with_failed_hook(
            self.shared.handle_failed.as_ref(),
            successful,
            failed,
            "processor",
        );
        forward
    }

    /// `handle_message` on one message (unless it failed before it got
    /// here: its partition_by panicked), then its batcher's route.
    fn handle(&self, message: &mut Message<T>, trace: bool) {
        if !message.is_ok() {
            return;
        }
        if trace {
            let _span = tracing::trace_span!(
                target: "weir_pipeline",
                "handle_message",
                name = %self.shared.name,
                processor = self.index,
            )
            .entered();
            (self.shared.handle_message)(message);
        } else {
            (self.shared.handle_message)(message);
        }
        if !message.is_ok() {
            return;
        }
        let Some(batchers) = &self.shared.batchers else {
            return;
        };
        match batchers.get(message) {
            Some(route) => {
                let partition = match &route.partition_by {
                    Some(by) if route.stages > 1 => partition_of(by, message, route.stages),
                    _ => 0,
                };
                message.batcher_index = route.first + partition;
            }
            None => {
                let reason = format!("no batcher named {:?}", message.batcher());
                message.fail(reason);
            }
        }
    }

    /// How much of `want` more from `subscription` to ask now: all of it,
    /// or what the rate limiter grants (it holds the rest and sends it
    /// later through `grant`).
    fn gate(
        &self,
        subscription: SubscriptionId,
        want: usize,
        grant: impl FnOnce() -> Option<Grant>,
    ) -> usize {
        match &self.shared.limiter {
            None => want,
            Some(limiter) => match grant() {
                Some(grant) => limiter.request(&grant, subscription, want),
                // Stopping: nothing more to ask.
                None => 0,
            },
        }
    }

    fn forget(&mut self, subscription: SubscriptionId) {
        if self.upstreams.cancelled(subscription)
            && let Some(limiter) = &self.shared.limiter
        {
            limiter.forget(subscription);
        }
    }

    fn forget_all(&mut self) {
        let ids: Vec<SubscriptionId> = self.upstreams.ids().collect();
        for id in ids {
            self.forget(id);
        }
    }
}

/// Ask `n` of `subscription` through the context, and count it.
macro_rules! ask {
    ($state:expr, $ctx:expr, $subscription:expr, $n:expr) => {{
        let (subscription, n) = ($subscription, $n);
        if n > 0 && $state.upstreams.asked(subscription, n) {
            if let Err(error) = $ctx.ask(subscription, n) {
                tracing::debug!(target: "weir_pipeline", %error, "a processor's ask found no subscription");
            }
        }
    }};
}

/// The rate-limited ask of a subscription, then the ask itself.
macro_rules! want {
    ($state:expr, $ctx:expr, $subscription:expr, $want:expr, $grant:expr) => {{
        let (subscription, want) = ($subscription, $want);
        if want > 0 {
            let now = $state.gate(subscription, want, || $grant($ctx));
            ask!($state, $ctx, subscription, now);
        }
    }};
}

/// A later grant of the rate limiter arrived.
macro_rules! granted {
    ($state:expr, $ctx:expr, $granted:expr) => {{
        let Granted { subscription, n } = $granted;
        if $state.upstreams.contains(subscription) {
            ask!($state, $ctx, subscription, n);
        } else if let Some(limiter) = &$state.shared.limiter {
            limiter.refund(n);
        }
    }};
}

fn stage_grant<T: Send + 'static>(
    ctx: &ProducerConsumerContext<'_, ProcessorStage<T>>,
) -> Option<Grant> {
    let me = ctx.stage_ref()?;
    Some(Arc::new(move |subscription, n| {
        me.send_info(Granted { subscription, n }).is_ok()
    }))
}

fn sink_grant<T: Send + 'static>(ctx: &ConsumerContext<'_, ProcessorSink<T>>) -> Option<Grant> {
    let me = ctx.stage_ref()?;
    Some(Arc::new(move |subscription, n| {
        me.send_info(Granted { subscription, n }).is_ok()
    }))
}

/// A processor in front of batchers.
pub(crate) struct ProcessorStage<T>(pub ProcessorState<T>);

/// What a processor's stages are sent: the rate limiter's grants, as infos.
pub(crate) type ProcessorMessages = weir_gen_stage::Infos<Granted>;

impl<T: Send + 'static> ProducerConsumer for ProcessorStage<T> {
    type Messages = ProcessorMessages;
    type In = Message<T>;
    type Out = Message<T>;
    async fn handle_subscribe_producer(
        &mut self,
        subscription: Subscription,
        _options: &SubscribeOptions<Message<T>>,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        let (max, min) = (self.0.shared.max_demand, self.0.shared.min_demand);
        let first = self.0.upstreams.subscribe(subscription.id, max, min);
        want!(self.0, ctx, subscription.id, first, stage_grant);
        Ok(ConsumerDemand::Manual)
    }

    async fn handle_events(
        &mut self,
        events: Vec<Message<T>>,
        from: Subscription,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Message<T>> {
        let n = events.len();
        let forward = self.0.process(events);
        let again = self.0.upstreams.received(from.id, n);
        want!(self.0, ctx, from.id, again, stage_grant);
        Noreply::Emit(forward)
    }

    async fn handle_info(
        &mut self,
        info: Granted,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Message<T>> {
        granted!(self.0, ctx, info);
        Noreply::none()
    }

    async fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Message<T>> {
        self.0.forget(subscription.id);
        Noreply::none()
    }

    async fn terminate(
        &mut self,
        _reason: &StopReason,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) {
        self.0.forget_all();
    }
}

/// A processor of a pipeline without batchers: the last stage.
pub(crate) struct ProcessorSink<T>(pub ProcessorState<T>);

impl<T: Send + 'static> Consumer for ProcessorSink<T> {
    type Messages = ProcessorMessages;
    type Event = Message<T>;
    async fn handle_subscribe(
        &mut self,
        subscription: Subscription,
        _options: &SubscribeOptions<Message<T>>,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        let (max, min) = (self.0.shared.max_demand, self.0.shared.min_demand);
        let first = self.0.upstreams.subscribe(subscription.id, max, min);
        want!(self.0, ctx, subscription.id, first, sink_grant);
        Ok(ConsumerDemand::Manual)
    }

    async fn handle_events(
        &mut self,
        events: Vec<Message<T>>,
        from: Subscription,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let n = events.len();
        let forward = self.0.process(events);
        debug_assert!(forward.is_empty(), "no batchers: everything is acked");
        let again = self.0.upstreams.received(from.id, n);
        want!(self.0, ctx, from.id, again, sink_grant);
        Noreply::none()
    }

    async fn handle_info(&mut self, info: Granted, ctx: &mut ConsumerContext<'_, Self>) -> Noreply {
        granted!(self.0, ctx, info);
        Noreply::none()
    }

    async fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.0.forget(subscription.id);
        Noreply::none()
    }

    async fn terminate(&mut self, _reason: &StopReason, _ctx: &mut ConsumerContext<'_, Self>) {
        self.0.forget_all();
    }
}
