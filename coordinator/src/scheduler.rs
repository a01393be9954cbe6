//! Which dataset's transaction runs next during a pull: a sans-IO state machine.
//!
//! A dataset is *ready* when it is not in flight, not known to be up to date, and every input it reads
//! (among the datasets being pulled) is up to date. A committed transaction makes the dataset itself and
//! every dataset reading it pending again (there may be more to do); a failure fails the dataset and skips
//! everything downstream of it. At most one transaction per dataset is ever in flight.

use std::collections::BTreeMap;

/// Where a dataset is in the pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetState {
    /// May have work; waits for its inputs.
    Pending,
    /// A transaction is running.
    InFlight,
    /// Nothing left to do.
    UpToDate,
    /// A transaction failed.
    Failed(String),
    /// Not run because an input failed.
    Skipped {
        /// The failed input.
        because: String,
    },
}

/// How a transaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Blocks were committed.
    Committed,
    /// Nothing to do.
    UpToDate,
    /// It failed.
    Failed(String),
}

/// The pull scheduler.
///
/// ```
/// use weir_cli::scheduler::{Completion, Scheduler};
/// let mut s = Scheduler::new(vec!["raw".into(), "clean".into()], |d| {
///     if d == "clean" { vec!["raw".to_string()] } else { vec![] }
/// });
/// assert_eq!(s.take_ready(), vec!["raw"]);
/// s.complete("raw", Completion::Committed);
/// assert_eq!(s.take_ready(), vec!["raw"]);
/// s.complete("raw", Completion::UpToDate);
/// assert_eq!(s.take_ready(), vec!["clean"]);
/// s.complete("clean", Completion::UpToDate);
/// assert!(s.is_finished());
/// ```
#[derive(Debug, Clone)]
pub struct Scheduler {
    order: Vec<String>,
    inputs: BTreeMap<String, Vec<String>>,
    state: BTreeMap<String, DatasetState>,
    transactions: BTreeMap<String, u64>,
}

impl Scheduler {
    /// Datasets in dependency order and a function giving each one's inputs.
    pub fn new(order: Vec<String>, inputs_of: impl Fn(&str) -> Vec<String>) -> Self {
        let inputs = order
            .iter()
            .map(|d| {
                (
                    d.clone(),
                    inputs_of(d)
                        .into_iter()
                        .filter(|i| order.contains(i))
                        .collect(),
                )
            })
            .collect();
        let state = order
            .iter()
            .map(|d| (d.clone(), DatasetState::Pending))
            .collect();
        Self {
            order,
            inputs,
            state,
            transactions: BTreeMap::new(),
        }
    }

    /// The datasets that may start now, in dependency order; they become in flight.
    pub fn take_ready(&mut self) -> Vec<String> {
        let ready: Vec<String> = self
            .order
            .iter()
            .filter(|d| self.state[*d] == DatasetState::Pending)
            .filter(|d| {
                self.inputs[*d]
                    .iter()
                    .all(|i| self.state[i] == DatasetState::UpToDate)
            })
            .cloned()
            .collect();
        for d in &ready {
            self.state.insert(d.clone(), DatasetState::InFlight);
        }
        ready
    }

    /// A transaction of `dataset` ended.
    pub fn complete(&mut self, dataset: &str, completion: Completion) {
        if self.state.get(dataset) != Some(&DatasetState::InFlight) {
            return;
        }
        match completion {
            Completion::Committed => {
                *self.transactions.entry(dataset.to_string()).or_default() += 1;
                self.state
                    .insert(dataset.to_string(), DatasetState::Pending);
                self.reopen_dependents(dataset);
            }
            Completion::UpToDate => {
                self.state
                    .insert(dataset.to_string(), DatasetState::UpToDate);
            }
            Completion::Failed(message) => {
                self.state
                    .insert(dataset.to_string(), DatasetState::Failed(message));
                self.skip_dependents(dataset, dataset);
            }
        }
    }

