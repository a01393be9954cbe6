//! [`JoinSide`]: the sans-IO state of one side of an interval join — the records that records still to
//! come from the other side may match, each with whether it has matched yet.
//!
//! A record of side `x` may match a record `y` of the other side when `y.t - x.t` lies in the join's
//! bound `[lower, upper]` (seen from `x`). Records of the other side still to come have event times at
//! or after the other side's watermark `W`, so `x` can still match one only while `x.t + upper >= W`:
//! [`JoinSide::expire`] takes out the records past that point, which for an outer join's preserved side
//! are then emitted with nulls if they never matched.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use datafusion::arrow::compute::{cast, concat_batches, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::EngineError;
use crate::temporal::state::millis;

/// Column of a checkpoint's preserved-side records: whether the record has matched.
pub(crate) const MATCHED_COLUMN: &str = "__weir_matched";

/// The kept records of one side.
#[derive(Debug, Clone)]
pub struct JoinSide {
    schema: SchemaRef,
    event_time: usize,
    offset: usize,
    records: RecordBatch,
    matched: Vec<bool>,
    watermark_ms: Option<i64>,
}

impl JoinSide {
    /// A side with no records, whose records have `schema` (event time and offset at those columns).
    pub fn new(
        schema: SchemaRef,
        event_time: usize,
        offset: usize,
        watermark_ms: Option<i64>,
    ) -> Self {
        Self {
            records: RecordBatch::new_empty(Arc::clone(&schema)),
            schema,
            event_time,
            offset,
            matched: Vec::new(),
            watermark_ms,
        }
    }

    /// The records' columns.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The kept records, in arrival order.
    pub fn records(&self) -> &RecordBatch {
        &self.records
    }

    /// Number of kept records.
    pub fn len(&self) -> usize {
        self.records.num_rows()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.records.num_rows() == 0
    }

    /// This side's latest watermark so far.
    pub fn watermark_ms(&self) -> Option<i64> {
        self.watermark_ms
    }

    /// Raises this side's watermark (never lowers it).
    pub fn advance(&mut self, watermark_ms: i64) {
        self.watermark_ms = Some(
            self.watermark_ms
                .map_or(watermark_ms, |w| w.max(watermark_ms)),
        );
    }

    /// Splits `batch` into the records on time and the late ones: event time before this side's
    /// watermark (the other side's records they could match may be gone), or none at all.
    pub fn split_late(&self, batch: &RecordBatch) -> Result<(RecordBatch, usize), EngineError> {
        let Some(watermark) = self.watermark_ms else {
            return Ok((batch.clone(), 0));
        };
        let times = millis(batch.column(self.event_time))?;
        let on_time: BooleanArray = times
            .iter()
            .map(|t| Some(t.is_some_and(|t| t >= watermark)))
            .collect();
        let kept = filter_record_batch(batch, &on_time)?;
        let late = batch.num_rows() - kept.num_rows();
        Ok((kept, late))
    }

    /// Keeps `batch`'s records (none matched yet).
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), EngineError> {
        let batch = RecordBatch::try_new(self.schema(), batch.columns().to_vec())?;
        self.records = concat_batches(&self.schema, [&self.records, &batch])?;
        self.matched
            .extend(std::iter::repeat_n(false, batch.num_rows()));
        Ok(())
    }

    /// Restores kept records and their matched flags (from a checkpoint).
    pub fn restore(&mut self, batch: &RecordBatch, matched: &[bool]) -> Result<(), EngineError> {
        self.push(batch)?;
        let start = self.matched.len() - matched.len();
        self.matched[start..].copy_from_slice(matched);
        Ok(())
    }

    /// Marks the records with these offsets as matched.
    pub fn mark_matched(&mut self, offsets: &HashSet<i64>) -> Result<(), EngineError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let own = int64(self.records.column(self.offset))?;
        for (i, flag) in self.matched.iter_mut().enumerate() {
            if own.is_valid(i) && offsets.contains(&own.value(i)) {
                *flag = true;
            }
        }
        Ok(())
    }

    /// Whether each kept record has matched.
    pub fn matched(&self) -> &[bool] {
        &self.matched
    }

    /// Takes out the records no record of the other side still to come can match: `t + upper_ms` before
    /// `other_watermark_ms`, or no event time. Returns them with their matched flags.
    pub fn expire(
        &mut self,
        upper_ms: i64,
        other_watermark_ms: Option<i64>,
    ) -> Result<(RecordBatch, Vec<bool>), EngineError> {
        let times = millis(self.records.column(self.event_time))?;
        let expired: Vec<bool> = times
            .iter()
            .map(|t| match (t, other_watermark_ms) {
                (None, _) => true,
                (Some(t), Some(w)) => t.saturating_add(upper_ms) < w,
                (Some(_), None) => false,
            })
            .collect();
        let mask = BooleanArray::from(expired.clone());
        let out = filter_record_batch(&self.records, &mask)?;
        let kept = filter_record_batch(&self.records, &datafusion::arrow::compute::not(&mask)?)?;
        let mut out_matched = Vec::new();
        let mut kept_matched = Vec::new();
        for (flag, gone) in self.matched.iter().zip(&expired) {
            if *gone {
                out_matched.push(*flag);
            } else {
                kept_matched.push(*flag);
            }
        }
        self.records = kept;
        self.matched = kept_matched;
        Ok((out, out_matched))
    }

    /// The kept records with their matched flags as a last column (a checkpoint part).
    pub fn with_matched(&self) -> Result<RecordBatch, EngineError> {
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(MATCHED_COLUMN, DataType::Boolean, false));
        let mut columns: Vec<ArrayRef> = self.records.columns().to_vec();
        columns.push(Arc::new(BooleanArray::from(self.matched.clone())));
        Ok(RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns,
        )?)
    }
}

