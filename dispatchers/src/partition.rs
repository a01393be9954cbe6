//! The Partition dispatcher: events are hashed into a fixed set of
//! partitions, one consumer per partition (GenStage's
//! `GenStage.PartitionDispatcher`).

mod stable_hash;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;

use crate::{
    Dispatcher, InfoId, Outbox, PartitionKey, SubscribeError, Subscriber, SubscriptionId,
    SubscriptionOptions, Warning,
};

/// Why the events queued in a partition are [discarded](crate::Emit::Discarded)
/// when its consumer cancels.
pub(crate) const DROPPED_ON_CANCEL: &str = "the partition's consumer cancelled with events queued for it; they are asked for again upstream";

/// Why a [`Warning::EventsDropped`] is pushed when the hash function names a
/// partition that does not exist.
pub(crate) const DROPPED_UNKNOWN_PARTITION: &str =
    "the hash function returned a partition that does not exist";

/// Routes each event to one partition chosen by a hash function; each
/// partition has at most one consumer.
///
/// The hash function receives each event and returns it (possibly
/// transformed) with its partition, or `None` to discard it:
///
/// - [`with_hash(count, f)`](Self::with_hash): partitions `0..count`, `f`
///   returns `Option<(T, usize)>`;
/// - [`new(count)`](Self::new): partitions `0..count` with a default, stable
///   hash of the whole event (for `T: Hash`);
/// - [`named(names, f)`](Self::named): named partitions, `f` returns
///   `Option<(T, name)>` with any `name: AsRef<str>` (e.g. a `&'static str`).
///
/// A consumer names its partition with the `partition` subscription option
/// ([`SubscriptionOptions::partition`]). GenStage's behaviour, kept as is:
///
/// - Upstream demand is the sum of the asks. Events go to their partition's
///   consumer up to its demand; the rest wait in that partition's queue and
///   go out on its next ask. Events for a partition without a consumer wait
///   there until one subscribes and asks.
/// - Events beyond the total upstream demand are returned as leftover;
///   discarded events do not count against the demand.
/// - When a consumer cancels with unmet demand, that demand stays *pending*
///   and is taken off later asks. When it cancels with events queued, those
///   events are given up ([`Emit::Discarded`](crate::Emit::Discarded), with
///   the events, for the host to hand on or drop) and asked for again
///   upstream: `cancel` returns their count.
/// - An info is released once the events queued before it in every
///   partition have gone out (or were dropped).
///
/// Where Weir differs: an invalid `partition` option refuses that
/// subscription ([`SubscribeError`]) instead of crashing the producer, an
/// unknown partition from the hash function drops the event with a warning
/// instead of crashing, queued events count toward
/// [`buffered`](Dispatcher::buffered), and an info is held only behind
/// events actually queued (GenStage also holds it behind a partition whose
/// queue was just emptied, until that partition's next ask).
///
/// # Example
///
/// ```
/// use weir_dispatchers::{ConsumerId, Dispatcher, Emit, Outbox, PartitionDispatcher, Subscriber,
///                   SubscriptionId, SubscriptionOptions};
///
/// let mut dispatcher = PartitionDispatcher::named(["odd", "even"], |n: u32| {
///     if n.is_multiple_of(3) {
///         None // discarded
///     } else {
///         Some((n, if n.is_multiple_of(2) { "even" } else { "odd" }))
///     }
/// });
/// let mut out = Outbox::new();
/// let odd = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
/// let even = Subscriber { subscription: SubscriptionId(2), consumer: ConsumerId(2) };
/// dispatcher.subscribe(odd, &SubscriptionOptions::new(6, 3).partition("odd"), &mut out)?;
/// dispatcher.subscribe(even, &SubscriptionOptions::new(2, 1).partition("even"), &mut out)?;
/// assert_eq!(dispatcher.ask(odd.subscription, 6, &mut out), 6);
/// assert_eq!(dispatcher.ask(even.subscription, 2, &mut out), 2);
///
/// // Eight events fill the upstream demand of eight (3, 6, 9 are discarded
/// // and do not count); 12 is left over.
/// let leftover = dispatcher.dispatch((1..=12).collect(), &mut out);
/// assert_eq!(leftover, vec![12]);
/// let sent: Vec<_> = out.drain().collect();
/// assert!(sent.contains(&Emit::Events { to: odd.subscription, events: vec![1, 5, 7, 11] }));
/// assert!(sent.contains(&Emit::Events { to: even.subscription, events: vec![2, 4] }));
///
/// // 8 and 10 went beyond the even consumer's demand: they wait for its next ask.
/// assert_eq!(dispatcher.buffered(), 2);
/// dispatcher.ask(even.subscription, 2, &mut out);
/// assert_eq!(out.drain().collect::<Vec<_>>(),
///            vec![Emit::Events { to: even.subscription, events: vec![8, 10] }]);
/// # Ok::<(), weir_dispatchers::SubscribeError>(())
/// ```
pub struct PartitionDispatcher<T> {
    route: RouteFn<T>,
    partitions: Vec<Partition<T>>,
    /// One empty batch per partition, filled by `dispatch` (kept between
    /// calls so that `dispatch` does not allocate the list every time).
    batches: Vec<Vec<T>>,
    /// For named partitions: name to index.
    names: Option<HashMap<String, usize>>,
    /// Subscription to partition index (GenStage's `references`).
    references: HashMap<SubscriptionId, usize>,
    /// Asked upstream and not dispatched yet.
    waiting: usize,
    /// Unmet demand of cancelled consumers, taken off later asks.
    pending: usize,
    /// Events in all partition queues.
    queued: usize,
    /// Infos held behind queued events, by tag: the info and the partitions
    /// that still have events queued before it.
    infos: BTreeMap<u64, (InfoId, Vec<usize>)>,
    next_info_tag: u64,
}

