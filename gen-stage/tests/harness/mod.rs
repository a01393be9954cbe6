//! Test stages for this crate's own integration tests: a counting producer
//! and a recording consumer that report what they see into a channel.
//!
//! Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::fmt::Debug;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use weir_gen_stage::{
    Cancellation, Consumer, ConsumerContext, ConsumerDemand, ConsumerOptions, Msgs, Noreply,
    Producer, ProducerConsumer, ProducerConsumerContext, ProducerContext, ProducerOptions, Reply,
    ReplyTo, StopReason, SubscribeOptions, Subscription, SubscriptionOptions,
};

/// A guard against a hung test, never a synchronisation.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// What the test stages report.
#[derive(Debug, Clone, PartialEq)]
pub enum Note<T> {
    /// A producer's `handle_demand(n)`.
    Demand(usize),
    /// A producer's `handle_subscribe`, with the extra options it saw.
    ProducerSubscribed(Subscription, Vec<(String, serde_json::Value)>),
    /// A producer's `handle_cancel`.
    ProducerCancelled(Subscription, Cancellation),
    /// A consumer's `handle_subscribe`.
    ConsumerSubscribed(Subscription),
    /// A consumer's `handle_events`.
    Consumed(Vec<T>),
    /// A consumer's `handle_cancel`.
    ConsumerCancelled(Subscription, Cancellation),
    /// A producer_consumer's `handle_events`.
    PcConsumed(Vec<T>),
    /// A `handle_info`.
    Info(&'static str),
    /// `terminate`.
    Terminated(StopReason),
}

pub type Notes<T> = mpsc::UnboundedReceiver<Note<T>>;
pub type Notify<T> = mpsc::UnboundedSender<Note<T>>;

pub fn notes<T>() -> (Notify<T>, Notes<T>) {
    mpsc::unbounded_channel()
}

/// The next note, failing the test after [`TIMEOUT`].
pub async fn next<T: Debug>(notes: &mut Notes<T>) -> Note<T> {
    match tokio::time::timeout(TIMEOUT, notes.recv()).await {
        Ok(Some(note)) => note,
        Ok(None) => panic!("every stage reporting notes has gone"),
        Err(_) => panic!("no note within {TIMEOUT:?}"),
    }
}

/// The next note matching `pick`, skipping the others.
pub async fn next_matching<T: Debug, R>(
    notes: &mut Notes<T>,
    mut pick: impl FnMut(Note<T>) -> Option<R>,
) -> R {
    loop {
        if let Some(found) = pick(next(notes).await) {
            return found;
        }
    }
}

/// The next `Consumed` batch.
pub async fn consumed<T: Debug>(notes: &mut Notes<T>) -> Vec<T> {
    next_matching(notes, |note| match note {
        Note::Consumed(events) => Some(events),
        _ => None,
    })
    .await
}

/// The next `Demand` a producer saw.
pub async fn demand<T: Debug>(notes: &mut Notes<T>) -> usize {
    next_matching(notes, |note| match note {
        Note::Demand(n) => Some(n),
        _ => None,
    })
    .await
}

/// Notes already received, without waiting.
pub fn drain<T>(notes: &mut Notes<T>) -> Vec<Note<T>> {
    let mut seen = Vec::new();
    while let Ok(note) = notes.try_recv() {
        seen.push(note);
    }
    seen
}

/// Requests the test producer understands.
#[derive(Debug)]
pub enum CounterCall {
    /// Reply with the counter, emitting these events first.
    Queue(Vec<u64>),
    /// Reply early with the counter, then emit these events.
    EarlyReplyQueue(Vec<u64>),
    /// Stop with this reason, replying `Some(counter)` or not.
    Stop(StopReason, bool),
    /// Keep the `ReplyTo` and never answer.
    Ignore,
    /// Panic.
    Panic,
}

/// Infos the test producer understands.
#[derive(Debug)]
pub enum CounterInfo {
    /// Emit these events.
    Queue(Vec<u64>),
    /// Report this label as a `Note::Info`.
    Label(&'static str),
}

/// GenStage's test `Counter`: emits `counter..counter+demand` on each
/// demand (unless `silent`), reports what it sees.
pub struct Counter {
    pub counter: u64,
    pub silent: bool,
    pub notify: Notify<u64>,
    pub options: Option<ProducerOptions<u64>>,
    pub discarded: Option<(Arc<Mutex<Vec<usize>>>, bool)>,
    kept: Vec<ReplyTo<u64>>,
}

impl Counter {
    pub fn new(counter: u64, notify: Notify<u64>) -> Self {
        Self {
            counter,
            silent: false,
            notify,
            options: None,
            discarded: None,
            kept: Vec::new(),
        }
    }

    /// Never emits from `handle_demand` (GenStage's `NothingProducer`).
    pub fn silent(mut self) -> Self {
        self.silent = true;
        self
    }

    pub fn with_options(mut self, options: ProducerOptions<u64>) -> Self {
        self.options = Some(options);
        self
    }

    /// Record discarded counts; `log` is what `handle_discarded` returns.
    pub fn record_discards(mut self, into: Arc<Mutex<Vec<usize>>>, log: bool) -> Self {
        self.discarded = Some((into, log));
        self
    }
}

pub type CounterMessages = Msgs<CounterCall, u64, Vec<u64>, CounterInfo>;

impl Producer for Counter {
    type Messages = CounterMessages;
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
        let _ = self.notify.send(Note::Demand(demand));
        if self.silent {
            return Noreply::none();
        }
        let events = (self.counter..self.counter + demand as u64).collect();
        self.counter += demand as u64;
        Noreply::Emit(events)
    }

