//! The Demand dispatcher: each batch goes to the consumer with the largest
//! outstanding demand (GenStage's `GenStage.DemandDispatcher`, the default).

mod shuffle;

use crate::{
    Dispatcher, Outbox, SubscribeError, Subscriber, SubscriptionId, SubscriptionOptions, Warning,
};
use shuffle::SplitMix64;

/// Sends each batch of events to the consumer with the largest outstanding
/// demand, repeating until the events or the demand run out.
///
/// This is GenStage's default dispatcher (work sharing between consumers).
/// Its bookkeeping is GenStage's:
///
/// - Consumers are kept in a list ordered by outstanding demand, highest
///   first; a consumer whose demand changes is moved behind the others with
///   the same demand, and a new subscriber goes last with zero demand.
/// - Subscribing asks nothing upstream; each ask is passed upstream as is.
/// - When a consumer cancels with unmet demand, that demand stays *pending*:
///   the events are already on their way, so later asks are reduced by it
///   instead of being asked upstream again.
/// - The first ask sets the expected maximum demand (unless given with
///   [`with_max_demand`](Self::with_max_demand)); a larger ask pushes
///   [`Warning::AskLargerThanMaxDemand`], because consumers with larger
///   demands get larger batches.
/// - Optionally the consumer list is shuffled once at the first dispatch, so
///   that the first subscriber is not the first one served when every
///   consumer asks at start-up ([`shuffle_demands_on_first_dispatch`](Self::shuffle_demands_on_first_dispatch)).
///   Where Weir differs: after the shuffle, consumers without demand are
///   moved behind those with demand. GenStage keeps the raw shuffled order
///   and stops dispatching at a consumer without demand at the head, holding
///   events back from the others until that consumer asks.
///
/// # Example
///
/// ```
/// use weir_dispatchers::{ConsumerId, DemandDispatcher, Dispatcher, Emit, Outbox, Subscriber,
///                   SubscriptionId, SubscriptionOptions};
///
/// let mut dispatcher = DemandDispatcher::new();
/// let mut out = Outbox::new();
/// let a = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
/// let b = Subscriber { subscription: SubscriptionId(2), consumer: ConsumerId(2) };
/// dispatcher.subscribe(a, &SubscriptionOptions::new(3, 1), &mut out)?;
/// dispatcher.subscribe(b, &SubscriptionOptions::new(3, 1), &mut out)?;
/// assert_eq!(dispatcher.ask(a.subscription, 3, &mut out), 3);
/// assert_eq!(dispatcher.ask(b.subscription, 2, &mut out), 2);
///
/// // The largest demand is served first, then the next one.
/// let leftover = dispatcher.dispatch(vec!['a', 'b', 'c', 'd', 'e'], &mut out);
/// assert!(leftover.is_empty());
/// assert_eq!(out.drain().collect::<Vec<_>>(), vec![
///     Emit::Events { to: a.subscription, events: vec!['a', 'b', 'c'] },
///     Emit::Events { to: b.subscription, events: vec!['d', 'e'] },
/// ]);
/// # Ok::<(), weir_dispatchers::SubscribeError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct DemandDispatcher {
    /// Outstanding demand per subscription, highest first (GenStage's
    /// `demands` list).
    demands: Vec<Demand>,
    /// Unmet demand of cancelled consumers: already asked upstream, so taken
    /// off later asks.
    pending: usize,
    /// The expected maximum demand.
    max_demand: Option<usize>,
    /// Shuffle the consumer list at the first dispatch, with this generator.
    shuffle: Option<SplitMix64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Demand {
    counter: usize,
    subscription: SubscriptionId,
}

impl DemandDispatcher {
    /// A dispatcher with no consumers, no expected maximum demand yet and no
    /// shuffling.
    pub fn new() -> Self {
        Self::default()
    }

