//! `weir lineage [DATASET]`: the dataset graph as text, Graphviz dot or JSON: the whole workspace, or one
//! dataset with everything upstream and downstream of it.

use serde_json::json;

use std::collections::BTreeSet;

use super::Format;
use super::{Output, known};
use crate::commands::error::CommandError;
use weir_transaction::Context;

/// Runs `lineage`.
pub fn run(ctx: &Context, dataset: Option<&str>, format: Format) -> Result<Output, CommandError> {
    let ws = &ctx.workspace;
    let mut order = ws.topological_order()?;
    if let Some(name) = dataset {
        known(ctx, name)?;
        let related = related(ws, name);
        order.retain(|n| related.contains(n));
    }
    let shown: BTreeSet<&String> = order.iter().collect();
    let text = if format == Format::Dot {
        let mut lines = vec!["digraph lineage {".to_string(), "  rankdir=LR;".to_string()];
        for name in &order {
            let m = &ws.datasets[name];
            let shape = if m.kind == weir_odf::DatasetKind::Root {
                "cylinder"
            } else {
                "box"
            };
            lines.push(format!("  \"{name}\" [shape={shape}];"));
            for input in ws.inputs_of(name) {
                if shown.contains(&input) {
                    lines.push(format!("  \"{input}\" -> \"{name}\";"));
                }
            }
        }
        lines.push("}".into());
        lines.join("\n")
    } else {
        let mut lines = Vec::new();
        for name in order
            .iter()
            .filter(|n| !ws.inputs_of(n).iter().any(|i| shown.contains(i)))
        {
            tree(ws, &shown, name, 0, &mut lines);
        }
        lines.join("\n")
    };
    let nodes: Vec<_> = order
        .iter()
        .map(|n| json!({ "name": n, "kind": ws.datasets[n].kind, "inputs": ws.inputs_of(n) }))
        .collect();
    Ok(Output {
        text,
        json: json!({ "datasets": nodes }),
    })
}

/// `name`, everything it is computed from and everything computed from it.
fn related(ws: &weir_manifest::workspace::Workspace, name: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::from([name.to_string()]);
    let mut up = vec![name.to_string()];
    while let Some(n) = up.pop() {
        for i in ws.inputs_of(&n) {
            if out.insert(i.clone()) {
                up.push(i);
            }
        }
    }
    let mut down = vec![name.to_string()];
    while let Some(n) = down.pop() {
        for d in ws.dependents_of(&n) {
            if out.insert(d.clone()) {
                down.push(d);
            }
        }
    }
    out
}

fn tree(
    ws: &weir_manifest::workspace::Workspace,
    shown: &BTreeSet<&String>,
    name: &str,
    depth: usize,
    out: &mut Vec<String>,
) {
    let m = &ws.datasets[name];
    let engine = m
        .transform
        .as_ref()
        .map(|t| format!(" [{}]", t.transform.sql().engine))
        .unwrap_or_default();
    out.push(format!(
        "{}{} ({:?}){engine}",
        "  ".repeat(depth) + if depth > 0 { "└─ " } else { "" },
        name,
        m.kind
    ));
    for d in ws.dependents_of(name) {
        if shown.contains(&d) {
            tree(ws, shown, &d, depth + 1, out);
        }
    }
}
