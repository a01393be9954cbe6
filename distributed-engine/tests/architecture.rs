//! ARCHITECTURE.md's invariant for `distributed-engine`, checked against the resolved build
//! (`Cargo.lock`): Ballista is built for this crate only. The coordinator, which embeds the reference
//! engine, and the crates below it never pull Ballista in, directly or through another crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every package of the workspace's `Cargo.lock` with the names of the packages it depends on.
fn lock_graph() -> BTreeMap<String, Vec<String>> {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    let text = std::fs::read_to_string(&lock).expect("the workspace's Cargo.lock is readable");
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            current = None;
            in_deps = false;
        } else if let Some(name) = line.strip_prefix("name = ") {
            let name = name.trim_matches('"').to_owned();
            graph.entry(name.clone()).or_default();
            current = Some(name);
        } else if line.starts_with("dependencies = [") {
            in_deps = !line.ends_with(']');
        } else if in_deps && line == "]" {
            in_deps = false;
        } else if in_deps && let Some(package) = current.as_ref() {
            // `"name"` or `"name version"` when two versions of a crate are in the lock.
            let dep = line.trim_end_matches(',').trim_matches('"');
            let dep = dep.split_once(' ').map_or(dep, |(name, _)| name);
            graph
                .entry(package.clone())
                .or_default()
                .push(dep.to_owned());
        }
    }
    graph
}

/// `root` and everything it depends on, transitively.
fn closure(graph: &BTreeMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_owned()];
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(graph.get(&name).into_iter().flatten().cloned());
        }
    }
    seen
}

#[test]
fn ballista_is_built_for_the_distributed_engine_only() {
    let graph = lock_graph();
    let ours = closure(&graph, "weir-distributed-engine");
    assert!(
        ours.contains("ballista-scheduler") && ours.contains("weir-reference-engine"),
        "the lock does not show distributed-engine's own dependencies: is this the right Cargo.lock?"
    );
    for crate_name in [
        "weir-cli",
        "weir-reference-engine",
        "weir-engine-runtime",
        "weir-engine-contract",
        "weir-odf",
        "weir-sql",
        "weir-gen-stage",
        "weir-pipeline",
    ] {
        assert!(
            graph.contains_key(crate_name),
            "`{crate_name}` is not in Cargo.lock: update this test's list"
        );
        let pulled: Vec<_> = closure(&graph, crate_name)
            .into_iter()
            .filter(|d| d.starts_with("ballista") || d == "weir-distributed-engine")
            .collect();
        assert!(
            pulled.is_empty(),
            "`{crate_name}` pulls in {pulled:?}: Ballista must stay a dependency of \
             distributed-engine only (ARCHITECTURE.md)"
        );
    }
}
