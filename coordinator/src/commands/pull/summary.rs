//! What `weir pull` prints when it ends: per dataset its state, the records added and the old and new
//! head, where its time went (text and `--format json`), and the totals.

use std::time::Duration;

use serde_json::json;

use super::plugin::PluginOutcome;
use super::schedule::PullReport;
use crate::commands::Output;
use crate::scheduler::DatasetState;
use weir_dataset::progress::Phase;

/// The summary of a pull that took `elapsed`, `engine_time` of it in engines.
pub(super) fn summary(
    report: &PullReport,
    elapsed: Duration,
    engine_time: Duration,
    plugin: Option<&PluginOutcome>,
) -> Output {
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
        match change {
            Some(c) => lines.push(format!(
                "{name}: {what}, {} record(s) added, head {} -> {}",
                c.records,
                c.old_head.as_deref().map_or("(new)", short_hash),
                short_hash(&c.new_head)
            )),
            None => lines.push(format!("{name}: {what}")),
        }
        items.push(json!({
            "dataset": name,
            "state": code,
            "error": error,
            "exitCode": report.errors.get(name).map(|(_, c)| *c),
            "skippedBecause": because,
            "summary": what,
            "transactions": transactions,
            "recordsAdded": change.map_or(0, |c| c.records),
            "oldHead": change.and_then(|c| c.old_head.clone()),
            "newHead": change.map(|c| c.new_head.clone()),
            "millis": millis(timing.total),
            "engineMillis": millis(timing.engine),
            "phaseMillis": Phase::ALL
                .iter()
                .map(|p| (p.as_str().to_string(), json!(millis(timing.phases.times[p.index()]))))
                .collect::<serde_json::Map<_, _>>(),
        }));
    }
    lines.push(format!(
        "pulled {} dataset(s) in {:.2} s, {:.2} s of it in engines",
        report.states.len(),
        elapsed.as_secs_f64(),
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
            "engineMillis": millis(engine_time),
            "pluginMetrics": plugin.and_then(|p| p.metrics.clone()),
            "pluginEventsDelivered": plugin.map(|p| p.delivered),
        }),
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
