//! The floor of BASELINES.md: the chain topology written directly with
//! bounded tokio mpsc channels (capacity 2 batches per hop, batch =
//! max_demand / 2), no demand protocol at all.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::workload::{Tally, Workload, time_chain};

/// Batches each hop holds.
const HOP_CAPACITY: usize = 2;

/// Runs the chain once on the current runtime: producer -> `x * 2` ->
/// counter, each its own task. Times from releasing the producer until the
/// counter has every event.
pub async fn run_chain(workload: Workload) -> Duration {
    let what = format!("channel {workload}");
    let events = workload.events;
    let batch = workload.batch() as u64;
    let tally = Tally::new(events);

    let (go_tx, go_rx) = oneshot::channel::<()>();
    let (numbers_tx, mut numbers_rx) = mpsc::channel::<Vec<u64>>(HOP_CAPACITY);
    let (doubled_tx, mut doubled_rx) = mpsc::channel::<Vec<u64>>(HOP_CAPACITY);

    let producer = tokio::spawn(async move {
        if go_rx.await.is_err() {
            return;
        }
        let mut next = 0;
        while next < events {
            let end = next.saturating_add(batch).min(events);
            if numbers_tx.send((next..end).collect()).await.is_err() {
                return;
            }
            next = end;
        }
    });
    let doubler = tokio::spawn(async move {
        while let Some(mut events) = numbers_rx.recv().await {
            for event in &mut events {
                *event = event.wrapping_mul(2);
            }
            if doubled_tx.send(events).await.is_err() {
                return;
            }
        }
    });
    let counter = tokio::spawn({
        let tally = tally.clone();
        async move {
            while let Some(events) = doubled_rx.recv().await {
                tally.count(&events);
            }
        }
    });

    time_chain(&what, events, &tally, go_tx, [producer, doubler, counter]).await
}
