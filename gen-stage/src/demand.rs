//! GenStage's automatic demand algorithm, as a pure state machine.
//!
//! A consumer in automatic mode asks `max_demand` when it subscribes. Each
//! incoming batch is cut into pieces of at most `max_demand - min_demand`
//! events. For each piece, in order: its size is taken off the outstanding
//! demand, the piece is handed to `handle_events`, and then, if the
//! outstanding demand is at or below `min_demand`, the consumer asks for
//! `max_demand - outstanding` and counts `max_demand` outstanding again.
//!
//! This module only computes the pieces and asks; the runtime hands the
//! pieces over and sends the asks.

/// The automatic demand of one subscription.
///
/// ```
/// use weir_gen_stage::demand::{AutomaticDemand, Batch};
///
/// // max_demand 100, min_demand 20: pieces of at most 80 events.
/// let mut demand = AutomaticDemand::new(100, 20);
/// assert_eq!(demand.initial_ask(), 100);
///
/// // The producer answers the first ask of 100 with 100 events.
/// let batches: Vec<Batch> = demand.receive(100).collect();
/// assert_eq!(batches, vec![Batch { size: 80, ask: 80 }, Batch { size: 20, ask: 0 }]);
/// assert_eq!(demand.outstanding(), 80);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutomaticDemand {
    max: usize,
    min: usize,
    outstanding: usize,
}

/// One piece of an incoming batch: hand `size` events to `handle_events`,
/// then ask the producer for `ask` more (nothing when `ask` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// How many events go to this `handle_events` call.
    pub size: usize,
    /// How many events to ask for after it (0: none).
    pub ask: usize,
}

impl AutomaticDemand {
    /// A subscription with these bounds, before its first ask.
    ///
    /// The runtime validates the options first; out-of-range values are
    /// brought into range here (`max_demand` at least 1, `min_demand` below
    /// `max_demand`) rather than trusted.
    pub fn new(max_demand: usize, min_demand: usize) -> Self {
        let max = max_demand.max(1);
        let min = min_demand.min(max - 1);
        Self {
            max,
            min,
            outstanding: max,
        }
    }

    /// What the consumer asks right after subscribing: `max_demand`.
    pub fn initial_ask(&self) -> usize {
        self.max
    }

    /// The subscription's `max_demand`.
    pub fn max_demand(&self) -> usize {
        self.max
    }

    /// The subscription's `min_demand`.
    pub fn min_demand(&self) -> usize {
        self.min
    }

    /// Events asked for and not received yet.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The largest piece handed to one `handle_events` call:
    /// `max_demand - min_demand`.
    #[inline]
    pub fn piece_size(&self) -> usize {
        self.max - self.min
    }

    /// [`receive`](Self::receive) for a message that is a single piece
    /// (`0 < count <= piece_size()`, the usual case), without building the
    /// iterator: the ask after the piece, and the events in excess.
    #[inline]
    pub(crate) fn receive_piece(&mut self, count: usize) -> (usize, usize) {
        debug_assert!(count > 0 && count <= self.piece_size());
        let excess = count.saturating_sub(self.outstanding);
        let left = self.outstanding - count.min(self.outstanding);
        let ask = if left <= self.min {
            self.outstanding = self.max;
            self.max - left
        } else {
            self.outstanding = left;
            0
        };
        (ask, excess)
    }

    /// `count` events arrived in one message: the pieces to hand over, in
    /// order, with the ask after each. The outstanding demand is updated as
    /// if every piece had been handed over.
    pub fn receive(&mut self, count: usize) -> Batches {
        let batches = Batches {
            max: self.max,
            min: self.min,
            old_demand: self.outstanding,
            new_demand: self.outstanding,
            remaining: count,
            excess: count.saturating_sub(self.outstanding),
        };
        let mut run = batches.clone();
        for _ in run.by_ref() {}
        self.outstanding = run.new_demand;
        batches
    }
}

/// The pieces of one incoming batch (see [`AutomaticDemand::receive`]).
#[derive(Debug, Clone)]
pub struct Batches {
    max: usize,
    min: usize,
    /// Demand still covering this message (never replenished within it).
    old_demand: usize,
    /// Outstanding demand including asks made while handing this message over.
    new_demand: usize,
    remaining: usize,
    excess: usize,
}

impl Batches {
    /// Events beyond the outstanding demand: the producer sent more than was
    /// asked. They are still handed over, but do not count as demand met.
    pub fn excess(&self) -> usize {
        self.excess
    }
}

impl Iterator for Batches {
    type Item = Batch;

