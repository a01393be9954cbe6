//! The crate's error type.

use std::time::Duration;

use weir_dispatchers::SubscriptionId;

use crate::{Cancellation, StageId, StopReason};

/// What can go wrong when starting, addressing or subscribing stages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An option has a value GenStage does not accept; nothing was started or
    /// subscribed.
    #[error("invalid option `{option}`: expected {expected}, got: {value}")]
    InvalidOption {
        /// The option's name (`max_demand`, `min_demand`, `buffer_size`, ...).
        option: &'static str,
        /// The value given.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// Stages are tokio tasks: `start_*` was called outside a tokio runtime.
    #[error("stages run on tokio: start them from within a tokio runtime")]
    NoRuntime,
    /// The [`StageGroup`](crate::StageGroup)'s task is gone (the runtime it
    /// ran on shut down): no stage can start in it any more.
    #[error("the stage group's task is gone (its runtime shut down)")]
    GroupClosed,
    /// The stage is not running (it stopped, or never started).
    #[error("{stage} is not alive")]
    NotAlive {
        /// The stage addressed.
        stage: StageId,
    },
    /// The stage did not answer in time. It may still process the request.
    #[error("{stage} did not answer within {timeout:?}")]
    Timeout {
        /// The stage addressed.
        stage: StageId,
        /// How long the caller waited.
        timeout: Duration,
    },
    /// The stage stopped before answering.
    #[error("{stage} stopped before answering: {reason}")]
    Stopped {
        /// The stage addressed.
        stage: StageId,
        /// Why it stopped.
        reason: StopReason,
    },
    /// The stage dropped a call without replying (its `handle_call` let go of
    /// every [`ReplyTo`](crate::ReplyTo)).
    #[error("{stage} dropped the call without replying")]
    NoReply {
        /// The stage addressed.
        stage: StageId,
    },
    /// The stage's `init` asked to stop (or panicked).
    #[error("{stage} failed to start: {reason}")]
    InitFailed {
        /// The stage that did not start.
        stage: StageId,
        /// What `init` returned.
        reason: StopReason,
    },
    /// The subscription ended before the producer accepted it (the producer
    /// refused it, was not alive, or went away).
    #[error("subscription to {producer} ended before it was accepted: {cancellation}")]
    SubscriptionRefused {
        /// The producer.
        producer: StageId,
        /// How it ended.
        cancellation: Cancellation,
    },
    /// A subscription ended, for a consumer that reports it (e.g. an
    /// [`EventStream`](crate::EventStream) whose permanent subscription ended
    /// abnormally).
    #[error("subscription {subscription} to {producer} ended: {cancellation}")]
    SubscriptionCancelled {
        /// The subscription.
        subscription: SubscriptionId,
        /// Its producer.
        producer: StageId,
        /// How it ended.
        cancellation: Cancellation,
    },
    /// The stage has no such subscription.
    #[error("{stage} has no subscription {subscription}")]
    UnknownSubscription {
        /// The stage addressed.
        stage: StageId,
        /// The subscription named.
        subscription: SubscriptionId,
    },
    /// A [`ConsumerSupervisor`](crate::ConsumerSupervisor) has no such child
    /// (it has finished, was terminated, or never was).
    #[error("{stage} has no child {child}")]
    UnknownChild {
        /// The supervisor.
        stage: StageId,
        /// The child named.
        child: crate::ChildId,
    },
    /// The operation only applies to another kind of stage (e.g. setting the
    /// demand mode of a consumer).
    #[error("{stage} is a {kind}: {operation} is only for {expected}")]
    WrongKind {
        /// The stage addressed.
        stage: StageId,
        /// What it is.
        kind: &'static str,
        /// What was attempted.
        operation: &'static str,
        /// Which kinds support it.
        expected: &'static str,
    },
}
