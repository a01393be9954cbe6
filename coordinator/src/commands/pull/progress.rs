//! What a pull shows while it runs: workers cast [`ProgressEvent`]s to the [`ProgressHub`], whose Broadcast
//! dispatcher hands every event to the [`Renderer`] (one indicatif line per dataset: its phase, a bar with
//! an ETA when the phase knows its size, counts otherwise) and to a dispatcher plugin's branch, if any.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use weir_gen_stage::{
    BroadcastDispatcher, Consumer, ConsumerContext, Msgs, Noreply, Producer, ProducerContext,
    ProducerOptions, Subscription,
};

use weir_dataset::progress::Report;

/// What workers tell the progress hub.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ProgressEvent {
    /// A transaction started.
    Started {
        /// The dataset.
        dataset: String,
    },
    /// A transaction committed.
    Committed {
        /// The dataset.
        dataset: String,
        /// Records added.
        records: u64,
        /// New head.
        head: String,
        /// Milliseconds spent.
        millis: u128,
        /// Of which inside the engine.
        engine_millis: u128,
    },
    /// How far a running transaction is.
    Working {
        /// The dataset.
        dataset: String,
        /// Its phase and counts.
        #[serde(flatten)]
        report: Report,
    },
    /// Nothing to do.
    UpToDate {
        /// The dataset.
        dataset: String,
    },
    /// It failed.
    Failed {
        /// The dataset.
        dataset: String,
        /// Why.
        message: String,
    },
}

impl ProgressEvent {
    pub(super) fn dataset(&self) -> &str {
        match self {
            ProgressEvent::Started { dataset }
            | ProgressEvent::Working { dataset, .. }
            | ProgressEvent::Committed { dataset, .. }
            | ProgressEvent::UpToDate { dataset }
            | ProgressEvent::Failed { dataset, .. } => dataset,
        }
    }
}

/// Progress events in, broadcast to every renderer.
pub(super) struct ProgressHub;

pub(super) type ProgressHubMessages = Msgs<(), (), ProgressEvent>;

impl Producer for ProgressHub {
    type Messages = ProgressHubMessages;
    type Event = ProgressEvent;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<ProgressEvent>, weir_gen_stage::StopReason> {
        Ok(ProducerOptions::new().dispatcher(BroadcastDispatcher::new()))
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<ProgressEvent> {
        Noreply::none()
    }

    async fn handle_cast(
        &mut self,
        event: ProgressEvent,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<ProgressEvent> {
        Noreply::Emit(vec![event])
    }
}

/// Progress bars, one per dataset, with the phase each shows.
pub(super) struct Renderer {
    pub(super) bars: BTreeMap<
        String,
        (
            indicatif::ProgressBar,
            Option<weir_dataset::progress::Phase>,
        ),
    >,
    pub(super) multi: indicatif::MultiProgress,
}

impl Consumer for Renderer {
    type Messages = ();
    type Event = ProgressEvent;

    async fn handle_events(
        &mut self,
        events: Vec<ProgressEvent>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for e in events {
            let line = self.bars.entry(e.dataset().to_string()).or_insert_with(|| {
                let b = self.multi.add(indicatif::ProgressBar::new_spinner());
                b.set_style(spinner_style());
                b.set_prefix(e.dataset().to_string());
                b.enable_steady_tick(Duration::from_millis(120));
                (b, None)
            });
            let (bar, shown) = (line.0.clone(), &mut line.1);
            let phase_changed = match &e {
                ProgressEvent::Working { report, .. } => {
                    shown.replace(report.phase) != Some(report.phase)
                }
                _ => {
                    *shown = None;
                    false
                }
            };
            match &e {
                ProgressEvent::Started { .. } => bar.set_message("starting"),
                ProgressEvent::Working { report, .. } => show(&bar, report, phase_changed),
                ProgressEvent::Committed {
                    records,
                    millis,
                    engine_millis,
                    ..
                } => {
                    bar.set_style(spinner_style());
                    bar.set_message(format!(
                        "committed {records} record(s) in {millis} ms (engine {engine_millis} ms)"
                    ));
                }
                ProgressEvent::UpToDate { .. } => {
                    bar.set_style(spinner_style());
                    bar.finish_with_message("up to date")
                }
                ProgressEvent::Failed { message, .. } => {
                    bar.set_style(spinner_style());
                    bar.finish_with_message(format!("FAILED: {message}"))
                }
            }
        }
        Noreply::none()
    }
}

/// A dataset's line while its size is unknown: a spinner and what it is doing.
fn spinner_style() -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template("{spinner} {prefix:<24} {msg}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner())
}

/// A dataset's line once the phase knows how much it has to do: a bar, the count, the rate and an ETA.
fn bar_style(bytes: bool) -> indicatif::ProgressStyle {
    let counts = if bytes {
        "{binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, eta {eta})"
    } else {
        "{human_pos}/{human_len} records (eta {eta})"
    };
    indicatif::ProgressStyle::with_template(&format!(
        "{{spinner}} {{prefix:<24}} {{msg}} [{{bar:20}}] {counts}"
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
}

/// Shows one report on a dataset's line: the phase (and the engine's own words), then a bar with an ETA when
/// the phase's size is known, the counts so far otherwise.
fn show(bar: &indicatif::ProgressBar, report: &Report, phase_changed: bool) {
    let mut msg = report.phase.as_str().to_string();
    if let Some(d) = &report.detail {
        msg.push_str(&format!(" ({d})"));
    }
    match report.done_of() {
        Some((done, total)) => {
            let bytes = report.total_bytes.is_some_and(|t| t > 0) && report.bytes.is_some();
            if phase_changed || bar.length() != Some(total) {
                bar.set_style(bar_style(bytes));
                bar.set_length(total);
                bar.reset_eta();
            }
            if bytes && let Some(rows) = report.rows {
                msg.push_str(&format!(", {rows} records"));
            }
            bar.set_position(done);
        }
        None => {
            if phase_changed || bar.length().is_some() {
                bar.set_style(spinner_style());
                bar.unset_length();
            }
            match (report.rows, report.bytes) {
                (Some(r), Some(b)) => {
                    msg.push_str(&format!(", {r} records, {}", indicatif::BinaryBytes(b)))
                }
                (Some(r), None) => msg.push_str(&format!(", {r} records")),
                (None, Some(b)) => msg.push_str(&format!(", {}", indicatif::BinaryBytes(b))),
                (None, None) => {}
            }
        }
    }
    bar.set_message(msg);
}

/// One dataset's progress line outside a pull (`weir ingest`): the line a pull draws for it, on stderr when
/// it is a terminal.
pub(crate) struct ProgressLine {
    bar: indicatif::ProgressBar,
    shown: std::sync::Mutex<Option<weir_dataset::progress::Phase>>,
}

impl ProgressLine {
    /// A line for `dataset`; drawn nowhere when `hidden`.
    pub(crate) fn new(dataset: &str, hidden: bool) -> Self {
        let bar = if hidden {
            indicatif::ProgressBar::hidden()
        } else {
            indicatif::ProgressBar::new_spinner()
        };
        bar.set_style(spinner_style());
        bar.set_prefix(dataset.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar.set_message("starting");
        Self {
            bar,
            shown: std::sync::Mutex::new(None),
        }
    }

    /// Shows a transaction's report.
    pub(crate) fn show(&self, report: &Report) {
        let changed = match self.shown.lock() {
            Ok(mut shown) => shown.replace(report.phase) != Some(report.phase),
            Err(_) => true,
        };
        show(&self.bar, report, changed);
    }

    /// Removes the line.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
