//! Test stages and a test "mailbox", the Rust counterparts of the helper
//! modules in GenStage's own `test/gen_stage_test.exs` (`Counter`,
//! `Forwarder`, `Doubler`, `DemandProducer`, `NothingProducer`, `Postponer`,
//! `Discarder`, `Sleeper`, `DiscardedBufferLogger`).
//!
//! GenStage's tests let every stage `send` what it saw to the test process
//! and then `assert_receive` on the test's mailbox. Here every stage gets a
//! [`Notifier`] and reports [`Note`]s into one channel, and the test reads
//! them from an [`Inbox`] with the same selective-receive helpers
//! ([`Inbox::assert_receive`], [`Inbox::refute_received`]).
//!
//! Each integration test file compiles this module on its own and uses only
//! part of it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use weir_gen_stage::protocol::{RawConsumer, ToConsumer};
use weir_gen_stage::{
    Cancellation, Consumer, ConsumerContext, ConsumerDemand, ConsumerOptions, Msgs, Noreply,
    Producer, ProducerConsumer, ProducerConsumerContext, ProducerConsumerOptions, ProducerContext,
    ProducerOptions, ProducerRef, Reply, ReplyTo, StopReason, SubscribeOptions, Subscription,
    SubscriptionId, SubscriptionOptions,
};

/// How long an expected note may take: only a guard against a hung test.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// How long a "nothing more arrives" check waits when no deterministic
/// barrier exists.
pub const QUIET: Duration = Duration::from_millis(100);

/// What the test stages report (the messages GenStage's test helpers send to
/// the test process).
#[derive(Debug, Clone, PartialEq)]
pub enum Note<T> {
    /// `{:consumed, events}`: a consumer's `handle_events`.
    Consumed(Vec<T>),
    /// `{:consumer_subscribed, from}`: a consumer's `handle_subscribe`.
    ConsumerSubscribed(Subscription),
    /// `{:consumer_cancelled, from, reason}`: a consumer's `handle_cancel`.
    ConsumerCancelled(Subscription, Cancellation),
    /// `{:terminated, reason}`: `terminate`.
    Terminated(StopReason),
    /// `{:producer_subscribed, from}`: a producer's `handle_subscribe`.
    ProducerSubscribed(Subscription),
    /// `{:producer_cancelled, from, reason}`: a producer's `handle_cancel`.
    ProducerCancelled(Subscription, Cancellation),
    /// `{:demand, n}`: a producer's `handle_demand`.
    Demand(usize),
    /// `{:producer_consumed, events}`: a producer_consumer's `handle_events`.
    ProducerConsumed(Vec<T>),
    /// `{:producer_consumer_subscribed, kind, from}`.
    PcSubscribed(Side, Subscription),
    /// `{:producer_consumer_cancelled, from, reason}`.
    PcCancelled(Subscription, Cancellation),
    /// `{:postponed, events}`: the Postponer's `handle_info`.
    Postponed(Vec<T>),
    /// `{:discarded, events}`: the Discarder's `handle_events`.
    Discarded(Vec<T>),
    /// `{:sleep, events}`: the Sleeper's first (and only) batch.
    Sleep(Vec<T>),
    /// An info message a stage's `handle_info` forwarded (`:sync`, `:async`, ...).
    Info(&'static str),
    /// The DiscardedBufferLogger's `format_discarded`.
    DiscardedCount(usize),
}

/// Which side of a producer_consumer a subscription is on (GenStage's
/// `:producer` / `:consumer` kind in `handle_subscribe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The producer_consumer subscribed to a producer.
    Producer,
    /// A consumer subscribed to the producer_consumer.
    Consumer,
}

/// Where test stages report to (the test process's pid).
#[derive(Debug)]
pub struct Notifier<T>(mpsc::UnboundedSender<Note<T>>);

impl<T> Clone for Notifier<T> {
    fn clone(&self) -> Self {
        Notifier(self.0.clone())
    }
}

impl<T> Notifier<T> {
    /// Report a note (ignored once the test stopped listening).
    pub fn note(&self, note: Note<T>) {
        let _ = self.0.send(note);
    }
}

/// The test's mailbox: notes in arrival order, read selectively like
/// Erlang's `receive`.
#[derive(Debug)]
pub struct Inbox<T> {
    rx: mpsc::UnboundedReceiver<Note<T>>,
    saved: VecDeque<Note<T>>,
}

