//! The producer behind [`Pipeline::test_message`](crate::Pipeline::test_message)
//! and [`Pipeline::push_messages`](crate::Pipeline::push_messages), and the
//! acknowledger that hands acked messages back to the caller.
//!
//! Pushed messages wait in an [`Inlet`] the pipeline and the producer share,
//! not in the producer's mailbox: so a push either lands where the producer
//! will send it (or, if the producer stops first, ack it failed), or is
//! refused at once because the inlet is closed. Nothing pushed can sit in
//! the mailbox of a stopped stage, unacked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;
use weir_gen_stage::{Msgs, Noreply, Producer, ProducerContext, Reply, ReplyTo, StopReason};

use crate::{Acknowledger, Message, NoopAcknowledger};

/// Why a message pushed into a pipeline that is draining or stopped fails.
pub(crate) const NOT_RUNNING: &str = "the pipeline is not running: it takes no new messages";

/// Messages pushed and not yet sent, and whether pushes are taken.
pub(crate) struct Inlet<T> {
    state: Mutex<InletState<T>>,
}

struct InletState<T> {
    open: bool,
    queue: VecDeque<Message<T>>,
}

/// What [`Inlet::push`] did.
pub(crate) enum Pushed<T> {
    /// Queued; `wake`: the queue was empty, so the producer must be told.
    Queued { wake: bool },
    /// The inlet is closed: the messages, untouched.
    Refused(Vec<Message<T>>),
}

impl<T> Inlet<T> {
    pub fn new() -> Self {
        Self {
            state: Mutex::new(InletState {
                open: true,
                queue: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, InletState<T>> {
        // Nothing panics while holding the lock: a poisoned one is whole.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn push(&self, messages: Vec<Message<T>>) -> Pushed<T> {
        let mut state = self.lock();
        if !state.open {
            return Pushed::Refused(messages);
        }
        let wake = state.queue.is_empty();
        state.queue.extend(messages);
        Pushed::Queued { wake }
    }

    /// Take no more pushes.
    pub fn close(&self) {
        self.lock().open = false;
    }

    /// Up to `n` messages, oldest first.
    fn take(&self, n: usize) -> Vec<Message<T>> {
        let mut state = self.lock();
        let n = n.min(state.queue.len());
        state.queue.drain(..n).collect()
    }

    /// Close, and ack every message queued failed with `reason`.
    pub fn fail_all(&self, reason: &str)
    where
        T: 'static,
    {
        ack_failed(self.close_and_take_all(), reason);
    }

    /// Close, and take every message queued.
    fn close_and_take_all(&self) -> Vec<Message<T>> {
        let mut state = self.lock();
        state.open = false;
        state.queue.drain(..).collect()
    }
}

/// Ack `messages` failed with `reason`.
pub(crate) fn ack_failed<T: 'static>(mut messages: Vec<Message<T>>, reason: &str) {
    if messages.is_empty() {
        return;
    }
    for message in &mut messages {
        message.fail(reason);
    }
    crate::ack_messages(Vec::new(), messages);
}

/// A producer of the messages pushed into its [`Inlet`], emitted as demand
/// comes.
pub(crate) struct PushProducer<T> {
    inlet: Arc<Inlet<T>>,
    /// Demand received and not yet served.
    demand: usize,
}

impl<T> PushProducer<T> {
    pub fn new(inlet: Arc<Inlet<T>>) -> Self {
        Self { inlet, demand: 0 }
    }

    fn emit(&mut self) -> Noreply<Message<T>> {
        if self.demand == 0 {
            return Noreply::none();
        }
        let messages = self.inlet.take(self.demand);
        self.demand -= messages.len();
        Noreply::Emit(messages)
    }
}

/// Messages were pushed into an empty inlet.
#[derive(Debug)]
pub(crate) struct Wake;

/// The pipeline is draining: send everything queued now (into the stage's
/// buffer, which the drain empties as the processors ask).
#[derive(Debug)]
pub(crate) struct Flush;

pub(crate) type PushProducerMessages = Msgs<Flush, (), Wake>;

impl<T: Send + 'static> Producer for PushProducer<T> {
    type Messages = PushProducerMessages;
    type Event = Message<T>;

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<Message<T>> {
        self.demand += demand;
        self.emit()
    }

    async fn handle_cast(
        &mut self,
        _wake: Wake,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<Message<T>> {
        self.emit()
    }

    async fn handle_call(
        &mut self,
        _flush: Flush,
        _from: ReplyTo<()>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Reply<(), Message<T>> {
        let messages = self.inlet.close_and_take_all();
        self.demand = self.demand.saturating_sub(messages.len());
        Reply::Reply((), messages)
    }

    /// Messages pushed but never sent (the producer was stopped by a
    /// shutdown without the pipeline's drain, e.g. a drain's deadline) are
    /// acked failed. Any other stop leaves them to the producer started in
    /// its place (or to the pipeline going down).
    async fn terminate(&mut self, reason: &StopReason, _ctx: &mut ProducerContext<'_, Self>) {
        if !reason.is_transient_shutdown() {
            return;
        }
        let left = self.inlet.close_and_take_all();
        ack_failed(
            left,
            &format!(
                "the producer stopped ({reason}: a drain's deadline passed, or the stage was stopped) before sending the message"
            ),
        );
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
