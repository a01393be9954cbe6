//! What a session reads: one table per dataset, over the dataset's Parquet slices.

use std::path::PathBuf;

use datafusion::arrow::datatypes::SchemaRef;

/// One dataset as a table: its name, its Parquet files in offset order, and the schema to give it while it
/// has no files.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The table name: the dataset's name as it is spelled (`readings.clean`); queries quote it when it holds
    /// anything but letters, digits and `_` (`SELECT * FROM "readings.clean"`).
    pub name: String,
    /// The dataset's data slices, local Parquet files of any file name, oldest first.
    pub files: Vec<PathBuf>,
    /// The table's schema when `files` is empty (an empty table of these columns). With files, the schema
    /// is read from their footers and this is ignored. No files and no schema: the dataset has no table,
    /// and a query that names it is told it has no data yet ([`crate::SqlError::NoData`]).
    pub schema: Option<SchemaRef>,
}

impl Table {
    /// A table over these files (in offset order).
    pub fn new(
        name: impl Into<String>,
        files: impl IntoIterator<Item = impl Into<PathBuf>>,
    ) -> Self {
        Self {
            name: name.into(),
            files: files.into_iter().map(Into::into).collect(),
            schema: None,
        }
    }

    /// A table of a dataset without data: empty, with `schema` when it is known.
    pub fn empty(name: impl Into<String>, schema: Option<SchemaRef>) -> Self {
        Self {
            name: name.into(),
            files: Vec::new(),
            schema,
        }
    }
}

/// The tables of a session, one per dataset.
pub type Tables = Vec<Table>;