/// A notifier and the inbox it reports to.
pub fn inbox<T>() -> (Notifier<T>, Inbox<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Notifier(tx),
        Inbox {
            rx,
            saved: VecDeque::new(),
        },
    )
}

impl<T: Debug> Inbox<T> {
    /// `assert_receive`: the first note (already received or arriving within
    /// [`TIMEOUT`]) for which `select` returns `Some`; other notes stay in the
    /// inbox, in order.
    pub async fn assert_receive<R>(
        &mut self,
        what: &str,
        mut select: impl FnMut(&Note<T>) -> Option<R>,
    ) -> R {
        if let Some(index) = self.saved.iter().position(|note| select(note).is_some()) {
            let note = self.saved.remove(index).expect("the index was just found");
            return select(&note).expect("the note was just selected");
        }
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(note)) => match select(&note) {
                    Some(found) => return found,
                    None => self.saved.push_back(note),
                },
                Ok(None) => panic!(
                    "expected {what}, but every notifier is gone; inbox: {:?}",
                    self.saved
                ),
                Err(_) => panic!(
                    "expected {what} within {TIMEOUT:?}; inbox: {:?}",
                    self.saved
                ),
            }
        }
    }

    /// `assert_receive` of exactly this note.
    pub async fn assert_note(&mut self, expected: Note<T>)
    where
        T: PartialEq,
    {
        let what = format!("{expected:?}");
        self.assert_receive(&what, |note| (*note == expected).then_some(()))
            .await;
    }

    /// `assert_receive {:consumed, ^batch}`.
    pub async fn assert_consumed(&mut self, batch: Vec<T>)
    where
        T: PartialEq,
    {
        self.assert_note(Note::Consumed(batch)).await;
    }

    /// The next `{:consumed, events}`, whatever the events.
    pub async fn next_consumed(&mut self) -> Vec<T>
    where
        T: Clone,
    {
        self.assert_receive("a consumed batch", |note| match note {
            Note::Consumed(events) => Some(events.clone()),
            _ => None,
        })
        .await
    }

    /// The next note, whatever it is.
    pub async fn next_note(&mut self) -> Note<T>
    where
        T: Clone,
    {
        self.assert_receive("any note", |note| Some(note.clone()))
            .await
    }

    /// Every note up to and including the first one `last` accepts, in order.
    pub async fn notes_until(&mut self, last: impl Fn(&Note<T>) -> bool) -> Vec<Note<T>>
    where
        T: Clone,
    {
        let mut notes = Vec::new();
        loop {
            let note = self.next_note().await;
            let done = last(&note);
            notes.push(note);
            if done {
                return notes;
            }
        }
    }

    /// The next info a stage forwarded.
    pub async fn next_info(&mut self) -> &'static str {
        self.assert_receive("an info", |note| match note {
            Note::Info(info) => Some(*info),
            _ => None,
        })
        .await
    }

    /// `refute_received`: no note delivered so far matches. Call it after a
    /// barrier (a sync call, a reply) that guarantees the note would already
    /// be here.
    pub fn refute_received(&mut self, what: &str, matches: impl Fn(&Note<T>) -> bool) {
        while let Ok(note) = self.rx.try_recv() {
            self.saved.push_back(note);
        }
        if let Some(note) = self.saved.iter().find(|note| matches(note)) {
            panic!("expected no {what}, got {note:?}");
        }
    }

    /// `refute_receive`: no matching note arrives within [`QUIET`].
    pub async fn refute_receive(&mut self, what: &str, matches: impl Fn(&Note<T>) -> bool) {
        let deadline = tokio::time::Instant::now() + QUIET;
        while let Ok(Some(note)) = tokio::time::timeout_at(deadline, self.rx.recv()).await {
            self.saved.push_back(note);
        }
        self.refute_received(what, matches);
    }

    /// Every note delivered so far, in order, emptying the inbox.
    pub fn drain(&mut self) -> Vec<Note<T>> {
        while let Ok(note) = self.rx.try_recv() {
            self.saved.push_back(note);
        }
        self.saved.drain(..).collect()
    }
}

/// Whether a note is a `{:consumed, _}`.
pub fn is_consumed<T>(note: &Note<T>) -> bool {
    matches!(note, Note::Consumed(_))
}

// ---------------------------------------------------------------------------
// Events

