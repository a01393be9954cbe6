//! The producer behind [`Pipeline::test_message`](crate::Pipeline::test_message)
//! and [`Pipeline::push_messages`](crate::Pipeline::push_messages), and the
//! acknowledger that hands acked messages back to the caller.

use std::collections::VecDeque;
use std::sync::Arc;

use gen_stage::{Msgs, Noreply, Producer, ProducerContext, StopReason};
use tokio::sync::mpsc;

use crate::{Acknowledger, Message, NoopAcknowledger};

/// A producer of messages pushed to it by casts, emitted as demand comes.
pub(crate) struct PushProducer<T> {
    queue: VecDeque<Message<T>>,
    demand: usize,
}

impl<T> PushProducer<T> {
    pub fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            demand: 0,
        }
    }

    fn emit(&mut self) -> Noreply<Message<T>> {
        let n = self.demand.min(self.queue.len());
        self.demand -= n;
        Noreply::Emit(self.queue.drain(..n).collect())
    }
}

pub(crate) type PushProducerMessages<T> = Msgs<(), (), Vec<Message<T>>>;

impl<T: Send + 'static> Producer<PushProducerMessages<T>> for PushProducer<T> {
    type Event = Message<T>;

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self, PushProducerMessages<T>>,
    ) -> Noreply<Message<T>> {
        self.demand += demand;
        self.emit()
    }

    async fn handle_cast(
        &mut self,
        messages: Vec<Message<T>>,
        _ctx: &mut ProducerContext<'_, Self, PushProducerMessages<T>>,
    ) -> Noreply<Message<T>> {
        self.queue.extend(messages);
        self.emit()
    }

    /// Messages pushed but never asked for are acked failed.
    async fn terminate(
        &mut self,
        reason: &StopReason,
        _ctx: &mut ProducerContext<'_, Self, PushProducerMessages<T>>,
    ) {
        let mut failed: Vec<Message<T>> = self.queue.drain(..).collect();
        if !failed.is_empty() {
            for message in &mut failed {
                message.fail(format!("the producer stopped ({reason}) before sending it"));
            }
            crate::ack_messages(Vec::new(), failed);
        }
    }
}

/// Sends every acked message to the caller (Broadway's
/// `CallerAcknowledger`). Each message it receives gets a no-op
/// acknowledger in its place, so the channel closes once every message of
/// the call was acked or dropped.
pub(crate) struct CallerAcknowledger<T> {
    pub tx: mpsc::UnboundedSender<Message<T>>,
}

impl<T: Send + 'static> Acknowledger<T> for CallerAcknowledger<T> {
    fn ack(&self, successful: Vec<Message<T>>, failed: Vec<Message<T>>) {
        for mut message in successful.into_iter().chain(failed) {
            message.acknowledger = Arc::new(NoopAcknowledger);
            let _ = self.tx.send(message);
        }
    }
}
