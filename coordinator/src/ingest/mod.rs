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

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use bytes::Bytes;

use check::Checks;
use error::IngestError;
use odf::ReadStep;

/// Reads a fetched file and checks it batch by batch; returns the records for the merge strategy.
pub fn read_checked(
    step: &ReadStep,
    bytes: Bytes,
    file: &str,
    checks: &mut Checks,
) -> Result<RecordBatch, IngestError> {
    let batches = read::read_batches(step, bytes, file, Some(checks.event_time()))?;
    let empty = read::Placed {
        batch: RecordBatch::new_empty(batches.schema.clone()),
        places: error::Places::run(error::Unit::Row, 1, 0),
    };
    let mut checked = Vec::new();
    for placed in batches {
        checked.push(checks.check(&placed?)?);
    }
    if checked.is_empty() {
        // No records: the schema is still checked.
        checked.push(checks.check(&empty)?);
    }
    concat_batches(&checked[0].schema(), &checked).map_err(schema::arrow("reading records"))
}
