//! YAML text to a `serde_json::Value` plus the line and column of every node, keyed by field path.
//!
//! serde's YAML deserializers lose positions inside tagged enums (ODF's `kind:` style), so Weir parses the
//! events itself: each node's path (`content.metadata[0].merge.primaryKey`) is recorded with where it
//! starts, and type errors found later are pointed at that line.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Where a node starts in the text, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// A parsed YAML document: its value and the position of every node by path.
#[derive(Debug, Clone)]
pub struct Located {
    /// The document as JSON-like data.
    pub value: Value,
    positions: HashMap<String, Position>,
    /// Where each scalar value starts (for a `key: value`, `positions` has the key's).
    scalars: HashMap<String, Position>,
}

/// The YAML text is not well-formed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    /// The parser's message.
    pub message: String,
    /// Where the parser stopped.
    pub position: Position,
}

impl Located {
    /// Parses the first document of `text`.
    pub fn parse(text: &str) -> Result<Self, SyntaxError> {
        let mut builder = Builder::default();
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut builder, false).map_err(|e| SyntaxError {
            message: e.info().to_string(),
            position: to_position(e.marker()),
        })?;
        let value = builder.root.unwrap_or(Value::Null);
        Ok(Self {
            value,
            positions: builder.positions,
            scalars: builder.scalars,
        })
    }

    /// Where the node at `path` starts, or the nearest ancestor that has a position.
    pub fn position_of(&self, path: &str) -> Option<Position> {
        let mut p = path.to_string();
        loop {
            if let Some(pos) = self.positions.get(&p) {
                return Some(*pos);
            }
            let cut = p.rfind(['.', '['])?;
            p.truncate(cut);
        }
    }
}

impl Located {
    /// Where the key of the node at exactly `path` starts (for a sequence item, the item).
    pub fn key_position(&self, path: &str) -> Option<Position> {
        self.positions.get(path).copied()
    }

    /// Where the scalar value at exactly `path` starts.
    pub fn scalar_position(&self, path: &str) -> Option<Position> {
        self.scalars.get(path).copied()
    }
}

/// `text` with the scalar value that starts at `at` replaced by `value`, written plain when YAML reads it
/// back as the same string, double-quoted otherwise. `None` if `at` is not in `text`.
pub fn replace_scalar(text: &str, at: Position, value: &str) -> Option<String> {
    let (start, end) = scalar_span(text, at)?;
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !value.starts_with(['-', '.']);
    let written = if plain {
        value.to_string()
    } else {
        serde_json::Value::String(value.to_string()).to_string()
    };
    Some(format!("{}{written}{}", &text[..start], &text[end..]))
}

/// `text` with the line `key: value` added after the line of the key at `sibling` (a key of a block
/// mapping), at that key's indentation. `None` if `sibling` is not in `text` or its mapping is not in
/// block style.
pub fn insert_key_after(text: &str, sibling: Position, key: &str, value: &str) -> Option<String> {
    let line_start = line_offset(text, sibling.line)?;
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let line = &text[line_start..line_end];
    let indent: usize = line
        .char_indices()
        .nth(sibling.column.checked_sub(1)?)
        .map(|(i, _)| i)?;
    if line[..indent].contains(['{', '[']) {
        return None;
    }
    let written = serde_json::Value::String(value.to_string()).to_string();
    let newline = if line_end == text.len() { "\n" } else { "" };
    Some(format!(
        "{}{newline}\n{}{key}: {written}{}",
        &text[..line_end],
        " ".repeat(indent),
        &text[line_end..]
    ))
}

/// The byte offset where 1-based `line` starts.
fn line_offset(text: &str, line: usize) -> Option<usize> {
    if line == 1 {
        return Some(0);
    }
    text.match_indices('\n')
        .nth(line.checked_sub(2)?)
        .map(|(i, _)| i + 1)
}