/// GenStage's tests mix integers and atoms in one stream (`[:a, :b, 0, 1]`);
/// Rust events are typed, so those tests use this event type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Item {
    /// A number (what the Counter emits).
    N(u64),
    /// An atom such as `:a`.
    A(char),
}

impl From<u64> for Item {
    fn from(n: u64) -> Self {
        Item::N(n)
    }
}

/// `[:a, :b, :c]` as `atoms("abc")`.
pub fn atoms(names: &str) -> Vec<Item> {
    names.chars().map(Item::A).collect()
}

/// Numbers as [`Item`]s.
pub fn nums(range: impl IntoIterator<Item = u64>) -> Vec<Item> {
    range.into_iter().map(Item::N).collect()
}

/// `Enum.to_list(range)`.
pub fn list(range: impl IntoIterator<Item = u64>) -> Vec<u64> {
    range.into_iter().collect()
}

/// `Enum.flat_map(range, &[&1, &1])`: what the Doubler emits.
pub fn doubled(range: impl IntoIterator<Item = u64>) -> Vec<u64> {
    range.into_iter().flat_map(|n| [n, n]).collect()
}

// ---------------------------------------------------------------------------
// Raw consumers.

/// The next batch of events a raw consumer receives on `sub`, skipping the
/// subscription's ack; anything else fails the test.
pub async fn next_events<T: Debug + Send + 'static>(
    raw: &mut RawConsumer<T>,
    sub: SubscriptionId,
) -> Vec<T> {
    loop {
        let msg = tokio::time::timeout(TIMEOUT, raw.recv())
            .await
            .expect("the producer sends within the timeout")
            .expect("the producer is alive");
        match msg {
            ToConsumer::Ack { subscription } if subscription == sub => continue,
            ToConsumer::Events {
                subscription,
                events,
            } if subscription == sub => return events,
            other => panic!("expected events on {sub}, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Counter: a producer counting in batches, or (when it has no count) one that
// emits only what it is told to queue.

/// GenStage test suite's `Counter`: `Counter::counting(0)` is `{:producer, 0}`
/// (emits `0, 1, 2, ...` exactly as demanded), `Counter::notifying(notifier)`
/// is `{:producer, self()}` (emits nothing on demand, reports subscriptions,
/// cancellations and infos). Both emit what they are told to queue through a
/// call, a cast or an info.
pub struct Counter<T> {
    next: Option<u64>,
    notify: Option<Notifier<T>>,
    options: Option<ProducerOptions<T>>,
}

/// Requests to a [`Counter`]'s `handle_call`.
#[derive(Debug)]
pub enum CounterCall<T> {
    /// `{:queue, events}`: emit the events, then reply.
    Queue(Vec<T>),
    /// `{:early_reply_queue, events}`: reply at once through `from`, then
    /// wait for the gate to open, then return the events to emit.
    EarlyReplyQueue(Vec<T>, oneshot::Receiver<()>),
    /// `:stop`: reply `()` and stop with `shutdown`.
    Stop,
}

/// Infos a [`Counter`] understands.
#[derive(Debug)]
pub enum CounterInfo<T> {
    /// `{:queue, events}`: emit the events.
    Queue(Vec<T>),
    /// Anything else: forwarded to the notifier as [`Note::Info`].
    Tag(&'static str),
}

impl<T: From<u64> + Send + 'static> Counter<T> {
    /// `{:producer, start}`.
    pub fn counting(start: u64) -> Self {
        Self {
            next: Some(start),
            notify: None,
            options: None,
        }
    }

    /// `{:producer, self()}`.
    pub fn notifying(notify: Notifier<T>) -> Self {
        Self {
            next: None,
            notify: Some(notify),
            options: None,
        }
    }

    /// A counting producer that also reports to `notify`.
    pub fn counting_with(start: u64, notify: Notifier<T>) -> Self {
        Self {
            next: Some(start),
            notify: Some(notify),
            options: None,
        }
    }

    /// The producer options `init` returns (dispatcher, buffer, demand).
    pub fn with_options(mut self, options: ProducerOptions<T>) -> Self {
        self.options = Some(options);
        self
    }

    fn note(&self, note: Note<T>) {
        if let Some(notify) = &self.notify {
            notify.note(note);
        }
    }
}

pub type CounterMessages<T> = Msgs<CounterCall<T>, (), Vec<T>, CounterInfo<T>>;

impl<T: From<u64> + Send + 'static> Producer for Counter<T> {
    type Messages = CounterMessages<T>;
    type Event = T;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<T>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<T> {
        match self.next.as_mut() {
            Some(next) => {
                let start = *next;
                *next += demand as u64;
                Noreply::Emit((start..start + demand as u64).map(T::from).collect())
            }
            None => Noreply::none(),
        }
    }

    async fn handle_subscribe(
        &mut self,
        subscription: Subscription,
        _options: &SubscriptionOptions<T>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<(), StopReason> {
        self.note(Note::ProducerSubscribed(subscription));
        Ok(())
    }

    async fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<T> {
        self.note(Note::ProducerCancelled(subscription, cancellation));
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        request: CounterCall<T>,
        from: ReplyTo<()>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Reply<(), T> {
        match request {
            CounterCall::Queue(events) => Reply::Reply((), events),
            CounterCall::EarlyReplyQueue(events, gate) => {
                from.reply(());
                let _ = gate.await;
                Reply::Noreply(events)
            }
            CounterCall::Stop => Reply::Stop(StopReason::Shutdown, Some(())),
        }
    }

    async fn handle_cast(
        &mut self,
        events: Vec<T>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<T> {
        Noreply::Emit(events)
    }

    async fn handle_info(
        &mut self,
        info: CounterInfo<T>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<T> {
        match info {
            CounterInfo::Queue(events) => Noreply::Emit(events),
            CounterInfo::Tag(tag) => {
                self.note(Note::Info(tag));
                Noreply::none()
            }
        }
    }

    async fn terminate(&mut self, reason: &StopReason, _ctx: &mut ProducerContext<'_, Self>) {
        self.note(Note::Terminated(reason.clone()));
    }
}

/// A running [`Counter`].
pub type CounterRef<T> = weir_gen_stage::ProducerHandle<Counter<T>>;

/// `Counter.sync_queue(producer, events)`: returns once the events were
/// dispatched or buffered.
pub async fn sync_queue<T: From<u64> + Send + 'static>(producer: &CounterRef<T>, events: Vec<T>) {
    producer
        .call(CounterCall::Queue(events), TIMEOUT)
        .await
        .expect("the counter replies to a queue call");
}

/// `Counter.async_queue(producer, events)`.
pub fn async_queue<T: From<u64> + Send + 'static>(producer: &CounterRef<T>, events: Vec<T>) {
    producer.cast(events).expect("the counter is alive");
}

/// A barrier: once this returns, the producer has handled every message
/// sent to it before (GenStage's tests use `:sys.get_state/1` or a call the
/// same way).
pub async fn barrier<T: From<u64> + Send + 'static>(producer: &CounterRef<T>) {
    sync_queue(producer, Vec::new()).await;
}

// ---------------------------------------------------------------------------
// Forwarder: a consumer reporting everything.

/// GenStage test suite's `Forwarder` as a consumer: reports subscriptions,
/// batches, cancellations, infos and termination. A subscription with the
/// extra option `consumer_demand: "manual"` is in manual demand mode.
pub struct Forwarder<T> {
    notify: Notifier<T>,
    subscribe_to: Vec<(ProducerRef<T>, SubscribeOptions<T>)>,
}

/// Requests to a [`Forwarder`]'s `handle_call`.
#[derive(Debug)]
pub enum ForwarderCall {
    /// `Forwarder.ask(forwarder, subscription, n)`: manual demand from
    /// inside the stage, then reply.
    Ask(SubscriptionId, usize),
    /// A barrier: reply at once.
    Ping,
}

impl<T: Send + 'static> Forwarder<T> {
    /// `{:consumer, self()}`.
    pub fn new(notify: Notifier<T>) -> Self {
        Self {
            notify,
            subscribe_to: Vec::new(),
        }
    }

    /// `subscribe_to: [{producer, options}]`.
    pub fn subscribe_to(
        mut self,
        producer: &impl weir_gen_stage::AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Self {
        self.subscribe_to.push((producer.producer_ref(), options));
        self
    }
}

/// Whether a subscription asked for manual demand through the extra option
/// `key: "manual"` (GenStage's tests use `consumer_demand: :manual`).
pub fn wants_manual<T>(options: &SubscribeOptions<T>, key: &str) -> bool {
    options.get_extra().get(key).and_then(|v| v.as_str()) == Some("manual")
}

pub type ForwarderMessages = Msgs<ForwarderCall, (), (), &'static str>;

impl<T: Send + 'static> Consumer for Forwarder<T> {
    type Messages = ForwarderMessages;
    type Event = T;

    async fn init(
        &mut self,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerOptions<T>, StopReason> {
        let mut options = ConsumerOptions::new();
        for (producer, subscribe) in self.subscribe_to.drain(..) {
            options = options.subscribe_to(&producer, subscribe);
        }
        Ok(options)
    }

    async fn handle_subscribe(
        &mut self,
        subscription: Subscription,
        options: &SubscribeOptions<T>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        self.notify.note(Note::ConsumerSubscribed(subscription));
        if wants_manual(options, "consumer_demand") {
            Ok(ConsumerDemand::Manual)
        } else {
            Ok(ConsumerDemand::Automatic)
        }
    }

    async fn handle_events(
        &mut self,
        events: Vec<T>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.notify.note(Note::Consumed(events));
        Noreply::none()
    }

    async fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.notify
            .note(Note::ConsumerCancelled(subscription, cancellation));
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        request: ForwarderCall,
        _from: ReplyTo<()>,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Reply<()> {
        if let ForwarderCall::Ask(subscription, n) = request {
            ctx.ask(subscription, n)
                .expect("the forwarder knows the subscription it is told to ask on");
        }
        Reply::Reply((), Vec::new())
    }

    async fn handle_info(
        &mut self,
        info: &'static str,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.notify.note(Note::Info(info));
        Noreply::none()
    }

    async fn terminate(&mut self, reason: &StopReason, _ctx: &mut ConsumerContext<'_, Self>) {
        self.notify.note(Note::Terminated(reason.clone()));
    }
}

/// A running [`Forwarder`].
pub type ForwarderRef<T> = weir_gen_stage::ConsumerHandle<Forwarder<T>>;

/// `Forwarder.ask(consumer, subscription, n)`.
pub async fn forwarder_ask<T: Send + 'static>(
    consumer: &ForwarderRef<T>,
    subscription: SubscriptionId,
    n: usize,
) {
    consumer
        .call(ForwarderCall::Ask(subscription, n), TIMEOUT)
        .await
        .expect("the forwarder replies to ask");
}

/// A barrier: the consumer has handled everything sent to it before.
pub async fn ping<T: Send + 'static>(consumer: &ForwarderRef<T>) {
    consumer
        .call(ForwarderCall::Ping, TIMEOUT)
        .await
        .expect("the forwarder replies to ping");
}

// ---------------------------------------------------------------------------
// Doubler: a producer_consumer emitting every event twice.

/// GenStage test suite's `Doubler`: reports both kinds of subscription,
/// cancellations, incoming batches and infos; emits `[x, x]` for each `x`.
/// A subscription to a producer with the extra option
/// `producer_consumer_demand: "manual"` is in manual demand mode.
pub struct Doubler {
    notify: Notifier<u64>,
    options: Option<ProducerConsumerOptions<u64, u64>>,
}

impl Doubler {
    /// `{:producer_consumer, self()}`.
    pub fn new(notify: Notifier<u64>) -> Self {
        Self {
            notify,
            options: None,
        }
    }

    /// The options `init` returns (dispatcher, initial subscriptions).
    pub fn with_options(mut self, options: ProducerConsumerOptions<u64, u64>) -> Self {
        self.options = Some(options);
        self
    }
}

pub type DoublerMessages = Msgs<(), (), (), &'static str>;

impl ProducerConsumer for Doubler {
    type Messages = DoublerMessages;
    type In = u64;
    type Out = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<u64, u64>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_subscribe_producer(
        &mut self,
        subscription: Subscription,
        options: &SubscribeOptions<u64>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        self.notify
            .note(Note::PcSubscribed(Side::Producer, subscription));
        if wants_manual(options, "producer_consumer_demand") {
            Ok(ConsumerDemand::Manual)
        } else {
            Ok(ConsumerDemand::Automatic)
        }
    }

    async fn handle_subscribe_consumer(
        &mut self,
        subscription: Subscription,
        _options: &SubscriptionOptions<u64>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<(), StopReason> {
        self.notify
            .note(Note::PcSubscribed(Side::Consumer, subscription));
        Ok(())
    }

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        let out = events.iter().flat_map(|&n| [n, n]).collect();
        self.notify.note(Note::ProducerConsumed(events));
        Noreply::Emit(out)
    }

    async fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        self.notify
            .note(Note::PcCancelled(subscription, cancellation));
        Noreply::none()
    }

    /// A barrier: reply at once.
    async fn handle_call(
        &mut self,
        _request: (),
        _from: ReplyTo<()>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Reply<(), u64> {
        Reply::Reply((), Vec::new())
    }

    async fn handle_info(
        &mut self,
        info: &'static str,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        self.notify.note(Note::Info(info));
        Noreply::none()
    }

    async fn terminate(
        &mut self,
        reason: &StopReason,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) {
        self.notify.note(Note::Terminated(reason.clone()));
    }
}

/// A running [`Doubler`].
pub type DoublerRef = weir_gen_stage::ProducerConsumerHandle<Doubler>;

/// A barrier: the doubler has handled everything sent to it before.
pub async fn ping_doubler(doubler: &DoublerRef) {
    doubler
        .call((), TIMEOUT)
        .await
        .expect("the doubler replies to a call");
}

// ---------------------------------------------------------------------------
// Smaller helpers of GenStage's test suite.

/// `DemandProducer`: answers each demand `n` with the single event `n`.
pub struct DemandProducer {
    options: Option<ProducerOptions<u64>>,
}

impl DemandProducer {
    /// `{:producer, [], options}`.
    pub fn new(options: ProducerOptions<u64>) -> Self {
        Self {
            options: Some(options),
        }
    }
}

impl Producer for DemandProducer {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Emit(vec![demand as u64])
    }
}

/// `NothingProducer`: emits nothing, reports every demand.
pub struct NothingProducer<T> {
    notify: Notifier<T>,
    options: Option<ProducerOptions<T>>,
}

impl<T: Send + 'static> NothingProducer<T> {
    /// `{:producer, self(), options}`.
    pub fn new(notify: Notifier<T>, options: ProducerOptions<T>) -> Self {
        Self {
            notify,
            options: Some(options),
        }
    }
}

