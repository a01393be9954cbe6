//! The ConsumerSupervisor equivalent: one task per event, at most
//! `max_demand` in flight per producer, asking again as tasks finish,
//! transient restarts within a limit.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gen_stage::{
    CancelMode, ConsumerSupervisor, CountChildren, Restart, StopReason, SubscribeOptions,
};
use tokio::sync::{Semaphore, mpsc};

const TIMEOUT: Duration = Duration::from_secs(5);

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(TIMEOUT, rx.recv())
        .await
        .expect("in time")
        .expect("a message")
}

#[tokio::test]
async fn runs_at_most_max_demand_tasks_and_asks_again_once_min_demand_have_finished() {
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (gate, running, peak) = (permits.clone(), in_flight.clone(), most.clone());
    let jobs = gen_stage::from_iter(0..100u64).await.expect("producer");
    let supervisor = ConsumerSupervisor::new(move |n: u64| {
        let (gate, running, peak, started) = (
            gate.clone(),
            running.clone(),
            peak.clone(),
            started_tx.clone(),
        );
        async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            let _ = started.send(n);
            gate.acquire().await.expect("open").forget();
            running.fetch_sub(1, Ordering::SeqCst);
            Ok::<(), Infallible>(())
        }
    })
    .subscribe_to(&jobs, SubscribeOptions::new().max_demand(10).min_demand(5))
    .start()
    .await
    .expect("supervisor");

    let mut seen: Vec<u64> = Vec::new();
    for _ in 0..10 {
        seen.push(recv(&mut started).await);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
    assert_eq!(supervisor.call(CountChildren, TIMEOUT).await, Ok(10));
    assert!(started.try_recv().is_err(), "no 11th task while 10 run");

    // Four finish: fewer than min_demand (5), so nothing is asked yet.
    permits.add_permits(4);
    while supervisor.call(CountChildren, TIMEOUT).await != Ok(6) {
        tokio::task::yield_now().await;
    }
    assert!(
        started.try_recv().is_err(),
        "waits for min_demand finished tasks"
    );

    // The fifth makes five: five more events are asked for and started.
    permits.add_permits(1);
    let mut next: Vec<u64> = Vec::new();
    for _ in 0..5 {
        next.push(recv(&mut started).await);
    }
    next.sort_unstable();
    assert_eq!(next, (10..15).collect::<Vec<_>>());
    assert_eq!(most.load(Ordering::SeqCst), 10);
}

#[tokio::test]
async fn transient_restarts_a_failing_task_with_the_same_event() {
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let failed_once = Arc::new(Mutex::new(HashSet::new()));
    let jobs = gen_stage::from_iter(0..6u64).await.expect("producer");
    let _supervisor = ConsumerSupervisor::new(move |n: u64| {
        let (failed_once, done) = (failed_once.clone(), done_tx.clone());
        async move {
            if n.is_multiple_of(3) && failed_once.lock().expect("set").insert(n) {
                return Err(format!("job {n} failed"));
            }
            let _ = done.send(n);
            Ok(())
        }
    })
    .restart(Restart::Transient)
    .max_restarts(5)
    .subscribe_to(&jobs, SubscribeOptions::new().cancel(CancelMode::Transient))
    .start()
    .await
    .expect("supervisor");
    let mut finished: Vec<u64> = Vec::new();
    for _ in 0..6 {
        finished.push(recv(&mut done).await);
    }
    finished.sort_unstable();
    assert_eq!(finished, (0..6).collect::<Vec<_>>());
}

#[tokio::test]
async fn too_many_restarts_stop_the_supervisor_with_shutdown() {
    let jobs = gen_stage::from_iter(0..3u64).await.expect("producer");
    let supervisor = ConsumerSupervisor::new(|_n: u64| async { Err::<(), _>("always fails") })
        .restart(Restart::Transient)
        .max_restarts(2)
        .subscribe_to(&jobs, SubscribeOptions::new().cancel(CancelMode::Temporary))
        .start()
        .await
        .expect("supervisor");
    let reason = tokio::time::timeout(TIMEOUT, supervisor.stopped())
        .await
        .expect("stops");
    assert_eq!(reason, StopReason::Shutdown);
}

#[tokio::test]
async fn temporary_failures_and_panics_free_their_slot() {
    let (tried_tx, mut tried) = mpsc::unbounded_channel();
    let jobs = gen_stage::from_iter(0..20u64).await.expect("producer");
    let supervisor = ConsumerSupervisor::new(move |n: u64| {
        let tried = tried_tx.clone();
        async move {
            let _ = tried.send(n);
            if n.is_multiple_of(2) {
                panic!("job {n} panicked");
            }
            Err::<(), _>(format!("job {n} failed"))
        }
    })
    .subscribe_to(
        &jobs,
        SubscribeOptions::new()
            .max_demand(2)
            .min_demand(1)
            .cancel(CancelMode::Transient),
    )
    .start()
    .await
    .expect("supervisor");
    let mut all: Vec<u64> = Vec::new();
    for _ in 0..20 {
        all.push(recv(&mut tried).await);
    }
    all.sort_unstable();
    assert_eq!(all, (0..20).collect::<Vec<_>>());
    assert!(supervisor.is_alive());
}
