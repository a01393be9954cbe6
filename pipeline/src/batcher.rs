//! Batchers: a producer_consumer per batcher name that groups messages by
//! batch key into batches of `batch_size` (or what `batch_timeout` finds),
//! and the batch processors (consumers) that run `handle_batch` and ack.

use std::collections::HashMap;
use std::time::Duration;

use gen_stage::{
    Cancellation, Consumer, ConsumerContext, ConsumerDemand, Msgs, Noreply, ProducerConsumer,
    ProducerConsumerContext, StopReason, SubscribeOptions, Subscription,
};
use tokio::task::AbortHandle;

use crate::batch::{Accumulator, Timer};
use crate::handlers::{HandleBatch, HandleFailed, ack_with_failed_hook, run_handle_batch};
use crate::message::split;
use crate::{Batch, Message};

/// A batcher's stage.
pub(crate) struct BatcherStage<T> {
    accumulator: Accumulator<T>,
    batch_timeout: Duration,
    /// Subscriptions to processors still open: when the last ends (the
    /// processors drained), every partial batch is flushed.
    producers: usize,
    /// The running timer of each batch key's partial batch.
    timers: HashMap<String, AbortHandle>,
}

impl<T> BatcherStage<T> {
    pub fn new(name: String, batch_size: usize, batch_timeout: Duration) -> Self {
        Self {
            accumulator: Accumulator::new(name, batch_size),
            batch_timeout,
            producers: 0,
            timers: HashMap::new(),
        }
    }

    fn handed_over(&mut self, batch: &Batch<T>) {
        if let Some(timer) = self.timers.remove(&batch.info.batch_key) {
            timer.abort();
        }
    }
}

type BatcherMessages = Msgs<(), (), (), Timer>;

impl<T: Send + 'static> ProducerConsumer<BatcherMessages> for BatcherStage<T> {
    type In = Message<T>;
    type Out = Batch<T>;

    async fn handle_subscribe_producer(
        &mut self,
        _subscription: Subscription,
        _options: &SubscribeOptions<Message<T>>,
        _ctx: &mut ProducerConsumerContext<'_, Self, BatcherMessages>,
    ) -> Result<ConsumerDemand, StopReason> {
        self.producers += 1;
        Ok(ConsumerDemand::Automatic)
    }

    async fn handle_events(
        &mut self,
        events: Vec<Message<T>>,
        _from: Subscription,
        ctx: &mut ProducerConsumerContext<'_, Self, BatcherMessages>,
    ) -> Noreply<Batch<T>> {
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
        Noreply::Emit(batches)
    }

    async fn handle_info(
        &mut self,
        timer: Timer,
        _ctx: &mut ProducerConsumerContext<'_, Self, BatcherMessages>,
    ) -> Noreply<Batch<T>> {
        match self.accumulator.timeout(&timer) {
            Some(batch) => {
                self.timers.remove(&timer.key);
                Noreply::Emit(vec![batch])
            }
            None => Noreply::none(),
        }
    }

    async fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        _subscription: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self, BatcherMessages>,
    ) -> Noreply<Batch<T>> {
        self.producers = self.producers.saturating_sub(1);
        if self.producers > 0 {
            return Noreply::none();
        }
        let batches = self.accumulator.flush();
        for batch in &batches {
            self.handed_over(batch);
        }
        Noreply::Emit(batches)
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
        _ctx: &mut ProducerConsumerContext<'_, Self, BatcherMessages>,
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
    }
}

/// A batch processor: runs `handle_batch`, then acks the batch.
pub(crate) struct BatchProcessor<T> {
    pub handle_batch: HandleBatch<T>,
    pub handle_failed: Option<HandleFailed<T>>,
}

impl<T: Send + 'static> Consumer for BatchProcessor<T> {
    type Event = Batch<T>;

    async fn handle_events(
        &mut self,
        batches: Vec<Batch<T>>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for Batch { mut messages, info } in batches {
            run_handle_batch(&self.handle_batch, &mut messages, &info);
            let (successful, failed) = split(messages);
            ack_with_failed_hook(self.handle_failed.as_ref(), successful, failed);
        }
        Noreply::none()
    }
}
