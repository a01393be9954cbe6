//! The sans-IO parts of a top-N: the live records of the ranked input ([`LiveRecords`]: appends add a
//! record, retractions take out the earliest live record with the same data), and the changelog
//! between two results of the query over a partition ([`changelog`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{concat_batches, take};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};

use crate::changelog::{APPEND, CORRECT_FROM, CORRECT_TO, RETRACT};
use crate::error::EngineError;

/// The records of an input that are live: appended (or corrected to) and not retracted since.
#[derive(Debug, Clone)]
pub struct LiveRecords {
    schema: SchemaRef,
    /// The columns a retraction must match (all but offset, operation type and system time).
    data_columns: Vec<usize>,
    records: RecordBatch,
}

/// What applying a batch of changes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Records added.
    pub added: usize,
    /// Records taken out by a retraction or correction.
    pub removed: usize,
    /// Retractions or corrections that matched no live record.
    pub unmatched: usize,
}

impl LiveRecords {
    /// No live records of `schema`; retractions match on `data_columns`.
    pub fn new(schema: SchemaRef, data_columns: Vec<usize>) -> Self {
        Self {
            records: RecordBatch::new_empty(Arc::clone(&schema)),
            schema,
            data_columns,
        }
    }

    /// The live records, in arrival order.
    pub fn records(&self) -> &RecordBatch {
        &self.records
    }

    /// Their columns.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Number of live records.
    pub fn len(&self) -> usize {
        self.records.num_rows()
    }

    /// Whether no record is live.
    pub fn is_empty(&self) -> bool {
        self.records.num_rows() == 0
    }

    /// Restores live records (from a checkpoint).
    pub fn restore(&mut self, records: &RecordBatch) -> Result<(), EngineError> {
        let records = RecordBatch::try_new(self.schema(), records.columns().to_vec())?;
        self.records = concat_batches(&self.schema, [&self.records, &records])?;
        Ok(())
    }

    /// Applies `changes` in order, each with its operation type: Append and CorrectTo add the
    /// record; Retract and CorrectFrom take out the earliest live record with the same data.
    pub fn apply(&mut self, changes: &RecordBatch, ops: &[i32]) -> Result<Applied, EngineError> {
        let changes = RecordBatch::try_new(self.schema(), changes.columns().to_vec())?;
        let all = concat_batches(&self.schema, [&self.records, &changes])?;
        let keys: Vec<ArrayRef> = self
            .data_columns
            .iter()
            .map(|&i| Arc::clone(all.column(i)))
            .collect();
        let converter = RowConverter::new(
            keys.iter()
                .map(|k| SortField::new(k.data_type().clone()))
                .collect(),
        )?;
        let rows = converter.convert_columns(&keys)?;
        let live_before = self.records.num_rows();
        let mut live: Vec<bool> = vec![true; live_before];
        live.extend(std::iter::repeat_n(false, changes.num_rows()));
        let mut by_data: HashMap<&[u8], VecDeque<usize>> = HashMap::new();
        for i in 0..live_before {
            by_data.entry(rows.row(i).data()).or_default().push_back(i);
        }
        let mut applied = Applied::default();
        for (j, op) in ops.iter().enumerate() {
            let i = live_before + j;
            let data = rows.row(i).data();
            match *op {
                APPEND | CORRECT_TO => {
                    live[i] = true;
                    by_data.entry(data).or_default().push_back(i);
                    applied.added += 1;
                }
                RETRACT | CORRECT_FROM => {
                    match by_data.get_mut(data).and_then(VecDeque::pop_front) {
                        Some(found) => {
                            live[found] = false;
                            applied.removed += 1;
                        }
                        None => applied.unmatched += 1,
                    }
                }
                other => {
                    return Err(EngineError::InvalidOperationType {
                        column: "op".to_owned(),
                        value: other.to_string(),
                    });
                }
            }
        }
        let kept: UInt32Array = (0..all.num_rows() as u32)
            .filter(|&i| live[i as usize])
            .collect();
        let columns = all
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &kept, None))
            .collect::<Result<Vec<_>, _>>()?;
        self.records = RecordBatch::try_new_with_options(
            self.schema(),
            columns,
            &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(kept.len())),
        )?;
        Ok(applied)
    }
}

/// Where the parts of a ranked result are: the query's columns `0..query_columns`, then the rank
/// (Int64), the input offset (Int64) and the partition keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankedColumns {
    /// Number of the query's own columns.
    pub query_columns: usize,
    /// Number of partition keys.
    pub partition_keys: usize,
}

