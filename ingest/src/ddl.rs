//! ODF's DDL read schemas (`["id BIGINT NOT NULL", "name STRING", "at TIMESTAMP"]`): the column list a
//! read step coerces values into, as Arrow fields.
//!
//! A column is `name TYPE` with an optional `NOT NULL` (without it a column may hold nulls). The types:
//!
//! | DDL | Arrow |
//! |---|---|
//! | `STRING` (`VARCHAR`, `TEXT`) | `Utf8` |
//! | `BOOLEAN` (`BOOL`) | `Boolean` |
//! | `TINYINT`, `SMALLINT`, `INT` (`INTEGER`), `BIGINT` (`LONG`), each optionally `UNSIGNED` | `Int8`..`Int64`, `UInt8`..`UInt64` |
//! | `FLOAT` (`REAL`), `DOUBLE` | `Float32`, `Float64` |
//! | `DECIMAL(p, s)` (`NUMERIC`; `DECIMAL(p)` is scale 0) | `Decimal128(p, s)`, p up to 38 |
//! | `DATE` | `Date32` |
//! | `TIMESTAMP` | `Timestamp(Millisecond, "UTC")` |

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use weir_dataset::data::{DataError, utc_millis};

/// The DDL type names [`parse_column`] knows, for messages.
pub const DDL_TYPES: &str = "STRING, BOOLEAN, TINYINT, SMALLINT, INT, BIGINT (each optionally UNSIGNED), FLOAT, DOUBLE, DECIMAL(p, s), DATE, TIMESTAMP, optionally followed by NOT NULL";

/// A DDL column that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DdlError {
    /// What is wrong, naming the column.
    pub message: String,
}

/// Parses one DDL column (`"id BIGINT NOT NULL"`) into an Arrow field.
///
/// ```
/// use weir_ingest::ddl::parse_column;
/// let f = parse_column("price DECIMAL(10, 2) NOT NULL").unwrap();
/// assert_eq!(f.name(), "price");
/// assert!(!f.is_nullable());
/// assert!(parse_column("name STRNG").is_err());
/// ```
pub fn parse_column(column: &str) -> Result<Field, DdlError> {
    let err = |message: String| DdlError { message };
    let trimmed = column.trim();
    let Some((name, rest)) = trimmed.split_once(char::is_whitespace) else {
        return Err(err(format!(
            "DDL column `{column}` is not `name TYPE` (types: {DDL_TYPES})"
        )));
    };
    let words: Vec<String> = rest
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    let mut spec = words.join(" ");
    let mut nullable = true;
    if let Some(t) = spec.strip_suffix(" NOT NULL") {
        spec = t.to_string();
        nullable = false;
    }
    let unsigned = spec.ends_with(" UNSIGNED");
    if let Some(t) = spec.strip_suffix(" UNSIGNED") {
        spec = t.to_string();
    }
    let spec = spec.replace(' ', "");
    let integer = |signed: DataType, u: DataType| if unsigned { u } else { signed };
    let data_type = match spec.as_str() {
        "TINYINT" | "INT8" | "BYTE" => integer(DataType::Int8, DataType::UInt8),
        "SMALLINT" | "INT16" | "SHORT" => integer(DataType::Int16, DataType::UInt16),
        "INT" | "INTEGER" | "INT32" => integer(DataType::Int32, DataType::UInt32),
        "BIGINT" | "INT64" | "LONG" => integer(DataType::Int64, DataType::UInt64),
        _ if unsigned => {
            return Err(err(format!(
                "DDL type `{spec} UNSIGNED` of `{name}`: only integer types can be UNSIGNED"
            )));
        }
        "STRING" | "VARCHAR" | "TEXT" => DataType::Utf8,
        "DOUBLE" | "FLOAT64" => DataType::Float64,
        "FLOAT" | "FLOAT32" | "REAL" => DataType::Float32,
        "BOOLEAN" | "BOOL" => DataType::Boolean,
        "TIMESTAMP" => utc_millis(),
        "DATE" => DataType::Date32,
        d if d.starts_with("DECIMAL(") || d.starts_with("NUMERIC(") => decimal(name, d)?,
        other => {
            return Err(err(format!(
                "DDL type `{other}` of `{name}` is not a type Weir reads (types: {DDL_TYPES})"
            )));
        }
    };
    Ok(Field::new(name, data_type, nullable))
}

fn decimal(name: &str, spec: &str) -> Result<DataType, DdlError> {
    let err = || DdlError {
        message: format!(
            "DDL type `{spec}` of `{name}` is not `DECIMAL(precision, scale)` with a precision of 1 to 38 and a scale of 0 to the precision"
        ),
    };
    let inner = spec
        .split_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .ok_or_else(err)?;
    let (p, s) = match inner.split_once(',') {
        Some((p, s)) => (p, s),
        None => (inner, "0"),
    };
    let precision: u8 = p.parse().map_err(|_| err())?;
    let scale: i8 = s.parse().map_err(|_| err())?;
    if !(1..=38).contains(&precision) || scale < 0 || scale as u8 > precision {
        return Err(err());
    }
    Ok(DataType::Decimal128(precision, scale))
}

/// Parses a DDL column list into an Arrow schema; a column named twice is an error.
pub fn parse_ddl(columns: &[String]) -> Result<SchemaRef, DataError> {
    let mut fields: Vec<Field> = Vec::with_capacity(columns.len());
    for c in columns {
        let f = parse_column(c).map_err(|e| DataError::Column { message: e.message })?;
        if fields.iter().any(|g| g.name() == f.name()) {
            return Err(DataError::Column {
                message: format!("the read schema names `{}` twice", f.name()),
            });
        }
        fields.push(f);
    }
    Ok(Arc::new(Schema::new(fields)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ddl_type_maps_to_its_arrow_type() {
        for (ddl, t) in [
            ("STRING", DataType::Utf8),
            ("boolean", DataType::Boolean),
            ("TINYINT", DataType::Int8),
            ("SMALLINT UNSIGNED", DataType::UInt16),
            ("INT", DataType::Int32),
            ("BIGINT", DataType::Int64),
            ("BIGINT UNSIGNED", DataType::UInt64),
            ("FLOAT", DataType::Float32),
            ("DOUBLE", DataType::Float64),
            ("DECIMAL(10,2)", DataType::Decimal128(10, 2)),
            ("DECIMAL(5)", DataType::Decimal128(5, 0)),
            ("DATE", DataType::Date32),
            ("TIMESTAMP", utc_millis()),
        ] {
            let f = parse_column(&format!("c {ddl}")).unwrap();
            assert_eq!(f.data_type(), &t, "{ddl}");
            assert!(f.is_nullable());
        }
        assert!(!parse_column("c INT NOT NULL").unwrap().is_nullable());
    }

    #[test]
    fn unknown_types_and_malformed_columns_are_named() {
        let e = parse_column("name STRNG").unwrap_err().to_string();
        assert!(e.contains("`STRNG` of `name`"), "{e}");
        assert!(parse_column("name").is_err());
        assert!(parse_column("x DECIMAL(40,2)").is_err());
        assert!(parse_column("x STRING UNSIGNED").is_err());
        assert!(parse_ddl(&["a INT".into(), "a STRING".into()]).is_err());
    }
}
