//! The demand-protocol floor: the chain with GenStage's demand protocol
//! written by hand on tokio tasks and channels, and nothing else: no handles,
//! subscriptions, dispatcher, callbacks, buffer, monitors or panic guards.
//! It is the least any GenStage whose stages are tokio tasks must do per
//! batch, so it says how much of the gap between Weir and the channel floor
//! is the protocol itself.
//!
//! What it keeps of the protocol (`shared/genstage/SEMANTICS.md`):
//! - each stage has one mailbox, where events from upstream and asks from
//!   downstream arrive in one order;
//! - a consumer (and the producer_consumer, towards the producer) asks
//!   `max_demand` at first, then `max_demand - min_demand` (at least 1) after
//!   each piece of that many events it handled, one ask message per piece;
//! - the producer emits exactly what it is asked, as one batch per ask;
//! - the producer_consumer handles events only as far as downstream asked,
//!   queues the rest, and asks upstream after handling them.
//!
//! Mailboxes are tokio's unbounded channels, taken up to 128 messages at a
//! time, as a stage's mailbox is.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::workload::{Tally, Workload, time_floor};

enum Msg {
    Events(Vec<u64>),
    Ask(usize),
}

/// Messages taken per receive.
const RECV_LIMIT: usize = 128;

/// Automatic demand towards one producer: the asks owed for `handled`
/// events, one per completed piece.
struct Asks {
    piece: usize,
    handled: usize,
}

impl Asks {
    fn new(workload: &Workload) -> Self {
        Self {
            piece: (workload.max_demand - workload.min_demand()).max(1),
            handled: 0,
        }
    }

    /// `n` more events were handled: ask for every completed piece.
    fn handled(&mut self, n: usize, upstream: &mpsc::UnboundedSender<Msg>) {
        self.handled += n;
        while self.handled >= self.piece {
            self.handled -= self.piece;
            // The producer may be done and gone.
            let _ = upstream.send(Msg::Ask(self.piece));
        }
    }
}

/// Runs the chain once on the current runtime: producer -> `x * 2` ->
/// counter, each its own task. Times from releasing the producer until the
/// counter has every event.
pub async fn run_chain(workload: Workload) -> Duration {
    let what = format!("protocol {workload}");
    let events = workload.events;
    let tally = Tally::new(events);

    let (go_tx, go_rx) = oneshot::channel::<()>();
    let (producer_tx, mut producer_rx) = mpsc::unbounded_channel::<Msg>();
    let (doubler_tx, mut doubler_rx) = mpsc::unbounded_channel::<Msg>();
    let (counter_tx, mut counter_rx) = mpsc::unbounded_channel::<Msg>();

    // The producer: emits `0..events` as asked; asks wait until the clock
    // starts (accumulate mode).
    let producer = tokio::spawn({
        let downstream = doubler_tx.clone();
        async move {
            if go_rx.await.is_err() {
                return;
            }
            let mut next = 0;
            let mut mail = Vec::with_capacity(RECV_LIMIT);
            while next < events && producer_rx.recv_many(&mut mail, RECV_LIMIT).await > 0 {
                for msg in mail.drain(..) {
                    if let Msg::Ask(n) = msg {
                        let end = next.saturating_add(n as u64).min(events);
                        if end > next
                            && downstream.send(Msg::Events((next..end).collect())).is_err()
                        {
                            return;
                        }
                        next = end;
                    }
                }
            }
        }
    });

    // The producer_consumer: asks the producer `max_demand`, doubles events
    // as far as the counter asked, queues the rest.
    let doubler = tokio::spawn({
        let upstream = producer_tx.clone();
        let mut asks = Asks::new(&workload);
        let initial = workload.max_demand;
        async move {
            let _ = upstream.send(Msg::Ask(initial));
            let mut queue: VecDeque<Vec<u64>> = VecDeque::new();
            let mut demand = 0usize;
            let mut forwarded = 0u64;
            let mut mail = Vec::with_capacity(RECV_LIMIT);
            while forwarded < events && doubler_rx.recv_many(&mut mail, RECV_LIMIT).await > 0 {
                for msg in mail.drain(..) {
                    match msg {
                        Msg::Events(batch) => queue.push_back(batch),
                        Msg::Ask(n) => demand += n,
                    }
                    while demand > 0 {
                        let Some(mut batch) = queue.pop_front() else {
                            break;
                        };
                        if batch.len() > demand {
                            let rest = batch.split_off(demand);
                            queue.push_front(rest);
                        }
                        let n = batch.len();
                        for event in &mut batch {
                            *event = event.wrapping_mul(2);
                        }
                        demand -= n;
                        forwarded += n as u64;
                        if counter_tx.send(Msg::Events(batch)).is_err() {
                            return;
                        }
                        asks.handled(n, &upstream);
                    }
                }
            }
        }
    });

    // The consumer: asks `max_demand`, counts, asks again piece by piece.
    let counter = tokio::spawn({
        let tally = tally.clone();
        let upstream = doubler_tx;
        let mut asks = Asks::new(&workload);
        let initial = workload.max_demand;
        async move {
            let _ = upstream.send(Msg::Ask(initial));
            let mut counted = 0u64;
            let mut mail = Vec::with_capacity(RECV_LIMIT);
            while counted < events && counter_rx.recv_many(&mut mail, RECV_LIMIT).await > 0 {
                for msg in mail.drain(..) {
                    if let Msg::Events(batch) = msg {
                        tally.count(&batch);
                        counted += batch.len() as u64;
                        asks.handled(batch.len(), &upstream);
                    }
                }
            }
        }
    });
    drop(producer_tx);

    // Let both asks of `max_demand` reach their mailboxes before the clock
    // starts, as the bench's Weir pipeline does.
    tokio::task::yield_now().await;
    time_floor(&what, workload, &tally, go_tx, [producer, doubler, counter]).await
}
