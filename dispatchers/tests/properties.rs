//! Property tests: each dispatcher driven by a model host through random
//! sequences of subscribe / ask / cancel / emit / info, checked against a
//! simple reference model of what consumers may receive.
//!
//! The host behaves like a GenStage producer: upstream demand returned by the
//! dispatcher is served from the host's buffer first and the rest is owed by
//! the producer, which emits at most what it owes (plus, sometimes, excess
//! events it was not asked for). Leftover events go to the buffer.
//! `Emit::Ask` is carried out after the outbox it came in.
//!
//! Checked after every call:
//! - no event is lost or duplicated: created = delivered + buffered by the
//!   host + queued in the dispatcher + dropped on cancel + discarded by the
//!   hash (Demand, Partition); every consumer receives every accepted event it
//!   selects, exactly the prefix the dispatcher accepted (Broadcast);
//! - leftover is always the unaccepted tail of the events handed in;
//! - each consumer receives events in the order the dispatcher accepted them;
//! - no consumer ever receives more than it asked for;
//! - the dispatcher does not sit on events a consumer has demand for, and
//!   never asks upstream for more than its consumers want;
//! - infos are released once, and exactly when the events queued before them
//!   are gone.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use proptest::prelude::*;
use weir_dispatchers::{
    BroadcastDispatcher, ConsumerId, DemandDispatcher, Dispatcher, Emit, InfoId, Outbox,
    PartitionDispatcher, PartitionKey, SubscribeError, Subscriber, SubscriptionId,
    SubscriptionOptions, Warning,
};

const PARTITIONS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Demand,
    DemandShuffled(u64),
    Broadcast,
    Partition,
}

#[derive(Debug, Clone)]
enum Op {
    /// `partition`: 0..3 a partition, 3 an unknown one, 4 none given.
    /// `selector`: 0 none, 1 even events, 2 events not divisible by 3.
    Subscribe {
        consumer: u8,
        partition: u8,
        selector: u8,
    },
    /// Ask on the `sub % subs.len()`-th subscription ever made.
    Ask {
        sub: u8,
        n: u8,
    },
    Cancel {
        sub: u8,
    },
    /// The producer emits `min(n, owed)` events, plus `excess` unasked ones.
    Emit {
        n: u8,
        excess: u8,
    },
    Info,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..4u8, 0..5u8, 0..3u8).prop_map(|(consumer, partition, selector)| Op::Subscribe {
            consumer,
            partition,
            selector
        }),
        5 => (any::<u8>(), 1..=8u8).prop_map(|(sub, n)| Op::Ask { sub, n }),
        1 => any::<u8>().prop_map(|sub| Op::Cancel { sub }),
        5 => (0..=12u8, prop_oneof![4 => Just(0u8), 1 => 1..=4u8])
            .prop_map(|(n, excess)| Op::Emit { n, excess }),
        1 => Just(Op::Info),
    ]
}

/// Partition hash: every fifth event is discarded, the rest go to
/// `id % PARTITIONS`.
fn discarded_by_hash(id: u64) -> bool {
    id % 5 == 4
}

fn partition_of(id: u64) -> usize {
    (id % PARTITIONS as u64) as usize
}

fn selects(selector: u8, id: u64) -> bool {
    match selector {
        1 => id.is_multiple_of(2),
        2 => !id.is_multiple_of(3),
        _ => true,
    }
}

#[derive(Debug)]
struct Sub {
    id: SubscriptionId,
    consumer: ConsumerId,
    partition: Option<usize>,
    selector: u8,
    active: bool,
    /// What the consumer asked for.
    asked: usize,
    /// What it received, in order.
    received: Vec<u64>,
    /// Broadcast: demand the dispatcher charged for events the selector
    /// rejected, and how much of it came back through `Emit::Ask`.
    rejected: usize,
    refunded: usize,
}

impl Sub {
    /// Demand from the consumer's point of view.
    fn outstanding(&self) -> usize {
        self.asked - self.received.len()
    }

