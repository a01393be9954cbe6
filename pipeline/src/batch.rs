//! Batches, and the accumulation of messages into them as a pure state
//! machine (no tasks, no timers: the batcher stage drives it).

use std::collections::HashMap;

use crate::Message;

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

/// A timer to start: when it fires, call [`Accumulator::timeout`] with
/// these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timer {
    pub key: String,
    pub generation: u64,
}

struct Pending<T> {
    /// The batch key (also the map's key), kept to hand over without a
    /// look-up allocation.
    key: String,
    messages: Vec<Message<T>>,
    generation: u64,
}

/// Messages of one batcher, grouped by batch key until a batch is full,
/// times out or is flushed.
pub(crate) struct Accumulator<T> {
    batcher: String,
    batch_size: usize,
    pending: HashMap<String, Pending<T>>,
    /// Each new partial batch gets the next generation, so that the timer of
    /// a batch already handed over finds nothing.
    next_generation: u64,
    len: usize,
}

impl<T> Accumulator<T> {
    pub fn new(batcher: String, batch_size: usize) -> Self {
        Self {
            batcher,
            batch_size: batch_size.max(1),
            pending: HashMap::new(),
            next_generation: 0,
            len: 0,
        }
    }

    /// Messages held in partial batches.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Add a message; a full batch comes back, and a timer to start when
    /// the message begins a new partial batch.
    pub fn push(&mut self, message: Message<T>) -> (Option<Batch<T>>, Option<Timer>) {
        self.len += 1;
        // The usual case first: a partial batch of this key exists (looked
        // up by `&str`, no key allocated).
        if let Some(pending) = self.pending.get_mut(message.batch_key()) {
            pending.messages.push(message);
            if pending.messages.len() >= self.batch_size {
                let key = pending.key.clone();
                return (self.take(&key, BatchTrigger::Size), None);
            }
            return (None, None);
        }
        let key = message.batch_key().to_owned();
        let generation = self.next_generation;
        self.next_generation += 1;
        let mut messages = Vec::with_capacity(self.batch_size.min(1024));
        messages.push(message);
        if self.batch_size <= 1 {
            // A batch of size 1 is full at once: no timer for it.
            self.len -= 1;
            let info = self.info(key, 1, BatchTrigger::Size);
            return (Some(Batch { messages, info }), None);
        }
        let timer = Timer {
            key: key.clone(),
            generation,
        };
        self.pending.insert(
            key.clone(),
            Pending {
                key,
                messages,
                generation,
            },
        );
        (None, Some(timer))
    }

    /// A timer fired: the batch it was started for, if still partial.
    pub fn timeout(&mut self, timer: &Timer) -> Option<Batch<T>> {
        match self.pending.get(&timer.key) {
            Some(pending) if pending.generation == timer.generation => {
                self.take(&timer.key, BatchTrigger::Timeout)
            }
            _ => None,
        }
    }

    /// Every partial batch.
    pub fn flush(&mut self) -> Vec<Batch<T>> {
        let mut keys: Vec<String> = self.pending.keys().cloned().collect();
        keys.sort();
        keys.iter()
            .filter_map(|key| self.take(key, BatchTrigger::Flush))
            .collect()
    }

    fn take(&mut self, key: &str, trigger: BatchTrigger) -> Option<Batch<T>> {
        let pending = self.pending.remove(key)?;
        self.len -= pending.messages.len();
        let info = self.info(pending.key, pending.messages.len(), trigger);
        Some(Batch {
            info,
            messages: pending.messages,
        })
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

    #[test]
    fn a_full_batch_comes_back_and_its_timer_then_finds_nothing() {
        let mut acc = Accumulator::new("default".into(), 2);
        let (batch, timer) = acc.push(message(1, "a"));
        assert!(batch.is_none());
        let timer = timer.expect("the first message starts a timer");
        let (batch, again) = acc.push(message(2, "a"));
        assert!(again.is_none());
        let batch = batch.expect("full");
        assert_eq!(batch.info.trigger, BatchTrigger::Size);
        assert_eq!(
            batch.messages.iter().map(|m| m.data).collect::<Vec<_>>(),
            [1, 2]
        );
        assert!(acc.timeout(&timer).is_none());
        // The next partial batch has a new timer; the old one still finds nothing.
        let (_, next) = acc.push(message(3, "a"));
        assert!(acc.timeout(&timer).is_none());
        let batch = acc.timeout(&next.expect("a new timer")).expect("partial");
        assert_eq!(
            (batch.info.size, batch.info.trigger),
            (1, BatchTrigger::Timeout)
        );
        assert_eq!(acc.len(), 0);
    }

    #[test]
    fn batch_keys_batch_apart() {
        let mut acc = Accumulator::new("default".into(), 2);
        assert!(acc.push(message(1, "a")).0.is_none());
        assert!(acc.push(message(2, "b")).0.is_none());
        let batch = acc.push(message(3, "a")).0.expect("a is full");
        assert_eq!(batch.info.batch_key, "a");
        let rest = acc.flush();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].info.batch_key, "b");
        assert_eq!(rest[0].info.trigger, BatchTrigger::Flush);
    }

    proptest! {
        /// Whatever the order of pushes, timeouts and the final flush, every
        /// message comes out in exactly one batch, no batch exceeds the size,
        /// and a batch holds one key only.
        #[test]
        fn every_message_comes_out_once(
            batch_size in 1usize..6,
            steps in proptest::collection::vec((0u8..3, any::<bool>()), 0..80),
        ) {
            let mut acc = Accumulator::new("b".into(), batch_size);
            let mut timers = Vec::new();
            let mut out = Vec::new();
            for (n, (key, fire)) in steps.iter().enumerate() {
                let (batch, timer) = acc.push(message(n as u32, &key.to_string()));
                out.extend(batch);
                timers.extend(timer);
                if *fire && !timers.is_empty() {
                    let timer = timers.remove(0);
                    out.extend(acc.timeout(&timer));
                }
            }
            out.extend(acc.flush());
            prop_assert_eq!(acc.len(), 0);
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
    }
}
