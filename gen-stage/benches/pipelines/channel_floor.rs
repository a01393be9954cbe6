//! The floor of BASELINES.md: each topology written directly with bounded
//! tokio mpsc channels (capacity 2 batches per hop, batch = max_demand / 2),
//! no demand protocol at all. BASELINES.md measures it for the chain; the
//! fan-out topologies get the same treatment, so that every workload has a
//! floor in the same run.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use weir_gen_stage::PartitionDispatcher;

use crate::workload::{Tally, Topology, Workload, time_floor};

/// Batches each hop holds.
const HOP_CAPACITY: usize = 2;

/// Consumers of the fan-out topologies.
const FAN_OUT: usize = 4;

/// Runs `workload` once on the current runtime, every stage its own task.
/// Times from releasing the producer until the consumers have every event.
pub async fn run(workload: Workload) -> Duration {
    match workload.topology {
        Topology::Chain => run_chain(workload).await,
        Topology::Demand4 | Topology::Partition4 | Topology::Broadcast4 => {
            run_fan_out(workload).await
        }
    }
}

/// producer -> `x * 2` -> counter.
async fn run_chain(workload: Workload) -> Duration {
    let what = format!("channel {workload}");
    let tally = Tally::new(workload.events);
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let (numbers_tx, mut numbers_rx) = mpsc::channel::<Vec<u64>>(HOP_CAPACITY);
    let (doubled_tx, doubled_rx) = mpsc::channel::<Vec<u64>>(HOP_CAPACITY);

    let producer = tokio::spawn(async move {
        if go_rx.await.is_err() {
            return;
        }
        for batch in batches(workload) {
            if numbers_tx.send(batch).await.is_err() {
                return;
            }
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
    let counter = tokio::spawn(count(doubled_rx, tally.clone()));

    time_floor(&what, workload, &tally, go_tx, [producer, doubler, counter]).await
}

/// producer -> 4 counters: batches in turn (demand4), each batch split by
/// the Partition dispatcher's default hash (partition4), or every batch to
/// every counter (broadcast4).
async fn run_fan_out(workload: Workload) -> Duration {
    let what = format!("channel {workload}");
    let topology = workload.topology;
    let tally = Tally::new(topology.deliveries(workload.events));
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let mut senders = Vec::with_capacity(FAN_OUT);
    let mut tasks: Vec<JoinHandle<()>> = Vec::with_capacity(FAN_OUT + 1);
    // A partition4 hop carries quarter batches: as many more of them, so
    // that each consumer has as many events in flight as in the others.
    let capacity = match topology {
        Topology::Partition4 => HOP_CAPACITY * FAN_OUT,
        _ => HOP_CAPACITY,
    };
    for _ in 0..FAN_OUT {
        let (tx, rx) = mpsc::channel::<Vec<u64>>(capacity);
        senders.push(tx);
        tasks.push(tokio::spawn(count(rx, tally.clone())));
    }

    tasks.push(tokio::spawn(async move {
        if go_rx.await.is_err() {
            return;
        }
        match topology {
            Topology::Demand4 => {
                for (batch, tx) in batches(workload).zip(senders.iter().cycle()) {
                    if tx.send(batch).await.is_err() {
                        return;
                    }
                }
            }
            Topology::Partition4 => {
                // Room for an even share and its spread, as the Partition
                // dispatcher reserves.
                let share = workload.batch() / FAN_OUT;
                let share = share + share / 4 + 4;
                for batch in batches(workload) {
                    let mut parts: [Vec<u64>; FAN_OUT] =
                        std::array::from_fn(|_| Vec::with_capacity(share));
                    for event in batch {
                        parts[PartitionDispatcher::default_partition(&event, FAN_OUT)].push(event);
                    }
                    for (part, tx) in parts.into_iter().zip(&senders) {
                        if !part.is_empty() && tx.send(part).await.is_err() {
                            return;
                        }
                    }
                }
            }
            Topology::Chain => unreachable!("the chain is not a fan-out"),
            Topology::Broadcast4 => {
                for batch in batches(workload) {
                    for tx in &senders[1..] {
                        if tx.send(batch.clone()).await.is_err() {
                            return;
                        }
                    }
                    if senders[0].send(batch).await.is_err() {
                        return;
                    }
                }
            }
        }
    }));

    time_floor(&what, workload, &tally, go_tx, tasks).await
}

/// What the producer emits: `0..events` in batches of `workload.batch()`.
fn batches(workload: Workload) -> impl Iterator<Item = Vec<u64>> {
    let events = workload.events;
    let batch = workload.batch() as u64;
    (0..events)
        .step_by(batch as usize)
        .map(move |start| (start..start.saturating_add(batch).min(events)).collect())
}

/// A counter: adds up every batch it receives into `tally`.
async fn count(mut rx: mpsc::Receiver<Vec<u64>>, tally: Arc<Tally>) {
    while let Some(events) = rx.recv().await {
        tally.count(&events);
    }
}