    /// Demand from the dispatcher's point of view (differs from
    /// `outstanding` only while a Broadcast refund is in flight).
    fn charged_outstanding(&self) -> usize {
        self.asked + self.refunded - self.received.len() - self.rejected
    }
}

enum Work {
    /// Upstream demand returned by the dispatcher.
    Demand(usize),
    /// An `Emit::Ask` to carry out.
    Ask(SubscriptionId, usize),
}

struct Host {
    kind: Kind,
    dispatcher: Box<dyn Dispatcher<u64>>,
    out: Outbox<u64>,
    subs: Vec<Sub>,
    by_id: HashMap<SubscriptionId, usize>,
    next_subscription: u64,
    /// Upstream demand the producer has not met yet.
    owed: usize,
    /// The producer's buffer.
    buffer: VecDeque<u64>,
    next_event: u64,
    /// Order in which the dispatcher accepted each event.
    accepted: HashMap<u64, u64>,
    next_accept: u64,
    /// Demand/Partition: events delivered to some consumer.
    delivered: HashSet<u64>,
    /// Partition: events queued inside the dispatcher, with their partition.
    held: BTreeMap<u64, usize>,
    dropped_on_cancel: usize,
    /// The events handed back by the last cancel.
    handed_back: Vec<u64>,
    discarded: usize,
    /// Infos issued: the events queued before each, and whether released.
    infos: Vec<(InfoId, BTreeSet<u64>, bool)>,
    work: VecDeque<Work>,
    /// Reference model of the upstream demand bookkeeping: Demand and
    /// Partition `pending`, Broadcast `requested`, Partition `waiting`.
    pending: usize,
    requested: usize,
    waiting: usize,
}

impl Host {
    fn new(kind: Kind) -> Self {
        let dispatcher: Box<dyn Dispatcher<u64>> = match kind {
            Kind::Demand => Box::new(DemandDispatcher::new()),
            Kind::DemandShuffled(seed) => {
                Box::new(DemandDispatcher::new().shuffle_demands_on_first_dispatch_with_seed(seed))
            }
            Kind::Broadcast => Box::new(BroadcastDispatcher::new()),
            Kind::Partition => Box::new(PartitionDispatcher::with_hash(PARTITIONS, |id: u64| {
                if discarded_by_hash(id) {
                    None
                } else {
                    Some((id, partition_of(id)))
                }
            })),
        };
        Self {
            kind,
            dispatcher,
            out: Outbox::new(),
            subs: Vec::new(),
            by_id: HashMap::new(),
            next_subscription: 1,
            owed: 0,
            buffer: VecDeque::new(),
            next_event: 0,
            accepted: HashMap::new(),
            next_accept: 0,
            delivered: HashSet::new(),
            held: BTreeMap::new(),
            dropped_on_cancel: 0,
            handed_back: Vec::new(),
            discarded: 0,
            infos: Vec::new(),
            work: VecDeque::new(),
            pending: 0,
            requested: 0,
            waiting: 0,
        }
    }

    fn active(&self) -> impl Iterator<Item = &Sub> {
        self.subs.iter().filter(|s| s.active)
    }

    fn is_active(&self, id: SubscriptionId) -> bool {
        self.by_id
            .get(&id)
            .is_some_and(|&index| self.subs[index].active)
    }

    /// The slowest consumer's demand as the Broadcast dispatcher sees it.
    fn slowest(&self) -> usize {
        self.active()
            .map(Sub::charged_outstanding)
            .min()
            .unwrap_or(0)
    }

    /// Upstream demand `ask(n)` must return, by the reference model.
    fn check_ask(&mut self, demand: usize, active: bool, n: usize) -> Result<(), TestCaseError> {
        let expected = if !active {
            0
        } else if self.kind == Kind::Broadcast {
            // Only what the slowest consumer wants beyond what was requested.
            let request = self.slowest().saturating_sub(self.requested);
            self.requested += request;
            request
        } else {
            // Demand already requested for cancelled consumers is used first.
            let already_requested = self.pending.min(n);
            self.pending -= already_requested;
            n - already_requested
        };
        if self.kind == Kind::Partition {
            self.waiting += expected;
        }
        prop_assert_eq!(demand, expected, "ask({}) asked upstream", n);
        Ok(())
    }

