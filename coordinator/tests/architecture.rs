//! ARCHITECTURE.md's invariants for the workspace's shape, checked against the code:
//!
//! - every crate depends only on the workspace crates below it (the table in `ALLOWED`, from `Cargo.lock`),
//!   so nothing low imports anything high and DataFusion stays in the crates that need it;
//! - inside the coordinator, modules import only the modules below them (`LAYERS`): no circles;
//! - a crate whose integration tests are one test binary (`autotests = false`) declares every file of
//!   its `tests/` folder in that binary or as a test target of its own, so no test is left unbuilt.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace crates each crate may depend on (normal, build and dev dependencies alike).
const ALLOWED: &[(&str, &[&str])] = &[
    ("weir-dispatchers", &[]),
    ("weir-odf", &[]),
    ("weir-plugin-interface", &[]),
    ("weir-gen-stage", &["weir-dispatchers"]),
    ("weir-pipeline", &["weir-gen-stage", "weir-dispatchers"]),
    (
        "weir-plugin-host",
        &[
            "weir-plugin-interface",
            "weir-dispatchers",
            "weir-gen-stage",
        ],
    ),
    ("weir-key-affinity-dispatcher", &["weir-plugin-interface"]),
    ("weir-metrics-dispatcher", &["weir-plugin-interface"]),
    ("weir-engine-contract", &["weir-odf"]),
    (
        "weir-engine-conformance",
        &["weir-engine-contract", "weir-odf"],
    ),
    ("weir-engine-runtime", &["weir-engine-contract", "weir-odf"]),
    ("weir-test-engine", &["weir-engine-contract", "weir-odf"]),
    ("weir-dataset", &["weir-odf"]),
    ("weir-ingest", &["weir-dataset", "weir-odf"]),
    (
        "weir-manifest",
        &["weir-ingest", "weir-dataset", "weir-odf"],
    ),
    ("weir-query-depth", &[]),
    (
        "weir-reference-engine",
        &[
            "weir-engine-contract",
            "weir-engine-conformance",
            "weir-query-depth",
            "weir-odf",
        ],
    ),
    ("weir-sql", &["weir-query-depth", "weir-odf"]),
    (
        "weir-engines",
        &[
            "weir-dataset",
            "weir-manifest",
            "weir-reference-engine",
            "weir-engine-runtime",
            "weir-engine-contract",
            "weir-engine-conformance",
            "weir-odf",
        ],
    ),
    (
        "weir-transaction",
        &[
            "weir-engines",
            "weir-dataset",
            "weir-ingest",
            "weir-manifest",
            "weir-engine-runtime",
            "weir-odf",
        ],
    ),
    (
        "weir-distributed-engine",
        &[
            "weir-reference-engine",
            "weir-engine-contract",
            "weir-engine-conformance",
            "weir-odf",
        ],
    ),
    (
        "weir-cli",
        &[
            "weir-transaction",
            "weir-engines",
            "weir-dataset",
            "weir-ingest",
            "weir-manifest",
            "weir-reference-engine",
            "weir-sql",
            "weir-engine-runtime",
            "weir-engine-contract",
            "weir-engine-conformance",
            "weir-gen-stage",
            "weir-dispatchers",
            "weir-plugin-host",
            "weir-plugin-interface",
            "weir-odf",
            "weir-test-engine",
        ],
    ),
    ("xtask", &[]),
];

