//! [`ChangelogRepair`]: keeps correction pairs meaningful after a filter dropped half of them.
//!
//! A sans-IO state machine over the output records of a map/filter query, in offset order, batch by
//! batch. It only needs, for each output record, the input record behind it ([`InputRecord`]) and the
//! operation type about to be written.

use super::{APPEND, CORRECT_FROM, CORRECT_TO, RETRACT};

/// The input record behind an output record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputRecord {
    /// Its operation type code.
    pub op: i32,
    /// Its offset in the input.
    pub offset: i64,
    /// Which input it comes from.
    pub input: i32,
}

impl InputRecord {
    /// Whether `next` is the record right after this one in the same input.
    fn followed_by(&self, next: &InputRecord) -> bool {
        self.input == next.input && self.offset.checked_add(1) == Some(next.offset)
    }
}

/// Repairs operation types of a filtered changelog, across batches.
///
/// ```
/// use weir_reference_engine::changelog::repair::{ChangelogRepair, InputRecord};
/// use weir_reference_engine::changelog::{APPEND, CORRECT_FROM, CORRECT_TO, RETRACT};
///
/// // Input: 7 CorrectFrom, 8 CorrectTo, 9 CorrectFrom, 10 CorrectTo; the filter kept 7 and 10.
/// let kept = [
///     InputRecord { op: CORRECT_FROM, offset: 7, input: 0 },
///     InputRecord { op: CORRECT_TO, offset: 10, input: 0 },
/// ];
/// let mut ops = [CORRECT_FROM, CORRECT_TO];
/// ChangelogRepair::default().repair(&kept, &mut ops, None);
/// assert_eq!(ops, [RETRACT, APPEND]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ChangelogRepair {
    /// The last output record already repaired (a CorrectTo's partner may be it).
    prev: Option<InputRecord>,
}

impl ChangelogRepair {
    /// Whether a batch ending with `last` must hold that record back until the next batch (or the end):
    /// a CorrectFrom's partner is the record after it.
    pub fn must_wait(last: InputRecord) -> bool {
        last.op == CORRECT_FROM
    }