/// Routes the events of one `dispatch` into their partitions' batches.
///
/// The hash function is called once per event, but inside a loop
/// monomorphised for it ([`router`]), so the only dynamic call is this one,
/// once per `dispatch`.
///
/// It takes events from `events` into `batches` (one per partition, in
/// partition order) until `limit` of them are routed (the rest is
/// leftover).
type RouteFn<T> = Box<dyn Fn(&mut std::vec::IntoIter<T>, &mut [Vec<T>], usize) -> Routed + Send>;

/// What a [`RouteFn`] did.
struct Routed {
    /// Events now in a batch.
    routed: usize,
    /// Events for a partition that does not exist (dropped).
    unknown: usize,
}

/// The routing loop for a hash function `place` mapping an event to
/// `Some((event, partition index))`, or `None` to discard it. An index out
/// of range counts as unknown.
fn router<T, F>(place: F) -> RouteFn<T>
where
    F: Fn(T) -> Option<(T, usize)> + Send + 'static,
{
    Box::new(move |events, batches, limit| {
        let mut unknown = 0;
        // Routes one event; whether it went into a batch.
        let mut route = |event| match place(event) {
            Some((event, index)) => match batches.get_mut(index) {
                Some(batch) => {
                    batch.push(event);
                    true
                }
                None => {
                    unknown += 1;
                    false
                }
            },
            None => false,
        };
        let routed = if limit >= events.len() {
            // The usual case: everything can go, no need to stop early.
            events.fold(0, |routed, event| routed + usize::from(route(event)))
        } else {
            let mut left = limit;
            while left > 0 {
                let Some(event) = events.next() else {
                    break;
                };
                if route(event) {
                    left -= 1;
                }
            }
            limit - left
        };
        Routed { routed, unknown }
    })
}

struct Partition<T> {
    key: PartitionKey,
    consumer: Option<SubscriptionId>,
    state: State<T>,
}

/// GenStage's `demand_or_queue`: a partition either has demand and nothing
/// queued, or has events queued and no demand.
enum State<T> {
    Demand(usize),
    Queue(Queue<T>),
}

/// A partition's queued events (never empty while it is the partition's
/// state), and the infos waiting behind some of them.
///
/// Events are kept in the batches they arrived in, so that they move on in
/// bulk: a batch taken whole is sent as it is, a part of one is one copy.
struct Queue<T> {
    /// The events, in order, as non-empty batches.
    chunks: VecDeque<Vec<T>>,
    /// Events in `chunks`.
    len: usize,
    /// `(position, tag)`, in order: the info `tag` goes out once `taken`
    /// reaches `position`, i.e. once every event queued before it has gone.
    infos: VecDeque<(u64, u64)>,
    /// Events taken out since this queue was made.
    taken: u64,
}

