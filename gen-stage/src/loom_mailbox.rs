//! Loom models of the mailbox (`mailbox.rs`): its races explored under
//! every interleaving of its lock and atomics, within a preemption bound.
//!
//! A lost wake-up shows as a deadlock (loom's `block_on` parks the receiver
//! on a loom primitive; if nothing wakes it, every thread is blocked and
//! loom fails the model), a lost or duplicated message as a failed
//! assertion. Run with `cargo xtask loom` (part of `cargo xtask ci`).

use std::collections::VecDeque;
use std::sync::Arc;

use loom::future::block_on;
use loom::thread;

use crate::mailbox::channel;

/// Runs `model` under loom with at most `LOOM_MAX_PREEMPTIONS` preemptions
/// per execution (3 unless set): enough for the races below, small enough
/// for the whole run to take seconds.
pub(crate) fn check(model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(model);
}

/// Everything the receiver gets until the mailbox ends.
fn receive_until_the_end<M>(rx: &mut crate::mailbox::Receiver<M>) -> VecDeque<M> {
    block_on(async {
        let mut got = VecDeque::new();
        while rx.recv_all(&mut got).await > 0 {}
        got
    })
}

/// Two senders on two threads, the receiver parking on an empty queue
/// between their sends: every send finds the receiver either awake or
/// parked with its waker in place. The senders stay alive until the
/// receiver has everything (their threads hand them back), so only the
/// sends' own wakes can wake it. Three messages, more than the receive
/// limit under loom (2), so a receive may also stop at the limit.
#[test]
fn two_senders_and_a_parking_receiver_lose_no_message_and_no_wakeup() {
    check(|| {
        let (tx, mut rx) = channel::<(u8, u8)>();
        let second = tx.clone();
        let a = thread::spawn(move || {
            tx.send((0, 0)).expect("open");
            tx.send((0, 1)).expect("open");
            tx
        });
        let b = thread::spawn(move || {
            second.send((1, 0)).expect("open");
            second
        });
        let got = block_on(async {
            let mut got = VecDeque::new();
            while got.len() < 3 {
                assert!(rx.recv_all(&mut got).await > 0, "senders are alive");
            }
            got
        });
        let senders = (a.join().expect("sender a"), b.join().expect("sender b"));
        assert_eq!(got.len(), 3, "{got:?}");
        // Each sender's messages in the order it sent them.
        let from_a: Vec<u8> = got.iter().filter(|m| m.0 == 0).map(|m| m.1).collect();
        assert_eq!(from_a, vec![0, 1]);
        assert!(got.contains(&(1, 0)));
        drop(senders);
    });
}

/// The last sender leaving while the receiver parks wakes it to see the
/// end, after the message sent before.
#[test]
fn the_last_sender_leaving_wakes_a_parked_receiver_to_see_the_end() {
    check(|| {
        let (tx, mut rx) = channel::<u8>();
        let sender = thread::spawn(move || {
            tx.send(1).expect("open");
            drop(tx);
        });
        let got = receive_until_the_end(&mut rx);
        sender.join().expect("sender");
        assert_eq!(got, VecDeque::from(vec![1]));
    });
}

/// A weak sender upgrading while the last strong sender drops: either the
/// upgrade wins (and its message arrives before the end) or it fails; the
/// receiver never sees the end while a sender that got through is alive.
#[test]
fn a_weak_sender_upgrading_as_the_last_strong_one_drops_never_loses_its_message() {
    check(|| {
        let (tx, mut rx) = channel::<u8>();
        let weak = tx.downgrade();
        let upgrader = thread::spawn(move || match weak.upgrade() {
            Some(tx) => {
                tx.send(1).expect("open");
                true
            }
            None => false,
        });
        drop(tx);
        let got = receive_until_the_end(&mut rx);
        let sent = upgrader.join().expect("upgrader");
        assert_eq!(got.len(), usize::from(sent), "{got:?}");
    });
}

/// A send racing the receiver's drop: the message is either given back to
/// the sender or dropped with the receiver's queue, never left behind.
#[test]
fn a_send_racing_the_receivers_drop_is_given_back_or_dropped_with_it() {
    check(|| {
        let witness = Arc::new(());
        let (tx, rx) = channel::<Arc<()>>();
        let message = witness.clone();
        let sender = thread::spawn(move || tx.send(message).is_err());
        drop(rx);
        let _given_back = sender.join().expect("sender");
        // The sender's thread dropped what was given back; the receiver
        // dropped what it had queued.
        assert_eq!(Arc::strong_count(&witness), 1);
    });
}
