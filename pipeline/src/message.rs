//! Messages and their acknowledgers.

use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The batcher a message goes to when its handler names none.
pub const DEFAULT_BATCHER: &str = "default";

/// The batch key a message has when its handler sets none.
pub const DEFAULT_BATCH_KEY: &str = "default";

/// Whether a message was handled: Broadway's `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Handled so far (the status every message starts with).
    Ok,
    /// Failed, with why: a handler called [`Message::fail`], panicked, or the
    /// pipeline could not deliver it (unknown batcher, shutdown).
    Failed(String),
}

/// When a batcher hands over the batch a message is in: Broadway's
/// `batch_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchMode {
    /// When the batch is full or its timeout passes (the default).
    #[default]
    Bulk,
    /// As soon as the batcher has received the message: the batch is handed
    /// over with what the batcher received with it (not necessarily alone).
    /// [`Pipeline::test_message`](crate::Pipeline::test_message) and
    /// [`test_batch`](crate::Pipeline::test_batch) push their messages so.
    Flush,
}

/// Told once for every message whether it was handled: Broadway's
/// `Broadway.Acknowledger`.
///
/// `ack` is called with messages that share this acknowledger, once per
/// batch (or, for messages that go to no batcher, once per group of
/// messages a processor handled together), and every message of a pipeline
/// reaches exactly one `ack` call: it is moved there, so it cannot be acked
/// twice.
///
/// `ack` is synchronous and runs on the stage that acks (a processor or a
/// batch processor): an acknowledger with slow work to do (a network call)
/// should hand it to a task or a channel of its own, as Broadway's
/// acknowledgers send a message. Any `Fn(Vec<Message<T>>, Vec<Message<T>>)`
/// is an acknowledger.
pub trait Acknowledger<T>: Send + Sync + 'static {
    /// `successful` were handled; `failed` were not (see each one's
    /// [`Message::status`]).
    fn ack(&self, successful: Vec<Message<T>>, failed: Vec<Message<T>>);

    /// Change how `message` will be acked (Broadway's acknowledger
    /// `configure/3`, reached through [`Message::configure_ack`]): the
    /// options are the acknowledger's own type (it downcasts them), and it
    /// usually records them in the message's [`ack data`](Message::put_ack_data).
    /// By default an acknowledger has nothing to configure.
    fn configure(
        &self,
        _message: &mut Message<T>,
        _options: &dyn Any,
    ) -> Result<(), ConfigureAckError> {
        Err(ConfigureAckError::Unsupported)
    }
}

/// Why [`Message::configure_ack`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigureAckError {
    /// The message's acknowledger has no options.
    #[error("the message's acknowledger has no options to configure")]
    Unsupported,
    /// The acknowledger refused the options.
    #[error("the acknowledger refused the options: {0}")]
    Invalid(String),
}

/// A message's metadata (Broadway's `metadata` map): what the producer
/// knows about it besides its data (headers, offsets, receipt ids), and
/// what handlers add.
pub type Metadata = BTreeMap<String, String>;

/// The metadata of a message without any.
static NO_METADATA: Metadata = BTreeMap::new();

impl<T, F> Acknowledger<T> for F
where
    F: Fn(Vec<Message<T>>, Vec<Message<T>>) + Send + Sync + 'static,
{
    fn ack(&self, successful: Vec<Message<T>>, failed: Vec<Message<T>>) {
        self(successful, failed)
    }
}

/// An acknowledger that does nothing (for sources with nothing to confirm).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopAcknowledger;

impl<T: 'static> Acknowledger<T> for NoopAcknowledger {
    fn ack(&self, _successful: Vec<Message<T>>, _failed: Vec<Message<T>>) {}
}

/// One piece of data moving through a pipeline, with the acknowledger to
/// tell when it is done: Broadway's `%Broadway.Message{}`.
///
/// Messages are not `Clone`: each is acked exactly once, by moving it into
/// [`Acknowledger::ack`].
///
/// A message that keeps the defaults (status ok, the default batcher and
/// batch key) is its data, its acknowledger and two words: what a handler
/// changes lives in a box of its own, allocated the first time one of them
/// changes.
pub struct Message<T> {
    /// The data; handlers may change it in place.
    pub data: T,
    pub(crate) acknowledger: Arc<dyn Acknowledger<T>>,
    /// `None`: status ok, the default batcher and batch key.
    extra: Option<Box<Extra>>,
    /// Set by the processor once `batcher` (and the batcher's partition) is
    /// resolved: the partition of the batcher stage it goes to.
    pub(crate) batcher_index: usize,
}

