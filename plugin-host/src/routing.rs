//! Carrying out a plugin's routing runs on the host's events: checked against
//! the demand each subscription asked for, then moved (never cloned) into
//! per-subscription batches.

use weir_dispatchers::{Outbox, SubscriptionId};
use weir_plugin_interface::Run;

/// Outstanding demand per live subscription, as the host saw it asked.
///
/// The host keeps its own count so that a buggy plugin can never make a
/// producer send a consumer more than it asked for. A producer has few
/// subscriptions and the plugin scans its own list on every call anyway, so
/// the ledger is a list too: one short scan, no hashing.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    demand: Vec<(SubscriptionId, u64)>,
    /// Events per subscription in the batch being settled (reused).
    taken: Vec<(SubscriptionId, u64)>,
}

impl Ledger {
    fn get(&self, subscription: SubscriptionId) -> Option<u64> {
        self.demand
            .iter()
            .find(|(id, _)| *id == subscription)
            .map(|(_, demand)| *demand)
    }

    fn get_mut(&mut self, subscription: SubscriptionId) -> Option<&mut u64> {
        self.demand
            .iter_mut()
            .find(|(id, _)| *id == subscription)
            .map(|(_, demand)| demand)
    }

    pub(crate) fn contains(&self, subscription: SubscriptionId) -> bool {
        self.get(subscription).is_some()
    }

    /// A new subscription with no demand (the caller checked it is new).
    pub(crate) fn subscribe(&mut self, subscription: SubscriptionId) {
        self.demand.push((subscription, 0));
    }

    pub(crate) fn cancel(&mut self, subscription: SubscriptionId) -> bool {
        match self.demand.iter().position(|(id, _)| *id == subscription) {
            Some(index) => {
                self.demand.swap_remove(index);
                true
            }
            None => false,
        }
    }

    /// Returns `false` for an unknown subscription.
    pub(crate) fn ask(&mut self, subscription: SubscriptionId, n: u64) -> bool {
        match self.get_mut(subscription) {
            Some(demand) => {
                *demand = demand.saturating_add(n);
                true
            }
            None => false,
        }
    }

    /// Check `runs` for a batch of `len` events, and on success take the sent
    /// events off each subscription's demand. On failure nothing changes.
    #[inline]
    pub(crate) fn settle(&mut self, runs: &[Run], len: usize) -> Result<(), String> {
        // The common case, one subscription takes (part of) the batch within
        // its demand: one lookup.
        if let [run] = runs
            && run.count <= len as u64
            && let Some(to) = run.to.as_ref().into_option()
            && let Some(demand) = self.get_mut(SubscriptionId(to.0))
            && run.count <= *demand
        {
            *demand -= run.count;
            return Ok(());
        }
        self.settle_runs(runs, len)
    }

    /// [`settle`](Self::settle) in general, and with the errors.
    #[inline(never)]
    fn settle_runs(&mut self, runs: &[Run], len: usize) -> Result<(), String> {
        let mut covered: u64 = 0;
        for run in runs {
            covered = covered.saturating_add(run.count);
        }
        if covered > len as u64 {
            return Err(format!(
                "its runs cover {covered} events but the batch holds {len}"
            ));
        }
        // Check the whole batch before changing anything.
        self.taken.clear();
        for run in runs {
            let Some(to) = run.to.as_ref().into_option() else {
                continue;
            };
            let to = SubscriptionId(to.0);
            let Some(demand) = self.get(to) else {
                return Err(format!("it sent {} events to unknown {to}", run.count));
            };
            let total = match self.taken.iter_mut().find(|(id, _)| *id == to) {
                Some((_, total)) => {
                    *total = total.saturating_add(run.count);
                    *total
                }
                None => {
                    self.taken.push((to, run.count));
                    run.count
                }
            };
            if total > demand {
                return Err(format!(
                    "it sent {total} events to {to}, which asked for {demand}"
                ));
            }
        }
        let taken = std::mem::take(&mut self.taken);
        for (to, sent) in &taken {
            if let Some(demand) = self.get_mut(*to) {
                *demand -= sent;
            }
        }
        self.taken = taken;
        Ok(())
    }
}

/// Carry out checked `runs` on `events`: one batch per subscription (in
/// order of first appearance, each keeping the events' order) pushed into
/// `out`; returns the leftover events (kept runs and the uncovered tail, in
/// order).
///
/// Events are moved: the first run keeps the batch's own allocation, later
/// runs are split off it.
#[inline]
pub(crate) fn route<T>(events: Vec<T>, runs: &[Run], out: &mut Outbox<T>) -> Vec<T> {
    // The common cases first: nothing routed, or one run takes the whole
    // batch.
    match runs {
        [] => return events,
        [run] if run.count == events.len() as u64 => {
            if let Some(to) = run.to.as_ref().into_option() {
                out.send(SubscriptionId(to.0), events);
                return Vec::new();
            }
            return events;
        }
        _ => {}
    }
    route_runs(events, runs, out)
}

/// [`route`] in general: several runs, or one that leaves events over.
#[inline(never)]
fn route_runs<T>(events: Vec<T>, runs: &[Run], out: &mut Outbox<T>) -> Vec<T> {
    let (batches, leftover) = split(events, runs);
    for (to, batch) in batches {
        out.send(to, batch);
    }
    leftover
}

