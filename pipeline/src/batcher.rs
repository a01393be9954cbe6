//! Batchers: a producer_consumer per batcher name that groups messages by
//! batch key into batches of `batch_size` (or what `batch_timeout` finds),
//! and the batch processors (consumers) that run `handle_batch` and ack.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use weir_gen_stage::{
    Cancellation, Consumer, ConsumerContext, ConsumerDemand, Infos, Noreply, ProducerConsumer,
    ProducerConsumerContext, StopReason, SubscribeOptions, Subscription,
};

use crate::batch::{Accumulator, Weight};
use crate::demand::Upstreams;
use crate::handlers::{HandleBatch, HandleFailed, ack_with_failed_hook, run_handle_batch};
use crate::message::split;
use crate::{Batch, Message};

/// A batcher's stage.
pub(crate) struct BatcherStage<T> {
    accumulator: Accumulator<T>,
    /// What it asks of each processor at a time (Broadway's batcher
    /// `max_demand`, `batch_size` by default).
    max_demand: usize,
    /// Subscriptions to processors still open (manual demand, asked as
    /// gen-stage's automatic demand would): when the last ends (the
    /// processors drained), every partial batch is flushed.
    upstreams: Upstreams,
    /// The stage's one timer, set to the earliest deadline of its partial
    /// batches.
    timer: Timer,
}

/// A batcher stage's timer: one task (started when first needed) that
/// sleeps until the deadline it is given, then tells the stage.
///
/// Deadlines only grow (a new partial batch's is `batch_timeout` from now),
/// so while the timer is set no new batch needs it earlier: it is set once
/// per timeout, not once per batch, and when it fires the stage hands over
/// what is due and sets it to the next deadline.
#[derive(Default)]
struct Timer {
    task: Option<(mpsc::UnboundedSender<Wake>, AbortHandle)>,
    /// The deadline the task sleeps until (a [`Tick`] comes then).
    set: Option<Instant>,
}

/// What the timer task is given: when to tell which stage. It holds the
/// stage's handle only while it sleeps, so an idle timer does not keep a
/// stage nobody else refers to running.
struct Wake {
    at: Instant,
    /// Sends the stage a [`Tick`]; `false` if it stopped.
    tell: Box<dyn FnOnce() -> bool + Send>,
}

/// The timer fired: hand over the partial batches that are due.
#[derive(Debug)]
pub(crate) struct Tick;

