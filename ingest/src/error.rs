//! What ingest refuses, and where in the file it found it.
//!
//! A refusal names the file, the line (CSV, NDJSON) or row (Parquet, a preprocess query's output) and the
//! column, so the user can open the file at that place. Nothing of a refused file is committed.

use std::fmt;

use weir_dataset::chain::store::StoreError;
use weir_dataset::data::DataError;

/// Where a record is in what was read: a 1-based line of a text file, a 1-based row of a Parquet file, or
/// a 1-based row of the output of the source's preprocess query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A line of a CSV or NDJSON file (a CSV record with a quoted line break counts as one line).
    Line(u64),
    /// A row of a Parquet file.
    Row(u64),
    /// A row of the preprocess query's output.
    OutputRow(u64),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Line(n) => write!(f, "line {n}"),
            Place::Row(n) => write!(f, "row {n}"),
            Place::OutputRow(n) => write!(f, "row {n} of the preprocess output"),
        }
    }
}

/// How the records of one batch map to places: numbers in the unit of the whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// Lines or rows.
    pub unit: Unit,
    /// The 1-based line or row of each record of the batch.
    pub numbers: Vec<u64>,
}

/// What the numbers of [`Places`] count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Lines of a text file.
    Line,
    /// Rows of a Parquet file.
    Row,
    /// Rows of the preprocess output.
    OutputRow,
}

impl Places {
    /// `count` records numbered from `first` on.
    pub fn run(unit: Unit, first: u64, count: usize) -> Self {
        Self {
            unit,
            numbers: (first..first + count as u64).collect(),
        }
    }

    /// The place of record `i` of the batch.
    pub fn place(&self, i: usize) -> Place {
        let n = self.numbers.get(i).copied().unwrap_or(i as u64 + 1);
        match self.unit {
            Unit::Line => Place::Line(n),
            Unit::Row => Place::Row(n),
            Unit::OutputRow => Place::OutputRow(n),
        }
    }
}

/// A column whose type differs from the dataset's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedType {
    /// The column.
    pub column: String,
    /// Its type in the dataset.
    pub old: String,
    /// Its type in the file.
    pub new: String,
}

