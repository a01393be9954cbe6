//! The producer of a pull's transactions: it holds the [`Scheduler`] and emits a dataset's next transaction
//! only when the dataset is ready (never two of the same dataset at once, never before its inputs), through
//! a Partition dispatcher with one partition per dataset. Workers cast each [`Done`] back to it; when the
//! scheduler has nothing left, it sends the [`PullReport`].

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::oneshot;
use weir_gen_stage::{
    Msgs, Noreply, PartitionDispatcher, Producer, ProducerContext, ProducerOptions,
};

use crate::scheduler::{Completion, DatasetState, Scheduler};
use weir_dataset::progress::PhaseTimes;
use weir_ingest::files_glob::SourceNotice;

/// One transaction to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// The dataset.
    pub dataset: String,
}

/// A completion sent back to the producer.
#[derive(Debug)]
pub struct Done {
    pub(super) dataset: String,
    pub(super) completion: Completion,
    pub(super) error: Option<Failure>,
    pub(super) timing: Timing,
    pub(super) change: Option<Change>,
    pub(super) notices: Vec<SourceNotice>,
}

/// Why a dataset's transaction failed: the error's text, its exit code and its hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The error and its causes, as one line.
    pub message: String,
    /// Its exit code.
    pub code: u8,
    /// What helps, when something does.
    pub hint: Option<&'static str>,
}

/// What a pull changed in one dataset: the records its committed transactions added, and its head before
/// the first and after the last of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// Records added.
    pub records: u64,
    /// Head before the pull (`None` for a new dataset).
    pub old_head: Option<String>,
    /// Head after it.
    pub new_head: String,
}

/// Where a dataset's transactions spent their time during a pull.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// Wall time of its transactions, whatever their outcome.
    pub total: Duration,
    /// Of which inside engine operations (preprocess Raw queries, ExecuteTransform).
    pub engine: Duration,
    /// The same wall time by phase, as the transactions reported them.
    pub phases: PhaseTimes,
}

impl std::ops::AddAssign for Timing {
    fn add_assign(&mut self, other: Timing) {
        self.total += other.total;
        self.engine += other.engine;
        self.phases.add(&other.phases);
    }
}

/// The producer of pending transactions.
pub(super) struct PendingTransactions {
    scheduler: Scheduler,
    datasets: Vec<String>,
    errors: BTreeMap<String, Failure>,
    timings: BTreeMap<String, Timing>,
    changes: BTreeMap<String, Change>,
    notices: BTreeMap<String, Vec<SourceNotice>>,
    finished: Option<oneshot::Sender<PullReport>>,
}

/// How a pull ended.
#[derive(Debug, Clone)]
pub struct PullReport {
    /// Final state and committed transactions per dataset.
    pub states: Vec<(String, DatasetState, u64)>,
    /// Errors by dataset, with their exit codes and hints.
    pub errors: BTreeMap<String, Failure>,
    /// Time spent per dataset (datasets that ran no transaction are absent).
    pub timings: BTreeMap<String, Timing>,
    /// What changed per dataset (datasets that committed nothing are absent).
    pub changes: BTreeMap<String, Change>,
    /// Source files a root did not ingest, and why, as its last transaction saw them (roots with none are
    /// absent).
    pub notices: BTreeMap<String, Vec<SourceNotice>>,
}

impl PendingTransactions {
    /// A producer of `datasets`' transactions as `scheduler` allows them; `finished` gets the report.
    pub(super) fn new(
        scheduler: Scheduler,
        datasets: Vec<String>,
        finished: oneshot::Sender<PullReport>,
    ) -> Self {
        Self {
            scheduler,
            datasets,
            errors: BTreeMap::new(),
            timings: BTreeMap::new(),
            changes: BTreeMap::new(),
            notices: BTreeMap::new(),
            finished: Some(finished),
        }
    }

    fn ready(&mut self) -> Vec<Task> {
        let tasks: Vec<Task> = self
            .scheduler
            .take_ready()
            .into_iter()
            .map(|dataset| Task { dataset })
            .collect();
        if tasks.is_empty()
            && self.scheduler.is_finished()
            && let Some(tx) = self.finished.take()
        {
            let _ = tx.send(PullReport {
                states: self.scheduler.states(),
                errors: self.errors.clone(),
                timings: self.timings.clone(),
                changes: self.changes.clone(),
                notices: self.notices.clone(),
            });
        }
        tasks
    }
}

pub(super) type PendingTransactionsMessages = Msgs<(), (), Done>;

impl Producer for PendingTransactions {
    type Messages = PendingTransactionsMessages;
    type Event = Task;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<Task>, weir_gen_stage::StopReason> {
        let dispatcher = PartitionDispatcher::named(self.datasets.clone(), |t: Task| {
            let key = t.dataset.clone();
            Some((t, key))
        });
        Ok(ProducerOptions::new().dispatcher(dispatcher))
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<Task> {
        Noreply::Emit(self.ready())
    }

    async fn handle_cast(
        &mut self,
        done: Done,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<Task> {
        if let Some(e) = done.error {
            self.errors.insert(done.dataset.clone(), e);
        }
        *self.timings.entry(done.dataset.clone()).or_default() += done.timing;
        // A root's last transaction saw its source as the pull leaves it.
        if done.notices.is_empty() {
            self.notices.remove(&done.dataset);
        } else {
            self.notices.insert(done.dataset.clone(), done.notices);
        }
        if let Some(change) = done.change {
            match self.changes.get_mut(&done.dataset) {
                Some(total) => {
                    total.records += change.records;
                    total.new_head = change.new_head;
                }
                None => {
                    self.changes.insert(done.dataset.clone(), change);
                }
            }
        }
        self.scheduler.complete(&done.dataset, done.completion);
        Noreply::Emit(self.ready())
    }
}