/// A column of integers as Int64.
pub(crate) fn int64(column: &ArrayRef) -> Result<Int64Array, EngineError> {
    let ints = cast(column, &DataType::Int64)?;
    ints.as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .ok_or_else(|| EngineError::MalformedRequest {
            reason: format!("{} is not an integer column", column.data_type()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::TimestampMillisecondArray;
    use datafusion::arrow::datatypes::TimeUnit;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new(
                "event_time",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
        ]))
    }

    fn batch(rows: &[(i64, Option<i64>)]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(
                    TimestampMillisecondArray::from_iter(rows.iter().map(|r| r.1))
                        .with_timezone("UTC"),
                ),
            ],
        )
        .unwrap()
    }

    fn offsets(batch: &RecordBatch) -> Vec<i64> {
        int64(batch.column(0)).unwrap().values().to_vec()
    }

    #[test]
    fn records_expire_once_the_other_watermark_passes_their_bound() {
        let mut side = JoinSide::new(schema(), 1, 0, None);
        side.push(&batch(&[
            (0, Some(100)),
            (1, Some(200)),
            (2, None),
            (3, Some(50)),
        ]))
        .unwrap();
        side.mark_matched(&HashSet::from([1, 3])).unwrap();
        // Without the other side's watermark only records without event time go.
        let (gone, matched) = side.expire(10, None).unwrap();
        assert_eq!((offsets(&gone), matched), (vec![2], vec![false]));
        // t + 10 < 150: offsets 0 (110) and 3 (60).
        let (gone, matched) = side.expire(10, Some(150)).unwrap();
        assert_eq!((offsets(&gone), matched), (vec![0, 3], vec![false, true]));
        assert_eq!(offsets(side.records()), [1]);
        assert_eq!(side.matched(), [true]);
        // The bound is inclusive: 200 + 10 is not before 210.
        assert_eq!(side.expire(10, Some(210)).unwrap().0.num_rows(), 0);
    }

    #[test]
    fn records_before_the_sides_own_watermark_are_late() {
        let mut side = JoinSide::new(schema(), 1, 0, None);
        let input = batch(&[(0, Some(100)), (1, Some(200)), (2, None)]);
        assert_eq!(side.split_late(&input).unwrap().1, 0);
        side.advance(150);
        side.advance(120);
        assert_eq!(side.watermark_ms(), Some(150));
        let (kept, late) = side.split_late(&input).unwrap();
        assert_eq!((offsets(&kept), late), (vec![1], 2));
    }

    #[test]
    fn matched_flags_survive_a_checkpoint_round_trip() {
        let mut side = JoinSide::new(schema(), 1, 0, Some(7));
        side.push(&batch(&[(0, Some(100)), (1, Some(200))]))
            .unwrap();
        side.mark_matched(&HashSet::from([0])).unwrap();
        let part = side.with_matched().unwrap();
        assert_eq!(part.num_columns(), 3);
        let mut restored = JoinSide::new(schema(), 1, 0, Some(7));
        let columns = part.columns()[..2].to_vec();
        restored
            .restore(
                &RecordBatch::try_new(schema(), columns).unwrap(),
                &[true, false],
            )
            .unwrap();
        assert_eq!(restored.matched(), [true, false]);
        assert_eq!(offsets(restored.records()), [0, 1]);
    }
}