    async fn handle_subscribe(
        &mut self,
        subscription: Subscription,
        options: &SubscriptionOptions<u64>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<(), StopReason> {
        let extra = options
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let _ = self
            .notify
            .send(Note::ProducerSubscribed(subscription, extra));
        Ok(())
    }

    async fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let _ = self
            .notify
            .send(Note::ProducerCancelled(subscription, cancellation));
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        request: CounterCall,
        from: ReplyTo<u64>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Reply<u64, u64> {
        match request {
            CounterCall::Queue(events) => Reply::Reply(self.counter, events),
            CounterCall::EarlyReplyQueue(events) => {
                from.reply(self.counter);
                Reply::Noreply(events)
            }
            CounterCall::Stop(reason, reply) => Reply::Stop(reason, reply.then_some(self.counter)),
            CounterCall::Ignore => {
                self.kept.push(from);
                Reply::noreply()
            }
            CounterCall::Panic => panic!("handle_call was asked to panic"),
        }
    }

    async fn handle_cast(
        &mut self,
        events: Vec<u64>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Emit(events)
    }

    async fn handle_info(
        &mut self,
        info: CounterInfo,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        match info {
            CounterInfo::Queue(events) => Noreply::Emit(events),
            CounterInfo::Label(label) => {
                let _ = self.notify.send(Note::Info(label));
                Noreply::none()
            }
        }
    }

    fn handle_discarded(&mut self, discarded: usize) -> bool {
        match &self.discarded {
            Some((into, log)) => {
                into.lock().expect("discard log").push(discarded);
                *log
            }
            None => true,
        }
    }

    async fn terminate(&mut self, reason: &StopReason, _ctx: &mut ProducerContext<'_, Self>) {
        let _ = self.notify.send(Note::Terminated(reason.clone()));
    }
}

/// What the recording consumer does on a call.
#[derive(Debug)]
pub enum RecorderCall {
    /// Reply once every earlier message has been handled.
    Ping,
    /// Panic.
    Panic,
}

/// GenStage's test `Forwarder`: reports everything it sees.
pub struct Recorder<T> {
    pub notify: Notify<T>,
    pub manual: bool,
    pub panic_on_events: bool,
    pub subscribe_to: Vec<(weir_gen_stage::ProducerRef<T>, SubscribeOptions<T>)>,
}

impl<T> Recorder<T> {
    pub fn new(notify: Notify<T>) -> Self {
        Self {
            notify,
            manual: false,
            panic_on_events: false,
            subscribe_to: Vec::new(),
        }
    }

    /// Subscribe to `producer` from `init`.
    pub fn subscribe_on_init(
        mut self,
        producer: &impl weir_gen_stage::AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Self {
        self.subscribe_to.push((producer.producer_ref(), options));
        self
    }

    /// Choose manual demand on every subscription.
    pub fn manual(mut self) -> Self {
        self.manual = true;
        self
    }

    /// Panic in `handle_events`.
    pub fn panicking(mut self) -> Self {
        self.panic_on_events = true;
        self
    }
}

pub type RecorderMessages = Msgs<RecorderCall, (), (), &'static str>;

impl<T: Send + Debug + 'static> Consumer for Recorder<T> {
    type Messages = RecorderMessages;
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
        _options: &SubscribeOptions<T>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        let _ = self.notify.send(Note::ConsumerSubscribed(subscription));
        Ok(if self.manual {
            ConsumerDemand::Manual
        } else {
            ConsumerDemand::Automatic
        })
    }

    async fn handle_events(
        &mut self,
        events: Vec<T>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        if self.panic_on_events {
            panic!("handle_events was asked to panic");
        }
        let _ = self.notify.send(Note::Consumed(events));
        Noreply::none()
    }

    async fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let _ = self
            .notify
            .send(Note::ConsumerCancelled(subscription, cancellation));
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        request: RecorderCall,
        _from: ReplyTo<()>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Reply<()> {
        match request {
            RecorderCall::Ping => Reply::reply(()),
            RecorderCall::Panic => panic!("the consumer's handle_call was asked to panic"),
        }
    }

    async fn handle_info(
        &mut self,
        label: &'static str,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let _ = self.notify.send(Note::Info(label));
        Noreply::none()
    }

    async fn terminate(&mut self, reason: &StopReason, _ctx: &mut ConsumerContext<'_, Self>) {
        let _ = self.notify.send(Note::Terminated(reason.clone()));
    }
}

/// A producer_consumer doubling every event, reporting what it sees.
pub struct Doubler {
    pub notify: Notify<u64>,
}

pub type DoublerMessages = Msgs<RecorderCall, (), (), &'static str>;

impl ProducerConsumer for Doubler {
    type Messages = DoublerMessages;
    type In = u64;
    type Out = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        let doubled = events.iter().map(|n| n * 2).collect();
        let _ = self.notify.send(Note::PcConsumed(events));
        Noreply::Emit(doubled)
    }

    async fn handle_cancel(
        &mut self,
        cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        let _ = self
            .notify
            .send(Note::ConsumerCancelled(subscription, cancellation));
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        request: RecorderCall,
        _from: ReplyTo<()>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Reply<(), u64> {
        match request {
            RecorderCall::Ping => Reply::reply(()),
            RecorderCall::Panic => panic!("the producer_consumer's handle_call was asked to panic"),
        }
    }

    async fn handle_info(
        &mut self,
        label: &'static str,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        let _ = self.notify.send(Note::Info(label));
        Noreply::none()
    }

    async fn terminate(
        &mut self,
        reason: &StopReason,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) {
        let _ = self.notify.send(Note::Terminated(reason.clone()));
    }
}

/// A log capture for `tracing` events emitted on this thread (use a
/// current-thread runtime so every stage runs here).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures everything at WARN and above until the guard is dropped.
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log buffer")).into_owned()
    }
}

impl io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
