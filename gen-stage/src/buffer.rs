//! The producer's event buffer, as a pure state machine.
//!
//! A producer keeps the events it could not dispatch (no consumers, or not
//! enough demand) here, up to a size. Info messages sent "through" the
//! producer ([`sync_info`](crate::StageRef::sync_info)) wait here behind the
//! events buffered before them and are released when those events leave the
//! buffer, whether dispatched or dropped.

use std::collections::VecDeque;
use std::fmt;

use weir_dispatchers::InfoId;

/// How many events a producer buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferSize {
    /// At most this many (at least 1: `0` is refused when the stage starts).
    Limited(usize),
    /// No limit (GenStage's `:infinity`; the default for producer_consumers).
    Infinity,
}

impl From<usize> for BufferSize {
    fn from(size: usize) -> Self {
        BufferSize::Limited(size)
    }
}

impl fmt::Display for BufferSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferSize::Limited(n) => write!(f, "{n}"),
            BufferSize::Infinity => f.write_str("infinity"),
        }
    }
}

/// Which events a full buffer keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferKeep {
    /// Keep the oldest events; incoming events beyond the size are dropped.
    First,
    /// Keep the newest events; the oldest are dropped to make room (default).
    #[default]
    Last,
}

/// What [`Buffer::store`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// Events dropped to respect the size.
    pub discarded: usize,
    /// Infos whose events were dropped: release them now, in order.
    pub released: Vec<InfoId>,
}

/// What [`Buffer::take`] returned.
#[derive(Debug, PartialEq, Eq)]
pub struct Taken<T> {
    /// Events to dispatch, oldest first (never more than asked).
    pub events: Vec<T>,
    /// Infos that reached the front after these events: release them after
    /// dispatching the events, in order.
    pub released: Vec<InfoId>,
}

/// A producer's buffer: events in order, with infos pinned behind them.
///
/// ```
/// use weir_gen_stage::buffer::{Buffer, BufferKeep, BufferSize};
/// use weir_gen_stage::dispatchers::InfoId;
///
/// let mut buffer = Buffer::new(BufferSize::Limited(3), BufferKeep::Last);
/// buffer.store(vec![1, 2], 0);
/// // An info sent now waits behind events 1 and 2.
/// assert_eq!(buffer.store_info(InfoId(7)), None);
/// let stored = buffer.store(vec![3, 4], 0);
/// // Event 1 was dropped to keep the last three.
/// assert_eq!(stored.discarded, 1);
///
/// let taken = buffer.take(10);
/// // Taking stops at the info, which is released right after event 2.
/// assert_eq!(taken.events, vec![2]);
/// assert_eq!(taken.released, vec![InfoId(7)]);
/// assert_eq!(buffer.take(10).events, vec![3, 4]);
/// ```
#[derive(Debug)]
pub struct Buffer<T> {
    events: VecDeque<T>,
    size: BufferSize,
    keep: BufferKeep,
    /// Absolute position of `events[0]` (events ever removed from the front).
    head: u64,
    /// Infos with the absolute position they wait for: released once `head`
    /// reaches it. Positions never decrease along the queue.
    infos: VecDeque<(u64, InfoId)>,
    /// Events dropped to respect the size, ever.
    discarded: u64,
}

impl<T> Buffer<T> {
    /// An empty buffer.
    pub fn new(size: BufferSize, keep: BufferKeep) -> Self {
        Self {
            events: VecDeque::new(),
            size,
            keep,
            head: 0,
            infos: VecDeque::new(),
            discarded: 0,
        }
    }

    /// Buffered events (GenStage's `estimate_buffered_count`).
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is buffered.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Infos waiting behind buffered events.
    pub fn waiting_infos(&self) -> usize {
        self.infos.len()
    }

    /// The configured size.
    pub fn size(&self) -> BufferSize {
        self.size
    }

    /// Which events a full buffer keeps.
    pub fn keep(&self) -> BufferKeep {
        self.keep
    }

    /// Events dropped to respect the size since the buffer was made (the
    /// sum of every [`Stored::discarded`]).
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Store events that could not be dispatched. `held_elsewhere` events
    /// held by the dispatcher (partition queues) count toward the size.
    pub fn store(&mut self, incoming: Vec<T>, held_elsewhere: usize) -> Stored {
        let room = match self.size {
            BufferSize::Infinity => {
                self.events.extend(incoming);
                return Stored::default();
            }
            BufferSize::Limited(size) => size.saturating_sub(held_elsewhere),
        };
        match self.keep {
            BufferKeep::First => {
                let free = room.saturating_sub(self.events.len());
                let discarded = incoming.len().saturating_sub(free);
                self.events.extend(incoming.into_iter().take(free));
                self.discarded += discarded as u64;
                Stored {
                    discarded,
                    released: Vec::new(),
                }
            }
            BufferKeep::Last => {
                self.events.extend(incoming);
                let discarded = self.events.len().saturating_sub(room);
                self.events.drain(..discarded);
                self.head += discarded as u64;
                self.discarded += discarded as u64;
                Stored {
                    discarded,
                    released: self.release_reached(),
                }
            }
        }
    }

