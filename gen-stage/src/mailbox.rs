//! A stage's mailbox: an unbounded multi-producer, single-consumer queue.
//!
//! It behaves like tokio's `mpsc::unbounded_channel` as the runtime uses it
//! (strong and weak senders; the receiver sees the end once every strong
//! sender is gone and the queue is empty; sending to a dropped receiver
//! fails and gives the message back), but is cheaper on the event path,
//! where every batch of events and every ask is one message:
//!
//! - one short lock per send and per receive instead of the lock-free block
//!   list, semaphore counter and atomic waker (several atomic operations
//!   per message); the lock is `parking_lot`'s, which has no poisoning to
//!   check (nothing panics while it is held) and spins briefly before it
//!   parks;
//! - the receiver takes everything queued (up to [`RECV_LIMIT`] messages)
//!   in one step, a swap of two `VecDeque`s whose buffers are reused, and a
//!   sender wakes the stage only when it parked on an empty queue, once;
//!   the receiver's waker is kept from one wait to the next and woken by
//!   reference under the lock, so no reference count moves per message.
//!   (Waking a stage of a [`StageGroup`](crate::StageGroup) from outside
//!   its group takes the group's lock, which is never held while a mailbox
//!   lock is taken: the order is always mailbox, then group.)
//!
//! Like tokio's receivers, a receive takes one unit of the task's
//! cooperative budget, so a stage that always has mail still yields to the
//! other tasks of its worker.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Poll, Waker};

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{Mutex, MutexGuard, coop};

struct Chan<M> {
    state: Mutex<State<M>>,
    /// Strong senders alive.
    senders: AtomicUsize,
}

struct State<M> {
    queue: VecDeque<M>,
    /// The receiver's waker, kept from one wait to the next.
    waker: Option<Waker>,
    /// The receiver waits on an empty queue: the next send wakes it.
    parked: bool,
    /// The receiver is gone: sends fail.
    closed: bool,
}

impl<M> Chan<M> {
    /// Nothing panics while the lock is held: messages are dropped outside
    /// it.
    fn lock(&self) -> MutexGuard<'_, State<M>> {
        self.state.lock()
    }
}

impl<M> State<M> {
    /// Wakes the receiver if it waits on an empty queue, by reference and
    /// under the lock: the waker stays for the next wait, so neither side
    /// touches its reference count.
    fn wake_parked(&mut self) {
        if self.parked {
            self.parked = false;
            if let Some(waker) = &self.waker {
                waker.wake_by_ref();
            }
        }
    }
}

/// The most messages one receive takes. Each receive spends one unit of the
/// task's cooperative budget, as tokio's `recv_many` does, so this bounds the
/// messages a stage handles before it yields to the other tasks of its
/// worker, as the stage loop's `recv_many(_, 128)` on a tokio channel did.
/// (2 under loom, so that small models reach the limit.)
pub(crate) const RECV_LIMIT: usize = if cfg!(loom) { 2 } else { 128 };

/// A new mailbox.
pub(crate) fn channel<M>() -> (Sender<M>, Receiver<M>) {
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            waker: None,
            parked: false,
            closed: false,
        }),
        senders: AtomicUsize::new(1),
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// Sends to a mailbox and keeps the stage reachable.
pub(crate) struct Sender<M> {
    chan: Arc<Chan<M>>,
}

impl<M> Sender<M> {
    /// Queue `msg`; gives it back if the receiver is gone.
    pub(crate) fn send(&self, msg: M) -> Result<(), M> {
        let mut state = self.chan.lock();
        if state.closed {
            drop(state);
            return Err(msg);
        }
        state.queue.push_back(msg);
        state.wake_parked();
        Ok(())
    }

    /// A sender that does not keep the stage reachable.
    pub(crate) fn downgrade(&self) -> WeakSender<M> {
        WeakSender {
            chan: self.chan.clone(),
        }
    }
}

impl<M> Clone for Sender<M> {
    fn clone(&self) -> Self {
        self.chan.senders.fetch_add(1, Ordering::Relaxed);
        Self {
            chan: self.chan.clone(),
        }
    }
}

impl<M> Drop for Sender<M> {
    fn drop(&mut self) {
        if self.chan.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last one: a waiting receiver must see the end.
            self.chan.lock().wake_parked();
        }
    }
}

