//! Batches, and the accumulation of messages into them as a pure state
//! machine (no tasks, no timers: the batcher stage drives it, with one
//! timer per batcher stage set to the earliest deadline).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::{DEFAULT_BATCH_KEY, Message};

/// Why a batch was handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchTrigger {
    /// It reached `batch_size`.
    Size,
    /// `batch_timeout` passed since its first message.
    Timeout,
    /// The pipeline is draining (or its producers finished): every partial
    /// batch is handed over.
    Flush,
}

/// What a batch handler is told about its batch: Broadway's
/// `%Broadway.BatchInfo{}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchInfo {
    /// The batcher's name.
    pub batcher: String,
    /// The batch key every message of the batch has.
    pub batch_key: String,
    /// How many messages the batch has.
    pub size: usize,
    /// Why it was handed over.
    pub trigger: BatchTrigger,
}

/// A batch of messages of one batcher and batch key.
#[derive(Debug)]
pub struct Batch<T> {
    /// The messages, in the order the batcher received them.
    pub messages: Vec<Message<T>>,
    /// About the batch.
    pub info: BatchInfo,
}

struct Pending<T> {
    /// The batch key, kept to hand over without a look-up allocation.
    key: String,
    messages: Vec<Message<T>>,
    /// The messages' weight (with [`Weight`]; 0 otherwise).
    weight: usize,
    /// `batch_timeout` after its first message.
    deadline: Instant,
}

/// What a message weighs, for [`Weight`].
pub(crate) type Weigh<T> = Arc<dyn Fn(&Message<T>) -> usize + Send + Sync>;

/// A batch size measured by a function of each message (Broadway's
/// `batch_size: {acc, fun}` splitter): a batch is handed over when its
/// messages weigh `limit`, and a message that would take it over `limit`
/// goes to the next batch instead.
pub(crate) struct Weight<T> {
    pub limit: usize,
    pub weigh: Weigh<T>,
}

impl<T> Clone for Weight<T> {
    fn clone(&self) -> Self {
        Self {
            limit: self.limit,
            weigh: self.weigh.clone(),
        }
    }
}

impl<T> Weight<T> {
    /// The message's weight; a panic counts as `limit` (the message goes
    /// in a batch of its own) and is logged.
    fn of(&self, message: &Message<T>) -> usize {
        match catch_unwind(AssertUnwindSafe(|| (self.weigh)(message))) {
            Ok(weight) => weight,
            Err(payload) => {
                let reason = crate::message::panic_reason(payload.as_ref());
                tracing::warn!(target: "weir_pipeline", %reason, "the batch_size function panicked: the message is batched alone");
                self.limit
            }
        }
    }
}

/// Messages of one batcher, grouped by batch key until a batch is full,
/// times out or is flushed.
///
/// The partial batches are slots of a `Vec`; the default batch key's slot is
/// kept apart (a message that kept the default key finds it without hashing
/// or comparing its key), the other keys' slots are in a map, and the slot
/// of the last custom key is tried first.
pub(crate) struct Accumulator<T> {
    batcher: String,
    batch_size: usize,
    batch_timeout: Duration,
    pending: Vec<Pending<T>>,
    /// The slot of the default batch key's partial batch.
    default: Option<usize>,
    /// The slots of the other keys' partial batches.
    slots: HashMap<String, usize>,
    /// The slot the last message with a custom key went to.
    last: Option<usize>,
    len: usize,
    /// Batches measured by weight as well as by count.
    weight: Option<Weight<T>>,
}