    /// An info arrives. Returns it back when the buffer is empty (dispatch it
    /// now); otherwise it waits behind the events buffered so far.
    pub fn store_info(&mut self, info: InfoId) -> Option<InfoId> {
        if self.events.is_empty() {
            Some(info)
        } else {
            self.infos
                .push_back((self.head + self.events.len() as u64, info));
            None
        }
    }

    /// Take every event, in order, and forget the waiting infos (the
    /// producer is stopping).
    pub fn take_all(&mut self) -> Vec<T> {
        self.head += self.events.len() as u64;
        self.infos.clear();
        self.events.drain(..).collect()
    }

    /// Take up to `max` events from the front, stopping early at the next
    /// waiting info (which is then released). Call again with what is left of
    /// the demand until the buffer is empty or the demand is met.
    pub fn take(&mut self, max: usize) -> Taken<T> {
        let mut n = max.min(self.events.len());
        if let Some(&(position, _)) = self.infos.front() {
            let before_info = usize::try_from(position - self.head).unwrap_or(usize::MAX);
            n = n.min(before_info);
        }
        let events: Vec<T> = self.events.drain(..n).collect();
        self.head += n as u64;
        Taken {
            events,
            released: self.release_reached(),
        }
    }

    fn release_reached(&mut self) -> Vec<InfoId> {
        let mut released = Vec::new();
        while let Some(&(position, info)) = self.infos.front() {
            if position > self.head {
                break;
            }
            self.infos.pop_front();
            released.push(info);
        }
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limited(size: usize, keep: BufferKeep) -> Buffer<u32> {
        Buffer::new(BufferSize::Limited(size), keep)
    }

    fn take_all(buffer: &mut Buffer<u32>) -> Vec<u32> {
        buffer.take(usize::MAX).events
    }

    #[test]
    fn stores_events_when_there_is_no_demand() {
        let mut buffer = limited(10, BufferKeep::Last);
        assert_eq!(buffer.store(vec![1, 2, 3], 0), Stored::default());
        assert_eq!(buffer.len(), 3);
        assert_eq!(take_all(&mut buffer), vec![1, 2, 3]);
    }

    #[test]
    fn keep_first_drops_the_incoming_excess() {
        let mut buffer = limited(5, BufferKeep::First);
        buffer.store(vec![1, 2, 3], 0);
        let stored = buffer.store(vec![4, 5, 6, 7], 0);
        assert_eq!(stored.discarded, 2);
        assert_eq!(take_all(&mut buffer), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn keep_last_drops_the_oldest_events() {
        let mut buffer = limited(5, BufferKeep::Last);
        buffer.store(vec![1, 2, 3], 0);
        let stored = buffer.store(vec![4, 5, 6, 7], 0);
        assert_eq!(stored.discarded, 2);
        assert_eq!(take_all(&mut buffer), vec![3, 4, 5, 6, 7]);
    }

    #[test]
    fn infinity_never_drops() {
        let mut buffer = Buffer::new(BufferSize::Infinity, BufferKeep::Last);
        let stored = buffer.store((0..100_000).collect(), 1_000_000);
        assert_eq!(stored.discarded, 0);
        assert_eq!(buffer.len(), 100_000);
    }

    #[test]
    fn events_held_by_the_dispatcher_count_toward_the_size() {
        let mut buffer = limited(5, BufferKeep::First);
        let stored = buffer.store(vec![1, 2, 3, 4], 3);
        assert_eq!(stored.discarded, 2);
        assert_eq!(take_all(&mut buffer), vec![1, 2]);
    }

    #[test]
    fn info_on_an_empty_buffer_is_released_at_once() {
        let mut buffer = limited(5, BufferKeep::Last);
        assert_eq!(buffer.store_info(InfoId(1)), Some(InfoId(1)));
    }

    #[test]
    fn info_waits_for_the_events_before_it() {
        let mut buffer = limited(10, BufferKeep::Last);
        buffer.store(vec![1, 2, 3], 0);
        assert_eq!(buffer.store_info(InfoId(1)), None);
        buffer.store(vec![4, 5], 0);
        let first = buffer.take(2);
        assert_eq!((first.events, first.released), (vec![1, 2], vec![]));
        let second = buffer.take(10);
        assert_eq!((second.events, second.released), (vec![3], vec![InfoId(1)]));
        assert_eq!(take_all(&mut buffer), vec![4, 5]);
    }

    #[test]
    fn infos_keep_fifo_order() {
        let mut buffer = limited(10, BufferKeep::Last);
        buffer.store(vec![1], 0);
        buffer.store_info(InfoId(1));
        buffer.store_info(InfoId(2));
        buffer.store(vec![2], 0);
        buffer.store_info(InfoId(3));
        let taken = buffer.take(10);
        assert_eq!(
            (taken.events, taken.released),
            (vec![1], vec![InfoId(1), InfoId(2)])
        );
        let taken = buffer.take(10);
        assert_eq!((taken.events, taken.released), (vec![2], vec![InfoId(3)]));
    }

    #[test]
    fn dropping_events_releases_the_infos_behind_them() {
        let mut buffer = limited(3, BufferKeep::Last);
        buffer.store(vec![1, 2], 0);
        buffer.store_info(InfoId(9));
        let stored = buffer.store(vec![3, 4, 5], 0);
        assert_eq!(stored.discarded, 2);
        assert_eq!(stored.released, vec![InfoId(9)]);
        assert_eq!(take_all(&mut buffer), vec![3, 4, 5]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Store(u8),
        Info,
        Take(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u8..20).prop_map(Op::Store),
            Just(Op::Info),
            (0u8..20).prop_map(Op::Take),
        ]
    }

    proptest! {
        /// Every event is taken or discarded exactly once, in order; the size
        /// is respected; every info is released exactly once, after every
        /// event stored before it has left the buffer.
        #[test]
        fn no_event_or_info_is_lost_or_reordered(
            size in 1usize..15,
            keep_first in any::<bool>(),
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let keep = if keep_first { BufferKeep::First } else { BufferKeep::Last };
            let mut buffer = Buffer::new(BufferSize::Limited(size), keep);
            let mut next = 0u32;
            let mut next_info = 0u64;
            let mut taken_log: Vec<u32> = Vec::new();
            let mut discarded_total = 0usize;
            // For each info: the number of events stored before it.
            let mut info_after: Vec<u32> = Vec::new();
            let mut released: Vec<u64> = Vec::new();
            let mut stored_total = 0u32;
            for op in ops {
                match op {
                    Op::Store(n) => {
                        let events: Vec<u32> = (next..next + u32::from(n)).collect();
                        next += u32::from(n);
                        let stored = buffer.store(events, 0);
                        discarded_total += stored.discarded;
                        stored_total = next;
                        for info in stored.released {
                            let must_have_left = info_after[info.0 as usize];
                            prop_assert!(buffer.events.iter().all(|b| *b >= must_have_left));
                            released.push(info.0);
                        }
                        prop_assert!(buffer.len() <= size);
                    }
                    Op::Info => {
                        info_after.push(stored_total);
                        let id = next_info;
                        next_info += 1;
                        if let Some(info) = buffer.store_info(InfoId(id)) { released.push(info.0); }
                    }
                    Op::Take(n) => {
                        let taken = buffer.take(usize::from(n));
                        prop_assert!(taken.events.len() <= usize::from(n));
                        taken_log.extend(&taken.events);
                        for info in taken.released {
                            // Every event stored before the info has left.
                            let must_have_left = info_after[info.0 as usize];
                            prop_assert!(buffer.events.iter().all(|b| *b >= must_have_left));
                            released.push(info.0);
                        }
                    }
                }
            }
            // Taken events are in increasing order.
            prop_assert!(taken_log.windows(2).all(|w| w[0] < w[1]));
            // Infos are released in FIFO order and at most once.
            prop_assert!(released.windows(2).all(|w| w[0] < w[1]));
            // Conservation: stored = taken + discarded + still buffered.
            prop_assert_eq!(next as usize, taken_log.len() + discarded_total + buffer.len());
            prop_assert_eq!(buffer.discarded(), discarded_total as u64);
            // Unreleased infos are exactly those still waiting, each behind an event
            // stored before it.
            prop_assert_eq!(released.len() + buffer.waiting_infos(), next_info as usize);
            for &(_, info) in &buffer.infos {
                let must_have_left = info_after[info.0 as usize];
                prop_assert!(buffer.events.iter().any(|b| *b < must_have_left));
            }
        }
    }
}