    fn pick(&self, sub: u8) -> Option<SubscriptionId> {
        if self.subs.is_empty() {
            None
        } else {
            Some(self.subs[sub as usize % self.subs.len()].id)
        }
    }

    fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Subscribe {
                consumer,
                partition,
                selector,
            } => self.subscribe(ConsumerId(u64::from(consumer)), partition, selector)?,
            Op::Ask { sub, n } => {
                if let Some(id) = self.pick(sub) {
                    let n = usize::from(n);
                    let active = self.is_active(id);
                    if active {
                        let index = self.by_id[&id];
                        self.subs[index].asked += n;
                    }
                    let demand = self.dispatcher.ask(id, n, &mut self.out);
                    self.after_call()?;
                    self.check_ask(demand, active, n)?;
                    self.work.push_back(Work::Demand(demand));
                }
            }
            Op::Cancel { sub } => {
                if let Some(id) = self.pick(sub) {
                    self.cancel(id)?;
                }
            }
            Op::Emit { n, excess } => {
                let n = usize::from(n).min(self.owed);
                self.owed -= n;
                let events: Vec<u64> = (0..n + usize::from(excess))
                    .map(|_| {
                        self.next_event += 1;
                        self.next_event
                    })
                    .collect();
                if !events.is_empty() {
                    let leftover = self.dispatch(events)?;
                    self.buffer.extend(leftover);
                }
            }
            Op::Info => {
                let info = InfoId(self.infos.len() as u64);
                let before: BTreeSet<u64> = self.held.keys().copied().collect();
                self.infos.push((info, before, false));
                self.dispatcher.info(info, &mut self.out);
                self.after_call()?;
            }
        }
        self.run_work()?;
        self.check_quiescent()
    }

    fn subscribe(
        &mut self,
        consumer: ConsumerId,
        partition: u8,
        selector: u8,
    ) -> Result<(), TestCaseError> {
        let id = SubscriptionId(self.next_subscription);
        self.next_subscription += 1;
        let mut options = SubscriptionOptions::new(8, 4);
        let partition = usize::from(partition);
        if partition < 4 {
            options = options.partition(partition);
        }
        if self.kind == Kind::Broadcast && selector != 0 {
            options = options.selector(move |id: &u64| selects(selector, *id));
        }
        let expected: Result<usize, SubscribeError> = match self.kind {
            Kind::Broadcast if self.active().any(|s| s.consumer == consumer) => {
                Err(SubscribeError::AlreadySubscribed { consumer })
            }
            Kind::Partition if partition == 4 => Err(SubscribeError::PartitionMissing {
                available: "[0, 1, 2]".into(),
            }),
            Kind::Partition if partition == 3 => Err(SubscribeError::PartitionUnknown {
                partition: PartitionKey::Index(3),
                available: "[0, 1, 2]".into(),
            }),
            Kind::Partition if self.active().any(|s| s.partition == Some(partition)) => {
                Err(SubscribeError::PartitionTaken {
                    partition: PartitionKey::Index(partition),
                })
            }
            _ => Ok(0),
        };
        let result = self.dispatcher.subscribe(
            Subscriber {
                subscription: id,
                consumer,
            },
            &options,
            &mut self.out,
        );
        prop_assert_eq!(&result, &expected);
        self.after_call()?;
        if result.is_ok() {
            self.by_id.insert(id, self.subs.len());
            self.subs.push(Sub {
                id,
                consumer,
                partition: (self.kind == Kind::Partition).then_some(partition),
                selector: if self.kind == Kind::Broadcast {
                    selector
                } else {
                    0
                },
                active: true,
                asked: 0,
                received: Vec::new(),
                rejected: 0,
                refunded: 0,
            });
        } else {
            // A refused subscription is unknown to the dispatcher; the host
            // still remembers the id so later ops may (harmlessly) use it.
            self.subs.push(Sub {
                id,
                consumer,
                partition: None,
                selector: 0,
                active: false,
                asked: 0,
                received: Vec::new(),
                rejected: 0,
                refunded: 0,
            });
        }
        Ok(())
    }

    fn cancel(&mut self, id: SubscriptionId) -> Result<(), TestCaseError> {
        let was_active = self.is_active(id);
        let outstanding = self
            .by_id
            .get(&id)
            .map_or(0, |&i| self.subs[i].outstanding());
        let queued: Vec<u64> = match self.by_id.get(&id).and_then(|&i| self.subs[i].partition) {
            Some(p) if was_active => self
                .held
                .iter()
                .filter(|(_, q)| **q == p)
                .map(|(id, _)| *id)
                .collect(),
            _ => Vec::new(),
        };
        let dropped_before = self.dropped_on_cancel;
        let demand = self.dispatcher.cancel(id, &mut self.out);
        if let Some(&index) = self.by_id.get(&id) {
            self.subs[index].active = false;
        }
        // The queued events of a cancelled partition are dropped and asked
        // for again.
        for event in &queued {
            self.held.remove(event);
        }
        self.handed_back.clear();
        self.after_call()?;
        prop_assert_eq!(self.dropped_on_cancel - dropped_before, queued.len());
        // The events handed back are exactly those the partition held.
        let mut discarded = std::mem::take(&mut self.handed_back);
        discarded.sort_unstable();
        let mut expected_back = queued.clone();
        expected_back.sort_unstable();
        prop_assert_eq!(discarded, expected_back);
        let expected = match self.kind {
            _ if !was_active => 0,
            Kind::Partition if !queued.is_empty() => {
                // Dropped events are asked for again.
                self.waiting += queued.len();
                queued.len()
            }
            Kind::Broadcast if self.active().next().is_none() => 0,
            Kind::Broadcast => {
                // The cancelled consumer may have been the slowest.
                let request = self.slowest().saturating_sub(self.requested);
                self.requested += request;
                request
            }
            _ => {
                self.pending += outstanding;
                0
            }
        };
        prop_assert_eq!(demand, expected, "cancel asked upstream");
        self.work.push_back(Work::Demand(demand));
        Ok(())
    }

    fn run_work(&mut self) -> Result<(), TestCaseError> {
        while let Some(work) = self.work.pop_front() {
            match work {
                Work::Demand(demand) => {
                    let from_buffer = demand.min(self.buffer.len());
                    self.owed += demand - from_buffer;
                    if from_buffer > 0 {
                        let events: Vec<u64> = self.buffer.drain(..from_buffer).collect();
                        let leftover = self.dispatch(events)?;
                        for event in leftover.into_iter().rev() {
                            self.buffer.push_front(event);
                        }
                    }
                }
                Work::Ask(id, n) => {
                    let active = self.is_active(id);
                    if let Some(&index) = self.by_id.get(&id) {
                        self.subs[index].refunded += n;
                    }
                    let demand = self.dispatcher.ask(id, n, &mut self.out);
                    self.after_call()?;
                    self.check_ask(demand, active, n)?;
                    self.work.push_back(Work::Demand(demand));
                }
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, events: Vec<u64>) -> Result<Vec<u64>, TestCaseError> {
        let input = events.clone();
        let before: HashMap<SubscriptionId, usize> =
            self.subs.iter().map(|s| (s.id, s.received.len())).collect();
        // How many events the reference model accepts.
        let expected_accepted = match self.kind {
            Kind::Demand | Kind::DemandShuffled(_) => {
                input.len().min(self.active().map(Sub::outstanding).sum())
            }
            Kind::Broadcast => input.len().min(self.slowest()),
            Kind::Partition => {
                // Up to `waiting` events that are not discarded.
                let mut accepted = 0;
                for &id in &input {
                    if self.waiting == 0 {
                        break;
                    }
                    accepted += 1;
                    if !discarded_by_hash(id) {
                        self.waiting -= 1;
                    }
                }
                accepted
            }
        };
        let leftover = self.dispatcher.dispatch(events, &mut self.out);
        prop_assert_eq!(
            input.len() - leftover.len(),
            expected_accepted,
            "events accepted"
        );
        match self.kind {
            Kind::Demand | Kind::DemandShuffled(_) => {
                self.pending = self.pending.saturating_sub(leftover.len());
            }
            Kind::Broadcast => {
                prop_assert!(self.requested >= expected_accepted);
                self.requested -= expected_accepted;
            }
            Kind::Partition => {}
        }

        prop_assert!(leftover.len() <= input.len());
        let accepted = &input[..input.len() - leftover.len()];
        prop_assert_eq!(
            &input[accepted.len()..],
            leftover.as_slice(),
            "leftover is the tail"
        );
        for &id in accepted {
            self.accepted.insert(id, self.next_accept);
            self.next_accept += 1;
            if self.kind == Kind::Partition {
                if discarded_by_hash(id) {
                    self.discarded += 1;
                } else {
                    self.held.insert(id, partition_of(id));
                }
            }
        }
        let accepted = accepted.to_vec();
        self.after_call()?;

        match self.kind {
            Kind::Demand | Kind::DemandShuffled(_) => {
                let sent: usize = self
                    .subs
                    .iter()
                    .map(|s| s.received.len() - before.get(&s.id).copied().unwrap_or(0))
                    .sum();
                prop_assert_eq!(sent, accepted.len(), "every accepted event went out");
                // Events are left over only when no consumer has demand
                // (also right after the shuffle).
                if !leftover.is_empty() {
                    for s in self.active() {
                        prop_assert_eq!(s.outstanding(), 0, "{:?} had demand", s.id);
                    }
                }
            }
            Kind::Broadcast => {
                for s in self.active() {
                    let got = &s.received[before.get(&s.id).copied().unwrap_or(0)..];
                    let expected: Vec<u64> = accepted
                        .iter()
                        .copied()
                        .filter(|id| selects(s.selector, *id))
                        .collect();
                    prop_assert_eq!(got, expected.as_slice(), "{:?} missed events", s.id);
                }
                if !leftover.is_empty() {
                    let min = self.active().map(Sub::charged_outstanding).min();
                    prop_assert!(
                        min.is_none_or(|m| m == 0),
                        "slowest consumer still had {:?}",
                        min
                    );
                }
            }
            Kind::Partition => {}
        }
        Ok(leftover)
    }

    /// Carry out the outbox, checking each item.
    fn after_call(&mut self) -> Result<(), TestCaseError> {
        let items: Vec<Emit<u64>> = self.out.drain().collect();
        for item in items {
            match item {
                Emit::Events { to, events } => {
                    prop_assert!(!events.is_empty());
                    let index = self.by_id.get(&to).copied();
                    prop_assert!(
                        index.is_some_and(|i| self.subs[i].active),
                        "{:?} inactive",
                        to
                    );
                    let index = index.unwrap_or_default();
                    for id in events {
                        let seq = self.accepted.get(&id).copied();
                        prop_assert!(seq.is_some(), "event {} was never accepted", id);
                        let sub = &self.subs[index];
                        if let Some(&last) = sub.received.last() {
                            prop_assert!(
                                self.accepted[&last] < self.accepted[&id],
                                "{:?} got {} after {}",
                                to,
                                id,
                                last
                            );
                        }
                        match self.kind {
                            Kind::Broadcast => {
                                prop_assert!(selects(sub.selector, id));
                            }
                            Kind::Partition => {
                                prop_assert_eq!(self.held.remove(&id), sub.partition);
                                prop_assert!(self.delivered.insert(id), "{} delivered twice", id);
                            }
                            _ => {
                                prop_assert!(self.delivered.insert(id), "{} delivered twice", id);
                            }
                        }
                        let sub = &mut self.subs[index];
                        sub.received.push(id);
                        prop_assert!(
                            sub.received.len() <= sub.asked,
                            "{:?} received {} but asked {}",
                            to,
                            sub.received.len(),
                            sub.asked
                        );
                    }
                }
                Emit::Info(info) => {
                    let entry = self.infos.iter_mut().find(|(i, _, _)| *i == info);
                    prop_assert!(entry.is_some(), "unknown {:?}", info);
                    if let Some((_, before, released)) = entry {
                        prop_assert!(!*released, "{:?} released twice", info);
                        *released = true;
                        for event in before.iter() {
                            prop_assert!(
                                !self.held.contains_key(event),
                                "{:?} released before event {}",
                                info,
                                event
                            );
                        }
                    }
                }
                Emit::Discarded { events, reason } => {
                    prop_assert_eq!(self.kind, Kind::Partition);
                    prop_assert!(reason.contains("cancelled"), "unexpected drop: {}", reason);
                    self.dropped_on_cancel += events.len();
                    self.handed_back.extend(events);
                }
                Emit::Warning(Warning::EventsDropped { .. }) => {
                    prop_assert!(false, "no event is dropped by a valid hash");
                }
                Emit::Warning(Warning::AskLargerThanMaxDemand { .. }) => {
                    prop_assert!(matches!(self.kind, Kind::Demand | Kind::DemandShuffled(_)));
                }
                Emit::Ask { subscription, n } => {
                    prop_assert_eq!(self.kind, Kind::Broadcast);
                    prop_assert!(n > 0);
                    if let Some(&index) = self.by_id.get(&subscription) {
                        self.subs[index].rejected += n;
                    }
                    self.work.push_back(Work::Ask(subscription, n));
                }
            }
        }
        // Broadcast: what the selector rejected is exactly what is charged.
        if self.kind == Kind::Broadcast {
            for s in &self.subs {
                prop_assert!(s.received.len() + s.rejected <= s.asked + s.refunded);
            }
        }
        Ok(())
    }

    fn check_quiescent(&self) -> Result<(), TestCaseError> {
        let created = self.next_event as usize;
        prop_assert_eq!(self.dispatcher.buffered(), self.held.len());
        match self.kind {
            Kind::Broadcast => {
                prop_assert_eq!(created, self.accepted.len() + self.buffer.len());
                for s in &self.subs {
                    // Every refund came back.
                    prop_assert_eq!(s.rejected, s.refunded);
                }
            }
            _ => {
                prop_assert_eq!(
                    created,
                    self.delivered.len()
                        + self.buffer.len()
                        + self.held.len()
                        + self.dropped_on_cancel
                        + self.discarded,
                    "events lost or duplicated"
                );
            }
        }
        // Partition: a consumer with demand never has events waiting for it.
        if self.kind == Kind::Partition {
            for s in self.active() {
                let waiting = self
                    .held
                    .values()
                    .filter(|p| Some(**p) == s.partition)
                    .count();
                prop_assert!(
                    s.outstanding() == 0 || waiting == 0,
                    "{:?} has demand {} and {} queued events",
                    s.id,
                    s.outstanding(),
                    waiting
                );
            }
        }
        // Infos: released exactly when nothing queued before them is left.
        for (info, before, released) in &self.infos {
            let gone = before.iter().all(|e| !self.held.contains_key(e));
            prop_assert_eq!(
                *released,
                gone,
                "{:?} released {} but gone {}",
                info,
                released,
                gone
            );
        }
        Ok(())
    }
}

fn run(kind: Kind, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut host = Host::new(kind);
    for op in ops {
        host.run(op)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn demand_dispatcher_loses_nothing_and_never_exceeds_demand(ops in prop::collection::vec(op(), 1..80)) {
        run(Kind::Demand, &ops)?;
    }

    #[test]
    fn shuffled_demand_dispatcher_loses_nothing_and_never_exceeds_demand(
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(Kind::DemandShuffled(seed), &ops)?;
    }

    #[test]
    fn broadcast_dispatcher_gives_every_consumer_every_selected_event(ops in prop::collection::vec(op(), 1..80)) {
        run(Kind::Broadcast, &ops)?;
    }

    #[test]
    fn partition_dispatcher_loses_nothing_and_keeps_partition_order(ops in prop::collection::vec(op(), 1..80)) {
        run(Kind::Partition, &ops)?;
    }
}