/// The byte span of the scalar that starts at `at`: a quoted one to its closing quote, a plain one to the
/// end of the line, a comment, or a flow delimiter.
fn scalar_span(text: &str, at: Position) -> Option<(usize, usize)> {
    let line_start = line_offset(text, at.line)?;
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let line = &text[line_start..line_end];
    let (offset, first) = line.char_indices().nth(at.column.checked_sub(1)?)?;
    let start = line_start + offset;
    let rest = &line[offset..];
    let len = match first {
        '"' => {
            let mut escaped = false;
            rest.char_indices()
                .skip(1)
                .find(|&(_, c)| {
                    let close = c == '"' && !escaped;
                    escaped = c == '\\' && !escaped;
                    close
                })
                .map(|(i, _)| i + 1)?
        }
        '\'' => rest[1..].find('\'').map(|i| i + 2)?,
        _ => {
            let end = [" #", ",", "}", "]"]
                .iter()
                .filter_map(|d| rest.find(d))
                .min()
                .unwrap_or(rest.len());
            rest[..end].trim_end().len()
        }
    };
    Some((start, start + len))
}

fn to_position(m: &Marker) -> Position {
    Position {
        line: m.line(),
        column: m.col() + 1,
    }
}

/// A container being built: a sequence, or a mapping waiting for a key or a value.
#[derive(Debug)]
enum Frame {
    Seq {
        path: String,
        items: Vec<Value>,
    },
    Map {
        path: String,
        map: Map<String, Value>,
        key: Option<String>,
    },
}

#[derive(Debug, Default)]
struct Builder {
    scalars: HashMap<String, Position>,
    stack: Vec<Frame>,
    root: Option<Value>,
    positions: HashMap<String, Position>,
}