/// A sender that does not count: it can be upgraded while a strong sender
/// is alive.
pub(crate) struct WeakSender<M> {
    chan: Arc<Chan<M>>,
}

impl<M> WeakSender<M> {
    /// A strong sender, unless every strong sender is gone.
    pub(crate) fn upgrade(&self) -> Option<Sender<M>> {
        let mut count = self.chan.senders.load(Ordering::Relaxed);
        loop {
            if count == 0 {
                return None;
            }
            match self.chan.senders.compare_exchange_weak(
                count,
                count + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Sender {
                        chan: self.chan.clone(),
                    });
                }
                Err(actual) => count = actual,
            }
        }
    }
}

impl<M> Clone for WeakSender<M> {
    fn clone(&self) -> Self {
        Self {
            chan: self.chan.clone(),
        }
    }
}

/// The stage's end of its mailbox.
pub(crate) struct Receiver<M> {
    chan: Arc<Chan<M>>,
}

impl<M> Receiver<M> {
    /// Wait for mail and move it to the back of `into` (in order), at most
    /// [`RECV_LIMIT`] messages. Returns how many messages were moved; 0 only
    /// when the queue is empty and no strong sender is left, so nothing can
    /// arrive any more.
    pub(crate) async fn recv_all(&mut self, into: &mut VecDeque<M>) -> usize {
        poll_fn(|cx| {
            let mut state = self.chan.lock();
            state.parked = false;
            let n = state.queue.len();
            if n > RECV_LIMIT {
                let coop = match coop::poll_proceed(cx) {
                    Poll::Ready(coop) => coop,
                    Poll::Pending => return Poll::Pending,
                };
                into.extend(state.queue.drain(..RECV_LIMIT));
                drop(state);
                coop.made_progress();
                return Poll::Ready(RECV_LIMIT);
            }
            if n > 0 {
                // Budget is only spent (and checked) when there is mail: a
                // stage about to park costs nothing here. Out of budget,
                // the mail stays queued and the task is woken again.
                let coop = match coop::poll_proceed(cx) {
                    Poll::Ready(coop) => coop,
                    Poll::Pending => return Poll::Pending,
                };
                if into.is_empty() {
                    // Swap buffers: `into`'s (empty) allocation becomes the
                    // queue's, so neither side allocates in steady state.
                    // One grown by a burst is not kept.
                    if into.capacity() > RECV_LIMIT {
                        *into = VecDeque::new();
                    }
                    std::mem::swap(&mut state.queue, into);
                } else {
                    into.extend(state.queue.drain(..));
                }
                drop(state);
                coop.made_progress();
                return Poll::Ready(n);
            }
            if self.chan.senders.load(Ordering::Acquire) == 0 {
                return Poll::Ready(0);
            }
            match &state.waker {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => state.waker = Some(cx.waker().clone()),
            }
            state.parked = true;
            Poll::Pending
        })
        .await
    }
}

impl<M> Receiver<M> {
    /// Close the mailbox (from now on a send is refused and gets its
    /// message back) and take everything queued: what a stopping stage
    /// leaves.
    pub(crate) fn close(&mut self) -> VecDeque<M> {
        let mut state = self.chan.lock();
        state.closed = true;
        std::mem::take(&mut state.queue)
    }
}

