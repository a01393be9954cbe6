//! What callbacks return, and how a call is answered.

use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::StopReason;

/// What most callbacks return: events to emit (GenStage's
/// `{:noreply, events, state}`) or a request to stop (`{:stop, reason, state}`).
///
/// Consumers emit nothing, so for them `T` is [`Infallible`] (the default)
/// and the only events list is the empty one.
///
/// ```
/// use weir_gen_stage::{Noreply, StopReason};
///
/// let emit: Noreply<u64> = Noreply::Emit(vec![1, 2, 3]);
/// let nothing: Noreply<u64> = Noreply::none();
/// let stop: Noreply = Noreply::Stop(StopReason::Normal); // a consumer's
/// # let _ = (emit, nothing, stop);
/// ```
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the runtime emits the events or stops the stage only if the value is returned"]
pub enum Noreply<T = Infallible> {
    /// Dispatch these events (in order) to consumers; may be empty.
    Emit(Vec<T>),
    /// Stop the stage with this reason.
    Stop(StopReason),
}

impl<T> Noreply<T> {
    /// Emit nothing and carry on.
    pub fn none() -> Self {
        Noreply::Emit(Vec::new())
    }

    /// Emit these events.
    pub fn emit(events: Vec<T>) -> Self {
        Noreply::Emit(events)
    }

    /// Stop with this reason.
    pub fn stop(reason: StopReason) -> Self {
        Noreply::Stop(reason)
    }
}

/// What `handle_call` returns (GenStage's `{:reply, reply, events, state}`,
/// `{:noreply, events, state}` and `{:stop, reason, reply, state}`).
///
/// With [`Reply::Reply`], the events are dispatched **before** the reply is
/// sent. A stage that answered early through [`ReplyTo::reply`] returns
/// [`Reply::Noreply`]; its answer went out first.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the runtime replies only if the value is returned"]
pub enum Reply<R, T = Infallible> {
    /// Dispatch the events, then send the reply.
    Reply(R, Vec<T>),
    /// Dispatch the events; the reply is (or was) sent through [`ReplyTo`].
    Noreply(Vec<T>),
    /// Send the reply if given, then stop with the reason.
    Stop(StopReason, Option<R>),
}

impl<R, T> Reply<R, T> {
    /// Reply, emitting nothing (GenStage's `{:reply, reply, [], state}`).
    #[allow(clippy::self_named_constructors)] // GenStage's own word for it.
    pub fn reply(reply: R) -> Self {
        Reply::Reply(reply, Vec::new())
    }

    /// Do not reply now, emit nothing.
    pub fn noreply() -> Self {
        Reply::Noreply(Vec::new())
    }
}

type Slot<R> = Arc<Mutex<Option<oneshot::Sender<Result<R, StopReason>>>>>;

/// Where the answer to a call goes (GenStage's `from` in `handle_call`).
///
/// Cheap to clone; the first [`reply`](Self::reply) wins. Keep it to answer
/// later, from another callback or another task. If every clone is dropped
/// without a reply, the caller gets [`Error::NoReply`](crate::Error::NoReply).
pub struct ReplyTo<R> {
    slot: Slot<R>,
}

impl<R> ReplyTo<R> {
    pub(crate) fn new() -> (Self, oneshot::Receiver<Result<R, StopReason>>) {
        let (tx, rx) = oneshot::channel();
        (
            Self {
                slot: Arc::new(Mutex::new(Some(tx))),
            },
            rx,
        )
    }

    fn take(&self) -> Option<oneshot::Sender<Result<R, StopReason>>> {
        self.slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// Send the answer. Returns `false` if an answer was already sent or the
    /// caller stopped waiting.
    pub fn reply(&self, reply: R) -> bool {
        match self.take() {
            Some(tx) => tx.send(Ok(reply)).is_ok(),
            None => false,
        }
    }

    /// Whether an answer was already sent.
    pub fn is_replied(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_none()
    }

    /// Tell the caller the stage stopped without answering.
    pub(crate) fn fail(&self, reason: StopReason) {
        if let Some(tx) = self.take() {
            let _ = tx.send(Err(reason));
        }
    }
}

impl<R> Clone for ReplyTo<R> {
    fn clone(&self) -> Self {
        Self {
            slot: self.slot.clone(),
        }
    }
}

impl<R> fmt::Debug for ReplyTo<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyTo")
            .field("replied", &self.is_replied())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reply_wins() {
        let (from, mut rx) = ReplyTo::new();
        let other = from.clone();
        assert!(from.reply(1));
        assert!(!other.reply(2));
        assert_eq!(rx.try_recv().expect("a reply"), Ok(1));
    }

    #[test]
    fn fail_after_reply_changes_nothing() {
        let (from, mut rx) = ReplyTo::new();
        assert!(from.reply("ok"));
        from.fail(StopReason::Shutdown);
        assert_eq!(rx.try_recv().expect("a reply"), Ok("ok"));
    }
}