    /// Expect this maximum demand instead of taking the first ask's (GenStage's
    /// `max_demand` dispatcher option).
    ///
    /// ```
    /// use weir_dispatchers::{ConsumerId, DemandDispatcher, Dispatcher, Emit, Outbox, Subscriber,
    ///                   SubscriptionId, SubscriptionOptions, Warning};
    ///
    /// let mut dispatcher = DemandDispatcher::new().with_max_demand(3);
    /// let mut out = Outbox::<u32>::new();
    /// let a = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
    /// dispatcher.subscribe(a, &SubscriptionOptions::new(4, 2), &mut out)?;
    /// assert_eq!(dispatcher.ask(a.subscription, 4, &mut out), 4);
    /// assert_eq!(out.drain().collect::<Vec<_>>(), vec![Emit::Warning(
    ///     Warning::AskLargerThanMaxDemand { subscription: a.subscription, asked: 4, expected: 3 },
    /// )]);
    /// # Ok::<(), weir_dispatchers::SubscribeError>(())
    /// ```
    pub fn with_max_demand(mut self, max_demand: usize) -> Self {
        self.max_demand = Some(max_demand);
        self
    }

    /// Shuffle the consumers once, at the first dispatch, with a seed drawn
    /// from the process's random hash keys (GenStage's
    /// `shuffle_demands_on_first_dispatch: true`). Use
    /// [`shuffle_demands_on_first_dispatch_with_seed`](Self::shuffle_demands_on_first_dispatch_with_seed)
    /// for a reproducible order.
    pub fn shuffle_demands_on_first_dispatch(self) -> Self {
        self.shuffle_demands_on_first_dispatch_with_seed(shuffle::random_seed())
    }

    /// Shuffle the consumers once, at the first dispatch, deterministically
    /// from `seed`.
    ///
    /// ```
    /// use weir_dispatchers::{ConsumerId, DemandDispatcher, Dispatcher, Outbox, Subscriber,
    ///                   SubscriptionId, SubscriptionOptions};
    ///
    /// let run = |seed| {
    ///     let mut dispatcher = DemandDispatcher::new().shuffle_demands_on_first_dispatch_with_seed(seed);
    ///     let mut out = Outbox::new();
    ///     for id in 1..=4 {
    ///         let s = Subscriber { subscription: SubscriptionId(id), consumer: ConsumerId(id) };
    ///         dispatcher.subscribe(s, &SubscriptionOptions::new(2, 1), &mut out).unwrap();
    ///         dispatcher.ask(s.subscription, 2, &mut out);
    ///     }
    ///     dispatcher.dispatch(vec![1, 2, 3, 4, 5, 6, 7, 8], &mut out);
    ///     out.drain().collect::<Vec<_>>()
    /// };
    /// assert_eq!(run(7), run(7));
    /// ```
    pub fn shuffle_demands_on_first_dispatch_with_seed(mut self, seed: u64) -> Self {
        self.shuffle = Some(SplitMix64::new(seed));
        self
    }

    /// The outstanding demand of `subscription`, if it is subscribed.
    pub fn demand(&self, subscription: SubscriptionId) -> Option<usize> {
        self.demands
            .iter()
            .find(|d| d.subscription == subscription)
            .map(|d| d.counter)
    }

