//! Root ingestion for Open Data Fabric datasets: fetch a source, read it (CSV, NDJSON, Parquet) batch by
//! batch, check every record, merge it with the dataset's history (Append, Ledger, Snapshot) and write the
//! new data slice, with no query engine involved (a preprocess query is the caller's to run).
//!
//! Ingest refuses data it would otherwise have to coerce or drop ([`error::BadData`]): a value that does not
//! parse as its column's type, an event time that is not a time or is empty, a primary key twice in one file,
//! a column name twice, columns that differ from the dataset's. Nothing of a refused file is committed.
//!
#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod check;
pub mod ddl;
pub mod error;
pub mod event_time;
pub mod fetch;
pub mod files_glob;
pub mod http;
pub mod merge;
pub mod prepare;
pub mod push;
pub mod read;
pub mod schema;
pub mod source_file;
pub mod write;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;

use check::Checks;
use error::IngestError;
use read::Batches;
use weir_dataset::progress::{Phase, Progress, Report};

/// Checks a file's batches in order, handing each checked batch to `each` as it goes (a file with no records
/// still has its schema checked), and reports the records and bytes read so far to `progress`.
pub fn check_each(
    batches: Batches,
    checks: &mut Checks,
    progress: &Progress,
    total_bytes: Option<u64>,
    mut each: impl FnMut(RecordBatch) -> Result<(), IngestError>,
) -> Result<(), IngestError> {
    let empty = read::Placed {
        batch: RecordBatch::new_empty(batches.schema.clone()),
        places: error::Places::run(error::Unit::Row, 1, 0),
    };
    let total_rows = batches.total_rows;
    // A text file counts bytes, a Parquet file records (its footer says how many there are).
    let total_bytes = total_rows.is_none().then_some(total_bytes).flatten();
    let report = |rows: u64, batches: &Batches| {
        let r = Report::new(Phase::Ingest).rows(rows).total_rows(total_rows);
        match total_bytes {
            Some(t) => r.bytes(batches.bytes_read()).total_bytes(Some(t)),
            None => r,
        }
    };
    let mut rows = 0u64;
    let mut batches = batches;
    let mut any = false;
    while let Some(placed) = batches.next() {
        let checked = checks.check(&placed?)?;
        rows += checked.num_rows() as u64;
        each(checked)?;
        any = true;
        progress.report(report(rows, &batches));
    }
    if !any {
        checks.check(&empty)?;
    }
    progress.finish(report(rows, &batches));
    Ok(())
}

/// Checks a file's batches; returns the records for a merge strategy that needs them together.
pub fn check_all(
    batches: Batches,
    file: &str,
    checks: &mut Checks,
    progress: &Progress,
    total_bytes: Option<u64>,
) -> Result<RecordBatch, IngestError> {
    let mut checked = Vec::new();
    let mut schema = None;
    check_each(batches, checks, progress, total_bytes, |b| {
        schema.get_or_insert_with(|| b.schema());
        checked.push(b);
        Ok(())
    })?;
    let schema = match schema {
        Some(s) => s,
        None => checks.schema().ok_or_else(|| {
            IngestError::Data(weir_dataset::data::DataError::Column {
                message: format!("{file}: no schema"),
            })
        })?,
    };
    concat_batches(&schema, &checked).map_err(schema::arrow("reading records"))
}