impl<T: Send + 'static> Producer for NothingProducer<T> {
    type Messages = ();
    type Event = T;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<T>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<T> {
        self.notify.note(Note::Demand(demand));
        Noreply::none()
    }

    /// A barrier: reply at once.
    async fn handle_call(
        &mut self,
        _request: (),
        _from: ReplyTo<()>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Reply<(), T> {
        Reply::Reply((), Vec::new())
    }
}

/// `Postponer`: a producer_consumer that sends each incoming batch to itself
/// as an info and emits it from `handle_info`.
pub struct Postponer {
    notify: Notifier<u64>,
    options: Option<ProducerConsumerOptions<u64, u64>>,
}

impl Postponer {
    /// `{:producer_consumer, self(), options}`.
    pub fn new(notify: Notifier<u64>, options: ProducerConsumerOptions<u64, u64>) -> Self {
        Self {
            notify,
            options: Some(options),
        }
    }
}

pub type PostponerMessages = Msgs<(), (), (), Vec<u64>>;

impl ProducerConsumer for Postponer {
    type Messages = PostponerMessages;
    type In = u64;
    type Out = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<u64, u64>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        ctx.send_info(events);
        Noreply::none()
    }

    async fn handle_info(
        &mut self,
        events: Vec<u64>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        self.notify.note(Note::Postponed(events.clone()));
        Noreply::Emit(events)
    }
}