impl Builder {
    /// The path the next node will have.
    fn next_path(&self) -> String {
        match self.stack.last() {
            None => String::new(),
            Some(Frame::Seq { path, items }) => format!("{path}[{}]", items.len()),
            Some(Frame::Map {
                path, key: Some(k), ..
            }) => {
                if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                }
            }
            // A key is being read: keys get no position of their own.
            Some(Frame::Map {
                path, key: None, ..
            }) => path.clone(),
        }
    }

    fn expecting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn push_value(&mut self, v: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(v),
            Some(Frame::Seq { items, .. }) => items.push(v),
            Some(Frame::Map { map, key, .. }) => {
                if let Some(k) = key.take() {
                    map.insert(k, v);
                }
            }
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = to_position(&mark);
        match ev {
            Event::Scalar(text, style, _, _) => {
                if self.expecting_key() {
                    if let Some(Frame::Map { path, key, .. }) = self.stack.last_mut() {
                        let full = if path.is_empty() {
                            text.clone()
                        } else {
                            format!("{path}.{text}")
                        };
                        self.positions.insert(full, pos);
                        *key = Some(text);
                    }
                } else {
                    let path = self.next_path();
                    self.scalars.insert(path.clone(), pos);
                    self.positions.entry(path).or_insert(pos);
                    self.push_value(resolve_scalar(text, style));
                }
            }
            Event::SequenceStart(..) => {
                let path = self.next_path();
                self.positions.entry(path.clone()).or_insert(pos);
                self.stack.push(Frame::Seq {
                    path,
                    items: Vec::new(),
                });
            }
            Event::MappingStart(..) => {
                let path = self.next_path();
                self.positions.entry(path.clone()).or_insert(pos);
                self.stack.push(Frame::Map {
                    path,
                    map: Map::new(),
                    key: None,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let v = match self.stack.pop() {
                    Some(Frame::Seq { items, .. }) => Value::Array(items),
                    Some(Frame::Map { map, .. }) => Value::Object(map),
                    None => Value::Null,
                };
                self.push_value(v);
            }
            // Aliases are not used in manifests; they read as null.
            Event::Alias(_) if !self.expecting_key() => self.push_value(Value::Null),
            _ => {}
        }
    }
}

/// YAML 1.2 core schema resolution of a scalar.
fn resolve_scalar(text: String, style: TScalarStyle) -> Value {
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = text.parse::<i64>() {
        return Value::Number(i.into());
    }
    if let Ok(u) = text.parse::<u64>() {
        return Value::Number(u.into());
    }
    if text.contains(['.', 'e', 'E'])
        && text
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '-' || c == '+' || c == '.')
        && let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64)
    {
        return Value::Number(n);
    }
    Value::String(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_nodes_get_their_own_lines() {
        let text = "kind: DatasetSnapshot\ncontent:\n  name: trips\n  metadata:\n    - kind: SetVocab\n      eventTimeColumn: ts\n";
        let doc = Located::parse(text).unwrap();
        assert_eq!(doc.value["content"]["metadata"][0]["eventTimeColumn"], "ts");
        assert_eq!(doc.position_of("content.name").unwrap().line, 3);
        assert_eq!(doc.position_of("content.metadata[0].kind").unwrap().line, 5);
        assert_eq!(
            doc.position_of("content.metadata[0].eventTimeColumn")
                .unwrap()
                .line,
            6
        );
        // An unknown child falls back to its parent.
        assert_eq!(
            doc.position_of("content.metadata[0].merge.primaryKey")
                .unwrap()
                .line,
            5
        );
    }

    #[test]
    fn plain_scalars_resolve_like_yaml_core_schema_and_quoted_ones_stay_strings() {
        let doc = Located::parse("a: 1\nb: true\nc: '1'\nd: ~\ne: 2.5\nf: text\n").unwrap();
        assert_eq!(doc.value["a"], 1);
        assert_eq!(doc.value["b"], true);
        assert_eq!(doc.value["c"], "1");
        assert!(doc.value["d"].is_null());
        assert_eq!(doc.value["e"], 2.5);
        assert_eq!(doc.value["f"], "text");
    }

    #[test]
    fn broken_yaml_reports_where_the_parser_stopped() {
        let err = Located::parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.position.line >= 1);
    }

    const MANIFEST: &str = "content:\n  name: zones # the root\n  metadata:\n    - kind: SetTransform\n      inputs:\n        - datasetRef: \"zones\"\n          other: 1\n";

    #[test]
    fn a_scalar_is_replaced_in_place_keeping_comments_and_layout() {
        let located = Located::parse(MANIFEST).unwrap();
        let at = located.scalar_position("content.name").unwrap();
        let text = replace_scalar(MANIFEST, at, "areas").unwrap();
        assert_eq!(text, MANIFEST.replace("name: zones #", "name: areas #"));
        let quoted = located
            .scalar_position("content.metadata[0].inputs[0].datasetRef")
            .unwrap();
        let text = replace_scalar(MANIFEST, quoted, "a b").unwrap();
        assert!(text.contains("datasetRef: \"a b\"\n"), "{text}");
        assert_eq!(
            Located::parse(&text).unwrap().value["content"]["metadata"][0]["inputs"][0]["datasetRef"],
            "a b"
        );
    }

    #[test]
    fn a_key_is_added_beside_its_sibling_at_the_same_indentation() {
        let located = Located::parse(MANIFEST).unwrap();
        let key = located
            .key_position("content.metadata[0].inputs[0].datasetRef")
            .unwrap();
        let text = insert_key_after(MANIFEST, key, "alias", "zones").unwrap();
        let parsed = Located::parse(&text).unwrap();
        let input = &parsed.value["content"]["metadata"][0]["inputs"][0];
        assert_eq!(input["alias"], "zones");
        assert_eq!(input["other"], 1);
        assert_eq!(input["datasetRef"], "zones");
    }

    #[test]
    fn a_flow_mapping_is_not_edited_line_wise() {
        let text = "inputs: [{datasetRef: zones}]\n";
        let located = Located::parse(text).unwrap();
        let key = located.key_position("inputs[0].datasetRef").unwrap();
        assert_eq!(insert_key_after(text, key, "alias", "zones"), None);
    }
}