/// Input data that ingest refuses. Every variant names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadData {
    /// A value does not parse as its column's type.
    #[error(
        "{file} {place}, column \"{column}\": \"{value}\" is not {} {expected}",
        article(expected)
    )]
    NotA {
        /// The file.
        file: String,
        /// Where.
        place: Place,
        /// The column.
        column: String,
        /// The value as written.
        value: String,
        /// The type it should have.
        expected: String,
    },
    /// A line or record cannot be read at all (wrong number of fields, broken JSON, an unknown field).
    #[error("{file} {place}{}: {message}", column.as_ref().map(|c| format!(", column \"{c}\"")).unwrap_or_default())]
    Malformed {
        /// The file.
        file: String,
        /// Where.
        place: Place,
        /// The column, when known.
        column: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The file cannot be read at all (not CSV / JSON / Parquet, or broken).
    #[error("{file}: {message}")]
    Unreadable {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// Two columns of the file have the same name.
    #[error("{file}: column \"{column}\" appears twice")]
    DuplicateColumn {
        /// The file.
        file: String,
        /// The name.
        column: String,
    },
    /// The file has a column the coordinator writes itself.
    #[error("{file}: column \"{column}\" is a system column, which the coordinator writes itself")]
    SystemColumn {
        /// The file.
        file: String,
        /// The name.
        column: String,
    },
    /// The event time column has a type that is not a time.
    #[error(
        "{file}, column \"{column}\": the event time must be a TIMESTAMP or a DATE, found {found}"
    )]
    EventTimeType {
        /// The file.
        file: String,
        /// The event time column.
        column: String,
        /// Its type.
        found: String,
    },
    /// A record has no event time.
    #[error("{file} {place}, column \"{column}\": the event time is empty")]
    NullEventTime {
        /// The file.
        file: String,
        /// Where.
        place: Place,
        /// The event time column.
        column: String,
    },
    /// A primary key column is not in the data.
    #[error("{file}: the primary key column \"{column}\" is not in the data")]
    MissingKeyColumn {
        /// The file.
        file: String,
        /// The column.
        column: String,
    },
    /// Two records of one file have the same primary key.
    #[error("{file} {second}: primary key ({columns}) = ({values}) is already at {first}")]
    DuplicateKey {
        /// The file.
        file: String,
        /// The key columns, comma-separated.
        columns: String,
        /// The key values, comma-separated.
        values: String,
        /// The first record with the key.
        first: Place,
        /// The second.
        second: Place,
    },
    /// A file read with a DDL schema does not have its columns.
    #[error("{file}: the columns differ from the read schema's ({})", schema_difference(missing, extra, &[]))]
    NotTheReadSchema {
        /// The file.
        file: String,
        /// Columns of the read schema the file lacks.
        missing: Vec<String>,
        /// Columns of the file the read schema lacks.
        extra: Vec<String>,
    },
    /// A column of a Parquet file cannot be read as the type the read schema gives it.
    #[error(
        "{file}, column \"{column}\": the file has {found}, which cannot be read as {expected}"
    )]
    TypeMismatch {
        /// The file.
        file: String,
        /// The column.
        column: String,
        /// Its type in the file.
        found: String,
        /// Its type in the read schema.
        expected: String,
    },
    /// A column's type has no ODF logical hash (Map, Duration, Interval, Dictionary, Union, ...): no ODF
    /// dataset can hold it.
    #[error(
        "{file}, column \"{column}\": its type {found} has no ODF logical hash, so no ODF dataset can hold it; convert it to a type that has one (a string, a list, a struct, a number), in the file or with a preprocess query"
    )]
    UnhashableType {
        /// The file.
        file: String,
        /// The column (`parent.child` for a nested field).
        column: String,
        /// Its type.
        found: String,
    },
    /// The file's columns differ from the dataset's.
    #[error(
        "{file}: the columns differ from the dataset's ({})",
        schema_difference(missing, extra, changed)
    )]
    SchemaChanged {
        /// The file.
        file: String,
        /// Columns of the dataset the file lacks.
        missing: Vec<String>,
        /// Columns of the file the dataset lacks.
        extra: Vec<String>,
        /// Columns whose type changed.
        changed: Vec<ChangedType>,
    },
    /// The event time column the dataset declares (`SetVocab`'s `eventTimeColumn`) is not in the data.
    #[error(
        "{file}: the event time column \"{column}\" is not in the data (the dataset's SetVocab declares it; records are never stamped with the ingest time instead)"
    )]
    MissingEventTime {
        /// The file.
        file: String,
        /// The declared event time column.
        column: String,
    },
    /// The source file changed while it was read: what was read matches neither its content before nor
    /// after.
    #[error(transparent)]
    ChangedWhileRead(#[from] crate::source_file::ChangedWhileRead),
}

fn article(noun: &str) -> &'static str {
    match noun.chars().next() {
        Some('A' | 'E' | 'I' | 'O' | 'U' | 'a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

fn schema_difference(missing: &[String], extra: &[String], changed: &[ChangedType]) -> String {
    let quoted = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing: {}", quoted(missing)));
    }
    if !extra.is_empty() {
        parts.push(format!("extra: {}", quoted(extra)));
    }
    if !changed.is_empty() {
        let c = changed
            .iter()
            .map(|c| format!("\"{}\" {} -> {}", c.column, c.old, c.new))
            .collect::<Vec<_>>()
            .join(", ");
        parts.push(format!("changed type: {c}"));
    }
    parts.join("; ")
}

/// Why ingesting a file failed: the data was refused, or reading or shaping it failed.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The file's data is refused.
    #[error(transparent)]
    BadData(#[from] BadData),
    /// Arrow or Parquet failed on data that passed the checks.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The dataset's stored data could not be read.
    #[error(transparent)]
    Store(StoreError),
}