/// Crates that may build DataFusion (directly or through another crate).
const DATAFUSION: &[&str] = &[
    "weir-reference-engine",
    "weir-distributed-engine",
    "weir-sql",
    // the embedded engine
    "weir-engines",
    "weir-transaction",
    "weir-cli",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every package of `Cargo.lock` with the names of the packages it depends on.
fn lock_graph() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(workspace_root().join("Cargo.lock"))
        .expect("the workspace's Cargo.lock is readable");
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut current, mut in_deps) = (None::<String>, false);
    for line in text.lines().map(str::trim) {
        if line == "[[package]]" {
            (current, in_deps) = (None, false);
        } else if let Some(name) = line.strip_prefix("name = ") {
            let name = name.trim_matches('"').to_owned();
            graph.entry(name.clone()).or_default();
            current = Some(name);
        } else if line.starts_with("dependencies = [") {
            in_deps = !line.ends_with(']');
        } else if in_deps && line == "]" {
            in_deps = false;
        } else if in_deps && let Some(package) = &current {
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
fn every_crate_depends_only_on_the_crates_below_it() {
    let graph = lock_graph();
    let ours: BTreeSet<&str> = ALLOWED.iter().map(|(name, _)| *name).collect();
    for (name, allowed) in ALLOWED {
        let deps = graph
            .get(*name)
            .unwrap_or_else(|| panic!("`{name}` is not in Cargo.lock: update ALLOWED"));
        let internal: BTreeSet<&str> = deps
            .iter()
            .map(String::as_str)
            .filter(|d| ours.contains(d))
            .collect();
        let extra: Vec<&&str> = internal.iter().filter(|d| !allowed.contains(d)).collect();
        assert!(
            extra.is_empty(),
            "`{name}` depends on {extra:?}, which ARCHITECTURE.md puts above it or beside it"
        );
    }
    for package in graph.keys() {
        let is_workspace_crate = workspace_member_names().contains(package);
        assert!(
            !is_workspace_crate || ours.contains(package.as_str()),
            "workspace crate `{package}` has no row in ALLOWED"
        );
    }
}

#[test]
fn datafusion_stays_in_the_crates_that_need_it() {
    let graph = lock_graph();
    for (name, _) in ALLOWED {
        if DATAFUSION.contains(name) {
            continue;
        }
        let deps = closure(&graph, name);
        assert!(
            !deps.contains("datafusion"),
            "`{name}` builds DataFusion (through {:?})",
            graph[*name]
                .iter()
                .filter(|d| closure(&graph, d).contains("datafusion"))
                .collect::<Vec<_>>()
        );
    }
}

/// The names of the workspace's packages, from the members' Cargo.toml files.
fn workspace_member_names() -> BTreeSet<String> {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace Cargo.toml");
    let members = text
        .lines()
        .find_map(|l| l.strip_prefix("members = "))
        .expect("a members line");
    members
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|dir| {
            let toml = std::fs::read_to_string(root.join(dir).join("Cargo.toml"))
                .unwrap_or_else(|e| panic!("{dir}/Cargo.toml: {e}"));
            toml.lines()
                .find_map(|l| l.strip_prefix("name = "))
                .map(|n| n.trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("{dir}/Cargo.toml has no name"))
        })
        .collect()
}

/// The coordinator's modules, lowest first: each may import only the ones before it (and itself).
const LAYERS: &[&str] = &["exit", "scratch", "scheduler", "commands", "cli"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn coordinator_modules_import_only_the_modules_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for (level, module) in LAYERS.iter().enumerate() {
        let mut files = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        let file = src.join(format!("{module}.rs"));
        if file.is_file() {
            files.push(file);
        }
        assert!(!files.is_empty(), "module `{module}` not found under src/");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a source file");
            for (line_no, line) in text.lines().enumerate() {
                for (at, _) in line.match_indices("crate::") {
                    let rest = &line[at + "crate::".len()..];
                    let used: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    let Some(used_level) = LAYERS.iter().position(|m| *m == used) else {
                        continue;
                    };
                    if used_level > level {
                        problems.push(format!(
                            "{}:{}: `{module}` imports `{used}`, a module above it",
                            file.strip_prefix(&src).unwrap_or(&file).display(),
                            line_no + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "imports that run up the layers:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_coordinator_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    for line in lib.lines() {
        if let Some(name) = line
            .trim()
            .strip_prefix("pub mod ")
            .or_else(|| line.trim().strip_prefix("mod "))
        {
            let name = name.trim_end_matches(';');
            assert!(
                LAYERS.contains(&name),
                "module `{name}` has no place in LAYERS"
            );
        }
    }
}

#[test]
fn no_integration_test_file_is_left_out_of_its_test_binary() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace Cargo.toml");
    let members = text
        .lines()
        .find_map(|l| l.strip_prefix("members = "))
        .expect("a members line");
    let mut left_out = Vec::new();
    let mut grouped = 0;
    for dir in members
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
    {
        let crate_dir = root.join(dir);
        let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{dir}/Cargo.toml: {e}"));
        if !manifest.lines().any(|l| l.trim() == "autotests = false") {
            continue;
        }
        grouped += 1;
        // The test targets the manifest declares, and the modules their roots declare.
        let roots: Vec<String> = manifest
            .lines()
            .filter_map(|l| l.trim().strip_prefix("path = \"tests/"))
            .map(|p| p.trim_end_matches('"').to_owned())
            .collect();
        assert!(
            !roots.is_empty(),
            "{dir}: autotests = false but no [[test]] target"
        );
        let mut declared: BTreeSet<String> = roots.iter().cloned().collect();
        for test_root in &roots {
            let source = std::fs::read_to_string(crate_dir.join("tests").join(test_root))
                .unwrap_or_else(|e| panic!("{dir}/tests/{test_root}: {e}"));
            declared.extend(
                source
                    .lines()
                    .filter_map(|l| l.strip_prefix("mod "))
                    .map(|m| format!("{}.rs", m.trim_end_matches(';'))),
            );
        }
        let Ok(entries) = std::fs::read_dir(crate_dir.join("tests")) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".rs") && !declared.contains(&name) {
                left_out.push(format!("{dir}/tests/{name}"));
            }
        }
    }
    assert!(
        grouped > 0,
        "the coordinator's tests at least are one binary"
    );
    assert!(
        left_out.is_empty(),
        "test files no test target builds (declare them as `mod` in the crate's tests/integration.rs): {left_out:?}"
    );
}
