//! Turning an engine's panic into an InternalError with the backtrace of
//! the panic itself.
//!
//! A chained panic hook (installed once, keeping the previous hook) records
//! a backtrace in a thread-local, but only while an engine future is being
//! polled on that thread; [`catch_engine_panic`] takes it when the panic
//! unwinds out of the future.

use std::any::Any;
use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

use futures::FutureExt;

thread_local! {
    static POLLING_ENGINE: Cell<bool> = const { Cell::new(false) };
    static PANIC_BACKTRACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

static INSTALL_HOOK: Once = Once::new();

fn install_hook() {
    INSTALL_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if POLLING_ENGINE.with(Cell::get) {
                let backtrace = Backtrace::force_capture().to_string();
                PANIC_BACKTRACE.with(|slot| *slot.borrow_mut() = Some(backtrace));
            }
            previous(info);
        }));
    });
}

/// A panic that escaped an engine future.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnginePanic {
    pub(crate) message: String,
    pub(crate) backtrace: String,
}

/// Marks the thread as polling an engine future while `inner` is polled.
struct MarkPolling<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for MarkPolling<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let was = POLLING_ENGINE.with(|p| p.replace(true));
        // The flag is restored by the guard even when poll unwinds.
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                POLLING_ENGINE.with(|p| p.set(self.0));
            }
        }
        let _restore = Restore(was);
        self.inner.as_mut().poll(cx)
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// Runs `future`, turning a panic into an [`EnginePanic`].
pub(crate) async fn catch_engine_panic<F: Future>(future: F) -> Result<F::Output, EnginePanic> {
    install_hook();
    let marked = MarkPolling {
        inner: Box::pin(future),
    };
    match AssertUnwindSafe(marked).catch_unwind().await {
        Ok(output) => Ok(output),
        Err(payload) => {
            let backtrace = PANIC_BACKTRACE
                .with(|slot| slot.borrow_mut().take())
                .unwrap_or_else(|| {
                    // Another hook replaced ours: the best we have is where
                    // the panic was caught.
                    format!(
                        "(panic hook replaced; backtrace of the catch site)\n{}",
                        Backtrace::force_capture()
                    )
                });
            Err(EnginePanic {
                message: panic_message(payload.as_ref()),
                backtrace,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn engine_code_that_panics() -> u32 {
        panic!("division by zero in the planner")
    }

    #[tokio::test]
    async fn a_panic_becomes_message_and_backtrace_of_the_panic_site() {
        let result = catch_engine_panic(async { engine_code_that_panics() }).await;
        let panic = result.unwrap_err();
        assert_eq!(panic.message, "division by zero in the planner");
        assert!(
            panic.backtrace.contains("engine_code_that_panics"),
            "backtrace lacks the panicking function:\n{}",
            panic.backtrace
        );
    }

    #[tokio::test]
    async fn no_panic_passes_the_output_through() {
        assert_eq!(catch_engine_panic(async { 7 }).await, Ok(7));
    }

    #[tokio::test]
    async fn string_payloads_are_kept() {
        let panic = catch_engine_panic(async {
            std::panic::panic_any(format!("code {}", 42));
        })
        .await
        .unwrap_err();
        assert_eq!(panic.message, "code 42");
    }
}
