//! What a running transaction reports while it works: its phase and how far it is, for `weir pull`'s
//! progress bars and its `--format json` event log.
//!
//! A transaction reports through a [`Progress`] handle: cheap to clone, a no-op when nobody listens, and
//! rate-limited so a phase reporting every batch costs one atomic load most of the time. A phase change and
//! the last count of a phase always go through.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use weir_dataset::progress::{Phase, Progress, Report};
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let sink = seen.clone();
//! let progress = Progress::new(move |r: Report| sink.lock().unwrap().push(r));
//! progress.phase(Phase::Ingest);
//! // Within the interval of the last report: dropped.
//! progress.report(Report::new(Phase::Ingest).rows(10).bytes(400).total_bytes(Some(4000)));
//! // The phase's last counts always go through.
//! progress.finish(Report::new(Phase::Ingest).rows(100).bytes(4000).total_bytes(Some(4000)));
//! let seen = seen.lock().unwrap();
//! assert_eq!(seen.len(), 2);
//! assert_eq!(seen[0].phase, Phase::Ingest);
//! assert_eq!(seen[1].done_of(), Some((4000, 4000)));
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The steps of a transaction, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Copying a remote source file to local scratch space.
    Fetch,
    /// Reading, checking and merging a root's source records into a new slice.
    Ingest,
    /// Checking the input slices a derivative's engine reads against their hashes.
    Stage,
    /// The engine runs (a derivative's transform, a root's preprocess query).
    Engine,
    /// Checking the engine's output file against the contract and hashing it.
    Check,
    /// Storing the data, checkpoint and blocks, then moving the head.
    Commit,
}

impl Phase {
    /// Every phase, in the order they run.
    pub const ALL: [Phase; 6] = [
        Self::Fetch,
        Self::Ingest,
        Self::Stage,
        Self::Engine,
        Self::Check,
        Self::Commit,
    ];

    /// Its place in [`Phase::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The phase's name as shown to users.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Fetch => "fetch",
            Self::Ingest => "ingest",
            Self::Stage => "stage",
            Self::Engine => "engine",
            Self::Check => "check",
            Self::Commit => "commit",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a transaction is: its phase and the counts of that phase, where they are known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The phase.
    pub phase: Phase,
    /// What the phase is doing in its own words (an engine's Progress phase, e.g. `executing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Records done so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Bytes done so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Records the phase will do, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_rows: Option<u64>,
    /// Bytes the phase will do, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
}

impl Report {
    /// A report of `phase` with no counts.
    pub fn new(phase: Phase) -> Self {
        Self {
            phase,
            detail: None,
            rows: None,
            bytes: None,
            total_rows: None,
            total_bytes: None,
        }
    }

    /// With a count of records done.
    pub fn rows(mut self, rows: u64) -> Self {
        self.rows = Some(rows);
        self
    }

    /// With a count of bytes done.
    pub fn bytes(mut self, bytes: u64) -> Self {
        self.bytes = Some(bytes);
        self
    }

    /// With the records the phase will do.
    pub fn total_rows(mut self, total: Option<u64>) -> Self {
        self.total_rows = total;
        self
    }

    /// With the bytes the phase will do.
    pub fn total_bytes(mut self, total: Option<u64>) -> Self {
        self.total_bytes = total;
        self
    }

    /// With the phase's own words.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The fraction done and what it counts, from bytes when both are known, else from records.
    pub fn done_of(&self) -> Option<(u64, u64)> {
        match (self.bytes, self.total_bytes, self.rows, self.total_rows) {
            (Some(b), Some(t), _, _) if t > 0 => Some((b.min(t), t)),
            (_, _, Some(r), Some(t)) if t > 0 => Some((r.min(t), t)),
            _ => None,
        }
    }
}

/// Where a transaction's time went: wall time per phase, fed the reports as they come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseTimes {
    /// Time per phase, indexed by [`Phase::index`].
    pub times: [Duration; 6],
    running: Option<(Phase, Instant)>,
}

impl PhaseTimes {
    /// A report arrived: a new phase closes the running one.
    pub fn saw(&mut self, phase: Phase) {
        let now = Instant::now();
        match self.running {
            Some((p, _)) if p == phase => {}
            Some((p, since)) => {
                self.times[p.index()] += now - since;
                self.running = Some((phase, now));
            }
            None => self.running = Some((phase, now)),
        }
    }

    /// The transaction ended: closes the running phase.
    pub fn stop(&mut self) {
        if let Some((p, since)) = self.running.take() {
            self.times[p.index()] += since.elapsed();
        }
    }

    /// Adds another transaction's times.
    pub fn add(&mut self, other: &PhaseTimes) {
        for (a, b) in self.times.iter_mut().zip(other.times) {
            *a += b;
        }
    }
}

/// How often a phase's counts go through at most; phase changes always do.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(100);

type Sink = dyn Fn(Report) + Send + Sync;

