//! An engine worker: a consumer that runs one transaction at a time (max_demand 1), reports its progress to
//! the hub and its outcome to the producer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::info;
use weir_gen_stage::{Consumer, ConsumerContext, Noreply, ProducerStage, StageRef, Subscription};

use super::progress::{ProgressEvent, ProgressHub};
use super::schedule::{Change, Done, Failure, PendingTransactions, Task, Timing};
use crate::commands::error::{tx_code, tx_hint};
use crate::scheduler::Completion;
use weir_dataset::progress::{PhaseTimes, Progress, Report};
use weir_transaction::{Context, TxOutcome};

/// An engine worker: runs one transaction at a time.
pub(super) struct Worker {
    pub(super) ctx: Context,
    pub(super) scheduler: StageRef<ProducerStage<PendingTransactions>>,
    pub(super) progress: StageRef<ProducerStage<ProgressHub>>,
}

impl Consumer for Worker {
    type Messages = ();
    type Event = Task;

    async fn handle_events(
        &mut self,
        events: Vec<Task>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for task in events {
            let dataset = task.dataset.clone();
            self.emit(ProgressEvent::Started {
                dataset: dataset.clone(),
            });
            let old_head = match self.ctx.storage.dataset(&dataset).head().await {
                Ok(head) => head.map(|h| h.to_string()),
                // The transaction itself reports an unreadable head.
                Err(_) => None,
            };
            let started = Instant::now();
            let hub = self.progress.clone();
            let reporting = dataset.clone();
            let clock = Arc::new(Mutex::new(PhaseTimes::default()));
            let ticking = clock.clone();
            let progress = Progress::new(move |report: Report| {
                if let Ok(mut c) = ticking.lock() {
                    c.saw(report.phase);
                }
                let event = ProgressEvent::Working {
                    dataset: reporting.clone(),
                    report,
                };
                // A hub that stopped (the pull is ending) misses a report, nothing else.
                let _ = hub.cast(event);
            });
            let outcome = self.ctx.with_progress(progress).run_once(&dataset).await;
            let mut change = None;
            let mut notices = Vec::new();
            let phases = match clock.lock() {
                Ok(mut c) => {
                    c.stop();
                    *c
                }
                Err(_) => PhaseTimes::default(),
            };
            let mut timing = Timing {
                total: started.elapsed(),
                engine: Duration::ZERO,
                phases,
            };
            let (completion, event, error) = match outcome {
                Ok(TxOutcome::Committed {
                    head,
                    records,
                    engine_time,
                    notices: seen,
                    ..
                }) => {
                    notices = seen;
                    timing.engine = engine_time;
                    change = Some(Change {
                        records,
                        old_head: old_head.clone(),
                        new_head: head.to_string(),
                    });
                    (
                        Completion::Committed,
                        ProgressEvent::Committed {
                            dataset: dataset.clone(),
                            records,
                            head: head.to_string(),
                            millis: timing.total.as_millis(),
                            engine_millis: engine_time.as_millis(),
                        },
                        None,
                    )
                }
                Ok(TxOutcome::UpToDate { notices: seen, .. }) => {
                    notices = seen;
                    (
                        Completion::UpToDate,
                        ProgressEvent::UpToDate {
                            dataset: dataset.clone(),
                        },
                        None,
                    )
                }
                Err(e) => {
                    let message = error_chain(&e);
                    // The summary says it once; the log has it for those who ask (`--log weir=info`).
                    info!(dataset = %dataset, error = %message, "transaction failed; the dataset keeps its previous head");
                    (
                        Completion::Failed(message.clone()),
                        ProgressEvent::Failed {
                            dataset: dataset.clone(),
                            message: message.clone(),
                        },
                        Some(Failure {
                            message,
                            code: tx_code(&e),
                            hint: tx_hint(&e),
                        }),
                    )
                }
            };
            self.emit(event);
            let _ = self.scheduler.cast(Done {
                dataset,
                completion,
                error,
                timing,
                change,
                notices,
            });
        }
        Noreply::none()
    }
}

impl Worker {
    fn emit(&self, event: ProgressEvent) {
        let _ = self.progress.cast(event);
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}