    /// Repairs `ops` (one per record of `records`, the operation types about to be written) in place.
    ///
    /// `next` is the output record right after the last one of `records`, or `None` when there is none
    /// (end of the output). Only records whose operation type is the input's own are changed: an `op`
    /// computed by the query is written as it is.
    pub fn repair(&mut self, records: &[InputRecord], ops: &mut [i32], next: Option<InputRecord>) {
        for (i, (record, op)) in records.iter().zip(ops.iter_mut()).enumerate() {
            if *op != record.op {
                continue;
            }
            match record.op {
                CORRECT_FROM => {
                    let following = records.get(i + 1).copied().or(next);
                    let paired =
                        following.is_some_and(|f| f.op == CORRECT_TO && record.followed_by(&f));
                    if !paired {
                        *op = RETRACT;
                    }
                }
                CORRECT_TO => {
                    let preceding = if i == 0 {
                        self.prev
                    } else {
                        Some(records[i - 1])
                    };
                    let paired =
                        preceding.is_some_and(|p| p.op == CORRECT_FROM && p.followed_by(record));
                    if !paired {
                        *op = APPEND;
                    }
                }
                _ => {}
            }
        }
        if let Some(last) = records.last() {
            self.prev = Some(*last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Action {
        Append(i32),
        Retract(usize),
        Correct(usize, i32),
    }

    /// A valid changelog of values built from actions: (op, value) in offset order.
    fn changelog(actions: &[Action]) -> Vec<(i32, i32)> {
        let mut state: Vec<i32> = Vec::new();
        let mut log = Vec::new();
        for action in actions {
            match *action {
                Action::Append(v) => {
                    state.push(v);
                    log.push((APPEND, v));
                }
                Action::Retract(i) if !state.is_empty() => {
                    let v = state.remove(i % state.len());
                    log.push((RETRACT, v));
                }
                Action::Correct(i, w) if !state.is_empty() => {
                    let at = i % state.len();
                    let v = std::mem::replace(&mut state[at], w);
                    log.push((CORRECT_FROM, v));
                    log.push((CORRECT_TO, w));
                }
                _ => {}
            }
        }
        log
    }

    /// The multiset a changelog leaves behind, sorted.
    fn apply(log: &[(i32, i32)]) -> Vec<i32> {
        let mut state: Vec<i32> = Vec::new();
        for &(op, v) in log {
            if op == APPEND || op == CORRECT_TO {
                state.push(v);
            } else if let Some(at) = state.iter().position(|&x| x == v) {
                state.remove(at);
            } else {
                panic!("{op} of {v}, which is not in the result");
            }
        }
        state.sort_unstable();
        state
    }

    /// Filters with `keep`, then repairs in batches of `batch` records with hold-back.
    fn filter_and_repair(
        log: &[(i32, i32)],
        keep: impl Fn(i32) -> bool,
        batch: usize,
    ) -> Vec<(i32, i32)> {
        let kept: Vec<(InputRecord, i32)> = log
            .iter()
            .enumerate()
            .filter(|(_, (_, v))| keep(*v))
            .map(|(offset, &(op, v))| {
                (
                    InputRecord {
                        op,
                        offset: offset as i64,
                        input: 0,
                    },
                    v,
                )
            })
            .collect();
        let mut repair = ChangelogRepair::default();
        let mut out = Vec::new();
        let mut pending: Vec<(InputRecord, i32)> = Vec::new();
        for chunk in kept.chunks(batch.max(1)) {
            pending.extend_from_slice(chunk);
            let hold = pending
                .last()
                .is_some_and(|(r, _)| ChangelogRepair::must_wait(*r));
            let ready = if hold {
                pending.len() - 1
            } else {
                pending.len()
            };
            let next = if hold {
                pending.last().map(|(r, _)| *r)
            } else {
                None
            };
            let records: Vec<_> = pending[..ready].iter().map(|(r, _)| *r).collect();
            let mut ops: Vec<_> = records.iter().map(|r| r.op).collect();
            repair.repair(&records, &mut ops, next);
            out.extend(
                ops.into_iter()
                    .zip(pending[..ready].iter().map(|(_, v)| *v)),
            );
            pending.drain(..ready);
        }
        let records: Vec<_> = pending.iter().map(|(r, _)| *r).collect();
        let mut ops: Vec<_> = records.iter().map(|r| r.op).collect();
        repair.repair(&records, &mut ops, None);
        out.extend(ops.into_iter().zip(pending.iter().map(|(_, v)| *v)));
        out
    }

    fn actions() -> impl Strategy<Value = Vec<Action>> {
        prop::collection::vec(
            prop_oneof![
                (0..20i32).prop_map(Action::Append),
                any::<usize>().prop_map(Action::Retract),
                (any::<usize>(), 0..20i32).prop_map(|(i, w)| Action::Correct(i, w)),
            ],
            0..60,
        )
    }

    proptest! {
        #[test]
        fn filtered_changelog_yields_the_filtered_result(actions in actions(), threshold in 0..20i32, batch in 1..8usize) {
            let log = changelog(&actions);
            let keep = |v: i32| v >= threshold;
            let out = filter_and_repair(&log, keep, batch);
            let expected: Vec<i32> = apply(&log).into_iter().filter(|&v| keep(v)).collect();
            prop_assert_eq!(apply(&out), expected);
        }

        #[test]
        fn repaired_correction_pairs_are_adjacent(actions in actions(), threshold in 0..20i32, batch in 1..8usize) {
            let out = filter_and_repair(&changelog(&actions), |v| v >= threshold, batch);
            for (i, &(op, _)) in out.iter().enumerate() {
                if op == CORRECT_FROM {
                    prop_assert_eq!(out.get(i + 1).map(|r| r.0), Some(CORRECT_TO));
                }
                if op == CORRECT_TO {
                    prop_assert_eq!(i.checked_sub(1).map(|p| out[p].0), Some(CORRECT_FROM));
                }
            }
        }

        #[test]
        fn batch_size_does_not_change_the_repair(actions in actions(), threshold in 0..20i32, batch in 1..8usize) {
            let log = changelog(&actions);
            prop_assert_eq!(
                filter_and_repair(&log, |v| v >= threshold, batch),
                filter_and_repair(&log, |v| v >= threshold, usize::MAX)
            );
        }
    }

    #[test]
    fn query_computed_op_is_written_as_is() {
        let records = [InputRecord {
            op: CORRECT_FROM,
            offset: 1,
            input: 0,
        }];
        let mut ops = [APPEND];
        ChangelogRepair::default().repair(&records, &mut ops, None);
        assert_eq!(ops, [APPEND]);
    }
}
