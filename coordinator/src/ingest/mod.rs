//! Root dataset ingestion: fetch, read, check, preprocess, merge.
//!
//! Ingest refuses data it would otherwise have to coerce or drop ([`error::BadData`]): a value that does not
//! parse as its column's type, an event time that is not a time or is empty, a primary key twice in one file,
//! a column name twice, columns that differ from the dataset's. Nothing of a refused file is committed.
pub mod check;
pub mod error;
pub mod fetch;
pub mod merge;
pub mod read;
pub mod schema;
pub mod write;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use bytes::Bytes;

use check::Checks;
use error::IngestError;
use odf::ReadStep;

/// Reads a fetched file and checks it batch by batch, handing each checked batch to `each` as it goes (a
/// file with no records still has its schema checked).
pub fn read_checked_each(
    step: &ReadStep,
    bytes: Bytes,
    file: &str,
    checks: &mut Checks,
    mut each: impl FnMut(RecordBatch) -> Result<(), IngestError>,
) -> Result<(), IngestError> {
    let batches = read::read_batches(step, bytes, file, Some(checks.event_time()))?;
    let empty = read::Placed {
        batch: RecordBatch::new_empty(batches.schema.clone()),
        places: error::Places::run(error::Unit::Row, 1, 0),
    };
    let mut any = false;
    for placed in batches {
        each(checks.check(&placed?)?)?;
        any = true;
    }
    if !any {
        checks.check(&empty)?;
    }
    Ok(())
}

/// Reads a fetched file and checks it batch by batch; returns the records for the merge strategy (which needs
/// them together).
pub fn read_checked(
    step: &ReadStep,
    bytes: Bytes,
    file: &str,
    checks: &mut Checks,
) -> Result<RecordBatch, IngestError> {
    let mut checked = Vec::new();
    let mut schema = None;
    read_checked_each(step, bytes, file, checks, |b| {
        schema.get_or_insert_with(|| b.schema());
        checked.push(b);
        Ok(())
    })?;
    let schema = match schema {
        Some(s) => s,
        None => checks.schema().ok_or_else(|| {
            IngestError::Data(crate::data::DataError::Column {
                message: format!("{file}: no schema"),
            })
        })?,
    };
    concat_batches(&schema, &checked).map_err(schema::arrow("reading records"))
}