/// `Discarder`: a producer_consumer that reports and drops every batch.
pub struct Discarder {
    notify: Notifier<u64>,
    options: Option<ProducerConsumerOptions<u64, u64>>,
}

impl Discarder {
    /// `{:producer_consumer, self(), options}`.
    pub fn new(notify: Notifier<u64>, options: ProducerConsumerOptions<u64, u64>) -> Self {
        Self {
            notify,
            options: Some(options),
        }
    }
}

impl ProducerConsumer for Discarder {
    type Messages = ();
    type In = u64;
    type Out = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<u64, u64>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        self.notify.note(Note::Discarded(events));
        Noreply::none()
    }
}

/// `Sleeper`: a consumer that reports its first batch and then never returns
/// from `handle_events` (GenStage's `Process.sleep(:infinity)`).
pub struct Sleeper<T> {
    notify: Notifier<T>,
    subscribe_to: Vec<(ProducerRef<T>, SubscribeOptions<T>)>,
}

impl<T: Send + 'static> Sleeper<T> {
    /// `{:consumer, self()}`.
    pub fn new(notify: Notifier<T>) -> Self {
        Self {
            notify,
            subscribe_to: Vec::new(),
        }
    }

    /// `subscribe_to: [{producer, options}]`.
    pub fn subscribe_to(
        mut self,
        producer: &impl weir_gen_stage::AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Self {
        self.subscribe_to.push((producer.producer_ref(), options));
        self
    }
}