impl Timer {
    /// Make sure a [`Tick`] comes at `at` or earlier.
    fn set<T: Send + 'static>(
        &mut self,
        at: Instant,
        ctx: &ProducerConsumerContext<'_, BatcherStage<T>>,
    ) {
        if self.set.is_some() {
            return;
        }
        // Stopping: nothing more to time.
        let Some(stage) = ctx.stage_ref() else {
            return;
        };
        let tell = Box::new(move || stage.send_info(Tick).is_ok());
        let tx = match &self.task {
            Some((tx, _)) => tx,
            None => {
                let (tx, mut rx) = mpsc::unbounded_channel::<Wake>();
                let task = tokio::spawn(async move {
                    while let Some(Wake { at, tell }) = rx.recv().await {
                        tokio::time::sleep_until(at).await;
                        if !tell() {
                            // The stage stopped meanwhile: nothing to flush.
                            return;
                        }
                    }
                });
                &self.task.insert((tx, task.abort_handle())).0
            }
        };
        if tx.send(Wake { at, tell }).is_ok() {
            self.set = Some(at);
        }
    }

    /// The task no longer runs (the stage stops).
    fn stop(&mut self) {
        if let Some((_, task)) = self.task.take() {
            task.abort();
        }
        self.set = None;
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl<T> BatcherStage<T> {
    pub fn new(
        name: String,
        (batch_size, weight): (usize, Option<Weight<T>>),
        batch_timeout: Duration,
        max_demand: usize,
        upstreams: Upstreams,
    ) -> Self {
        Self {
            accumulator: Accumulator::new(name, batch_size, batch_timeout).with_weight(weight),
            max_demand,
            upstreams,
            timer: Timer::default(),
        }
    }

    /// Count what goes out, and what stays in partial batches.
    fn emit(&self, batches: Vec<Batch<T>>) -> Noreply<Batch<T>> {
        let counters = self.upstreams.counters();
        for batch in &batches {
            counters.batch(batch.messages.len());
        }
        counters.set_buffered(self.accumulator.len());
        Noreply::Emit(batches)
    }
}

pub(crate) type BatcherMessages = Infos<Tick>;

impl<T: Send + 'static> ProducerConsumer for BatcherStage<T> {
    type Messages = BatcherMessages;
    type In = Message<T>;
    type Out = Batch<T>;

    async fn handle_subscribe_producer(
        &mut self,
        subscription: Subscription,
        _options: &SubscribeOptions<Message<T>>,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        let max = self.max_demand;
        let first = self.upstreams.subscribe(subscription.id, max, max / 2);
        ask(&mut self.upstreams, ctx, subscription.id, first);
        Ok(ConsumerDemand::Manual)
    }

    async fn handle_events(
        &mut self,
        events: Vec<Message<T>>,
        from: Subscription,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Batch<T>> {
        let n = events.len();
        self.upstreams.counters().processed(n);
        let mut batches = Vec::new();
        // The first deadline a new partial batch set (the later ones are
        // later still).
        let mut first_deadline = None;
        // The batch keys of messages in flush mode.
        let mut flush: Vec<String> = Vec::new();
        for message in events {
            if message.flushes() {
                note_flush(&mut flush, &message);
            }
            let deadline = self
                .accumulator
                .push_into(message, Instant::now, &mut batches);
            first_deadline = first_deadline.or(deadline);
        }
        if !flush.is_empty() {
            for key in flush {
                batches.extend(self.accumulator.flush_key(&key));
            }
        }
        if let Some(at) = first_deadline {
            self.timer.set(at, ctx);
        }
        let again = self.upstreams.received(from.id, n);
        ask(&mut self.upstreams, ctx, from.id, again);
        self.emit(batches)
    }

    async fn handle_info(
        &mut self,
        _tick: Tick,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Batch<T>> {
        self.timer.set = None;
        let batches = self.accumulator.timeout(Instant::now());
        if let Some(at) = self.accumulator.next_deadline() {
            self.timer.set(at, ctx);
        }
        if batches.is_empty() {
            return Noreply::none();
        }
        self.emit(batches)
    }

    async fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Batch<T>> {
        // Only the end of a subscription to a processor counts (not a batch
        // processor's), and only the last one flushes.
        if !self.upstreams.cancelled(subscription.id) || self.upstreams.ids().next().is_some() {
            return Noreply::none();
        }
        let batches = self.accumulator.flush();
        self.emit(batches)
    }

    /// Messages held in partial batches: a drain waits for them.
    fn in_flight(&self) -> usize {
        self.accumulator.len()
    }

    /// Stopped with partial batches (a drain's deadline passed, or the
    /// stage was stopped): those messages are acked failed.
    async fn terminate(
        &mut self,
        reason: &StopReason,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) {
        self.timer.stop();
        let mut failed = Vec::new();
        for batch in self.accumulator.flush() {
            failed.extend(batch.messages);
        }
        if !failed.is_empty() {
            tracing::warn!(messages = failed.len(), %reason, "batcher stopped with partial batches: acked failed");
            for message in &mut failed {
                message.fail(format!(
                    "the batcher stopped ({reason}: a drain's deadline passed, or the stage was stopped) before the batch was handled"
                ));
            }
            crate::ack_messages(Vec::new(), failed);
        }
        self.upstreams.counters().set_buffered(0);
    }
}

/// A message in [`BatchMode::Flush`](crate::BatchMode::Flush): its batch
/// key's partial batch is handed over once the group is batched.
#[cold]
fn note_flush<T>(flush: &mut Vec<String>, message: &Message<T>) {
    let key = message.batch_key();
    if !flush.iter().any(|k| k == key) {
        flush.push(key.to_owned());
    }
}

/// Ask `n` of `subscription` (manual demand), and count it.
fn ask<S: weir_gen_stage::Stage>(
    upstreams: &mut Upstreams,
    ctx: &mut weir_gen_stage::Context<'_, S>,
    subscription: weir_gen_stage::SubscriptionId,
    n: usize,
) {
    if n > 0
        && upstreams.asked(subscription, n)
        && let Err(error) = ctx.ask(subscription, n)
    {
        tracing::debug!(target: "weir_pipeline", %error, "an ask found no subscription");
    }
}

/// A batch processor: runs `handle_batch`, then acks the batch. It asks
/// one batch at a time.
pub(crate) struct BatchProcessor<T> {
    pub name: Arc<str>,
    pub index: usize,
    pub handle_batch: HandleBatch<T>,
    pub handle_failed: Option<HandleFailed<T>>,
    pub upstreams: Upstreams,
}

impl<T: Send + 'static> Consumer for BatchProcessor<T> {
    type Messages = ();
    type Event = Batch<T>;

    async fn handle_subscribe(
        &mut self,
        subscription: Subscription,
        _options: &SubscribeOptions<Batch<T>>,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        let first = self.upstreams.subscribe(subscription.id, 1, 0);
        ask(&mut self.upstreams, ctx, subscription.id, first);
        Ok(ConsumerDemand::Manual)
    }

    async fn handle_events(
        &mut self,
        batches: Vec<Batch<T>>,
        from: Subscription,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let n = batches.len();
        for Batch { mut messages, info } in batches {
            let _span = tracing::debug_span!(
                target: "weir_pipeline",
                "handle_batch",
                name = %self.name,
                batcher = %info.batcher,
                batch_key = %info.batch_key,
                batch_size = info.size,
                trigger = ?info.trigger,
                batch_processor = self.index,
            )
            .entered();
            let counters = self.upstreams.counters();
            counters.processed(messages.len());
            counters.batch(messages.len());
            run_handle_batch(&self.handle_batch, &mut messages, &info);
            let (successful, failed) = split(messages);
            counters.failed(failed.len());
            ack_with_failed_hook(
                self.handle_failed.as_ref(),
                successful,
                failed,
                "batch_processor",
            );
        }
        let again = self.upstreams.received(from.id, n);
        ask(&mut self.upstreams, ctx, from.id, again);
        Noreply::none()
    }

    async fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.upstreams.cancelled(subscription.id);
        Noreply::none()
    }
}