impl RankedColumns {
    fn rank(&self) -> usize {
        self.query_columns
    }
    fn offset(&self) -> usize {
        self.query_columns + 1
    }
    fn keys(&self) -> std::ops::Range<usize> {
        self.query_columns + 2..self.query_columns + 2 + self.partition_keys
    }
}

/// The changelog that turns the result `before` into `after` (both ranked results of the same
/// partitions): rows of `before` no longer in `after` leave, rows of `after` not in `before` enter (as
/// multisets of the query's columns within a partition). In each partition, a leaving and an entering
/// row of the same rank form a correction (CorrectFrom the old row, CorrectTo the new); the others are
/// Retract and Append. Records follow partition, then rank, then input offset; a correction's halves
/// are adjacent.
///
/// Returns the query's columns of the records and their operation types.
pub fn changelog(
    before: &RecordBatch,
    after: &RecordBatch,
    columns: RankedColumns,
) -> Result<(RecordBatch, Vec<i32>), EngineError> {
    let schema = after.schema();
    let before = RecordBatch::try_new(Arc::clone(&schema), before.columns().to_vec())?;
    let all = concat_batches(&schema, [&before, after])?;
    let split = before.num_rows();
    let row_converter = |indices: &[usize]| -> Result<(RowConverter, Vec<OwnedRow>), EngineError> {
        let arrays: Vec<ArrayRef> = indices.iter().map(|&i| Arc::clone(all.column(i))).collect();
        let converter = RowConverter::new(
            arrays
                .iter()
                .map(|a| SortField::new(a.data_type().clone()))
                .collect(),
        )?;
        let rows = converter.convert_columns(&arrays)?;
        let owned = (0..all.num_rows()).map(|i| rows.row(i).owned()).collect();
        Ok((converter, owned))
    };
    let keys: Vec<usize> = columns.keys().collect();
    let mut identity_columns: Vec<usize> = (0..columns.query_columns).collect();
    identity_columns.extend(keys.iter().copied());
    let (_, identities) = row_converter(&identity_columns)?;
    let (_, partitions) = if keys.is_empty() {
        (None, vec![])
    } else {
        let (c, r) = row_converter(&keys)?;
        (Some(c), r)
    };
    let partition_of = |i: usize| -> Vec<u8> {
        partitions
            .get(i)
            .map(|r| r.row().data().to_vec())
            .unwrap_or_default()
    };
    let ranks = crate::interval::state::int64(all.column(columns.rank()))?;
    let offsets = crate::interval::state::int64(all.column(columns.offset()))?;
    let value = |a: &datafusion::arrow::array::Int64Array, i: usize| {
        if a.is_valid(i) { a.value(i) } else { i64::MIN }
    };

    // Multiset difference: rows of `after` cancel equal rows of `before`.
    let mut unmatched_before: HashMap<Vec<u8>, VecDeque<usize>> = HashMap::new();
    for (i, identity) in identities.iter().enumerate().take(split) {
        unmatched_before
            .entry(identity.row().data().to_vec())
            .or_default()
            .push_back(i);
    }
    let mut entering = Vec::new();
    for (i, identity) in identities.iter().enumerate().skip(split) {
        match unmatched_before
            .get_mut(identity.row().data())
            .and_then(VecDeque::pop_front)
        {
            Some(_) => {}
            None => entering.push(i),
        }
    }
    let mut leaving: Vec<usize> = unmatched_before.into_values().flatten().collect();
    leaving.sort_unstable();

    // Per (partition, rank): the rows leaving and entering, each in offset order.
    type Slot = (Vec<usize>, Vec<usize>);
    let mut slots: BTreeMap<(Vec<u8>, i64), Slot> = BTreeMap::new();
    for &i in &leaving {
        slots
            .entry((partition_of(i), value(&ranks, i)))
            .or_default()
            .0
            .push(i);
    }
    for &i in &entering {
        slots
            .entry((partition_of(i), value(&ranks, i)))
            .or_default()
            .1
            .push(i);
    }
    let mut order = Vec::new();
    let mut ops = Vec::new();
    for (_, (mut out, mut into)) in slots {
        out.sort_by_key(|&i| (value(&offsets, i), i));
        into.sort_by_key(|&i| (value(&offsets, i), i));
        let pairs = out.len().min(into.len());
        for k in 0..pairs {
            order.extend([out[k] as u32, into[k] as u32]);
            ops.extend([CORRECT_FROM, CORRECT_TO]);
        }
        for &i in &out[pairs..] {
            order.push(i as u32);
            ops.push(RETRACT);
        }
        for &i in &into[pairs..] {
            order.push(i as u32);
            ops.push(APPEND);
        }
    }
    let indices = UInt32Array::from(order);
    let query_schema = Arc::new(datafusion::arrow::datatypes::Schema::new(
        schema.fields()[..columns.query_columns].to_vec(),
    ));
    let out = all.columns()[..columns.query_columns]
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<Vec<_>, _>>()?;
    let batch = RecordBatch::try_new_with_options(
        query_schema,
        out,
        &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(indices.len())),
    )?;
    Ok((batch, ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn live_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("player", DataType::Utf8, false),
            Field::new("score", DataType::Int64, false),
        ]))
    }

    fn live_batch(rows: &[(i64, &str, i64)]) -> RecordBatch {
        RecordBatch::try_new(
            live_schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap()
    }

    fn offsets(batch: &RecordBatch) -> Vec<i64> {
        crate::interval::state::int64(batch.column(0))
            .unwrap()
            .values()
            .to_vec()
    }

    #[test]
    fn a_retraction_takes_out_the_earliest_live_record_with_its_data() {
        let mut live = LiveRecords::new(live_schema(), vec![1, 2]);
        let applied = live
            .apply(
                &live_batch(&[(0, "a", 1), (1, "a", 1), (2, "b", 2)]),
                &[APPEND, APPEND, APPEND],
            )
            .unwrap();
        assert_eq!(applied.added, 3);
        // Retract one "a 1" (the earliest), correct "b 2" to "b 5", retract something never added.
        let applied = live
            .apply(
                &live_batch(&[(3, "a", 1), (4, "b", 2), (5, "b", 5), (6, "c", 9)]),
                &[RETRACT, CORRECT_FROM, CORRECT_TO, RETRACT],
            )
            .unwrap();
        assert_eq!(
            applied,
            Applied {
                added: 1,
                removed: 2,
                unmatched: 1
            }
        );
        assert_eq!(offsets(live.records()), [1, 5]);
    }

    fn ranked(rows: &[(&str, i64, i64, i64)]) -> RecordBatch {
        // query columns: player, place; hidden: rank, offset, partition key
        let schema = Arc::new(Schema::new(vec![
            Field::new("player", DataType::Utf8, false),
            Field::new("place", DataType::Int64, false),
            Field::new("__weir_rank", DataType::Int64, false),
            Field::new("__weir_ranked_offset", DataType::Int64, false),
            Field::new("__weir_partition_0", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
            ],
        )
        .unwrap()
    }

    fn described(batch: &RecordBatch, ops: &[i32]) -> Vec<String> {
        let players = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let places = crate::interval::state::int64(batch.column(1)).unwrap();
        (0..batch.num_rows())
            .map(|i| format!("{} {}@{}", ops[i], players.value(i), places.value(i)))
            .collect()
    }

    const COLUMNS: RankedColumns = RankedColumns {
        query_columns: 2,
        partition_keys: 1,
    };

    #[test]
    fn a_new_leader_corrects_every_place_it_pushes_down_and_retracts_the_one_pushed_out() {
        let before = ranked(&[("a", 1, 0, 1), ("b", 2, 1, 1)]);
        let after = ranked(&[("c", 1, 2, 1), ("a", 2, 0, 1)]);
        let (batch, ops) = changelog(&before, &after, COLUMNS).unwrap();
        assert_eq!(
            described(&batch, &ops),
            ["2 a@1", "3 c@1", "2 b@2", "3 a@2"]
        );
    }

    #[test]
    fn unchanged_rows_emit_nothing_and_partitions_pair_separately() {
        let before = ranked(&[("a", 1, 0, 1), ("x", 1, 5, 2)]);
        let after = ranked(&[("a", 1, 0, 1), ("b", 2, 1, 1), ("y", 1, 6, 2)]);
        let (batch, ops) = changelog(&before, &after, COLUMNS).unwrap();
        assert_eq!(described(&batch, &ops), ["0 b@2", "2 x@1", "3 y@1"]);
        // The whole partition gone: retractions only.
        let (batch, ops) = changelog(&before, &ranked(&[]), COLUMNS).unwrap();
        assert_eq!(described(&batch, &ops), ["1 a@1", "1 x@1"]);
    }
}