impl<T> Queue<T> {
    /// A queue of `events` (not empty).
    fn new(events: Vec<T>) -> Self {
        Self {
            len: events.len(),
            chunks: VecDeque::from([events]),
            infos: VecDeque::new(),
            taken: 0,
        }
    }

    fn push(&mut self, events: Vec<T>) {
        if !events.is_empty() {
            self.len += events.len();
            self.chunks.push_back(events);
        }
    }

    /// Move the first `n` events (at most `len`) to the back of `batch`.
    fn take(&mut self, mut n: usize, batch: &mut Vec<T>) {
        self.taken += n as u64;
        self.len -= n;
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else {
                return;
            };
            if front.len() > n {
                batch.extend(front.drain(..n));
                return;
            }
            n -= front.len();
            if let Some(chunk) = self.chunks.pop_front() {
                if batch.is_empty() {
                    *batch = chunk;
                } else {
                    batch.extend(chunk);
                }
            }
        }
    }

    /// Hold info `tag` behind every event queued so far.
    fn push_info(&mut self, tag: u64) {
        self.infos.push_back((self.taken + self.len as u64, tag));
    }
}

impl<T> PartitionDispatcher<T> {
    /// Partitions `0..count`; `hash` maps each event to `Some((event,
    /// partition))` or `None` to discard it.
    ///
    /// An index `>= count` drops the event with a
    /// [`Warning::EventsDropped`].
    ///
    /// ```
    /// use weir_dispatchers::{Dispatcher, PartitionDispatcher, PartitionKey};
    ///
    /// let dispatcher = PartitionDispatcher::with_hash(4, |(key, value): (u64, String)| {
    ///     Some(((key, value), (key % 4) as usize))
    /// });
    /// assert_eq!(dispatcher.partitions().count(), 4);
    /// assert_eq!(dispatcher.partitions().last(), Some(&PartitionKey::Index(3)));
    /// ```
    pub fn with_hash<F>(count: usize, hash: F) -> Self
    where
        F: Fn(T) -> Option<(T, usize)> + Send + 'static,
    {
        Self::build(
            (0..count).map(PartitionKey::Index).collect(),
            None,
            router(hash),
        )
    }

    /// Named partitions; `hash` maps each event to `Some((event, name))` or
    /// `None` to discard it. Duplicate names are one partition.
    ///
    /// A name that is not one of `names` drops the event with a
    /// [`Warning::EventsDropped`].
    ///
    /// ```
    /// use weir_dispatchers::{PartitionDispatcher, PartitionKey};
    ///
    /// let dispatcher = PartitionDispatcher::named(["odd", "even"], |n: u32| {
    ///     Some((n, if n.is_multiple_of(2) { "even" } else { "odd" }))
    /// });
    /// let keys: Vec<_> = dispatcher.partitions().cloned().collect();
    /// assert_eq!(keys, vec![PartitionKey::from("odd"), PartitionKey::from("even")]);
    /// ```
    pub fn named<N, K, F>(names: impl IntoIterator<Item = N>, hash: F) -> Self
    where
        N: Into<String>,
        K: AsRef<str>,
        F: Fn(T) -> Option<(T, K)> + Send + 'static,
    {
        let mut keys = Vec::new();
        let mut lookup = HashMap::new();
        for name in names {
            let name: String = name.into();
            if !lookup.contains_key(&name) {
                lookup.insert(name.clone(), keys.len());
                keys.push(PartitionKey::Name(name));
            }
        }
        let routes = lookup.clone();
        let route = router(move |event| {
            let (event, name) = hash(event)?;
            // An unknown name becomes an index out of range: unknown.
            let index = routes.get(name.as_ref()).copied().unwrap_or(usize::MAX);
            Some((event, index))
        });
        Self::build(keys, Some(lookup), route)
    }

    fn build(
        keys: Vec<PartitionKey>,
        names: Option<HashMap<String, usize>>,
        route: RouteFn<T>,
    ) -> Self {
        Self {
            route,
            batches: keys.iter().map(|_| Vec::new()).collect(),
            partitions: keys
                .into_iter()
                .map(|key| Partition {
                    key,
                    consumer: None,
                    state: State::Demand(0),
                })
                .collect(),
            names,
            references: HashMap::new(),
            waiting: 0,
            pending: 0,
            queued: 0,
            infos: BTreeMap::new(),
            next_info_tag: 0,
        }
    }

