//! A read step's schema as kamu writes it, turned into the DDL column list the chain records.
//!
//! kamu (0.263 and later) writes `read.schema` as an ODF schema, `{fields: [{name, type}]}`, where a type is
//! either its kind's name (`type: String`, `type: int64`: the short form) or a mapping (`type: {kind:
//! Option, inner: String}`, `type: {kind: Decimal, precision: 10, scale: 2}`); kind names are accepted in
//! PascalCase and camelCase, as kamu does. A type that is not an `Option` is non-null. Older manifests
//! give `read.ddlSchema` (or `read.schema`) as a DDL list (`["id BIGINT", "name STRING"]`).
//!
//! The ODF version Weir's chains follow holds a read step's schema as DDL, so an ODF schema is recorded as
//! its exact DDL equivalent ([`weir_ingest::ddl`]): `int64` is `BIGINT NOT NULL`, `{kind: Option, inner:
//! int64}` is `BIGINT`. ODF types that DDL cannot say (a timestamp in another unit or time zone, `Time`,
//! `Duration`, `Float16`, `Binary`, `Null`, `List`, `Map`, `Struct`) are refused at their field, with what
//! to write instead.

use serde_json::Value;

/// A read schema that cannot be used: the field path below `read` and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The field below the read step (`schema.fields[2].type`).
    pub field: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

fn error(field: impl Into<String>, message: impl Into<String>) -> SchemaError {
    SchemaError {
        field: field.into(),
        message: message.into(),
    }
}

/// Rewrites a read step (the JSON of `read:`) so that its `schema` is a DDL list: an ODF schema is
/// converted, `ddlSchema` is renamed, and every DDL column is checked. Returns every error found.
pub fn normalize_read(read: &mut Value) -> Vec<SchemaError> {
    let Some(obj) = read.as_object_mut() else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if let Some(ddl) = obj.remove("ddlSchema") {
        if obj.contains_key("schema") {
            errors.push(error(
                "ddlSchema",
                "give either `schema` or `ddlSchema`, not both",
            ));
            return errors;
        }
        // Checked below, positioned at `ddlSchema`.
        match check_ddl(&ddl, "ddlSchema") {
            Ok(()) => {
                obj.insert("schema".into(), ddl);
            }
            Err(mut e) => errors.append(&mut e),
        }
        return errors;
    }
    match obj.get("schema") {
        None | Some(Value::Null) => {}
        Some(Value::Object(schema)) => match odf_schema_to_ddl(schema) {
            Ok(ddl) => {
                obj.insert(
                    "schema".into(),
                    Value::Array(ddl.into_iter().map(Value::String).collect()),
                );
            }
            Err(mut e) => errors.append(&mut e),
        },
        Some(ddl) => {
            if let Err(mut e) = check_ddl(ddl, "schema") {
                errors.append(&mut e);
            }
        }
    }
    errors
}