/// Split `events` along `runs` into per-subscription batches and leftovers.
pub(crate) fn split<T>(
    mut events: Vec<T>,
    runs: &[Run],
) -> (Vec<(SubscriptionId, Vec<T>)>, Vec<T>) {
    let covered: usize = runs.iter().map(|run| run.count as usize).sum();
    let tail = events.split_off(covered.min(events.len()));
    // Split from the back so the first run keeps the original allocation.
    let mut pieces: Vec<Vec<T>> = Vec::with_capacity(runs.len());
    let mut end = covered.min(events.len());
    for run in runs.iter().rev() {
        let start = end.saturating_sub(run.count as usize);
        pieces.push(if start == 0 {
            std::mem::take(&mut events)
        } else {
            events.split_off(start)
        });
        end = start;
    }
    pieces.reverse();

    let mut batches: Vec<(SubscriptionId, Vec<T>)> = Vec::new();
    let mut leftover: Vec<T> = Vec::new();
    for (run, mut piece) in runs.iter().zip(pieces) {
        match run.to.as_ref().into_option() {
            Some(to) => {
                let to = SubscriptionId(to.0);
                match batches.iter_mut().find(|(id, _)| *id == to) {
                    Some((_, batch)) => batch.append(&mut piece),
                    None => batches.push((to, piece)),
                }
            }
            None => {
                if leftover.is_empty() {
                    leftover = piece;
                } else {
                    leftover.append(&mut piece);
                }
            }
        }
    }
    if leftover.is_empty() {
        leftover = tail;
    } else {
        leftover.extend(tail);
    }
    (batches, leftover)
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::ROption;
    use proptest::prelude::*;

    fn send(to: u64, count: u64) -> Run {
        Run {
            to: ROption::RSome(weir_plugin_interface::SubscriptionId(to)),
            count,
        }
    }

    fn keep(count: u64) -> Run {
        Run {
            to: ROption::RNone,
            count,
        }
    }

    #[test]
    fn one_run_for_the_whole_batch_moves_the_vector_itself() {
        let events = vec![1, 2, 3];
        let pointer = events.as_ptr();
        let mut out = Outbox::new();
        let leftover = route(events, &[send(1, 3)], &mut out);
        assert!(leftover.is_empty());
        match out.items() {
            [weir_dispatchers::Emit::Events { to, events }] => {
                assert_eq!(
                    (*to, events.as_slice()),
                    (SubscriptionId(1), &[1, 2, 3][..])
                );
                assert_eq!(events.as_ptr(), pointer);
            }
            other => panic!("expected one batch, got {other:?}"),
        }
    }

    #[test]
    fn nothing_routed_gives_every_event_back() {
        let mut out = Outbox::new();
        assert_eq!(route(vec![1, 2], &[], &mut out), vec![1, 2]);
        assert_eq!(route(vec![1, 2], &[keep(2)], &mut out), vec![1, 2]);
        assert!(out.is_empty());
    }

    #[test]
    fn the_first_run_keeps_the_batch_allocation() {
        let events: Vec<u32> = (0..10).collect();
        let pointer = events.as_ptr();
        let (batches, leftover) = split(events, &[send(1, 4), send(2, 3)]);
        assert_eq!(batches[0], (SubscriptionId(1), vec![0, 1, 2, 3]));
        assert_eq!(batches[0].1.as_ptr(), pointer);
        assert_eq!(batches[1], (SubscriptionId(2), vec![4, 5, 6]));
        assert_eq!(leftover, vec![7, 8, 9]);
    }

    #[test]
    fn runs_to_the_same_subscription_become_one_batch_and_kept_runs_are_leftover() {
        let (batches, leftover) = split(
            (0..8).collect::<Vec<u32>>(),
            &[send(1, 2), keep(1), send(2, 1), send(1, 2)],
        );
        assert_eq!(
            batches,
            vec![
                (SubscriptionId(1), vec![0, 1, 4, 5]),
                (SubscriptionId(2), vec![3])
            ]
        );
        assert_eq!(leftover, vec![2, 6, 7]);
    }

    #[test]
    fn ledger_refuses_more_than_asked_unknown_subscriptions_and_overlong_runs() {
        let mut ledger = Ledger::default();
        ledger.subscribe(SubscriptionId(1));
        assert!(ledger.ask(SubscriptionId(1), 3));
        assert!(!ledger.ask(SubscriptionId(2), 3));
        assert!(ledger.settle(&[send(1, 2), send(1, 2)], 4).is_err());
        assert!(ledger.settle(&[send(2, 1)], 4).is_err());
        assert!(ledger.settle(&[send(1, 1), keep(4)], 4).is_err());
        // Nothing was taken by the refused runs.
        assert_eq!(ledger.settle(&[send(1, 3)], 3), Ok(()));
        assert!(ledger.settle(&[send(1, 1)], 1).is_err());
    }

    proptest! {
        #[test]
        fn split_loses_and_duplicates_nothing(
            len in 0usize..60,
            raw in proptest::collection::vec((0u64..4, 0u64..8), 0..12),
        ) {
            let events: Vec<usize> = (0..len).collect();
            let mut runs = Vec::new();
            let mut left = len as u64;
            for (to, count) in raw {
                let count = count.min(left);
                left -= count;
                runs.push(if to == 0 { keep(count) } else { send(to, count) });
            }
            let (batches, leftover) = split(events, &runs);
            let mut all: Vec<usize> = batches.iter().flat_map(|(_, b)| b.iter().copied()).collect();
            all.extend(leftover.iter().copied());
            all.sort_unstable();
            prop_assert_eq!(all, (0..len).collect::<Vec<_>>());
            for (_, batch) in &batches {
                prop_assert!(batch.windows(2).all(|w| w[0] < w[1]));
            }
            prop_assert!(leftover.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