    /// The partitions, in the order they were given.
    pub fn partitions(&self) -> impl Iterator<Item = &PartitionKey> + '_ {
        self.partitions.iter().map(|p| &p.key)
    }

    /// The subscription that holds `partition`, if any.
    pub fn consumer(&self, partition: &PartitionKey) -> Option<SubscriptionId> {
        self.index_of(partition)
            .and_then(|index| self.partitions[index].consumer)
    }

    /// How many events wait in `partition`'s queue (`None` for an unknown
    /// partition).
    pub fn queued(&self, partition: &PartitionKey) -> Option<usize> {
        self.index_of(partition)
            .map(|index| match &self.partitions[index].state {
                State::Demand(_) => 0,
                State::Queue(queue) => queue.len,
            })
    }

    /// The outstanding demand of `subscription`, if it is subscribed.
    pub fn demand(&self, subscription: SubscriptionId) -> Option<usize> {
        self.references
            .get(&subscription)
            .map(|&index| match self.partitions[index].state {
                State::Demand(demand) => demand,
                State::Queue(_) => 0,
            })
    }

    /// Demand asked upstream whose events have not been dispatched yet.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Unmet demand left by cancelled consumers, taken off later asks.
    pub fn pending(&self) -> usize {
        self.pending
    }

    fn index_of(&self, partition: &PartitionKey) -> Option<usize> {
        match (partition, &self.names) {
            (PartitionKey::Index(index), None) if *index < self.partitions.len() => Some(*index),
            (PartitionKey::Name(name), Some(names)) => names.get(name).copied(),
            _ => None,
        }
    }

    fn available(&self) -> String {
        let keys: Vec<String> = self.partitions.iter().map(|p| p.key.to_string()).collect();
        format!("[{}]", keys.join(", "))
    }

    /// Take `partition` out of the info waiting under `tag`; release the
    /// info when no partition holds it any more.
    fn release_info(&mut self, tag: u64, partition: usize, out: &mut Outbox<T>) {
        let Some((_, holders)) = self.infos.get_mut(&tag) else {
            return;
        };
        holders.retain(|&p| p != partition);
        if holders.is_empty()
            && let Some((info, _)) = self.infos.remove(&tag)
        {
            out.info(info);
        }
    }

    /// Send up to `n` queued events of `index` to its consumer, releasing
    /// the infos they reach; returns the partition's new state.
    fn send_from_queue(
        &mut self,
        index: usize,
        mut queue: Queue<T>,
        to: SubscriptionId,
        mut n: usize,
        out: &mut Outbox<T>,
    ) -> State<T> {
        let mut batch = Vec::new();
        loop {
            // Events up to the next info (or all of them), as far as the
            // demand goes.
            let before_info = match queue.infos.front() {
                Some(&(position, _)) => (position - queue.taken) as usize,
                None => usize::MAX,
            };
            let now = n.min(before_info).min(queue.len);
            queue.take(now, &mut batch);
            self.queued -= now;
            n -= now;
            // An info whose events have all gone out goes now, after them.
            match queue.infos.front() {
                Some(&(position, tag)) if position == queue.taken => {
                    queue.infos.pop_front();
                    out.send(to, std::mem::take(&mut batch));
                    self.release_info(tag, index, out);
                }
                _ => break,
            }
        }
        out.send(to, batch);
        if queue.len == 0 {
            // Every info was behind an event that went out: none is left.
            State::Demand(n)
        } else {
            State::Queue(queue)
        }
    }

    /// Hand a partition the events hashed to it in one dispatch.
    fn deliver(&mut self, index: usize, mut events: Vec<T>, out: &mut Outbox<T>) {
        let partition = &mut self.partitions[index];
        match (&mut partition.state, partition.consumer) {
            (State::Queue(queue), _) => {
                self.queued += events.len();
                queue.push(events);
            }
            (State::Demand(demand), Some(to)) if *demand > 0 => {
                let now = (*demand).min(events.len());
                let later = events.split_off(now);
                *demand -= now;
                out.send(to, events);
                if !later.is_empty() {
                    self.queued += later.len();
                    partition.state = State::Queue(Queue::new(later));
                }
            }
            (State::Demand(_), _) => {
                self.queued += events.len();
                partition.state = State::Queue(Queue::new(events));
            }
        }
    }
}

