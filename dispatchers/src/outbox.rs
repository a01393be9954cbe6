//! What a dispatcher call produces: deliveries, released infos and warnings, in order.

use crate::{InfoId, SubscriptionId};

/// One thing the host must do after a dispatcher call, in the order pushed.
#[derive(Debug, PartialEq)]
pub enum Emit<T> {
    /// Send `events` (never empty) to the consumer of `to`.
    Events {
        /// The subscription that receives the batch.
        to: SubscriptionId,
        /// The batch, in order.
        events: Vec<T>,
    },
    /// Deliver this info message to the producer's `handle_info` now: every
    /// event queued before it has gone out.
    Info(InfoId),
    /// Something the user should hear about; the host logs it.
    Warning(Warning),
    /// Call [`Dispatcher::ask`](crate::Dispatcher::ask) for `subscription`
    /// with `n`, as if its consumer had asked, once everything pushed before
    /// this has been carried out (the host may do it right away or queue it
    /// behind messages already waiting, as GenStage does).
    ///
    /// The Broadcast dispatcher pushes this from `dispatch` to give back the
    /// demand of events a subscription's selector rejected: GenStage sends
    /// itself exactly this ask.
    Ask {
        /// The subscription whose demand is given back.
        subscription: SubscriptionId,
        /// How many events.
        n: usize,
    },
    /// The dispatcher gave up on `events` it held (e.g. the queue of a
    /// partition whose consumer cancelled; they were asked for again
    /// upstream). The host hands them to whoever wants undelivered events,
    /// or drops them with a warning.
    Discarded {
        /// The events, in order.
        events: Vec<T>,
        /// Why, for the log line.
        reason: &'static str,
    },
}

/// A condition worth a log line, reported by the dispatcher instead of logged by it
/// (dispatchers do no I/O).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// Demand dispatcher: a consumer asked for more than the first ask seen
    /// (GenStage's "expects a maximum demand of ..." warning).
    AskLargerThanMaxDemand {
        /// The subscription that asked.
        subscription: SubscriptionId,
        /// What it asked.
        asked: usize,
        /// The maximum the dispatcher expects.
        expected: usize,
    },
    /// Events were dropped by the dispatcher (e.g. queued events of a
    /// cancelled partition).
    EventsDropped {
        /// How many.
        count: usize,
        /// Why, for the log line.
        reason: &'static str,
    },
}

/// Collects what a dispatcher call wants the host to do.
///
/// A host keeps one outbox, passes it to each call and drains it afterwards;
/// the dispatcher only ever appends.
#[derive(Debug)]
pub struct Outbox<T> {
    items: Vec<Emit<T>>,
}

impl<T> Default for Outbox<T> {
    fn default() -> Self {
        Self { items: Vec::new() }
    }
}

impl<T> Outbox<T> {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queue `events` for the consumer of `to`. Empty batches are ignored, so
    /// dispatchers never need to check.
    pub fn send(&mut self, to: SubscriptionId, events: Vec<T>) {
        if !events.is_empty() {
            self.items.push(Emit::Events { to, events });
        }
    }

    /// Release an info message.
    pub fn info(&mut self, info: InfoId) {
        self.items.push(Emit::Info(info));
    }

    /// Ask the host to call [`Dispatcher::ask`](crate::Dispatcher::ask) for
    /// `subscription` with `n` (see [`Emit::Ask`]). Zero is ignored.
    pub fn ask(&mut self, subscription: SubscriptionId, n: usize) {
        if n > 0 {
            self.items.push(Emit::Ask { subscription, n });
        }
    }

    /// Give up on `events` (see [`Emit::Discarded`]). Empty batches are
    /// ignored.
    pub fn discard(&mut self, events: Vec<T>, reason: &'static str) {
        if !events.is_empty() {
            self.items.push(Emit::Discarded { events, reason });
        }
    }

    /// Report a warning.
    pub fn warn(&mut self, warning: Warning) {
        self.items.push(Emit::Warning(warning));
    }

    /// Whether nothing was emitted.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Take everything emitted so far, in order.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Emit<T>> {
        self.items.drain(..)
    }

    /// Everything emitted so far, in order, without taking it.
    pub fn items(&self) -> &[Emit<T>] {
        &self.items
    }
}