impl<T: Send + 'static> Consumer for Sleeper<T> {
    type Messages = ();
    type Event = T;

    async fn init(
        &mut self,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerOptions<T>, StopReason> {
        let mut options = ConsumerOptions::new();
        for (producer, subscribe) in self.subscribe_to.drain(..) {
            options = options.subscribe_to(&producer, subscribe);
        }
        Ok(options)
    }

    async fn handle_events(
        &mut self,
        events: Vec<T>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.notify.note(Note::Sleep(events));
        std::future::pending::<()>().await;
        Noreply::none()
    }
}

/// `DiscardedBufferLogger`: a producer that emits only what it is told to
/// queue and reports every discard count; `log_discarded` is what its
/// `format_discarded` returns (whether the default warning is logged too).
pub struct DiscardedBufferLogger {
    notify: Notifier<Item>,
    log_discarded: bool,
    options: Option<ProducerOptions<Item>>,
}

impl DiscardedBufferLogger {
    /// `{:producer, %{log_discarded: log_discarded}, options}`.
    pub fn new(
        notify: Notifier<Item>,
        log_discarded: bool,
        options: ProducerOptions<Item>,
    ) -> Self {
        Self {
            notify,
            log_discarded,
            options: Some(options),
        }
    }
}

pub type DiscardedBufferLoggerMessages = Msgs<Vec<Item>>;

