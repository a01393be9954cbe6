//! ARCHITECTURE.md's invariant for `odf`, checked: the crate stays on the ground floor.

use std::path::Path;

/// The names of the crates `odf/Cargo.toml` declares (dependencies of every kind).
fn declared_dependencies() -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("odf/Cargo.toml is readable");
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            continue;
        }
        if in_deps
            && !line.starts_with('#')
            && let Some((name, _)) = line.split_once('=')
        {
            // `flatbuffers.workspace = true` names the crate `flatbuffers`.
            let name = name.trim();
            let name = name
                .split_once('.')
                .map_or(name, |(crate_name, _)| crate_name);
            names.push(name.to_owned());
        }
    }
    names
}

#[test]
fn odf_depends_on_no_runtime_engine_or_query_crate() {
    let deps = declared_dependencies();
    assert!(deps.contains(&"flatbuffers".to_owned()), "{deps:?}");
    for forbidden in [
        "tokio",
        "datafusion",
        "tonic",
        "object_store",
        "weir-engine-contract",
        "weir-engine-runtime",
        "weir-cli",
        "weir-reference-engine",
        "weir-gen-stage",
    ] {
        assert!(
            !deps
                .iter()
                .any(|d| d == forbidden || d.starts_with(&format!("{forbidden}-"))),
            "odf must not depend on `{forbidden}` (ARCHITECTURE.md): {deps:?}"
        );
    }
}
