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
}