fn check_ddl(ddl: &Value, field: &str) -> Result<(), Vec<SchemaError>> {
    let Some(columns) = ddl.as_array() else {
        return Err(vec![error(
            field,
            "expected a list of DDL columns (`[\"id BIGINT\", \"name STRING\"]`) or an ODF schema (`{fields: [{name: id, type: Int64}]}`)",
        )]);
    };
    let mut errors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, c) in columns.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match c.as_str() {
            None => errors.push(error(at, "expected a DDL column such as `id BIGINT`")),
            Some(text) => match weir_ingest::ddl::parse_column(text) {
                Ok(f) if !seen.insert(f.name().clone()) => {
                    errors.push(error(at, format!("column `{}` is named twice", f.name())));
                }
                Ok(_) => {}
                Err(e) => errors.push(error(at, e.message)),
            },
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn odf_schema_to_ddl(
    schema: &serde_json::Map<String, Value>,
) -> Result<Vec<String>, Vec<SchemaError>> {
    let mut errors = Vec::new();
    for key in schema.keys() {
        if key != "fields" && key != "extra" {
            errors.push(error(
                format!("schema.{key}"),
                "unknown field of an ODF schema (expected `fields`)",
            ));
        }
    }
    let Some(fields) = schema.get("fields").and_then(Value::as_array) else {
        errors.push(error(
            "schema",
            "an ODF schema needs `fields`, a list of `{name, type}`",
        ));
        return Err(errors);
    };
    let mut ddl = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, f) in fields.iter().enumerate() {
        let at = format!("schema.fields[{i}]");
        let Some(obj) = f.as_object() else {
            errors.push(error(at, "expected `{name, type}`"));
            continue;
        };
        for key in obj.keys() {
            if !["name", "type", "extra"].contains(&key.as_str()) {
                errors.push(error(
                    format!("{at}.{key}"),
                    "unknown field of a schema field (expected `name`, `type`)",
                ));
            }
        }
        let name = match obj.get("name").and_then(Value::as_str) {
            Some(n) if !n.trim().is_empty() && !n.chars().any(char::is_whitespace) => n,
            Some(n) => {
                errors.push(error(
                    format!("{at}.name"),
                    format!("`{n}`: Weir reads column names without spaces"),
                ));
                continue;
            }
            None => {
                errors.push(error(format!("{at}.name"), "every field needs a `name`"));
                continue;
            }
        };
        if !seen.insert(name.to_string()) {
            errors.push(error(
                format!("{at}.name"),
                format!("column `{name}` is named twice"),
            ));
        }
        let Some(ty) = obj.get("type") else {
            errors.push(error(format!("{at}.type"), "every field needs a `type`"));
            continue;
        };
        match ddl_type(ty, &format!("{at}.type")) {
            Ok((t, nullable)) => {
                ddl.push(if nullable {
                    format!("{name} {t}")
                } else {
                    format!("{name} {t} NOT NULL")
                });
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(ddl)
    } else {
        Err(errors)
    }
}

/// The kind names of ODF's `DataType`, as the spec spells them.
const KINDS: [&str; 24] = [
    "Binary",
    "Bool",
    "Date",
    "Decimal",
    "Duration",
    "Float16",
    "Float32",
    "Float64",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "UInt8",
    "UInt16",
    "UInt32",
    "UInt64",
    "List",
    "Map",
    "Null",
    "Option",
    "Struct",
    "Time",
    "Timestamp",
    "String",
];

/// A kind as kamu reads it: PascalCase or with its first letter in lower case (`string`, `uInt8`).
fn kind_of(text: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|k| {
        *k == text || {
            let mut c = k.chars();
            c.next().is_some_and(|first| {
                let lower: String = first.to_lowercase().chain(c).collect();
                lower == text
            })
        }
    })
}

/// The DDL type of an ODF type (short or long form) and whether it is nullable.
fn ddl_type(ty: &Value, at: &str) -> Result<(String, bool), SchemaError> {
    let (kind_text, params) = match ty {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => match o.get("kind").and_then(Value::as_str) {
            Some(k) => (k, Some(o)),
            None => return Err(error(format!("{at}.kind"), "a type mapping needs a `kind`")),
        },
        _ => {
            return Err(error(
                at,
                "expected a type name (`String`) or a mapping (`{kind: Option, inner: String}`)",
            ));
        }
    };
    let kind_at = if params.is_some() {
        format!("{at}.kind")
    } else {
        at.to_string()
    };
    let Some(kind) = kind_of(kind_text) else {
        return Err(error(
            kind_at,
            format!(
                "unknown type `{kind_text}` (ODF types: {}; in PascalCase or camelCase)",
                KINDS.join(", ")
            ),
        ));
    };
    let allowed: &[&str] = match kind {
        "Option" => &["inner"],
        "Decimal" => &["precision", "scale"],
        "Timestamp" => &["unit", "timezone"],
        "Time" | "Duration" => &["unit"],
        "Binary" | "List" => &["fixedLength", "itemType"],
        "Map" => &["keyType", "valueType", "keysSorted"],
        "Struct" => &["fields"],
        _ => &[],
    };
    if let Some(o) = params {
        for key in o.keys() {
            if key != "kind" && !allowed.contains(&key.as_str()) {
                return Err(error(
                    format!("{at}.{key}"),
                    format!("unknown field of type `{kind}`"),
                ));
            }
        }
    }
    let param = |name: &str| params.and_then(|o| o.get(name));
    let not_in_ddl = |instead: &str| {
        Err(error(
            kind_at.clone(),
            format!(
                "type `{kind}` cannot be read by Weir: its chains record a read schema as DDL, which has no such type; {instead}"
            ),
        ))
    };
    let ddl = match kind {
        "Option" => {
            let Some(inner) = param("inner") else {
                return Err(error(
                    format!("{at}.inner"),
                    "`Option` needs its `inner` type",
                ));
            };
            let (t, _) = ddl_type(inner, &format!("{at}.inner"))?;
            return Ok((t, true));
        }
        "String" => "STRING".to_string(),
        "Bool" => "BOOLEAN".to_string(),
        "Int8" => "TINYINT".to_string(),
        "Int16" => "SMALLINT".to_string(),
        "Int32" => "INT".to_string(),
        "Int64" => "BIGINT".to_string(),
        "UInt8" => "TINYINT UNSIGNED".to_string(),
        "UInt16" => "SMALLINT UNSIGNED".to_string(),
        "UInt32" => "INT UNSIGNED".to_string(),
        "UInt64" => "BIGINT UNSIGNED".to_string(),
        "Float32" => "FLOAT".to_string(),
        "Float64" => "DOUBLE".to_string(),
        "Date" => "DATE".to_string(),
        "Decimal" => {
            let p = param("precision").and_then(Value::as_u64);
            let s = param("scale").and_then(Value::as_i64);
            match (p, s) {
                (Some(p), Some(s)) if (1..=38).contains(&p) && s >= 0 && s as u64 <= p => {
                    format!("DECIMAL({p},{s})")
                }
                _ => {
                    return Err(error(
                        at,
                        "`Decimal` needs `precision` (1 to 38) and `scale` (0 to the precision)",
                    ));
                }
            }
        }
        "Timestamp" => {
            let unit = param("unit").and_then(Value::as_str);
            if !matches!(unit, None | Some("Millisecond" | "millisecond")) {
                return Err(error(
                    format!("{at}.unit"),
                    "Weir reads timestamps in milliseconds (kamu's default unit); leave `unit` out or write `Millisecond`",
                ));
            }
            let tz = param("timezone").and_then(Value::as_str);
            if !matches!(tz, None | Some("UTC" | "Etc/UTC" | "+00:00")) {
                return Err(error(
                    format!("{at}.timezone"),
                    "Weir reads timestamps in UTC (kamu's default time zone); leave `timezone` out and convert in a `preprocess` query",
                ));
            }
            "TIMESTAMP".to_string()
        }
        "Time" | "Duration" => {
            return not_in_ddl("read it as `String` and convert it in a `preprocess` query");
        }
        "Float16" => return not_in_ddl("use `Float32`"),
        "Binary" | "Null" => return not_in_ddl("read it as `String`"),
        _ => {
            return not_in_ddl(
                "nested values (List, Map, Struct) are not read by Weir; read a text column and parse it in a `preprocess` query",
            );
        }
    };
    Ok((ddl, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ddl(read: Value) -> Result<Value, Vec<SchemaError>> {
        let mut read = read;
        let errors = normalize_read(&mut read);
        if errors.is_empty() {
            Ok(read["schema"].clone())
        } else {
            Err(errors)
        }
    }

    #[test]
    fn both_type_forms_in_both_cases_become_ddl() {
        let schema = json!({"kind": "Csv", "schema": {"fields": [
            {"name": "id", "type": "int64"},
            {"name": "at", "type": "Timestamp"},
            {"name": "zone", "type": {"kind": "option", "inner": "string"}},
            {"name": "lat", "type": {"kind": "Option", "inner": "float32"}},
            {"name": "price", "type": {"kind": "Decimal", "precision": 10, "scale": 2}},
            {"name": "n", "type": "uInt16"},
        ]}});
        assert_eq!(
            ddl(schema).unwrap(),
            json!([
                "id BIGINT NOT NULL",
                "at TIMESTAMP NOT NULL",
                "zone STRING",
                "lat FLOAT",
                "price DECIMAL(10,2) NOT NULL",
                "n SMALLINT UNSIGNED NOT NULL"
            ])
        );
    }

    #[test]
    fn ddl_schema_is_taken_and_checked() {
        assert_eq!(
            ddl(json!({"ddlSchema": ["a BIGINT", "b STRING"]})).unwrap(),
            json!(["a BIGINT", "b STRING"])
        );
        let e = ddl(json!({"ddlSchema": ["a BIGINT", "b STRNG"]})).unwrap_err();
        assert_eq!(e[0].field, "ddlSchema[1]");
    }

    #[test]
    fn every_bad_field_is_reported_at_its_path() {
        let e = ddl(json!({"schema": {"fields": [
            {"name": "a", "type": "STRNG"},
            {"name": "b", "type": {"kind": "Option"}},
            {"name": "c", "type": {"kind": "Timestamp", "unit": "Nanosecond"}},
            {"name": "d", "type": "Struct"},
        ]}}))
        .unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "schema.fields[0].type",
                "schema.fields[1].type.inner",
                "schema.fields[2].type.unit",
                "schema.fields[3].type"
            ]
        );
        assert!(e[0].message.contains("unknown type `STRNG`"), "{:?}", e[0]);
    }
}
