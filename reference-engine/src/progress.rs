//! Progress reports sent while an operation runs (`*Progress` messages on the wire).

use std::fmt;

/// What an operation is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Opening inputs and the previous checkpoint, planning the query.
    Planning,
    /// Reading input records and computing output records.
    Executing,
    /// Writing the output data file.
    Writing,
    /// Writing the new checkpoint.
    Checkpointing,
    /// Finalising the previous query's state (MigrateQuery).
    Finalising,
}

impl Phase {
    /// The phase's name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Planning => "planning",
            Self::Executing => "executing",
            Self::Writing => "writing",
            Self::Checkpointing => "checkpointing",
            Self::Finalising => "finalising",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One progress report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// What the operation is doing.
    pub phase: Phase,
    /// Input records read so far, when known.
    pub rows_read: Option<u64>,
    /// Output records written so far, when known.
    pub rows_written: Option<u64>,
}

impl Progress {
    /// A report of `phase` with no counts.
    pub const fn phase(phase: Phase) -> Self {
        Self {
            phase,
            rows_read: None,
            rows_written: None,
        }
    }
}

/// Where an operation sends its progress reports.
///
/// Reporting never blocks and never fails: a sink that cannot keep up drops reports.
///
/// ```
/// use std::sync::Mutex;
/// use weir_reference_engine::{Phase, Progress, ProgressSink};
///
/// let seen = Mutex::new(Vec::new());
/// let sink = |progress: Progress| seen.lock().unwrap().push(progress.phase);
/// sink.report(Progress::phase(Phase::Planning));
/// assert_eq!(*seen.lock().unwrap(), vec![Phase::Planning]);
/// ```
pub trait ProgressSink: Send + Sync {
    /// Sends one report.
    fn report(&self, progress: Progress);
}

impl<F> ProgressSink for F
where
    F: Fn(Progress) + Send + Sync,
{
    fn report(&self, progress: Progress) {
        self(progress);
    }
}

/// A sink that drops every report.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn report(&self, _progress: Progress) {}
}