impl<T: Hash> PartitionDispatcher<T> {
    /// Partitions `0..count` with the default hash: a stable hash of the
    /// whole event (a word-at-a-time multiplicative hash with MurmurHash3's
    /// final mix), the same in every run; for integers and strings also on
    /// every platform. GenStage's default is
    /// `:erlang.phash2(event, count)`; the partition an event lands in
    /// differs from GenStage's, the evenness does not.
    ///
    /// ```
    /// use weir_dispatchers::{ConsumerId, Dispatcher, Emit, Outbox, PartitionDispatcher, Subscriber,
    ///                   SubscriptionId, SubscriptionOptions};
    ///
    /// let mut dispatcher = PartitionDispatcher::new(3);
    /// let mut out = Outbox::new();
    /// for i in 0..3 {
    ///     let s = Subscriber { subscription: SubscriptionId(i), consumer: ConsumerId(i) };
    ///     dispatcher.subscribe(s, &SubscriptionOptions::new(100, 50).partition(i as usize), &mut out)?;
    ///     dispatcher.ask(s.subscription, 100, &mut out);
    /// }
    /// dispatcher.dispatch(vec!["apple", "pear", "apple", "plum"], &mut out);
    /// // Equal events always land in the same partition.
    /// let batches: Vec<_> = out.drain().collect();
    /// assert!(batches.iter().any(|e| matches!(e, Emit::Events { events, .. }
    ///     if events.iter().filter(|f| **f == "apple").count() == 2)));
    /// # Ok::<(), weir_dispatchers::SubscribeError>(())
    /// ```
    pub fn new(count: usize) -> Self {
        Self::with_hash(count, move |event: T| {
            let index = stable_hash::partition_of(&event, count);
            Some((event, index))
        })
    }

    /// The partition in `0..count` that [`new(count)`](Self::new) routes
    /// `event` to (0 when `count` is 0). Code that makes the events can
    /// know where each will land without a dispatcher, e.g. to spread keys
    /// evenly or to route the same way by hand.
    ///
    /// ```
    /// use weir_dispatchers::{ConsumerId, Dispatcher, Emit, Outbox, PartitionDispatcher, Subscriber,
    ///                   SubscriptionId, SubscriptionOptions};
    ///
    /// let mut dispatcher = PartitionDispatcher::new(4);
    /// let mut out = Outbox::new();
    /// for i in 0..4 {
    ///     let s = Subscriber { subscription: SubscriptionId(i), consumer: ConsumerId(i) };
    ///     dispatcher.subscribe(s, &SubscriptionOptions::new(100, 50).partition(i as usize), &mut out)?;
    ///     dispatcher.ask(s.subscription, 100, &mut out);
    /// }
    /// dispatcher.dispatch((0..40u64).collect(), &mut out);
    /// let mut checked = 0;
    /// for emit in out.drain() {
    ///     if let Emit::Events { to, events } = emit {
    ///         for event in events {
    ///             assert_eq!(PartitionDispatcher::default_partition(&event, 4) as u64, to.0);
    ///             checked += 1;
    ///         }
    ///     }
    /// }
    /// assert_eq!(checked, 40);
    /// # Ok::<(), weir_dispatchers::SubscribeError>(())
    /// ```
    pub fn default_partition(event: &T, count: usize) -> usize {
        stable_hash::partition_of(event, count)
    }
}

impl<T> fmt::Debug for PartitionDispatcher<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let partitions: Vec<_> = self
            .partitions
            .iter()
            .map(|p| {
                let state = match &p.state {
                    State::Demand(demand) => format!("demand {demand}"),
                    State::Queue(queue) => {
                        format!("{} queued", queue.len + queue.infos.len())
                    }
                };
                (p.key.to_string(), p.consumer, state)
            })
            .collect();
        f.debug_struct("PartitionDispatcher")
            .field("partitions", &partitions)
            .field("waiting", &self.waiting)
            .field("pending", &self.pending)
            .field("queued", &self.queued)
            .field("infos", &self.infos.len())
            .finish()
    }
}