/// Where a transaction sends its [`Report`]s (see the module docs).
#[derive(Clone, Default)]
pub struct Progress {
    sink: Option<Arc<Sink>>,
    /// Microseconds since `epoch` of the last report that went through.
    last: Arc<AtomicU64>,
    epoch: Option<Instant>,
    /// The engine's phase last reported: a change in it always goes through.
    engine_phase: Arc<std::sync::Mutex<Option<String>>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("listened", &self.sink.is_some())
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// Reports to nobody.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reports to `sink`.
    pub fn new(sink: impl Fn(Report) + Send + Sync + 'static) -> Self {
        Self {
            sink: Some(Arc::new(sink)),
            last: Arc::new(AtomicU64::new(0)),
            epoch: Some(Instant::now()),
            engine_phase: Arc::default(),
        }
    }

    /// Whether anyone listens (a caller may skip counting when nobody does).
    pub fn is_listened(&self) -> bool {
        self.sink.is_some()
    }

    /// A new phase starts: always reported.
    pub fn phase(&self, phase: Phase) {
        self.send(Report::new(phase), true);
    }

    /// The counts of the running phase: reported at most every [`REPORT_INTERVAL`].
    pub fn report(&self, report: Report) {
        self.send(report, false);
    }

    /// The last counts of a phase: always reported.
    pub fn finish(&self, report: Report) {
        self.send(report, true);
    }

    /// An engine's Progress message: its phase in its own words, the input records it has read of `total`.
    /// An engine that sends empty Progress messages (ODF's have no fields) still shows it is alive. A change
    /// of the engine's phase always goes through.
    pub fn engine(
        &self,
        phase: Option<&str>,
        rows_read: Option<u64>,
        rows_written: Option<u64>,
        total: Option<u64>,
    ) {
        let mut r = Report::new(Phase::Engine).total_rows(total);
        r.rows = rows_read;
        r.detail = match (phase, rows_written) {
            (Some(p), Some(w)) => Some(format!("{p}, {w} written")),
            (Some(p), None) => Some(p.to_string()),
            (None, Some(w)) => Some(format!("{w} written")),
            (None, None) => None,
        };
        let changed = match self.engine_phase.lock() {
            Ok(mut last) if last.as_deref() != phase => {
                *last = phase.map(str::to_string);
                true
            }
            _ => false,
        };
        if changed {
            self.finish(r);
        } else {
            self.report(r);
        }
    }

    fn send(&self, report: Report, always: bool) {
        let (Some(sink), Some(epoch)) = (&self.sink, self.epoch) else {
            return;
        };
        let now = u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let last = self.last.load(Ordering::Relaxed);
        let due = now.saturating_sub(last) >= REPORT_INTERVAL.as_micros() as u64;
        if !always && !due {
            return;
        }
        // Only one of several threads reporting at once goes through when it is not forced.
        if !always
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if always {
            self.last.store(now, Ordering::Relaxed);
        }
        sink(report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn recording() -> (Progress, Arc<Mutex<Vec<Report>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let progress = Progress::new(move |r| sink.lock().unwrap().push(r));
        (progress, seen)
    }

    #[test]
    fn counts_within_the_interval_are_dropped_but_phases_and_finishes_go_through() {
        let (progress, seen) = recording();
        progress.phase(Phase::Ingest);
        for i in 0..1000 {
            progress.report(Report::new(Phase::Ingest).rows(i));
        }
        progress.finish(Report::new(Phase::Ingest).rows(1000));
        progress.phase(Phase::Commit);
        let seen = seen.lock().unwrap();
        // A loop of 1000 reports takes far less than one interval: at most the first of them went through.
        assert!(seen.len() <= 4, "{seen:?}");
        assert_eq!(seen[0], Report::new(Phase::Ingest));
        assert_eq!(seen[seen.len() - 2].rows, Some(1000));
        assert_eq!(seen[seen.len() - 1].phase, Phase::Commit);
    }

    #[test]
    fn a_report_after_the_interval_goes_through() {
        let (progress, seen) = recording();
        progress.phase(Phase::Engine);
        std::thread::sleep(REPORT_INTERVAL + Duration::from_millis(5));
        progress.report(Report::new(Phase::Engine).rows(5));
        assert_eq!(seen.lock().unwrap().last().unwrap().rows, Some(5));
    }

    #[test]
    fn nobody_listening_costs_nothing_and_says_so() {
        let progress = Progress::none();
        assert!(!progress.is_listened());
        progress.phase(Phase::Stage);
        progress.report(Report::new(Phase::Stage).bytes(3));
    }

    #[test]
    fn done_of_prefers_bytes_and_caps_at_the_total() {
        let r = Report::new(Phase::Ingest)
            .rows(5)
            .total_rows(Some(10))
            .bytes(120)
            .total_bytes(Some(100));
        assert_eq!(r.done_of(), Some((100, 100)));
        let r = Report::new(Phase::Check).rows(5).total_rows(Some(10));
        assert_eq!(r.done_of(), Some((5, 10)));
        assert_eq!(Report::new(Phase::Commit).done_of(), None);
    }
}