impl<M> Drop for Receiver<M> {
    fn drop(&mut self) {
        let (queue, waker) = {
            let mut state = self.chan.lock();
            state.closed = true;
            (std::mem::take(&mut state.queue), state.waker.take())
        };
        // Messages may hold senders, reply channels, handles: drop them
        // outside the lock.
        drop(queue);
        drop(waker);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn messages_arrive_in_order_and_all_at_once() {
        let (tx, mut rx) = channel();
        for n in 0..5 {
            tx.send(n).expect("open");
        }
        let mut got = VecDeque::new();
        assert_eq!(rx.recv_all(&mut got).await, 5);
        tx.send(5).expect("open");
        assert_eq!(rx.recv_all(&mut got).await, 1);
        assert_eq!(got, VecDeque::from(vec![0, 1, 2, 3, 4, 5]));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn one_receive_takes_at_most_the_limit() {
        let (tx, mut rx) = channel();
        for n in 0..(2 * RECV_LIMIT + 3) {
            tx.send(n).expect("open");
        }
        let mut got = VecDeque::new();
        assert_eq!(rx.recv_all(&mut got).await, RECV_LIMIT);
        assert_eq!(rx.recv_all(&mut got).await, RECV_LIMIT);
        assert_eq!(rx.recv_all(&mut got).await, 3);
        assert!(got.iter().copied().eq(0..(2 * RECV_LIMIT + 3)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_end_comes_when_the_last_strong_sender_goes() {
        let (tx, mut rx) = channel::<u8>();
        let weak = tx.downgrade();
        let second = weak.upgrade().expect("a strong sender is alive");
        drop(tx);
        second.send(1).expect("open");
        drop(second);
        assert!(weak.upgrade().is_none());
        let mut got = VecDeque::new();
        assert_eq!(rx.recv_all(&mut got).await, 1);
        assert_eq!(rx.recv_all(&mut got).await, 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_receiver_wakes_on_send_and_on_the_end() {
        let (tx, mut rx) = channel::<u8>();
        let receiver = tokio::spawn(async move {
            let mut got = VecDeque::new();
            let first = rx.recv_all(&mut got).await;
            let end = rx.recv_all(&mut got).await;
            (first, end, got)
        });
        tokio::task::yield_now().await;
        tx.send(7).expect("open");
        tokio::task::yield_now().await;
        drop(tx);
        let (first, end, got) = receiver.await.expect("the receiver ends");
        assert_eq!((first, end), (1, 0));
        assert_eq!(got, VecDeque::from(vec![7]));
    }

    /// Counts its wakes.
    struct Counting(AtomicUsize);

    impl std::task::Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_parked_receiver_is_woken_once_and_keeps_its_waker() {
        use std::future::Future;
        use std::task::Context;

        let (tx, mut rx) = channel::<u8>();
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let waker = Waker::from(counting.clone());
        let mut cx = Context::from_waker(&waker);
        let mut got = VecDeque::new();
        for round in 1..=3 {
            let mut recv = Box::pin(rx.recv_all(&mut got));
            assert!(recv.as_mut().poll(&mut cx).is_pending(), "nothing queued");
            tx.send(1).expect("open");
            tx.send(2).expect("open");
            assert_eq!(
                counting.0.load(Ordering::SeqCst),
                round,
                "one wake per wait"
            );
            assert_eq!(recv.as_mut().poll(&mut cx), Poll::Ready(2));
            // Mail taken without waiting: the next send wakes nobody.
            drop(recv);
            tx.send(3).expect("open");
            assert_eq!(counting.0.load(Ordering::SeqCst), round);
            let mut recv = Box::pin(rx.recv_all(&mut got));
            assert_eq!(recv.as_mut().poll(&mut cx), Poll::Ready(1));
            // The mailbox holds one reference to the waker, from the first
            // wait on: waking did not consume it, waiting did not clone it.
            assert_eq!(Arc::strong_count(&counting), 3);
        }
        assert_eq!(got.len(), 9);
    }

    #[test]
    fn sending_to_a_dropped_receiver_gives_the_message_back() {
        let (tx, rx) = channel::<String>();
        tx.send("queued".to_owned()).expect("open");
        drop(rx);
        assert_eq!(tx.send("late".to_owned()), Err("late".to_owned()));
    }

    #[test]
    fn queued_messages_are_dropped_with_the_receiver() {
        let (tx, rx) = channel::<Arc<()>>();
        let witness = Arc::new(());
        tx.send(witness.clone()).expect("open");
        assert_eq!(Arc::strong_count(&witness), 2);
        drop(rx);
        assert_eq!(Arc::strong_count(&witness), 1);
    }

    #[test]
    fn senders_on_many_threads_lose_nothing_and_keep_their_order() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("a runtime");
        let (tx, mut rx) = channel::<u64>();
        let senders: Vec<_> = (0..4)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for n in 0..10_000u64 {
                        tx.send(t * 10_000 + n).expect("open");
                    }
                })
            })
            .collect();
        drop(tx);
        let got = runtime.block_on(async move {
            let mut got = VecDeque::new();
            while rx.recv_all(&mut got).await > 0 {}
            got
        });
        for sender in senders {
            sender.join().expect("a sender thread");
        }
        assert_eq!(got.len(), 40_000);
        // Each sender's messages arrive in the order it sent them.
        for t in 0..4u64 {
            let mine: Vec<u64> = got.iter().copied().filter(|n| n / 10_000 == t).collect();
            assert!(mine.iter().copied().eq(t * 10_000..(t + 1) * 10_000));
        }
    }
}