impl Producer for DiscardedBufferLogger {
    type Messages = DiscardedBufferLoggerMessages;
    type Event = Item;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<Item>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<Item> {
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        events: Vec<Item>,
        _from: ReplyTo<()>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Reply<(), Item> {
        Reply::Reply((), events)
    }

    fn handle_discarded(&mut self, discarded: usize) -> bool {
        self.notify.note(Note::DiscardedCount(discarded));
        self.log_discarded
    }
}

// ---------------------------------------------------------------------------
// Log capture (GenStage's `capture_log`).

/// Warnings and errors logged while the guard lives, on this thread. Use with
/// `#[tokio::test]` (a current-thread runtime), so the stages' tasks run on
/// the test's thread and log into the capture too.
#[derive(Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    /// Start capturing warnings on this thread until the guard drops.
    ///
    /// One global subscriber (installed on first use) writes each event to the capture of the thread it
    /// is logged on, if any. A subscriber per thread (`set_default`) races with the other tests' threads
    /// over tracing's global callsite interest and level caches, so a warning was sometimes not
    /// captured when tests ran in parallel.
    pub fn start() -> (Self, CaptureGuard) {
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_ansi(false)
                .with_writer(ThreadCapture::current)
                .finish();
            // A test binary that installed another global subscriber keeps it (and captures nothing).
            let _ = tracing::subscriber::set_global_default(subscriber);
        });
        let log = CapturedLog::default();
        let previous = CAPTURE.with(|c| c.replace(Some(log.clone())));
        (log, CaptureGuard { previous })
    }

    /// Everything captured so far.
    pub fn contents(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Forget what was captured so far.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

thread_local! {
    /// The capture events logged on this thread go to.
    static CAPTURE: std::cell::RefCell<Option<CapturedLog>> = const { std::cell::RefCell::new(None) };
}

/// Ends a [`CapturedLog`] on its thread when dropped.
pub struct CaptureGuard {
    previous: Option<CapturedLog>,
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CAPTURE.with(|c| *c.borrow_mut() = previous);
    }
}

/// The writer of one event: this thread's capture, or nowhere.
struct ThreadCapture(Option<CapturedLog>);

impl ThreadCapture {
    fn current() -> Self {
        Self(CAPTURE.with(|c| c.borrow().clone()))
    }
}

impl io::Write for ThreadCapture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.0 {
            Some(log) => log.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