impl<T: Send> Dispatcher<T> for PartitionDispatcher<T> {
    fn subscribe(
        &mut self,
        subscriber: Subscriber,
        options: &SubscriptionOptions<T>,
        _out: &mut Outbox<T>,
    ) -> Result<usize, SubscribeError> {
        let Some(partition) = &options.partition else {
            return Err(SubscribeError::PartitionMissing {
                available: self.available(),
            });
        };
        let Some(index) = self.index_of(partition) else {
            return Err(SubscribeError::PartitionUnknown {
                partition: partition.clone(),
                available: self.available(),
            });
        };
        if self.partitions[index].consumer.is_some() {
            return Err(SubscribeError::PartitionTaken {
                partition: partition.clone(),
            });
        }
        self.partitions[index].consumer = Some(subscriber.subscription);
        self.references.insert(subscriber.subscription, index);
        Ok(0)
    }

    fn cancel(&mut self, subscription: SubscriptionId, out: &mut Outbox<T>) -> usize {
        let Some(index) = self.references.remove(&subscription) else {
            return 0;
        };
        let partition = &mut self.partitions[index];
        partition.consumer = None;
        match std::mem::replace(&mut partition.state, State::Demand(0)) {
            State::Demand(demand) => {
                self.pending += demand;
                0
            }
            State::Queue(queue) => {
                let dropped = queue.len;
                for (_, tag) in queue.infos {
                    self.release_info(tag, index, out);
                }
                self.queued -= dropped;
                self.waiting += dropped;
                out.discard(
                    queue.chunks.into_iter().flatten().collect(),
                    DROPPED_ON_CANCEL,
                );
                dropped
            }
        }
    }

    fn ask(&mut self, subscription: SubscriptionId, n: usize, out: &mut Outbox<T>) -> usize {
        let Some(&index) = self.references.get(&subscription) else {
            return 0;
        };
        let state = std::mem::replace(&mut self.partitions[index].state, State::Demand(0));
        self.partitions[index].state = match state {
            State::Demand(demand) => State::Demand(demand + n),
            State::Queue(queue) => self.send_from_queue(index, queue, subscription, n, out),
        };
        let already_sent = self.pending.min(n);
        self.pending -= already_sent;
        let demand = n - already_sent;
        self.waiting += demand;
        demand
    }

    fn dispatch(&mut self, events: Vec<T>, out: &mut Outbox<T>) -> Vec<T> {
        let mut batches = std::mem::take(&mut self.batches);
        let count = self.partitions.len();
        if batches.len() != count {
            // Only after a hash function panicked in the middle of a dispatch.
            batches = self.partitions.iter().map(|_| Vec::new()).collect();
        }
        // Every batch gets room for an even share of what can be routed,
        // plus the usual unevenness, before routing (a larger share grows
        // it as usual). A batch that receives nothing keeps its room for the
        // next dispatch.
        let routable = events.len().min(self.waiting);
        let share = routable / count.max(1);
        let capacity = (share + share / 4 + 4).min(routable);
        for batch in &mut batches {
            batch.reserve_exact(capacity);
        }
        let mut events = events.into_iter();
        let Routed { routed, unknown } = (self.route)(&mut events, &mut batches, self.waiting);
        self.waiting -= routed;
        let leftover: Vec<T> = events.collect();
        for (index, batch) in batches.iter_mut().enumerate() {
            if !batch.is_empty() {
                self.deliver(index, std::mem::take(batch), out);
            }
        }
        self.batches = batches;
        if unknown > 0 {
            out.warn(Warning::EventsDropped {
                count: unknown,
                reason: DROPPED_UNKNOWN_PARTITION,
            });
        }
        leftover
    }

    fn info(&mut self, info: InfoId, out: &mut Outbox<T>) {
        let tag = self.next_info_tag;
        let mut holders = Vec::new();
        for (index, partition) in self.partitions.iter_mut().enumerate() {
            if let State::Queue(queue) = &mut partition.state {
                queue.push_info(tag);
                holders.push(index);
            }
        }
        if holders.is_empty() {
            out.info(info);
        } else {
            self.next_info_tag += 1;
            self.infos.insert(tag, (info, holders));
        }
    }

    fn buffered(&self) -> usize {
        self.queued
    }

    fn take_held(&mut self) -> Vec<T> {
        let mut held = Vec::with_capacity(self.queued);
        for partition in &mut self.partitions {
            if let State::Queue(_) = partition.state
                && let State::Queue(queue) =
                    std::mem::replace(&mut partition.state, State::Demand(0))
            {
                held.extend(queue.chunks.into_iter().flatten());
            }
        }
        self.queued = 0;
        held
    }

    fn name(&self) -> &str {
        "partition"
    }
}

#[cfg(test)]
mod tests;
