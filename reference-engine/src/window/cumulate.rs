//! Cumulating windows (Flink's `CUMULATE`): windows of one start, aligned to `size`, whose ends grow by
//! `step` up to `size`. A record belongs to every cumulating window of its size window that ends after
//! it. The pre-aggregation plan gives each record the end of the smallest one
//! ([`super::functions::CUMULATE_END`]) and [`cumulate_copies`] adds the larger ones before the
//! records are buffered; a cumulating window is known by its end (buffered in the window column) and
//! its start follows from it ([`start_of`]).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, TimestampMillisecondArray, UInt32Array};
use datafusion::arrow::compute::take;

use crate::error::EngineError;

/// The start of the cumulating window ending at `end`, with windows of at most `size_ms`.
pub(crate) fn start_of(end: i64, size_ms: i64) -> i64 {
    end.saturating_sub(1)
        .div_euclid(size_ms.max(1))
        .saturating_mul(size_ms)
}

/// Each pre-aggregated record once per cumulating window holding it: its copies follow it (offset
/// order is kept), the first with the smallest window's end (column 0), each next one `step_ms` later,
/// up to the end of its size window. Records without a window are kept once (they are dropped later).
pub(crate) fn cumulate_copies(
    batch: &RecordBatch,
    size_ms: i64,
    step_ms: i64,
) -> Result<RecordBatch, EngineError> {
    let step = step_ms.max(1);
    let ends = batch
        .column(0)
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .cloned()
        .ok_or_else(|| EngineError::MalformedRequest {
            reason: "window ends are not millisecond timestamps".to_owned(),
        })?;
    let mut indices = Vec::with_capacity(batch.num_rows());
    let mut shifted = Vec::with_capacity(batch.num_rows());
    for (row, end) in ends.iter().enumerate() {
        let row = u32::try_from(row).map_err(|_| EngineError::MalformedRequest {
            reason: "too many records in one batch".to_owned(),
        })?;
        let Some(first) = end else {
            indices.push(row);
            shifted.push(None);
            continue;
        };
        let last = start_of(first, size_ms).saturating_add(size_ms);
        let mut end = first;
        loop {
            indices.push(row);
            shifted.push(Some(end));
            end = end.saturating_add(step);
            if end > last || end == i64::MAX {
                break;
            }
        }
    }
    let indices = UInt32Array::from(indices);
    let mut columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<_, _>>()?;
    columns[0] =
        Arc::new(TimestampMillisecondArray::from(shifted).with_timezone_opt(ends.timezone()));
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    #[test]
    fn each_record_is_copied_into_every_larger_window_of_its_size_window() {
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "w",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
            Field::new("x", DataType::Int64, false),
        ]));
        // Windows of at most 100 every 25: a record at 30 is first in [0, 50), at 99 in [0, 100).
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(
                    TimestampMillisecondArray::from(vec![Some(50), Some(100), None])
                        .with_timezone("UTC"),
                ),
                Arc::new(Int64Array::from(vec![1, 2, 3])),
            ],
        )
        .unwrap();
        let copies = cumulate_copies(&batch, 100, 25).unwrap();
        let ends = copies
            .column(0)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap();
        assert_eq!(
            ends.iter().collect::<Vec<_>>(),
            [Some(50), Some(75), Some(100), Some(100), None]
        );
        let x = copies
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(x.values().to_vec(), [1, 1, 1, 2, 3]);
        assert_eq!(start_of(100, 100), 0);
        assert_eq!(start_of(101, 100), 100);
        assert_eq!(start_of(0, 100), -100);
    }
}
