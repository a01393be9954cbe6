//! [`JoinSide`]: the sans-IO state of one side of an interval join — the records that records still to
//! come from the other side may match, each with whether it has matched yet.
//!
//! A record of side `x` may match a record `y` of the other side when `y.t - x.t` lies in the join's
//! bound `[lower, upper]` (seen from `x`). Records of the other side still to come have event times at
//! or after the other side's watermark `W`, so `x` can still match one only while `x.t + upper >= W`:
//! [`JoinSide::expire`] takes out the records past that point, which for an outer join's preserved side
//! are then emitted with nulls if they never matched.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use datafusion::arrow::compute::{cast, concat_batches, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::EngineError;
use crate::temporal::state::millis;

/// Column of a format-3 checkpoint's records: whether the record has matched.
pub(crate) const MATCHED_COLUMN: &str = "__weir_matched";
/// Column of a checkpoint's records: how many matches the record has (UInt64).
pub(crate) const MATCHES_COLUMN: &str = "__weir_matches";
/// A record's number of matches when it is known to have matched but not how often (a record kept
/// from a format-3 checkpoint): retractions of its matches never make it unmatched.
pub const UNKNOWN_MATCHES: u64 = u64::MAX;

/// The kept records of one side.
#[derive(Debug, Clone)]
pub struct JoinSide {
    schema: SchemaRef,
    event_time: usize,
    offset: usize,
    records: RecordBatch,
    /// Each kept record's number of matches so far ([`UNKNOWN_MATCHES`]: matched, how often unknown).
    matches: Vec<u64>,
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
            matches: Vec::new(),
            watermark_ms,
        }
    }

    /// The records' columns.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The position of the offset column.
    pub fn offset_index(&self) -> usize {
        self.offset
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
        self.matches
            .extend(std::iter::repeat_n(0, batch.num_rows()));
        Ok(())
    }

    /// Restores kept records and their numbers of matches (from a checkpoint).
    pub fn restore(&mut self, batch: &RecordBatch, matches: &[u64]) -> Result<(), EngineError> {
        self.push(batch)?;
        let start = self.matches.len() - matches.len();
        self.matches[start..].copy_from_slice(matches);
        Ok(())
    }

    /// Adds matches to the records with these offsets (offset, number of new matches).
    pub fn add_matches(&mut self, offsets: &HashMap<i64, u64>) -> Result<(), EngineError> {
        self.change_matches(offsets, |count, n| {
            if count == UNKNOWN_MATCHES {
                count
            } else {
                count.saturating_add(n).min(UNKNOWN_MATCHES - 1)
            }
        })
    }

    /// Takes matches from the records with these offsets (their matches were retracted).
    pub fn remove_matches(&mut self, offsets: &HashMap<i64, u64>) -> Result<(), EngineError> {
        self.change_matches(offsets, |count, n| {
            if count == UNKNOWN_MATCHES {
                count
            } else {
                count.saturating_sub(n)
            }
        })
    }

    fn change_matches(
        &mut self,
        offsets: &HashMap<i64, u64>,
        change: impl Fn(u64, u64) -> u64,
    ) -> Result<(), EngineError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let own = int64(self.records.column(self.offset))?;
        for (i, count) in self.matches.iter_mut().enumerate() {
            if own.is_valid(i)
                && let Some(&n) = offsets.get(&own.value(i))
            {
                *count = change(*count, n);
            }
        }
        Ok(())
    }

    /// Takes out, for each record of `batch` in order, the earliest kept record with the same values
    /// in `data_columns` (a retraction names the record it cancels by its data). Returns, for each
    /// record of `batch`, whether it found one.
    pub fn remove_matching(
        &mut self,
        batch: &RecordBatch,
        data_columns: &[usize],
    ) -> Result<Vec<bool>, EngineError> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let batch = RecordBatch::try_new(self.schema(), batch.columns().to_vec())?;
        let all = concat_batches(&self.schema, [&self.records, &batch])?;
        let keys: Vec<ArrayRef> = data_columns
            .iter()
            .map(|&i| Arc::clone(all.column(i)))
            .collect();
        let converter = datafusion::arrow::row::RowConverter::new(
            keys.iter()
                .map(|k| datafusion::arrow::row::SortField::new(k.data_type().clone()))
                .collect(),
        )?;
        let rows = converter.convert_columns(&keys)?;
        let kept = self.records.num_rows();
        let mut by_data: std::collections::HashMap<&[u8], std::collections::VecDeque<usize>> =
            std::collections::HashMap::new();
        for i in 0..kept {
            by_data.entry(rows.row(i).data()).or_default().push_back(i);
        }
        let mut live = vec![true; kept];
        let mut found = Vec::with_capacity(batch.num_rows());
        for j in 0..batch.num_rows() {
            match by_data
                .get_mut(rows.row(kept + j).data())
                .and_then(std::collections::VecDeque::pop_front)
            {
                Some(i) => {
                    live[i] = false;
                    found.push(true);
                }
                None => found.push(false),
            }
        }
        let mask = BooleanArray::from(live.clone());
        self.records = filter_record_batch(&self.records, &mask)?;
        self.matches = self
            .matches
            .iter()
            .zip(&live)
            .filter(|(_, l)| **l)
            .map(|(m, _)| *m)
            .collect();
        Ok(found)
    }

    /// Whether each kept record has matched.
    pub fn matched(&self) -> Vec<bool> {
        self.matches.iter().map(|&n| n > 0).collect()
    }

    /// Each kept record's number of matches ([`UNKNOWN_MATCHES`] when unknown).
    pub fn matches(&self) -> &[u64] {
        &self.matches
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
        let mut kept_matches = Vec::new();
        for (count, gone) in self.matches.iter().zip(&expired) {
            if *gone {
                out_matched.push(*count > 0);
            } else {
                kept_matches.push(*count);
            }
        }
        self.records = kept;
        self.matches = kept_matches;
        Ok((out, out_matched))
    }

    /// The kept records with their numbers of matches as a last column (a checkpoint part).
    pub fn with_matches(&self) -> Result<RecordBatch, EngineError> {
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(MATCHES_COLUMN, DataType::UInt64, false));
        let mut columns: Vec<ArrayRef> = self.records.columns().to_vec();
        columns.push(Arc::new(datafusion::arrow::array::UInt64Array::from(
            self.matches.clone(),
        )));
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
        side.add_matches(&HashMap::from([(1, 1), (3, 2)])).unwrap();
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
    fn a_retraction_removes_the_earliest_kept_record_with_its_data() {
        let mut side = JoinSide::new(schema(), 1, 0, None);
        side.push(&batch(&[(0, Some(100)), (1, Some(100)), (2, Some(200))]))
            .unwrap();
        // Data is the event time alone here: offsets 0 and 1 are the same record.
        let found = side
            .remove_matching(&batch(&[(7, Some(100)), (8, Some(300))]), &[1])
            .unwrap();
        assert_eq!(found, [true, false]);
        assert_eq!(offsets(side.records()), [1, 2]);
        assert_eq!(side.matched(), [false, false]);
    }

    #[test]
    fn retracted_matches_make_a_record_unmatched_unless_its_count_is_unknown() {
        let mut side = JoinSide::new(schema(), 1, 0, None);
        side.push(&batch(&[(0, Some(100)), (1, Some(200))]))
            .unwrap();
        side.add_matches(&HashMap::from([(0, 2), (1, 1)])).unwrap();
        side.remove_matches(&HashMap::from([(0, 1), (1, 1)]))
            .unwrap();
        assert_eq!(side.matches(), [1, 0]);
        assert_eq!(side.matched(), [true, false]);
        let mut upgraded = JoinSide::new(schema(), 1, 0, None);
        upgraded
            .restore(&batch(&[(0, Some(100))]), &[UNKNOWN_MATCHES])
            .unwrap();
        upgraded.remove_matches(&HashMap::from([(0, 5)])).unwrap();
        upgraded.add_matches(&HashMap::from([(0, 1)])).unwrap();
        assert_eq!(upgraded.matches(), [UNKNOWN_MATCHES]);
    }

    #[test]
    fn match_counts_survive_a_checkpoint_round_trip() {
        let mut side = JoinSide::new(schema(), 1, 0, Some(7));
        side.push(&batch(&[(0, Some(100)), (1, Some(200))]))
            .unwrap();
        side.add_matches(&HashMap::from([(0, 3)])).unwrap();
        let part = side.with_matches().unwrap();
        assert_eq!(part.num_columns(), 3);
        let mut restored = JoinSide::new(schema(), 1, 0, Some(7));
        let columns = part.columns()[..2].to_vec();
        restored
            .restore(&RecordBatch::try_new(schema(), columns).unwrap(), &[3, 0])
            .unwrap();
        assert_eq!(restored.matched(), [true, false]);
        assert_eq!(offsets(restored.records()), [0, 1]);
    }
}