/// `now + timeout`, or far in the future if that overflows (as tokio's
/// `sleep`).
fn deadline(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

impl<T> Accumulator<T> {
    pub fn new(batcher: String, batch_size: usize, batch_timeout: Duration) -> Self {
        Self {
            batcher,
            batch_size: batch_size.max(1),
            batch_timeout,
            pending: Vec::new(),
            default: None,
            slots: HashMap::new(),
            last: None,
            len: 0,
            weight: None,
        }
    }

    /// Batches are full at `weight.limit` too.
    pub fn with_weight(mut self, weight: Option<Weight<T>>) -> Self {
        self.weight = weight;
        self
    }

    /// Messages held in partial batches.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Add a message; a full batch comes back, and when the message begins
    /// a new partial batch, that batch's deadline (`now()` plus the
    /// timeout; `now` is only called then).
    #[cfg(test)]
    pub fn push(
        &mut self,
        message: Message<T>,
        now: impl FnOnce() -> Instant,
    ) -> (Option<Batch<T>>, Option<Instant>) {
        let mut full = Vec::new();
        let deadline = self.push_into(message, now, &mut full);
        (full.pop(), deadline)
    }

    /// Add a message; full batches go to `full` (at most two: with a
    /// [`Weight`], the batch the message did not fit in, then the message
    /// alone if it fills a batch by itself), and when the message begins a
    /// new partial batch, that batch's deadline (`now()` plus the timeout;
    /// `now` is only called then).
    #[inline]
    pub fn push_into(
        &mut self,
        message: Message<T>,
        now: impl FnOnce() -> Instant,
        full: &mut Vec<Batch<T>>,
    ) -> Option<Instant> {
        if self.weight.is_some() {
            return self.push_weighed(message, now, full);
        }
        self.len += 1;
        // The usual case first: a partial batch of this key exists.
        if let Some(slot) = self.slot_of(&message) {
            let pending = &mut self.pending[slot];
            pending.messages.push(message);
            if pending.messages.len() >= self.batch_size {
                full.push(self.take(slot, BatchTrigger::Size));
            }
            return None;
        }
        let key = message.batch_key().to_owned();
        let mut messages = Vec::with_capacity(self.batch_size.min(1024));
        messages.push(message);
        if self.batch_size <= 1 {
            // A batch of size 1 is full at once: no deadline for it.
            self.len -= 1;
            let info = self.info(key, 1, BatchTrigger::Size);
            full.push(Batch { messages, info });
            return None;
        }
        Some(self.open(key, messages, 0, now))
    }

    /// [`push_into`](Self::push_into) with a [`Weight`]; kept out of line,
    /// so that the count-only path stays small.
    #[inline(never)]
    fn push_weighed(
        &mut self,
        message: Message<T>,
        now: impl FnOnce() -> Instant,
        full: &mut Vec<Batch<T>>,
    ) -> Option<Instant> {
        let weight = self.weight.clone()?;
        let heavy = weight.of(&message);
        self.len += 1;
        if let Some(slot) = self.slot_of(&message) {
            let pending = &mut self.pending[slot];
            if pending.weight.saturating_add(heavy) <= weight.limit {
                pending.messages.push(message);
                pending.weight += heavy;
                if pending.messages.len() >= self.batch_size || pending.weight >= weight.limit {
                    full.push(self.take(slot, BatchTrigger::Size));
                }
                return None;
            }
            // Too heavy for this batch: hand it over, begin the next.
            full.push(self.take(slot, BatchTrigger::Size));
        }
        let key = message.batch_key().to_owned();
        if heavy >= weight.limit || self.batch_size <= 1 {
            // Full on its own.
            self.len -= 1;
            let info = self.info(key, 1, BatchTrigger::Size);
            full.push(Batch {
                messages: vec![message],
                info,
            });
            return None;
        }
        Some(self.open(key, vec![message], heavy, now))
    }

    /// A new partial batch of `key` with `messages` (counted in `len`
    /// already): its deadline.
    fn open(
        &mut self,
        key: String,
        messages: Vec<Message<T>>,
        weight: usize,
        now: impl FnOnce() -> Instant,
    ) -> Instant {
        let deadline = deadline(now(), self.batch_timeout);
        let slot = self.pending.len();
        if key == DEFAULT_BATCH_KEY {
            self.default = Some(slot);
        } else {
            self.slots.insert(key.clone(), slot);
            self.last = Some(slot);
        }
        self.pending.push(Pending {
            key,
            messages,
            weight,
            deadline,
        });
        deadline
    }

    /// Hand over the partial batch of `key` now, if there is one (a message
    /// in [`BatchMode::Flush`](crate::BatchMode::Flush) joined it).
    pub fn flush_key(&mut self, key: &str) -> Option<Batch<T>> {
        let slot = if key == DEFAULT_BATCH_KEY {
            self.default
        } else {
            self.slots.get(key).copied()
        }?;
        Some(self.take(slot, BatchTrigger::Flush))
    }

    /// The slot of the message's key's partial batch, if there is one.
    #[inline]
    fn slot_of(&mut self, message: &Message<T>) -> Option<usize> {
        match message.custom_batch_key() {
            None => self.default,
            Some(key) if key == DEFAULT_BATCH_KEY => self.default,
            Some(key) => {
                if let Some(last) = self.last
                    && self.pending[last].key == key
                {
                    return Some(last);
                }
                let slot = self.slots.get(key).copied();
                self.last = slot;
                slot
            }
        }
    }

    /// Hand over the batch in `slot`; the last slot takes its place.
    fn take(&mut self, slot: usize, trigger: BatchTrigger) -> Batch<T> {
        let pending = self.pending.swap_remove(slot);
        self.last = None;
        if pending.key == DEFAULT_BATCH_KEY {
            self.default = None;
        } else {
            self.slots.remove(&pending.key);
        }
        if let Some(moved) = self.pending.get(slot) {
            if moved.key == DEFAULT_BATCH_KEY {
                self.default = Some(slot);
            } else if let Some(index) = self.slots.get_mut(&moved.key) {
                *index = slot;
            }
        }
        self.batch(pending, trigger)
    }

    fn batch(&mut self, pending: Pending<T>, trigger: BatchTrigger) -> Batch<T> {
        self.len -= pending.messages.len();
        let info = self.info(pending.key, pending.messages.len(), trigger);
        Batch {
            info,
            messages: pending.messages,
        }
    }

    /// The earliest deadline of the partial batches.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.iter().map(|pending| pending.deadline).min()
    }

    /// Every partial batch whose deadline is `now` or earlier, earliest
    /// first (by key among equal deadlines).
    pub fn timeout(&mut self, now: Instant) -> Vec<Batch<T>> {
        let mut due: Vec<Pending<T>> = self
            .pending
            .extract_if(.., |pending| pending.deadline <= now)
            .collect();
        if due.is_empty() {
            return Vec::new();
        }
        self.reindex();
        due.sort_by(|a, b| (a.deadline, &a.key).cmp(&(b.deadline, &b.key)));
        due.into_iter()
            .map(|pending| self.batch(pending, BatchTrigger::Timeout))
            .collect()
    }

    /// Every partial batch, by key.
    pub fn flush(&mut self) -> Vec<Batch<T>> {
        let mut all = std::mem::take(&mut self.pending);
        self.reindex();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all.into_iter()
            .map(|pending| self.batch(pending, BatchTrigger::Flush))
            .collect()
    }

    /// The slots anew, after partial batches left from anywhere.
    fn reindex(&mut self) {
        self.default = None;
        self.last = None;
        self.slots.clear();
        for (slot, pending) in self.pending.iter().enumerate() {
            if pending.key == DEFAULT_BATCH_KEY {
                self.default = Some(slot);
            } else {
                self.slots.insert(pending.key.clone(), slot);
            }
        }
    }

    fn info(&self, batch_key: String, size: usize, trigger: BatchTrigger) -> BatchInfo {
        BatchInfo {
            batcher: self.batcher.clone(),
            batch_key,
            size,
            trigger,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::NoopAcknowledger;

    fn message(n: u32, key: &str) -> Message<u32> {
        let mut message = Message::new(n, Arc::new(NoopAcknowledger));
        message.put_batch_key(key);
        message
    }

    const TIMEOUT: Duration = Duration::from_secs(1);

    #[test]
    fn a_full_batch_comes_back_and_its_deadline_then_finds_nothing() {
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut acc = Accumulator::new("default".into(), 2, TIMEOUT);
        let (batch, deadline) = acc.push(message(1, "a"), || at(0));
        assert!(batch.is_none());
        assert_eq!(deadline, Some(at(1)), "the first message sets a deadline");
        let (batch, again) = acc.push(message(2, "a"), || unreachable!("no new batch"));
        assert!(again.is_none());
        let batch = batch.expect("full");
        assert_eq!(batch.info.trigger, BatchTrigger::Size);
        assert_eq!(
            batch.messages.iter().map(|m| m.data).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(acc.next_deadline(), None);
        assert!(acc.timeout(at(1)).is_empty());
        // The next partial batch has a deadline of its own.
        let (_, next) = acc.push(message(3, "a"), || at(1));
        assert_eq!(next, Some(at(2)));
        assert!(acc.timeout(at(1)).is_empty());
        let batches = acc.timeout(at(2));
        assert_eq!(
            batches
                .iter()
                .map(|b| (b.info.size, b.info.trigger))
                .collect::<Vec<_>>(),
            [(1, BatchTrigger::Timeout)]
        );
        assert_eq!(acc.len(), 0);
    }

    #[test]
    fn the_default_key_set_or_left_batches_together() {
        let mut acc = Accumulator::new("default".into(), 2, TIMEOUT);
        let now = Instant::now();
        assert!(
            acc.push(Message::new(1, Arc::new(NoopAcknowledger)), || now)
                .0
                .is_none()
        );
        let batch = acc.push(message(2, DEFAULT_BATCH_KEY), || now).0;
        assert_eq!(batch.expect("full").info.batch_key, DEFAULT_BATCH_KEY);
    }

    #[test]
    fn batch_keys_batch_apart() {
        let mut acc = Accumulator::new("default".into(), 2, TIMEOUT);
        let now = Instant::now();
        assert!(acc.push(message(1, "a"), || now).0.is_none());
        assert!(acc.push(message(2, "b"), || now).0.is_none());
        let batch = acc.push(message(3, "a"), || now).0.expect("a is full");
        assert_eq!(batch.info.batch_key, "a");
        let rest = acc.flush();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].info.batch_key, "b");
        assert_eq!(rest[0].info.trigger, BatchTrigger::Flush);
    }

    proptest! {
        /// Whatever the order of pushes (keys, the default one among them),
        /// the clock's advances, timeouts and the final flush, every message
        /// comes out in exactly one batch, no batch exceeds the size, a batch
        /// holds one key only, and a timeout hands over exactly the partial
        /// batches whose first message is `batch_timeout` old.
        #[test]
        fn every_message_comes_out_once(
            batch_size in 1usize..6,
            steps in proptest::collection::vec((0u8..4, 0u64..3, any::<bool>()), 0..80),
        ) {
            let timeout = Duration::from_secs(2);
            let mut acc = Accumulator::new("b".into(), batch_size, timeout);
            let mut now = Instant::now();
            let mut out = Vec::new();
            // When each key's partial batch started.
            let mut started: HashMap<String, Instant> = HashMap::new();
            for (n, (key, advance, fire)) in steps.iter().enumerate() {
                let key = if *key == 0 { DEFAULT_BATCH_KEY.to_owned() } else { key.to_string() };
                let mut message = Message::new(n as u32, Arc::new(NoopAcknowledger));
                if *key != *DEFAULT_BATCH_KEY || n % 2 == 0 {
                    message.put_batch_key(key.clone());
                }
                let (batch, deadline) = acc.push(message, || now);
                if let Some(deadline) = deadline {
                    prop_assert_eq!(deadline, now + timeout);
                    started.insert(key.clone(), now);
                }
                if let Some(batch) = batch {
                    prop_assert_eq!(batch.info.trigger, BatchTrigger::Size);
                    started.remove(&batch.info.batch_key);
                    out.push(batch);
                }
                prop_assert_eq!(acc.next_deadline(), started.values().min().map(|s| *s + timeout));
                now += Duration::from_secs(*advance);
                if *fire {
                    for batch in acc.timeout(now) {
                        let began = started.remove(&batch.info.batch_key);
                        prop_assert!(began.is_some_and(|b| b + timeout <= now));
                        out.push(batch);
                    }
                    prop_assert!(started.values().all(|b| *b + timeout > now));
                }
            }
            out.extend(acc.flush());
            prop_assert_eq!(acc.len(), 0);
            prop_assert_eq!(acc.next_deadline(), None);
            let mut seen: Vec<u32> = Vec::new();
            for batch in &out {
                prop_assert!(batch.messages.len() <= batch_size && !batch.messages.is_empty());
                prop_assert_eq!(batch.info.size, batch.messages.len());
                prop_assert!(batch.messages.iter().all(|m| m.batch_key() == batch.info.batch_key));
                seen.extend(batch.messages.iter().map(|m| m.data));
            }
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..steps.len() as u32).collect::<Vec<_>>());
        }

        /// With a weight: every message comes out once, in order within its
        /// batch; a batch weighs at most the limit unless it is one message,
        /// and holds at most `batch_size`; `len` counts what is held; and
        /// `flush_key` hands over a key's partial batch at once.
        #[test]
        fn weighed_batches_keep_to_the_limit(
            batch_size in 1usize..8,
            limit in 1usize..20,
            steps in proptest::collection::vec((0u8..3, 0usize..25, 0u8..10), 0..80),
        ) {
            let weigh = |message: &Message<u32>| (message.data as usize) % 25;
            let mut acc = Accumulator::new("b".into(), batch_size, TIMEOUT).with_weight(Some(Weight {
                limit,
                weigh: Arc::new(weigh),
            }));
            let now = Instant::now();
            let mut out: Vec<Batch<u32>> = Vec::new();
            let mut held = 0usize;
            for (n, (key, weight, flush)) in steps.iter().enumerate() {
                // The data carries its weight: n * 25 + weight.
                let data = n as u32 * 25 + *weight as u32;
                let mut message = Message::new(data, Arc::new(NoopAcknowledger));
                message.put_batch_key(key.to_string());
                let mut full = Vec::new();
                acc.push_into(message, || now, &mut full);
                held += 1;
                for batch in &full {
                    prop_assert_eq!(batch.info.trigger, BatchTrigger::Size);
                    held -= batch.messages.len();
                }
                out.extend(full);
                if *flush == 0 {
                    if let Some(batch) = acc.flush_key(&key.to_string()) {
                        prop_assert_eq!(batch.info.trigger, BatchTrigger::Flush);
                        held -= batch.messages.len();
                        out.push(batch);
                    }
                    prop_assert!(acc.flush_key(&key.to_string()).is_none());
                }
                prop_assert_eq!(acc.len(), held);
            }
            out.extend(acc.flush());
            prop_assert_eq!(acc.len(), 0);
            let mut seen: Vec<u32> = Vec::new();
            for batch in &out {
                let total: usize = batch.messages.iter().map(weigh).sum();
                prop_assert!(!batch.messages.is_empty());
                prop_assert!(batch.messages.len() <= batch_size);
                prop_assert!(total <= limit || batch.messages.len() == 1, "{} over {}", total, limit);
                prop_assert!(batch.messages.iter().all(|m| m.batch_key() == batch.info.batch_key));
                // In order within a batch.
                prop_assert!(batch.messages.windows(2).all(|w| w[0].data < w[1].data));
                seen.extend(batch.messages.iter().map(|m| m.data));
            }
            seen.sort_unstable();
            let all: Vec<u32> = steps.iter().enumerate().map(|(n, (_, w, _))| n as u32 * 25 + *w as u32).collect();
            prop_assert_eq!(seen, all);
        }
    }
}
