//! Loom models of the group executor (`group.rs`) driving real mailboxes:
//! wakes from outside the group (the group's lock and its `outside` flag)
//! racing the turn the group task is taking, wakes between siblings (the
//! thread-local turn), the yield after [`POLLS_PER_TURN`] polls (3 under
//! loom), stages joining from another thread, and a panicking stage.
//!
//! The model's thread runs the group task with loom's `block_on`, which
//! parks on a loom primitive when the task is pending: a lost wake of the
//! group task (or of a stage in it) leaves every thread blocked, which loom
//! reports as a deadlock. Run with `cargo xtask loom` (part of
//! `cargo xtask ci`).
//!
//! [`POLLS_PER_TURN`]: crate::group::POLLS_PER_TURN

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use loom::future::block_on;
use loom::thread;

use crate::group::{StageGroup, StageTask};
use crate::loom_mailbox::check;
use crate::mailbox::{Receiver, Sender, channel};

/// A stage that takes everything its mailbox gets until the mailbox ends,
/// and records how many messages that was.
fn receiver(mut rx: Receiver<u8>, received: Arc<AtomicUsize>) -> StageTask {
    Box::pin(async move {
        let mut got = VecDeque::new();
        while rx.recv_all(&mut got).await > 0 {}
        received.store(got.len(), Ordering::SeqCst);
    })
}

/// Pending once, waking itself first: a stage that yields.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A message from outside the group (another thread: the group's lock and
/// `outside` flag) and one from a sibling (the thread-local turn) wake the
/// same parked stage while the group task takes its turn, yields after
/// three polls and parks: neither wake is lost, and the group ends once
/// its stages have and no handle is left.
#[test]
fn wakes_from_outside_and_from_a_sibling_during_the_turn_are_not_lost() {
    check(|| {
        let group = StageGroup::new();
        let (outside, rx) = channel::<u8>();
        let sibling = outside.clone();
        let received = Arc::new(AtomicUsize::new(0));
        let task = group
            .spawn_in_model(receiver(rx, received.clone()))
            .expect("the group's first stage");
        let sender: StageTask = Box::pin(async move {
            sibling.send(1).expect("open");
            drop(sibling);
            YieldOnce(false).await;
        });
        assert!(group.spawn_in_model(sender).is_none());
        drop(group);
        let from_outside = thread::spawn(move || {
            outside.send(2).expect("open");
        });
        block_on(task);
        from_outside.join().expect("the outside thread");
        assert_eq!(received.load(Ordering::SeqCst), 2);
    });
}

/// Two threads wake two different stages of the group at once, racing
/// each other for the group's lock and the group task parking: both wakes
/// reach the ready list and the group task is woken for them.
#[test]
fn two_outside_wakes_racing_each_other_and_the_group_parking_are_both_seen() {
    check(|| {
        let group = StageGroup::new();
        let (to_a, rx_a) = channel::<u8>();
        let (to_b, rx_b) = channel::<u8>();
        let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let task = group
            .spawn_in_model(receiver(rx_a, a.clone()))
            .expect("the group's first stage");
        assert!(group.spawn_in_model(receiver(rx_b, b.clone())).is_none());
        drop(group);
        let first = thread::spawn(move || to_a.send(1).expect("open"));
        let second = thread::spawn(move || to_b.send(2).expect("open"));
        block_on(task);
        first.join().expect("the first thread");
        second.join().expect("the second thread");
        assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (1, 1));
    });
}

/// A stage started from another thread while the group task runs or
/// parks: it reaches the group through the inbox and wakes the group task,
/// and the last handle's drop (on that thread too) lets the group end.
#[test]
fn a_stage_started_from_another_thread_joins_the_running_group() {
    check(|| {
        let group = StageGroup::new();
        let (tx, rx) = channel::<u8>();
        let received = Arc::new(AtomicUsize::new(0));
        let task = group
            .spawn_in_model(receiver(rx, received.clone()))
            .expect("the group's first stage");
        let joiner = group.clone();
        drop(group);
        let starter = thread::spawn(move || {
            let stage: StageTask = Box::pin(async move {
                tx.send(7).expect("open");
            });
            assert!(joiner.spawn_in_model(stage).is_none());
        });
        block_on(task);
        starter.join().expect("the starting thread");
        assert_eq!(received.load(Ordering::SeqCst), 1);
    });
}

/// What the panicking stage of the model says; kept out of the test output.
const MODEL_PANIC: &str = "the model's panicking stage";

/// A stage whose poll panics, and whose drop panics too, after dropping
/// the sender it holds.
struct Panicking(Option<Sender<u8>>);

impl Future for Panicking {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        panic!("{MODEL_PANIC} panics in poll");
    }
}

impl Drop for Panicking {
    fn drop(&mut self) {
        drop(self.0.take());
        panic!("{MODEL_PANIC} panics in drop");
    }
}

/// Silences the model's own panics (the group catches them), not loom's.
fn quiet_model_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied());
            if !message.is_some_and(|m| m.contains(MODEL_PANIC)) {
                default(info);
            }
        }));
    });
}

/// A stage that panics when polled (and again when dropped) is dropped on
/// its own: its sender goes with it, its sibling still gets the message
/// sent from outside, sees the end, and the group ends.
#[test]
fn a_panicking_stage_stops_alone_and_its_siblings_run_on() {
    quiet_model_panics();
    check(|| {
        let group = StageGroup::new();
        let (tx, rx) = channel::<u8>();
        let received = Arc::new(AtomicUsize::new(0));
        let task = group
            .spawn_in_model(receiver(rx, received.clone()))
            .expect("the group's first stage");
        assert!(
            group
                .spawn_in_model(Box::pin(Panicking(Some(tx.clone()))))
                .is_none()
        );
        drop(group);
        let from_outside = thread::spawn(move || {
            tx.send(3).expect("open");
        });
        block_on(task);
        from_outside.join().expect("the outside thread");
        assert_eq!(received.load(Ordering::SeqCst), 1);
    });
}