/// What a message carries once a handler changed its status, batcher or
/// batch key, or it got metadata or ack data.
#[derive(Debug, Clone)]
struct Extra {
    status: Status,
    /// `Cow`: the defaults are borrowed.
    batcher: Cow<'static, str>,
    batch_key: Cow<'static, str>,
    batch_mode: BatchMode,
    /// Metadata and ack data, boxed again: most messages that change their
    /// batcher or status have neither, and a message's drop stays small.
    source: Option<Box<SourceData>>,
}

/// What a message's producer (or a handler) attached for later stages and
/// the acknowledger.
#[derive(Debug, Clone, Default)]
struct SourceData {
    metadata: Metadata,
    ack_data: Option<AckData>,
}

/// A message's ack data: anything its acknowledger wants to find again.
#[derive(Clone)]
struct AckData(Arc<dyn Any + Send + Sync>);

impl fmt::Debug for AckData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AckData(..)")
    }
}

/// The status of a message without [`Extra`].
static OK: Status = Status::Ok;

impl<T> Message<T> {
    /// A message with status [`Status::Ok`], for the default batcher.
    pub fn new(data: T, acknowledger: Arc<dyn Acknowledger<T>>) -> Self {
        Self {
            data,
            acknowledger,
            extra: None,
            batcher_index: 0,
        }
    }

    fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(|| {
            Box::new(Extra {
                status: Status::Ok,
                batcher: Cow::Borrowed(DEFAULT_BATCHER),
                batch_key: Cow::Borrowed(DEFAULT_BATCH_KEY),
                batch_mode: BatchMode::Bulk,
                source: None,
            })
        })
    }

    fn source_mut(&mut self) -> &mut SourceData {
        self.extra_mut().source.get_or_insert_default()
    }

    fn source(&self) -> Option<&SourceData> {
        self.extra
            .as_ref()
            .and_then(|extra| extra.source.as_deref())
    }

    /// A message with `data` and `metadata` (Broadway's `metadata` field).
    pub fn with_metadata(
        data: T,
        acknowledger: Arc<dyn Acknowledger<T>>,
        metadata: Metadata,
    ) -> Self {
        let mut message = Self::new(data, acknowledger);
        if !metadata.is_empty() {
            message.source_mut().metadata = metadata;
        }
        message
    }

    /// The message's metadata (empty unless a producer or handler put
    /// some).
    pub fn metadata(&self) -> &Metadata {
        self.source()
            .map_or(&NO_METADATA, |source| &source.metadata)
    }

    /// The message's metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.source_mut().metadata
    }

    /// Attach `data` for the acknowledger (Broadway's `ack_data`, the third
    /// element of its acknowledger tuple): a receipt handle, a delivery
    /// tag, how to ack on failure. Replaces any ack data it had.
    pub fn put_ack_data<D: Any + Send + Sync>(&mut self, data: D) {
        self.source_mut().ack_data = Some(AckData(Arc::new(data)));
    }

    /// The ack data, if it is a `D`.
    pub fn ack_data<D: Any>(&self) -> Option<&D> {
        self.source()
            .and_then(|source| source.ack_data.as_ref())
            .and_then(|AckData(data)| data.downcast_ref())
    }

    /// Configure how the message will be acked (Broadway's
    /// `configure_ack`): hands `options` to the acknowledger's
    /// [`configure`](Acknowledger::configure).
    pub fn configure_ack(&mut self, options: &dyn Any) -> Result<(), ConfigureAckError>
    where
        T: 'static,
    {
        let acknowledger = self.acknowledger.clone();
        acknowledger.configure(self, options)
    }

    /// Ack the message now, with its status so far (Broadway's
    /// `ack_immediately`): a copy of it goes to its acknowledger at once,
    /// and the message goes on through the pipeline with a no-op
    /// acknowledger in its place, so it is not acked again. `handle_failed`
    /// does not see a message acked this way. For sources that must confirm
    /// receipt before the work is done.
    pub fn ack_immediately(&mut self)
    where
        T: Clone + 'static,
    {
        let copy = Message {
            data: self.data.clone(),
            acknowledger: self.acknowledger.clone(),
            extra: self.extra.clone(),
            batcher_index: self.batcher_index,
        };
        let acknowledger = std::mem::replace(&mut self.acknowledger, Arc::new(NoopAcknowledger));
        if copy.is_ok() {
            ack_group(&acknowledger, vec![copy], Vec::new());
        } else {
            ack_group(&acknowledger, Vec::new(), vec![copy]);
        }
    }

    /// When the batcher hands over the message's batch (Broadway's
    /// `put_batch_mode`): [`BatchMode::Flush`] at once, without waiting
    /// for the batch to fill or time out.
    pub fn put_batch_mode(&mut self, mode: BatchMode) {
        if mode != self.batch_mode() {
            self.extra_mut().batch_mode = mode;
        }
    }

    /// In [`BatchMode::Flush`] (one look at the box of changes, for the
    /// batcher's per-message path).
    #[inline]
    pub(crate) fn flushes(&self) -> bool {
        matches!(
            self.extra.as_deref(),
            Some(Extra {
                batch_mode: BatchMode::Flush,
                ..
            })
        )
    }

    /// The message's batch mode.
    pub fn batch_mode(&self) -> BatchMode {
        self.extra
            .as_ref()
            .map_or(BatchMode::Bulk, |extra| extra.batch_mode)
    }

    /// Mark the message failed: it goes to no batcher, and is acked failed
    /// (after `handle_failed`). Failing an already failed message keeps the
    /// first reason.
    pub fn fail(&mut self, reason: impl Into<String>) {
        if self.is_ok() {
            self.extra_mut().status = Status::Failed(reason.into());
        }
    }

    /// Send the message to the batcher named `batcher` (Broadway's
    /// `put_batcher`).
    pub fn put_batcher(&mut self, batcher: impl Into<String>) {
        self.extra_mut().batcher = Cow::Owned(batcher.into());
    }

    /// Batch the message only with messages of the same key (Broadway's
    /// `put_batch_key`).
    pub fn put_batch_key(&mut self, key: impl Into<String>) {
        self.extra_mut().batch_key = Cow::Owned(key.into());
    }

    /// Ok, or failed with why.
    pub fn status(&self) -> &Status {
        self.extra.as_ref().map_or(&OK, |extra| &extra.status)
    }

    /// Not failed.
    pub fn is_ok(&self) -> bool {
        self.extra
            .as_ref()
            .is_none_or(|extra| extra.status == Status::Ok)
    }

    /// The batcher this message goes to.
    pub fn batcher(&self) -> &str {
        self.extra
            .as_ref()
            .map_or(DEFAULT_BATCHER, |extra| &extra.batcher)
    }

    /// The batcher, unless it is the default one left as it was (no
    /// comparison needed).
    pub(crate) fn custom_batcher(&self) -> Option<&str> {
        match self.extra.as_deref() {
            Some(Extra {
                batcher: Cow::Owned(name),
                ..
            }) => Some(name),
            _ => None,
        }
    }

    /// The batch key, unless it is the default one left as it was.
    pub(crate) fn custom_batch_key(&self) -> Option<&str> {
        match self.extra.as_deref() {
            Some(Extra {
                batch_key: Cow::Owned(key),
                ..
            }) => Some(key),
            _ => None,
        }
    }

    /// The batch key.
    pub fn batch_key(&self) -> &str {
        self.extra
            .as_ref()
            .map_or(DEFAULT_BATCH_KEY, |extra| &extra.batch_key)
    }

    /// The acknowledger.
    pub fn acknowledger(&self) -> &Arc<dyn Acknowledger<T>> {
        &self.acknowledger
    }
}

impl<T: fmt::Debug> fmt::Debug for Message<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("data", &self.data)
            .field("status", self.status())
            .field("batcher", &self.batcher())
            .field("batch_key", &self.batch_key())
            .field("batch_mode", &self.batch_mode())
            .field("metadata", self.metadata())
            .finish_non_exhaustive()
    }
}