    /// Every subscription with its outstanding demand, in the order the
    /// next batch would be served.
    pub fn demands(&self) -> impl Iterator<Item = (SubscriptionId, usize)> + '_ {
        self.demands.iter().map(|d| (d.subscription, d.counter))
    }

    /// Unmet demand left by cancelled consumers, taken off later asks.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// The maximum demand this dispatcher expects, once known.
    pub fn max_demand(&self) -> Option<usize> {
        self.max_demand
    }

    fn pop_demand(&mut self, subscription: SubscriptionId) -> Option<usize> {
        let index = self.index_of(subscription)?;
        Some(self.demands.remove(index).counter)
    }

    #[inline]
    fn index_of(&self, subscription: SubscriptionId) -> Option<usize> {
        self.demands
            .iter()
            .position(|d| d.subscription == subscription)
    }

    /// Give the consumer at `index` the demand `counter` and move it behind
    /// every other consumer with the same or a larger demand, before the
    /// first one with a smaller demand (GenStage takes it out and inserts it
    /// there again). Done in place (a rotation of the consumers in between),
    /// so a lone consumer, or one that keeps its place, moves nothing.
    #[inline]
    fn set_demand(&mut self, index: usize, counter: usize) {
        if let [only] = self.demands.as_mut_slice() {
            // A lone consumer has nowhere to move.
            only.counter = counter;
        } else {
            self.move_demand(index, counter);
        }
    }

    fn move_demand(&mut self, index: usize, counter: usize) {
        let subscription = self.demands[index].subscription;
        // The insertion point among the others, as an index into the list
        // without this consumer (the end if nobody has a smaller demand).
        let mut target = self.demands.len() - 1;
        for (i, other) in self.demands.iter().enumerate() {
            if i != index && counter > other.counter {
                target = if i < index { i } else { i - 1 };
                break;
            }
        }
        match target.cmp(&index) {
            std::cmp::Ordering::Less => self.demands[target..=index].rotate_right(1),
            std::cmp::Ordering::Greater => self.demands[index..=target].rotate_left(1),
            std::cmp::Ordering::Equal => {}
        }
        self.demands[target] = Demand {
            counter,
            subscription,
        };
    }
}

impl<T> Dispatcher<T> for DemandDispatcher {
    fn subscribe(
        &mut self,
        subscriber: Subscriber,
        _options: &SubscriptionOptions<T>,
        _out: &mut Outbox<T>,
    ) -> Result<usize, SubscribeError> {
        self.demands.push(Demand {
            counter: 0,
            subscription: subscriber.subscription,
        });
        Ok(0)
    }

    fn cancel(&mut self, subscription: SubscriptionId, _out: &mut Outbox<T>) -> usize {
        if let Some(current) = self.pop_demand(subscription) {
            self.pending += current;
        }
        0
    }

    fn ask(&mut self, subscription: SubscriptionId, n: usize, out: &mut Outbox<T>) -> usize {
        let Some(index) = self.index_of(subscription) else {
            return 0;
        };
        let current = self.demands[index].counter;
        let expected = *self.max_demand.get_or_insert(n);
        if n > expected {
            out.warn(Warning::AskLargerThanMaxDemand {
                subscription,
                asked: n,
                expected,
            });
        }
        self.set_demand(index, current + n);
        let already_sent = self.pending.min(n);
        self.pending -= already_sent;
        n - already_sent
    }

    fn dispatch(&mut self, events: Vec<T>, out: &mut Outbox<T>) -> Vec<T> {
        if let Some(mut rng) = self.shuffle.take() {
            rng.shuffle(&mut self.demands);
            // Unlike GenStage, consumers without demand go behind the others,
            // so that one of them at the head cannot hold events back from
            // consumers that asked. Among those with demand the order stays
            // shuffled.
            self.demands.sort_by_key(|d| d.counter == 0);
        }
        let mut events = events;
        // Serve the head until it has no demand: the list keeps every
        // consumer without demand behind those with some, so then nobody has.
        while !events.is_empty() {
            let Some(head) = self.demands.first().copied() else {
                break;
            };
            if head.counter == 0 {
                break;
            }
            let now = head.counter.min(events.len());
            if now == events.len() {
                out.send(head.subscription, std::mem::take(&mut events));
            } else {
                let later = events.split_off(now);
                out.send(head.subscription, events);
                events = later;
            }
            self.set_demand(0, head.counter - now);
        }
        self.pending = self.pending.saturating_sub(events.len());
        events
    }

    fn name(&self) -> &str {
        "demand"
    }
}

#[cfg(test)]
mod tests;
