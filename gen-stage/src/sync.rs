//! The synchronisation primitives of the hand-written concurrent cores (the
//! [mailbox](crate::mailbox) and the [group executor](crate::group)), in one
//! place so that they can be model-checked.
//!
//! Normally these are `parking_lot`'s lock, std's atomics and thread-locals
//! and tokio's cooperative budget. Built with `RUSTFLAGS="--cfg loom"`, they
//! are [loom](https://docs.rs/loom)'s instead: loom runs a test under every
//! interleaving of those operations (within a preemption bound), so a lost
//! wake-up shows as a deadlock and a lost message as a failed assertion. The
//! models are `loom_mailbox.rs` and `loom_group.rs`; `cargo xtask ci` runs
//! them. Nothing else in the crate uses this module: the rest of the runtime
//! is tokio's and std's, tested as usual.

#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::{Mutex, MutexGuard};
    pub(crate) use std::sync::atomic;

    /// `std::thread_local!` with `const` initialisers (no lazy-init check
    /// on access).
    macro_rules! const_thread_local {
        ($($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;)*) => {
            std::thread_local! { $($(#[$attr])* static $name: $t = const { $init };)* }
        };
    }
    pub(crate) use const_thread_local;

    /// Tokio's cooperative budget.
    pub(crate) mod coop {
        pub(crate) use tokio::task::coop::{has_budget_remaining, poll_proceed};
    }
}

#[cfg(loom)]
mod imp {
    use std::sync::PoisonError;

    pub(crate) use loom::sync::MutexGuard;
    pub(crate) use loom::sync::atomic;

    /// loom's thread-locals: one per simulated thread (its threads share
    /// the OS thread, so std's would be shared between them).
    macro_rules! const_thread_local {
        ($($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;)*) => {
            loom::thread_local! { $($(#[$attr])* static $name: $t = $init;)* }
        };
    }
    pub(crate) use const_thread_local;

    /// loom's lock with `parking_lot`'s face: no poisoning to check.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }

    /// No tokio runtime under loom: the budget never runs out (the group's
    /// own bound on polls per turn is what models its yield).
    pub(crate) mod coop {
        use std::task::{Context, Poll};

        pub(crate) struct RestoreOnPending;

        impl RestoreOnPending {
            pub(crate) fn made_progress(&self) {}
        }

        pub(crate) fn poll_proceed(_cx: &mut Context<'_>) -> Poll<RestoreOnPending> {
            Poll::Ready(RestoreOnPending)
        }

        pub(crate) fn has_budget_remaining() -> bool {
            true
        }
    }
}

pub(crate) use imp::*;