/// Ack `successful` and `failed`, one `ack` call per acknowledger (in the
/// order the acknowledgers first appear), as Broadway's `ack_messages`. An
/// acknowledger that panics is logged; the caller carries on.
pub fn ack_messages<T: 'static>(successful: Vec<Message<T>>, failed: Vec<Message<T>>) {
    // The usual case: one acknowledger for all, no regrouping.
    let first = successful
        .first()
        .or_else(|| failed.first())
        .map(|message| message.acknowledger.clone());
    let Some(first) = first else {
        return;
    };
    let key = Arc::as_ptr(&first).cast::<()>();
    let same = |message: &Message<T>| Arc::as_ptr(&message.acknowledger).cast::<()>() == key;
    if successful.iter().all(same) && failed.iter().all(same) {
        ack_group(&first, successful, failed);
        return;
    }
    struct Group<T> {
        acknowledger: Arc<dyn Acknowledger<T>>,
        successful: Vec<Message<T>>,
        failed: Vec<Message<T>>,
    }
    let mut groups: Vec<Group<T>> = Vec::new();
    let mut place = |message: Message<T>, ok: bool| {
        let key = Arc::as_ptr(&message.acknowledger).cast::<()>();
        let index = match groups
            .iter()
            .position(|g| Arc::as_ptr(&g.acknowledger).cast::<()>() == key)
        {
            Some(index) => index,
            None => {
                groups.push(Group {
                    acknowledger: message.acknowledger.clone(),
                    successful: Vec::new(),
                    failed: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[index];
        if ok {
            group.successful.push(message);
        } else {
            group.failed.push(message);
        }
    };
    for message in successful {
        place(message, true);
    }
    for message in failed {
        place(message, false);
    }
    for group in groups {
        ack_group(&group.acknowledger, group.successful, group.failed);
    }
}

/// One `ack` call; a panic is logged.
fn ack_group<T: 'static>(
    acknowledger: &Arc<dyn Acknowledger<T>>,
    successful: Vec<Message<T>>,
    failed: Vec<Message<T>>,
) {
    let counts = (successful.len(), failed.len());
    let acked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        acknowledger.ack(successful, failed)
    }));
    // The messages went to the acknowledger all the same: they are not
    // acked again. The stage keeps running.
    if let Err(payload) = acked {
        let reason = panic_reason(payload.as_ref());
        let (successful, failed) = counts;
        tracing::error!(target: "weir_pipeline", successful, failed, %reason, "an acknowledger panicked");
    }
}

/// Split messages into (successful, failed) by status.
pub(crate) fn split<T>(messages: Vec<Message<T>>) -> (Vec<Message<T>>, Vec<Message<T>>) {
    // The usual case: nothing failed, the batch is acked as it is.
    if messages.iter().all(Message::is_ok) {
        return (messages, Vec::new());
    }
    messages.into_iter().partition(Message::is_ok)
}

/// The text of a panic's payload.
pub(crate) fn panic_reason(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_owned());
    format!("panicked: {text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    type Calls = Arc<Mutex<Vec<(Vec<u32>, Vec<u32>)>>>;

    fn recorder(calls: &Calls) -> Arc<dyn Acknowledger<u32>> {
        let calls = calls.clone();
        Arc::new(move |ok: Vec<Message<u32>>, failed: Vec<Message<u32>>| {
            let ok = ok.into_iter().map(|m| m.data).collect();
            let failed = failed.into_iter().map(|m| m.data).collect();
            calls.lock().map(|mut c| c.push((ok, failed))).ok();
        })
    }

    #[test]
    fn ack_messages_calls_each_acknowledger_once_with_its_messages() {
        let (a, b) = (Calls::default(), Calls::default());
        let (ack_a, ack_b) = (recorder(&a), recorder(&b));
        let mut failed = Message::new(2, ack_a.clone());
        failed.fail("bad");
        let successful = vec![
            Message::new(1, ack_a.clone()),
            Message::new(3, ack_b.clone()),
        ];
        ack_messages(successful, vec![failed, Message::new(4, ack_b)]);
        assert_eq!(*a.lock().expect("lock"), vec![(vec![1], vec![2])]);
        assert_eq!(*b.lock().expect("lock"), vec![(vec![3], vec![4])]);
    }

    #[test]
    fn a_message_that_keeps_the_defaults_is_small() {
        // Data, a fat `Arc`, the box of what changed, the batcher index.
        assert_eq!(
            std::mem::size_of::<Message<u64>>(),
            std::mem::size_of::<u64>() + 4 * std::mem::size_of::<usize>()
        );
        let mut message = Message::new(1u64, Arc::new(NoopAcknowledger));
        assert!(message.is_ok());
        assert_eq!(
            (message.batcher(), message.batch_key()),
            (DEFAULT_BATCHER, DEFAULT_BATCH_KEY)
        );
        message.put_batch_key("k");
        assert_eq!(
            (message.batcher(), message.batch_key()),
            (DEFAULT_BATCHER, "k")
        );
        assert!(message.is_ok());
    }

    #[test]
    fn fail_keeps_the_first_reason() {
        let mut message = Message::new(1u32, Arc::new(NoopAcknowledger));
        message.fail("first");
        message.fail("second");
        assert_eq!(message.status(), &Status::Failed("first".into()));
    }
}