    fn next(&mut self) -> Option<Batch> {
        if self.remaining == 0 {
            return None;
        }
        let size = self.remaining.min(self.max - self.min);
        self.remaining -= size;
        // Events beyond the demand covering this message do not count.
        let counted = size.min(self.old_demand);
        self.old_demand -= counted;
        let left = self.new_demand - counted;
        let ask = if left <= self.min {
            self.new_demand = self.max;
            self.max - left
        } else {
            self.new_demand = left;
            0
        };
        Some(Batch { size, ask })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining.div_ceil(self.max - self.min);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Batches {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A producer that answers every ask at once with exactly the demanded
    /// count, as GenStage's test `Counter` does. Returns the event ranges
    /// handed to `handle_events`.
    fn run_counter(max: usize, min: usize, pieces: usize) -> Vec<std::ops::Range<usize>> {
        let mut demand = AutomaticDemand::new(max, min);
        let mut asks = std::collections::VecDeque::from([demand.initial_ask()]);
        let mut next = 0;
        let mut handed = Vec::new();
        while handed.len() < pieces {
            let n = asks.pop_front().expect("the consumer keeps asking");
            for batch in demand.receive(n) {
                handed.push(next..next + batch.size);
                next += batch.size;
                if batch.ask > 0 {
                    asks.push_back(batch.ask);
                }
            }
        }
        handed.truncate(pieces);
        handed
    }

    #[test]
    fn defaults_1000_500_give_pieces_of_500() {
        assert_eq!(run_counter(1000, 500, 2), vec![0..500, 500..1000]);
    }

    #[test]
    fn max_100_min_80_gives_pieces_of_20() {
        let pieces = run_counter(100, 80, 10);
        assert!(pieces.iter().all(|p| p.len() == 20), "{pieces:?}");
        assert_eq!(pieces[0], 0..20);
        assert_eq!(pieces[9], 180..200);
    }

    #[test]
    fn max_100_min_20_gives_80_then_20_then_80s() {
        assert_eq!(
            run_counter(100, 20, 4),
            vec![0..80, 80..100, 100..180, 180..260]
        );
    }

    #[test]
    fn max_1_min_0_gives_one_event_per_piece_and_one_ask_each() {
        let mut demand = AutomaticDemand::new(1, 0);
        assert_eq!(demand.initial_ask(), 1);
        for _ in 0..5 {
            let batches: Vec<_> = demand.receive(1).collect();
            assert_eq!(batches, vec![Batch { size: 1, ask: 1 }]);
        }
    }

    #[test]
    fn min_0_cuts_pieces_of_max_demand() {
        let mut demand = AutomaticDemand::new(10, 0);
        let batches: Vec<_> = demand.receive(10).collect();
        assert_eq!(batches, vec![Batch { size: 10, ask: 10 }]);
    }

    #[test]
    fn ask_waits_until_outstanding_reaches_min_demand() {
        // GenStage's documentation example: 1000/750, producer sends 100 at a time.
        let mut demand = AutomaticDemand::new(1000, 750);
        assert_eq!(
            demand.receive(100).collect::<Vec<_>>(),
            vec![Batch { size: 100, ask: 0 }]
        );
        assert_eq!(
            demand.receive(100).collect::<Vec<_>>(),
            vec![Batch { size: 100, ask: 0 }]
        );
        assert_eq!(demand.outstanding(), 800);
        // The third batch brings it to 700 <= 750: ask 300.
        assert_eq!(
            demand.receive(100).collect::<Vec<_>>(),
            vec![Batch {
                size: 100,
                ask: 300
            }]
        );
        assert_eq!(demand.outstanding(), 1000);
    }

    #[test]
    fn excess_events_are_reported_and_do_not_count() {
        let mut demand = AutomaticDemand::new(10, 5);
        let batches = demand.receive(12);
        assert_eq!(batches.excess(), 2);
        let batches: Vec<_> = batches.collect();
        assert_eq!(batches.iter().map(|b| b.size).sum::<usize>(), 12);
        assert_eq!(batches[0], Batch { size: 5, ask: 5 });
        assert_eq!(batches[1], Batch { size: 5, ask: 5 });
        // Only the 10 asked for count; the last 2 are excess.
        assert_eq!(batches[2], Batch { size: 2, ask: 0 });
        assert_eq!(demand.outstanding(), 10);
    }

    #[test]
    fn out_of_range_bounds_are_clamped() {
        let demand = AutomaticDemand::new(0, 7);
        assert_eq!((demand.max_demand(), demand.min_demand()), (1, 0));
    }

    proptest! {
        /// The single-piece shortcut agrees with the general algorithm.
        #[test]
        fn receive_piece_is_receive_for_one_piece(
            max in 1usize..200,
            min_frac in 0.0f64..1.0,
            counts in proptest::collection::vec(1usize..400, 1..40),
        ) {
            let min = ((max as f64) * min_frac) as usize % max;
            let mut general = AutomaticDemand::new(max, min);
            let mut shortcut = general;
            for count in counts {
                let count = 1 + (count - 1) % general.piece_size();
                let batches = general.receive(count);
                let excess = batches.excess();
                let batches: Vec<Batch> = batches.collect();
                prop_assert_eq!(batches.len(), 1);
                prop_assert_eq!(shortcut.receive_piece(count), (batches[0].ask, excess));
                prop_assert_eq!(shortcut, general);
            }
        }

        /// With a producer that answers every ask with any split of it, the
        /// consumer never has more than max_demand outstanding, never asks
        /// nothing, never hands over an empty or oversized piece, and every
        /// event is handed over exactly once.
        #[test]
        fn demand_is_never_exceeded_and_no_event_is_lost(
            max in 1usize..200,
            min_frac in 0.0f64..1.0,
            splits in proptest::collection::vec(1usize..300, 1..50),
        ) {
            let min = ((max as f64) * min_frac) as usize % max;
            let mut demand = AutomaticDemand::new(max, min);
            let mut asked = demand.initial_ask();
            let mut sent = 0usize;
            let mut handed = 0usize;
            for split in splits {
                let unsent = asked - sent;
                if unsent == 0 { break; }
                let n = split.min(unsent);
                sent += n;
                let batches = demand.receive(n);
                prop_assert_eq!(batches.excess(), 0);
                for batch in batches {
                    prop_assert!(batch.size >= 1 && batch.size <= max - min);
                    handed += batch.size;
                    asked += batch.ask;
                }
                prop_assert!(asked - sent <= max);
                prop_assert_eq!(demand.outstanding(), asked - sent);
            }
            prop_assert_eq!(handed, sent);
        }
    }
}
