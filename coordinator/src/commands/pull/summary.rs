//! What `weir pull` prints when it ends: per dataset its state, the records added and the old and new
//! head, where its time went (text and `--format json`), and the totals.

use std::time::Duration;

use serde_json::json;

use super::plugin::PluginOutcome;
use super::schedule::PullReport;
use crate::commands::Output;
use crate::scheduler::DatasetState;
use weir_dataset::progress::Phase;
use weir_ingest::files_glob::SourceNotice;

/// The summary of a pull that took `elapsed` (wall time) with up to `workers` transactions at once.
///
/// Time inside transactions is given per dataset (its transactions' wall time, and the part of it spent
/// in engine operations) and summed over the datasets: with several workers the sums exceed the pull's
/// wall time, so the totals line says they are sums, and the engine time is always part of the
/// transaction time it is compared with.
pub(super) fn summary(
    report: &PullReport,
    elapsed: Duration,
    workers: usize,
    plugin: Option<&PluginOutcome>,
) -> Output {
    let engine_time: Duration = report.timings.values().map(|t| t.engine).sum();
    let transaction_time: Duration = report.timings.values().map(|t| t.total).sum();
    let mut lines = Vec::new();
    let mut items = Vec::new();
    for (name, state, transactions) in &report.states {
        let (what, code, error, because) = match state {
            DatasetState::UpToDate => (
                format!("up to date ({transactions} transaction(s))"),
                "upToDate",
                None,
                None,
            ),
            DatasetState::Failed(m) => (format!("FAILED: {m}"), "failed", Some(m), None),
            DatasetState::Skipped { because } => (
                format!("skipped: input `{because}` failed"),
                "skipped",
                None,
                Some(because),
            ),
            DatasetState::Pending | DatasetState::InFlight => {
                (format!("{state:?}"), "unfinished", None, None)
            }
        };
        let timing = report.timings.get(name).copied().unwrap_or_default();
        let change = report.changes.get(name);
        let timed = if timing.total.is_zero() {
            String::new()
        } else {
            format!(
                " [{:.2} s, {:.2} s of it in engines]",
                timing.total.as_secs_f64(),
                timing.engine.as_secs_f64()
            )
        };
        match change {
            Some(c) => lines.push(format!(
                "{name}: {what}, {} record(s) added, head {} -> {}{timed}",
                c.records,
                c.old_head.as_deref().map_or("(new)", short_hash),
                short_hash(&c.new_head)
            )),
            None => lines.push(format!("{name}: {what}{timed}")),
        }
        let notices = report
            .notices
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for n in notices {
            lines.push(format!("  {}: {n}", notice_label(n)));
        }
        items.push(json!({
            "dataset": name,
            "state": code,
            "error": error,
            "exitCode": report.errors.get(name).map(|f| f.code),
            "hint": report.errors.get(name).and_then(|f| f.hint),
            "skippedBecause": because,
            "summary": what,
            "transactions": transactions,
            "recordsAdded": change.map_or(0, |c| c.records),
            "oldHead": change.and_then(|c| c.old_head.clone()),
            "newHead": change.map(|c| c.new_head.clone()),
            "sourceNotices": notices
                .iter()
                .map(|n| {
                    let mut v = serde_json::to_value(n).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("message".into(), json!(n.to_string()));
                    }
                    v
                })
                .collect::<Vec<_>>(),
            "millis": millis(timing.total),
            "engineMillis": millis(timing.engine),
            "phaseMillis": Phase::ALL
                .iter()
                .map(|p| (p.as_str().to_string(), json!(millis(timing.phases.times[p.index()]))))
                .collect::<serde_json::Map<_, _>>(),
        }));
    }
    lines.push(format!(
        "pulled {} dataset(s) in {:.2} s (wall time); their transactions took {:.2} s summed over the datasets (up to {workers} at once), {:.2} s of it in engines",
        report.states.len(),
        elapsed.as_secs_f64(),
        transaction_time.as_secs_f64(),
        engine_time.as_secs_f64()
    ));
    if let Some(p) = plugin {
        lines.push(format!(
            "dispatcher plugin {}: {} event(s) delivered",
            p.path.display(),
            p.delivered
        ));
        if let Some(m) = &p.metrics {
            lines.push("dispatcher plugin metrics:".to_string());
            lines.push(m.trim_end().to_string());
        }
    }
    Output {
        text: lines.join("\n"),
        json: json!({
            "datasets": items,
            "millis": millis(elapsed),
            "workers": workers,
            // Sums of the per-dataset figures as printed, so that they add up exactly.
            "transactionMillis": report.timings.values().map(|t| millis(t.total)).sum::<u64>(),
            "engineMillis": report.timings.values().map(|t| millis(t.engine)).sum::<u64>(),
            "pluginMetrics": plugin.and_then(|p| p.metrics.clone()),
            "pluginEventsDelivered": plugin.map(|p| p.delivered),
        }),
    }
}

/// What a pull committed, in words, for an error that ends it after its transactions ran: the datasets
/// that committed new blocks, and those that failed or were skipped.
pub(super) fn committed_in_words(report: &PullReport) -> String {
    let committed: Vec<&str> = report.changes.keys().map(String::as_str).collect();
    let unchanged = report
        .states
        .iter()
        .filter(|(name, state, _)| {
            matches!(state, DatasetState::UpToDate) && !report.changes.contains_key(name)
        })
        .count();
    let mut words = if committed.is_empty() {
        "the pull committed nothing".to_string()
    } else {
        format!(
            "the pull committed new blocks to {} dataset(s): {}",
            committed.len(),
            committed.join(", ")
        )
    };
    if unchanged > 0 {
        words.push_str(&format!("; {unchanged} dataset(s) were already up to date"));
    }
    if !report.errors.is_empty() {
        words.push_str(&format!(
            "; {} failed (keeping their previous head): {}",
            report.errors.len(),
            report
                .errors
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    words
}

/// How a summary line introduces a source file that was not ingested.
fn notice_label(n: &SourceNotice) -> &'static str {
    match n {
        SourceNotice::Unsettled { .. } => "waiting",
        SourceNotice::Late { .. } => "not ingested (late)",
        SourceNotice::ChangedAfterIngest { .. } => "not ingested (changed)",
    }
}

/// The end of a block hash, enough to tell heads apart in a summary line (`weir log` shows them whole).
fn short_hash(hash: &str) -> &str {
    hash.get(hash.len().saturating_sub(12)..).unwrap_or(hash)
}

/// Whole milliseconds, for the JSON summary.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