    fn dependents(&self, dataset: &str) -> Vec<String> {
        self.order
            .iter()
            .filter(|d| self.inputs[*d].iter().any(|i| i == dataset))
            .cloned()
            .collect()
    }

    fn reopen_dependents(&mut self, dataset: &str) {
        for d in self.dependents(dataset) {
            if self.state[&d] == DatasetState::UpToDate {
                self.state.insert(d.clone(), DatasetState::Pending);
                self.reopen_dependents(&d);
            }
        }
    }

    fn skip_dependents(&mut self, dataset: &str, because: &str) {
        for d in self.dependents(dataset) {
            if matches!(
                self.state[&d],
                DatasetState::Pending | DatasetState::UpToDate
            ) {
                self.state.insert(
                    d.clone(),
                    DatasetState::Skipped {
                        because: because.to_string(),
                    },
                );
                self.skip_dependents(&d, because);
            }
        }
    }

    /// Nothing pending or in flight.
    pub fn is_finished(&self) -> bool {
        self.state
            .values()
            .all(|s| !matches!(s, DatasetState::Pending | DatasetState::InFlight))
    }

    /// Final states in dependency order.
    pub fn states(&self) -> Vec<(String, DatasetState, u64)> {
        self.order
            .iter()
            .map(|d| {
                (
                    d.clone(),
                    self.state[d].clone(),
                    self.transactions.get(d).copied().unwrap_or(0),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn diamond() -> Scheduler {
        // raw -> a, raw -> b, (a, b) -> c
        Scheduler::new(
            vec!["raw".into(), "a".into(), "b".into(), "c".into()],
            |d| match d {
                "a" | "b" => vec!["raw".into()],
                "c" => vec!["a".into(), "b".into()],
                _ => vec![],
            },
        )
    }

    #[test]
    fn independent_datasets_run_together_once_their_input_is_up_to_date() {
        let mut s = diamond();
        assert_eq!(s.take_ready(), ["raw"]);
        assert!(
            s.take_ready().is_empty(),
            "one transaction per dataset at a time"
        );
        s.complete("raw", Completion::UpToDate);
        assert_eq!(s.take_ready(), ["a", "b"]);
        s.complete("a", Completion::UpToDate);
        assert!(s.take_ready().is_empty(), "c waits for b");
        s.complete("b", Completion::UpToDate);
        assert_eq!(s.take_ready(), ["c"]);
    }

    #[test]
    fn a_failure_skips_everything_downstream_and_the_pull_finishes() {
        let mut s = diamond();
        s.take_ready();
        s.complete("raw", Completion::UpToDate);
        s.take_ready();
        s.complete("a", Completion::Failed("boom".into()));
        s.complete("b", Completion::UpToDate);
        assert!(s.take_ready().is_empty());
        assert!(s.is_finished());
        assert_eq!(
            s.states()[3].1,
            DatasetState::Skipped {
                because: "a".into()
            }
        );
    }

    proptest! {
        /// Whatever the outcomes, no dataset is ever in flight twice, inputs are up to date before a
        /// dataset starts, and the pull finishes.
        #[test]
        fn every_pull_finishes_with_inputs_first(outcomes in proptest::collection::vec(0u8..3, 1..60)) {
            let mut s = diamond();
            let mut outcomes = outcomes.into_iter();
            let mut in_flight: Vec<String> = Vec::new();
            for _ in 0..2000 {
                for d in s.take_ready() {
                    prop_assert!(!in_flight.contains(&d));
                    for i in &s.inputs[&d] {
                        prop_assert_eq!(&s.state[i], &DatasetState::UpToDate);
                    }
                    in_flight.push(d);
                }
                let Some(d) = in_flight.pop() else { break };
                let c = match outcomes.next() {
                    Some(0) => Completion::Committed,
                    Some(1) => Completion::Failed("x".into()),
                    _ => Completion::UpToDate,
                };
                s.complete(&d, c);
            }
            prop_assert!(s.is_finished());
        }
    }
}
