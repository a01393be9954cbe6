//! What the data checks need from the caller: writing and reading small
//! Parquet files. `engine-contract` has no Arrow/Parquet dependency; an
//! engine crate (which has them anyway) implements [`DataFixtures`].

use std::path::Path;

/// A column's type, as the checks write and read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// 64-bit signed integer (offset as existing engines write it).
    Int64,
    /// 32-bit signed integer (op as existing engines write it).
    Int32,
    /// UTF-8 string.
    Utf8,
    /// Timestamp in milliseconds, UTC.
    TimestampMillisUtc,
    /// Any other type, by the reader's name for it.
    Other(String),
}

/// A cell.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    /// Null.
    Null,
    /// Any integer column's value.
    Int(i64),
    /// A string.
    Utf8(String),
    /// Milliseconds since the epoch, UTC.
    TimestampMillis(i64),
}

/// A named, typed column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Column {
    /// Column name.
    pub name: String,
    /// Column type.
    pub data_type: ColumnType,
    /// Whether nulls are allowed.
    pub nullable: bool,
}

/// A small table: the content of one Parquet file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    /// The schema.
    pub columns: Vec<Column>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    /// Index of the column named `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The values of column `name`, in row order.
    pub fn column(&self, name: &str) -> Option<Vec<Value>> {
        let index = self.column_index(name)?;
        Some(
            self.rows
                .iter()
                .map(|row| row.get(index).cloned().unwrap_or(Value::Null))
                .collect(),
        )
    }

    /// The same schema with no rows.
    pub fn schema_only(&self) -> Self {
        Self {
            columns: self.columns.clone(),
            rows: Vec::new(),
        }
    }
}

/// A fixture could not be written or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FixtureError {
    /// What went wrong.
    pub message: String,
}

/// Writes and reads Parquet files for the data checks.
///
/// Write `offset` as Int64, `op` as Int32 and times as Timestamp(ms, UTC):
/// the forms existing engines use. When reading, map every integer type to
/// [`Value::Int`] and every timestamp to [`Value::TimestampMillis`].
pub trait DataFixtures: Send + Sync {
    /// Writes `table` to a Parquet file at `path` (zero rows: a schema file).
    fn write_parquet(&self, path: &Path, table: &Table) -> Result<(), FixtureError>;

    /// Reads the Parquet file at `path`.
    fn read_parquet(&self, path: &Path) -> Result<Table, FixtureError>;
}
