//! The ConsumerSupervisor equivalent: one task per event, at most
//! `max_demand` in flight per producer, asking again as tasks finish,
//! transient restarts within a limit.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use weir_gen_stage::{
    CancelMode, ChildId, ChildType, ConsumerSupervisor, CountChildren, Error, Restart, StopReason,
    SubscribeOptions,
};

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
    let jobs = weir_gen_stage::from_iter(0..100u64)
        .await
        .expect("producer");
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
    let jobs = weir_gen_stage::from_iter(0..6u64).await.expect("producer");
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
    let jobs = weir_gen_stage::from_iter(0..3u64).await.expect("producer");
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
    let jobs = weir_gen_stage::from_iter(0..20u64).await.expect("producer");
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

/// A supervisor whose children report their event and then run until
/// aborted, with `max_demand` 2 and `min_demand` 0 on a producer of 0..10.
async fn blocked_children(
    restart: Restart,
) -> (
    weir_gen_stage::ProducerRef<u64>,
    weir_gen_stage::SupervisorHandle<u64, ChildFn>,
    mpsc::UnboundedReceiver<u64>,
) {
    blocked_children_with(restart, 2, 0).await
}

/// The child function of [`blocked_children_with`].
type ChildFn = Box<
    dyn Fn(
            u64,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Infallible>> + Send>>
        + Send
        + Sync,
>;

/// [`blocked_children`] with these demand bounds.
async fn blocked_children_with(
    restart: Restart,
    max_demand: usize,
    min_demand: usize,
) -> (
    weir_gen_stage::ProducerRef<u64>,
    weir_gen_stage::SupervisorHandle<u64, ChildFn>,
    mpsc::UnboundedReceiver<u64>,
) {
    let (started_tx, started) = mpsc::unbounded_channel();
    let jobs = weir_gen_stage::from_iter(0..10u64).await.expect("producer");
    let child: ChildFn = Box::new(move |n: u64| {
        let started = started_tx.clone();
        Box::pin(async move {
            let _ = started.send(n);
            std::future::pending::<()>().await;
            Ok::<(), Infallible>(())
        })
    });
    let supervisor = ConsumerSupervisor::new(child)
        .restart(restart)
        .subscribe_to(
            &jobs,
            SubscribeOptions::new()
                .max_demand(max_demand)
                .min_demand(min_demand)
                .cancel(CancelMode::Transient),
        )
        .start()
        .await
        .expect("supervisor");
    (jobs, supervisor, started)
}

#[tokio::test]
async fn which_children_lists_each_running_task_with_the_event_a_transient_child_keeps() {
    let (_jobs, supervisor, mut started) = blocked_children(Restart::Transient).await;
    let mut first: Vec<u64> = vec![recv(&mut started).await, recv(&mut started).await];
    first.sort_unstable();
    assert_eq!(first, vec![0, 1]);

    let children = supervisor.which_children().await.expect("children");
    assert_eq!(children.len(), 2);
    assert!(children.iter().all(|child| child.alive));
    assert!(
        children
            .iter()
            .all(|child| child.child_type == ChildType::Worker)
    );
    // Oldest first, each with the event it was started for.
    let events: Vec<Option<u64>> = children.iter().map(|child| child.event).collect();
    assert_eq!(events, vec![Some(0), Some(1)]);
    assert!(children[0].id < children[1].id);
    let subscription = supervisor.status().await.expect("status").producers[0].id();
    assert!(
        children
            .iter()
            .all(|child| child.subscription == subscription)
    );
    assert_eq!(children[0].function, std::any::type_name::<ChildFn>());
}

#[tokio::test]
async fn a_temporary_child_keeps_no_event() {
    let (_jobs, supervisor, mut started) = blocked_children(Restart::Temporary).await;
    recv(&mut started).await;
    recv(&mut started).await;
    let children = supervisor.which_children().await.expect("children");
    assert_eq!(children.len(), 2);
    assert!(children.iter().all(|child| child.event.is_none()));
}

#[tokio::test]
async fn count_children_counts_one_spec_and_every_child_as_an_active_worker() {
    let (_jobs, supervisor, mut started) = blocked_children(Restart::Temporary).await;
    recv(&mut started).await;
    recv(&mut started).await;
    let count = supervisor.count_children().await.expect("count");
    assert_eq!(
        (count.specs, count.active, count.supervisors, count.workers),
        (1, 2, 0, 2)
    );
    // The plain call still answers the number of children.
    assert_eq!(supervisor.call(CountChildren, TIMEOUT).await, Ok(2));
}

#[tokio::test]
async fn terminate_child_frees_its_demand_and_the_producer_emits_again() {
    let (jobs, supervisor, mut started) = blocked_children(Restart::Transient).await;
    recv(&mut started).await;
    recv(&mut started).await;
    // Both slots taken: the supervisor has nothing pending on the producer,
    // and the producer owes it nothing.
    let status = supervisor.status().await.expect("status");
    assert_eq!(
        status.producers[0].mode,
        weir_gen_stage::ConsumerDemand::Manual
    );
    assert_eq!(status.producers[0].pending_demand, 0);
    assert_eq!(jobs.status().await.expect("status").consumers[0].demand, 0);

    let children = supervisor.which_children().await.expect("children");
    let oldest = children[0].id;
    assert_eq!(children[0].event, Some(0));
    supervisor
        .terminate_child(oldest)
        .await
        .expect("terminated");

    // The freed slot is asked for again (min_demand 0: at once), and the
    // producer sends the next event, which starts a new child.
    assert_eq!(recv(&mut started).await, 2);
    let children = supervisor.which_children().await.expect("children");
    let events: Vec<Option<u64>> = children.iter().map(|child| child.event).collect();
    assert_eq!(events, vec![Some(1), Some(2)]);
    assert!(children.iter().all(|child| child.id != oldest));
    let count = supervisor.count_children().await.expect("count");
    assert_eq!((count.active, count.workers), (2, 2));
    assert_eq!(jobs.status().await.expect("status").consumers[0].demand, 0);

    // The terminated child is gone for good (not restarted, unknown now).
    assert_eq!(
        supervisor.terminate_child(oldest).await,
        Err(Error::UnknownChild {
            stage: supervisor.id(),
            child: oldest,
        })
    );
}

#[tokio::test]
async fn terminate_child_of_an_id_that_never_was_is_an_error() {
    let (_jobs, supervisor, mut started) = blocked_children(Restart::Temporary).await;
    recv(&mut started).await;
    let unknown = ChildId(u64::MAX);
    assert_eq!(
        supervisor.terminate_child(unknown).await,
        Err(Error::UnknownChild {
            stage: supervisor.id(),
            child: unknown,
        })
    );
}

#[tokio::test]
async fn a_stopped_supervisor_answers_not_alive() {
    let (_jobs, supervisor, mut started) = blocked_children(Restart::Temporary).await;
    recv(&mut started).await;
    supervisor.stop(StopReason::Normal).await.expect("stopped");
    assert_eq!(
        supervisor.which_children().await,
        Err(Error::NotAlive {
            stage: supervisor.id()
        })
    );
    assert_eq!(
        supervisor.count_children().await,
        Err(Error::NotAlive {
            stage: supervisor.id()
        })
    );
}

#[tokio::test]
async fn terminated_children_give_their_demand_back_once_min_demand_slots_are_free() {
    // max_demand 3, min_demand 2: one free slot is not enough to ask.
    let (jobs, supervisor, mut started) = blocked_children_with(Restart::Temporary, 3, 2).await;
    for _ in 0..3 {
        recv(&mut started).await;
    }
    let children = supervisor.which_children().await.expect("children");
    assert_eq!(children.len(), 3);

    supervisor
        .terminate_child(children[0].id)
        .await
        .expect("terminated");
    let count = supervisor.count_children().await.expect("count");
    assert_eq!((count.active, count.workers), (2, 2));
    // Nothing asked yet: the producer owes the supervisor nothing.
    assert_eq!(jobs.status().await.expect("status").consumers[0].demand, 0);
    assert!(started.try_recv().is_err());

    // The second free slot makes min_demand: both are asked for at once and
    // the producer sends the next two events.
    supervisor
        .terminate_child(children[1].id)
        .await
        .expect("terminated");
    let mut next = vec![recv(&mut started).await, recv(&mut started).await];
    next.sort_unstable();
    assert_eq!(next, vec![3, 4]);
    let count = supervisor.count_children().await.expect("count");
    assert_eq!((count.active, count.workers), (3, 3));
}
