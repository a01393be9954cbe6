//! Batchers: a producer_consumer per batcher name that groups messages by
//! batch key into batches of `batch_size` (or what `batch_timeout` finds),
//! and the batch processors (consumers) that run `handle_batch` and ack.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use gen_stage::{
    Cancellation, Consumer, ConsumerContext, ConsumerDemand, Noreply, ProducerConsumer,
    ProducerConsumerContext, StopReason, SubscribeOptions, Subscription,
};
use tokio::task::AbortHandle;

use crate::batch::{Accumulator, Timer};
use crate::demand::Upstreams;
use crate::handlers::{HandleBatch, HandleFailed, ack_with_failed_hook, run_handle_batch};
use crate::message::split;
use crate::{Batch, Message};

/// A batcher's stage.
pub(crate) struct BatcherStage<T> {
    accumulator: Accumulator<T>,
    batch_timeout: Duration,
    batch_size: usize,
    /// Subscriptions to processors still open (manual demand, asked as
    /// gen-stage's automatic demand would): when the last ends (the
    /// processors drained), every partial batch is flushed.
    upstreams: Upstreams,
    /// The running timer of each batch key's partial batch.
    timers: HashMap<String, AbortHandle>,
}

impl<T> BatcherStage<T> {
    pub fn new(
        name: String,
        batch_size: usize,
        batch_timeout: Duration,
        upstreams: Upstreams,
    ) -> Self {
        Self {
            accumulator: Accumulator::new(name, batch_size),
            batch_timeout,
            batch_size,
            upstreams,
            timers: HashMap::new(),
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

    fn handed_over(&mut self, batch: &Batch<T>) {
        if let Some(timer) = self.timers.remove(&batch.info.batch_key) {
            timer.abort();
        }
    }
}

impl<T: Send + 'static> ProducerConsumer for BatcherStage<T> {
    type In = Message<T>;
    type Out = Batch<T>;
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = Timer;

    async fn handle_subscribe_producer(
        &mut self,
        subscription: Subscription,
        _options: &SubscribeOptions<Message<T>>,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        let max = self.batch_size;
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
        for message in events {
            let (batch, timer) = self.accumulator.push(message);
            if let Some(batch) = batch {
                self.handed_over(&batch);
                batches.push(batch);
            }
            if let Some(timer) = timer
                && let Some(stage) = ctx.stage_ref()
            {
                let key = timer.key.clone();
                let timeout = self.batch_timeout;
                let task = tokio::spawn(async move {
                    tokio::time::sleep(timeout).await;
                    // The stage may have stopped meanwhile: nothing to flush.
                    let _ = stage.send_info(timer);
                });
                if let Some(old) = self.timers.insert(key, task.abort_handle()) {
                    old.abort();
                }
            }
        }
        let again = self.upstreams.received(from.id, n);
        ask(&mut self.upstreams, ctx, from.id, again);
        self.emit(batches)
    }

    async fn handle_info(
        &mut self,
        timer: Timer,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Batch<T>> {
        match self.accumulator.timeout(&timer) {
            Some(batch) => {
                self.timers.remove(&timer.key);
                self.emit(vec![batch])
            }
            None => Noreply::none(),
        }
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
        for batch in &batches {
            self.handed_over(batch);
        }
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
        for timer in self.timers.values() {
            timer.abort();
        }
        let mut failed = Vec::new();
        for batch in self.accumulator.flush() {
            failed.extend(batch.messages);
        }
        if !failed.is_empty() {
            tracing::warn!(messages = failed.len(), %reason, "batcher stopped with partial batches: acked failed");
            for message in &mut failed {
                message.fail(format!(
                    "the batcher stopped ({reason}) before the batch was handled"
                ));
            }
            crate::ack_messages(Vec::new(), failed);
        }
        self.upstreams.counters().set_buffered(0);
    }
}

/// Ask `n` of `subscription` (manual demand), and count it.
fn ask<S: gen_stage::Stage>(
    upstreams: &mut Upstreams,
    ctx: &mut gen_stage::Context<'_, S>,
    subscription: gen_stage::SubscriptionId,
    n: usize,
) {
    if n > 0
        && upstreams.asked(subscription, n)
        && let Err(error) = ctx.ask(subscription, n)
    {
        tracing::debug!(target: "pipeline", %error, "an ask found no subscription");
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
    type Event = Batch<T>;
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = ();

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
                target: "pipeline",
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
