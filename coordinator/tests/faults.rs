//! Crash safety: the coordinator killed at every step of a transaction leaves the previous head, and a rerun
//! completes the work with the same result as an uninterrupted pull.
use crate::common;

use common::*;

fn add_day4(dir: &std::path::Path) {
    let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        dir.join("data/readings/2024-06-04.csv"),
        day3.replace("2024-06-03", "2024-06-04"),
    )
    .unwrap();
}

#[test]
fn a_crash_at_any_step_keeps_the_previous_head_and_a_rerun_completes() {
    // The reference result: an uninterrupted pull after day 4 arrives.
    let reference = workspace();
    ok(reference.path(), &["pull", "--all", "--quiet"]);
    add_day4(reference.path());
    ok(reference.path(), &["pull", "--all", "--quiet"]);
    let expected_daily = ok(
        reference.path(),
        &["--format", "json", "tail", "readings.daily", "-n", "100"],
    );

    for step in weir_dataset::fault::STEPS {
        for dataset in ["readings", "readings.daily"] {
            let ws = workspace();
            ok(ws.path(), &["pull", "--all", "--quiet"]);
            add_day4(ws.path());
            let (head_before, records_before) = head_and_records(ws.path(), dataset);

            let crashed = weir(ws.path())
                .args(["pull", "--all", "--quiet"])
                .env("WEIR_FAULT_AT", format!("{step}:{dataset}"))
                .output()
                .unwrap();
            assert!(
                !crashed.status.success(),
                "{step}:{dataset} should have aborted the process"
            );
            let stderr = String::from_utf8_lossy(&crashed.stderr);
            assert!(stderr.contains("aborting at"), "{step}:{dataset}: {stderr}");

            let (head_after, records_after) = head_and_records(ws.path(), dataset);
            if *step == "after-head" {
                assert_ne!(
                    head_after, head_before,
                    "{step}:{dataset}: the head moved before the crash"
                );
            } else {
                assert_eq!(
                    head_after, head_before,
                    "{step}:{dataset}: the head must not move"
                );
                assert_eq!(records_after, records_before);
            }
            ok(ws.path(), &["validate"]);

            ok(ws.path(), &["pull", "--all", "--quiet"]);
            assert_eq!(
                head_and_records(ws.path(), "readings").1,
                576,
                "{step}:{dataset}"
            );
            let daily = ok(
                ws.path(),
                &["--format", "json", "tail", "readings.daily", "-n", "100"],
            );
            let strip = |s: &str| -> Vec<serde_json::Value> {
                let v: serde_json::Value = serde_json::from_str(s).unwrap();
                v["records"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| {
                        let mut r = r.clone();
                        r.as_object_mut().unwrap().remove("system_time");
                        r
                    })
                    .collect()
            };
            assert_eq!(
                strip(&daily),
                strip(&expected_daily),
                "{step}:{dataset}: rerun result differs"
            );
        }
    }
}
