//! `weir lineage`: the dataset graph as text, Graphviz dot or JSON.

use serde_json::json;

use super::Output;
use crate::cli::Format;
use crate::error::CommandError;
use crate::transaction::Context;

/// Runs `lineage`.
pub fn run(ctx: &Context, format: Format) -> Result<Output, CommandError> {
    let ws = &ctx.workspace;
    let order = ws.topological_order()?;
    let text = if format == Format::Dot {
        let mut lines = vec!["digraph lineage {".to_string(), "  rankdir=LR;".to_string()];
        for name in &order {
            let m = &ws.datasets[name];
            let shape = if m.kind == odf::DatasetKind::Root {
                "cylinder"
            } else {
                "box"
            };
            lines.push(format!("  \"{name}\" [shape={shape}];"));
            for input in ws.inputs_of(name) {
                lines.push(format!("  \"{input}\" -> \"{name}\";"));
            }
        }
        lines.push("}".into());
        lines.join("\n")
    } else {
        let mut lines = Vec::new();
        for name in order.iter().filter(|n| ws.inputs_of(n).is_empty()) {
            tree(ws, name, 0, &mut lines);
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

fn tree(
    ws: &crate::manifest::workspace::Workspace,
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
        tree(ws, &d, depth + 1, out);
    }
}
