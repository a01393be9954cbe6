//! Fault injection for crash tests: `WEIR_FAULT_AT=<step>[:<dataset>]` aborts the process at that step of a
//! transaction, as a crash would.
//!
//! Steps, in transaction order: `after-read` (source read / engine done), `after-data` (data slice
//! written), `after-checkpoint` (checkpoint written), `after-blocks` (blocks written, head not moved),
//! `after-head` (head moved). `weir upgrade` has its own ([`UPGRADE_STEPS`]); `rename`, `delete` and `reset`
//! have `intent-recorded` and `intent-step-N`, one per step they carry out. A root's Append ingest also has
//! `during-read`, passed after each batch of the source file is checked (so a test can change the file
//! while it is read). With `WEIR_FAULT_PAUSE=<file>` the process waits at the step until the file exists
//! instead of aborting.

/// The steps a transaction passes, in order.
pub const STEPS: &[&str] = &[
    "after-read",
    "after-data",
    "after-checkpoint",
    "after-blocks",
    "after-head",
];

/// The steps of `weir upgrade`, per dataset: `upgrade-after-blocks` (its backup and new blocks written, no
/// head moved yet) and `upgrade-after-head` (its head moved, its old block files not yet removed).
pub const UPGRADE_STEPS: &[&str] = &["upgrade-after-blocks", "upgrade-after-head"];

/// Aborts the process if `WEIR_FAULT_AT` names this step (and dataset, when one is given).
pub fn point(step: &str, dataset: &str) {
    let Ok(spec) = std::env::var("WEIR_FAULT_AT") else {
        return;
    };
    let (want_step, want_dataset) = match spec.split_once(':') {
        Some((s, d)) => (s, Some(d)),
        None => (spec.as_str(), None),
    };
    if want_step == step && want_dataset.is_none_or(|d| d == dataset) {
        // `WEIR_FAULT_PAUSE=<file>`: wait there (holding whatever the process holds) until the file exists,
        // then go on, for tests that queue another command behind this one.
        if let Ok(file) = std::env::var("WEIR_FAULT_PAUSE") {
            eprintln!("weir: WEIR_FAULT_AT={spec}: paused at {step} until {file} exists");
            while !std::path::Path::new(&file).exists() {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            return;
        }
        eprintln!("weir: WEIR_FAULT_AT={spec}: aborting at {step} of `{dataset}`");
        std::process::abort();
    }
}
