//! Why a stage stops and why a subscription ends.

use std::fmt;

use weir_dispatchers::SubscribeError;

/// Why a stage stopped, or why a subscription was cancelled (GenStage's exit
/// and cancel reasons).
///
/// Reasons travel along subscriptions: a consumer whose producer stops with
/// `reason` sees [`Cancellation::Down`]`(reason)`, and with a
/// [`Permanent`](crate::CancelMode::Permanent) subscription stops with the
/// same reason.
///
/// ```
/// use weir_gen_stage::StopReason;
///
/// assert!(StopReason::Normal.is_transient_shutdown());
/// assert!(StopReason::ShutdownWith("rotating".into()).is_transient_shutdown());
/// assert!(!StopReason::custom("oops").is_transient_shutdown());
/// assert_eq!(StopReason::custom("oops").to_string(), "oops");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The stage finished its work (`:normal`).
    Normal,
    /// The stage was asked to shut down (`:shutdown`).
    Shutdown,
    /// A shutdown with a note (`{:shutdown, term}`); transient like
    /// [`Shutdown`](Self::Shutdown).
    ShutdownWith(String),
    /// The other stage was not alive when this one tried to reach it
    /// (`:noproc`).
    Noproc,
    /// The stage's task was dropped without stopping, e.g. because its tokio
    /// runtime shut down (`:killed`).
    Killed,
    /// A message named a subscription the receiver does not know
    /// (`:unknown_subscription`).
    UnknownSubscription,
    /// A consumer subscribed twice with the same subscription id
    /// (`:duplicated_subscription`).
    DuplicatedSubscription,
    /// The producer's dispatcher refused the subscription (Weir: GenStage
    /// crashes the producer instead).
    SubscriptionRefused(SubscribeError),
    /// A callback panicked; the message is the panic's payload.
    Panicked(String),
    /// Any other reason, chosen by user code (e.g. `StopReason::custom("oops")`).
    Custom(String),
}

impl StopReason {
    /// A user-chosen reason.
    pub fn custom(reason: impl Into<String>) -> Self {
        StopReason::Custom(reason.into())
    }

    /// Whether a [`Transient`](crate::CancelMode::Transient) subscription
    /// ending with this reason leaves its consumer running: `Normal`,
    /// `Shutdown` or `ShutdownWith(_)` (GenStage's `is_transient_shutdown`).
    pub fn is_transient_shutdown(&self) -> bool {
        matches!(
            self,
            StopReason::Normal | StopReason::Shutdown | StopReason::ShutdownWith(_)
        )
    }

    /// Builds the reason for a caught panic from its payload.
    pub(crate) fn from_panic(payload: &(dyn std::any::Any + Send)) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "a panic with a non-string payload".to_owned()
        };
        StopReason::Panicked(message)
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Normal => f.write_str("normal"),
            StopReason::Shutdown => f.write_str("shutdown"),
            StopReason::ShutdownWith(note) => write!(f, "shutdown: {note}"),
            StopReason::Noproc => f.write_str("noproc (the stage was not alive)"),
            StopReason::Killed => f.write_str("killed (the stage's task was dropped)"),
            StopReason::UnknownSubscription => f.write_str("unknown_subscription"),
            StopReason::DuplicatedSubscription => f.write_str("duplicated_subscription"),
            StopReason::SubscriptionRefused(error) => write!(f, "subscription refused: {error}"),
            StopReason::Panicked(message) => write!(f, "panicked: {message}"),
            StopReason::Custom(reason) => f.write_str(reason),
        }
    }
}

/// How a subscription ended, as `handle_cancel` sees it (GenStage's
/// `{:cancel, reason}` and `{:down, reason}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancellation {
    /// One side cancelled the subscription (or the producer refused it).
    Cancel(StopReason),
    /// The other stage went away; the reason is the one it stopped with.
    Down(StopReason),
}

impl Cancellation {
    /// The reason, whichever the kind.
    pub fn reason(&self) -> &StopReason {
        match self {
            Cancellation::Cancel(reason) | Cancellation::Down(reason) => reason,
        }
    }

    /// Whether the other stage went away.
    pub fn is_down(&self) -> bool {
        matches!(self, Cancellation::Down(_))
    }
}

impl fmt::Display for Cancellation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cancellation::Cancel(reason) => write!(f, "cancel: {reason}"),
            Cancellation::Down(reason) => write!(f, "down: {reason}"),
        }
    }
}
