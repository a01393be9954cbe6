//! The user's callbacks, shared by every stage that runs them, and the
//! catch_unwind around each call (the processor's around each group of
//! messages is in `processor.rs`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::message::{ack_messages, panic_reason};
use crate::{BatchInfo, Message};

pub(crate) type PrepareMessages<T> = Arc<dyn Fn(&mut [Message<T>]) + Send + Sync>;
pub(crate) type HandleMessage<T> = Arc<dyn Fn(&mut Message<T>) + Send + Sync>;
pub(crate) type HandleBatch<T> = Arc<dyn Fn(&mut [Message<T>], &BatchInfo) + Send + Sync>;
pub(crate) type HandleFailed<T> = Arc<dyn Fn(&mut [Message<T>]) + Send + Sync>;

/// Run `prepare_messages` on a processor's group of messages; a panic
/// fails every one of them (`handle_message` is then not called on them).
pub(crate) fn run_prepare_messages<T>(prepare: &PrepareMessages<T>, messages: &mut [Message<T>]) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| prepare(messages))) {
        let reason = panic_reason(payload.as_ref());
        tracing::warn!(target: "weir_pipeline", messages = messages.len(), %reason, "prepare_messages panicked: the messages fail");
        for message in messages {
            message.fail(reason.clone());
        }
    }
}

/// `handle_message` panicked on `message`: it fails.
pub(crate) fn fail_panicked<T>(message: &mut Message<T>, payload: &(dyn std::any::Any + Send)) {
    let reason = panic_reason(payload);
    tracing::warn!(target: "weir_pipeline", %reason, "handle_message panicked: the message fails");
    message.fail(reason);
}

/// Run `handle_batch`; a panic fails every message of the batch.
pub(crate) fn run_handle_batch<T>(
    handler: &HandleBatch<T>,
    messages: &mut [Message<T>],
    info: &BatchInfo,
) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| handler(messages, info))) {
        let reason = panic_reason(payload.as_ref());
        tracing::warn!(target: "weir_pipeline", batcher = %info.batcher, size = info.size, %reason, "handle_batch panicked: the batch fails");
        for message in messages {
            message.fail(reason.clone());
        }
    }
}

/// `handle_failed` on the failed messages (a panic there is logged, the
/// messages stay failed), then one ack per acknowledger.
///
/// Under an `ack` span (target `pipeline`) naming the acking `stage`
/// (`processor` or `batch_processor`) and the counts.
pub(crate) fn ack_with_failed_hook<T: 'static>(
    handle_failed: Option<&HandleFailed<T>>,
    successful: Vec<Message<T>>,
    mut failed: Vec<Message<T>>,
    stage: &'static str,
) {
    if successful.is_empty() && failed.is_empty() {
        return;
    }
    let _span = tracing::debug_span!(
        target: "weir_pipeline",
        "ack",
        stage,
        successful = successful.len(),
        failed = failed.len(),
    )
    .entered();
    if let Some(hook) = handle_failed.filter(|_| !failed.is_empty()) {
        let _span = tracing::debug_span!(
            target: "weir_pipeline",
            "handle_failed",
            stage,
            messages = failed.len(),
        )
        .entered();
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| hook(&mut failed))) {
            let reason = panic_reason(payload.as_ref());
            tracing::warn!(target: "weir_pipeline", %reason, "handle_failed panicked: the messages are acked failed");
        }
    }
    ack_messages(successful, failed);
}
