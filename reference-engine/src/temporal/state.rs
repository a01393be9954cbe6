//! The sans-IO state of a temporal join: each temporal table's versions by primary key and event time
//! ([`VersionedTable`]), and the stream records still waiting for the tables' watermark
//! ([`PendingStream`]).
//!
//! A table's changelog is read the way Flink reads an upsert changelog for a temporal join: every
//! record sets its key's entry *at its own event time* — an Append or a CorrectTo to its row, a Retract
//! to "no row" — and a later record for the same key and event time replaces the earlier one. A
//! CorrectFrom (the old image of a correction) changes nothing by itself: its CorrectTo replaces the
//! row from the CorrectTo's event time. (When the correction changes the primary key, the old key has
//! no row from the CorrectTo's event time on.) The table as of time `t` holds, per key, the latest
//! entry at or before `t`, if that entry is a row.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray,
};
use datafusion::arrow::compute::{cast, concat_batches, filter_record_batch, interleave};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::row::{RowConverter, SortField};

use crate::changelog::{APPEND, CORRECT_FROM, CORRECT_TO, RETRACT};
use crate::error::EngineError;

/// Column of a table's versions: the event time from which the row holds.
pub(crate) const VALID_FROM: &str = "__weir_valid_from";
/// Column of a table's versions: the event time from which it no longer holds (null: still holds).
pub(crate) const VALID_TO: &str = "__weir_valid_to";
/// Column of a table's kept entries: the event time of the entry (ms since the epoch).
pub(crate) const ENTRY_AT: &str = "__weir_entry_at";
/// Column of a table's kept entries: whether the entry is a row (or the key's removal).
pub(crate) const ENTRY_LIVE: &str = "__weir_entry_live";

fn malformed(reason: impl Into<String>) -> EngineError {
    EngineError::MalformedRequest {
        reason: reason.into(),
    }
}

/// Where the system columns and the primary key are in a table's records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableColumns {
    /// Primary key columns.
    pub primary_key: Vec<usize>,
    /// The event time column.
    pub event_time: usize,
    /// The offset column.
    pub offset: usize,
    /// The operation type column (inputs without one are all appends).
    pub op: Option<usize>,
}

impl TableColumns {
    /// Finds the columns by name in `schema`.
    pub(crate) fn find(
        schema: &Schema,
        alias: &str,
        primary_key: &[String],
        vocab: &crate::request::DatasetVocabulary,
    ) -> Result<Self, EngineError> {
        let find = |name: &str, what: &str| {
            schema
                .index_of(name)
                .map_err(|_| EngineError::UnsupportedTemporalJoin {
                    reason: format!("the temporal table `{alias}` has no {what} column `{name}`"),
                })
        };
        if primary_key.is_empty() {
            return Err(EngineError::UnsupportedTemporalJoin {
                reason: format!("the temporal table `{alias}` declares no primary key"),
            });
        }
        Ok(Self {
            primary_key: primary_key
                .iter()
                .map(|c| find(c, "primary key"))
                .collect::<Result<_, _>>()?,
            event_time: find(&vocab.event_time_column, "event time")?,
            offset: find(&vocab.offset_column, "offset")?,
            op: schema.index_of(&vocab.operation_type_column).ok(),
        })
    }
}

/// One entry of a key: the record behind it (batch, row) and whether it is a row or a removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    batch: usize,
    row: usize,
    live: bool,
}

/// A temporal table: per primary key, its entries by event time, and how far its watermark went.
#[derive(Debug)]
pub struct VersionedTable {
    schema: SchemaRef,
    columns: TableColumns,
    converter: RowConverter,
    batches: Vec<RecordBatch>,
    keys: BTreeMap<Box<[u8]>, BTreeMap<i64, Entry>>,
    watermark_ms: Option<i64>,
    without_event_time: u64,
    /// The key, batch and row of the CorrectFrom just applied, waiting for its CorrectTo.
    before: Option<(Box<[u8]>, usize, usize)>,
}

impl VersionedTable {
    /// An empty table of records with `schema`.
    pub(crate) fn new(
        schema: SchemaRef,
        columns: TableColumns,
        watermark_ms: Option<i64>,
    ) -> Result<Self, EngineError> {
        let converter = RowConverter::new(
            columns
                .primary_key
                .iter()
                .map(|&i| SortField::new(schema.field(i).data_type().clone()))
                .collect(),
        )?;
        Ok(Self {
            schema,
            columns,
            converter,
            batches: Vec::new(),
            keys: BTreeMap::new(),
            watermark_ms,
            without_event_time: 0,
            before: None,
        })
    }

    /// Schema of the table's records.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The table's watermark (ms since the epoch): no record at or before it is expected any more.
    pub fn watermark_ms(&self) -> Option<i64> {
        self.watermark_ms
    }

    /// Number of keys with at least one entry.
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Records ignored because they had no event time.
    pub fn records_without_event_time(&self) -> u64 {
        self.without_event_time
    }

    /// Applies changelog records, in offset order.
    pub fn apply(&mut self, batch: &RecordBatch) -> Result<(), EngineError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.check(batch)?;
        let keys = self.keys_of(batch)?;
        let times = millis(batch.column(self.columns.event_time))?;
        let ops = operation_types(batch, self.columns.op)?;
        let index = self.batches.len();
        let mut without_event_time = 0;
        for row in 0..batch.num_rows() {
            let key: Box<[u8]> = Box::from(keys.row(row).as_ref());
            let before = self.before.take();
            let live = match ops.get(row).copied().unwrap_or(APPEND) {
                APPEND => true,
                RETRACT => false,
                CORRECT_FROM => {
                    self.before = Some((key, index, row));
                    continue;
                }
                CORRECT_TO => {
                    if let Some((old, old_batch, old_row)) = before
                        && old != key
                        && times.is_valid(row)
                    {
                        let removal = Entry {
                            batch: old_batch,
                            row: old_row,
                            live: false,
                        };
                        self.keys
                            .entry(old)
                            .or_default()
                            .insert(times.value(row), removal);
                    }
                    true
                }
                other => {
                    return Err(EngineError::InvalidOperationType {
                        column: "op".to_owned(),
                        value: other.to_string(),
                    });
                }
            };
            if times.is_null(row) {
                without_event_time += 1;
                continue;
            }
            self.keys.entry(key).or_default().insert(
                times.value(row),
                Entry {
                    batch: index,
                    row,
                    live,
                },
            );
        }
        if without_event_time > 0 {
            self.without_event_time += without_event_time;
            tracing::warn!(
                ignored = without_event_time,
                "temporal table records without event time ignored"
            );
        }
        self.batches.push(batch.clone());
        Ok(())
    }

    /// Restores kept entries ([`VersionedTable::retained`]'s records).
    pub fn restore(&mut self, kept: &RecordBatch) -> Result<(), EngineError> {
        let columns = self.schema.fields().len();
        if kept.num_columns() != columns + 2 {
            return Err(malformed("kept table entries have unexpected columns"));
        }
        let records = kept.project(&(0..columns).collect::<Vec<_>>())?;
        if records.num_rows() == 0 {
            return Ok(());
        }
        self.check(&records)?;
        let keys = self.keys_of(&records)?;
        let at = int64(kept.column(columns))?;
        let live = kept
            .column(columns + 1)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| malformed("kept table entries have no liveness"))?
            .clone();
        let index = self.batches.len();
        for row in 0..records.num_rows() {
            let key: Box<[u8]> = Box::from(keys.row(row).as_ref());
            if at.is_null(row) {
                // A CorrectFrom whose CorrectTo is in the next transaction.
                self.before = Some((key, index, row));
                continue;
            }
            self.keys.entry(key).or_default().insert(
                at.value(row),
                Entry {
                    batch: index,
                    row,
                    live: live.is_valid(row) && live.value(row),
                },
            );
        }
        self.batches.push(records);
        Ok(())
    }

    fn check(&self, batch: &RecordBatch) -> Result<(), EngineError> {
        if same_types(&batch.schema(), &self.schema) {
            Ok(())
        } else {
            Err(malformed(
                "temporal table records do not have the table's columns",
            ))
        }
    }

    fn keys_of(&self, batch: &RecordBatch) -> Result<datafusion::arrow::row::Rows, EngineError> {
        let keys: Vec<ArrayRef> = self
            .columns
            .primary_key
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        Ok(self.converter.convert_columns(&keys)?)
    }

    /// Moves the watermark to `watermark_ms` (never back).
    pub fn advance(&mut self, watermark_ms: i64) {
        self.watermark_ms = Some(
            self.watermark_ms
                .map_or(watermark_ms, |w| w.max(watermark_ms)),
        );
    }

    /// Forgets entries no stream record on time can need: per key, those before its latest entry at or
    /// before the watermark (that one stays, row or removal, so that a late table record older than
    /// it stays hidden behind it, as it would have been had everything come in one transaction).
    pub fn prune(&mut self) {
        let Some(watermark) = self.watermark_ms else {
            return;
        };
        for entries in self.keys.values_mut() {
            if let Some((&latest, _)) = entries.range(..=watermark).next_back() {
                *entries = entries.split_off(&latest);
            }
        }
    }

    /// The table's rows with the event times they hold for: its columns, then `VALID_FROM` and
    /// `VALID_TO` (Timestamp(ms, UTC); `VALID_TO` null while the row still holds).
    pub fn versions(&self) -> Result<RecordBatch, EngineError> {
        let mut picks = Vec::new();
        let mut from = Vec::new();
        let mut to = Vec::new();
        for entries in self.keys.values() {
            let mut iter = entries.iter().peekable();
            while let Some((&time, entry)) = iter.next() {
                if entry.live {
                    picks.push((entry.batch, entry.row));
                    from.push(time);
                    to.push(iter.peek().map(|next| *next.0));
                }
            }
        }
        let mut columns = self.take(&picks)?;
        columns.push(Arc::new(
            TimestampMillisecondArray::from(from).with_timezone("UTC"),
        ));
        columns.push(Arc::new(
            TimestampMillisecondArray::from(to).with_timezone("UTC"),
        ));
        Ok(RecordBatch::try_new(
            versions_schema(&self.schema),
            columns,
        )?)
    }

    /// Every entry with the record behind it, in offset order: the table's columns, then
    /// `ENTRY_AT` (Int64 ms) and `ENTRY_LIVE`; [`VersionedTable::restore`] gives this table back
    /// from them (what the checkpoint keeps). A CorrectFrom still waiting for its CorrectTo comes last,
    /// with a null `ENTRY_AT`.
    pub fn retained(&self) -> Result<RecordBatch, EngineError> {
        let mut picks: Vec<(i64, usize, usize, Option<i64>, bool)> = Vec::new();
        let offsets: Vec<Int64Array> = self
            .batches
            .iter()
            .map(|b| int64(b.column(self.columns.offset)))
            .collect::<Result<_, _>>()?;
        for entries in self.keys.values() {
            for (&at, entry) in entries {
                let offset = offsets.get(entry.batch).map_or(0, |o| o.value(entry.row));
                picks.push((offset, entry.batch, entry.row, Some(at), entry.live));
            }
        }
        if let Some((_, batch, row)) = &self.before {
            let offset = offsets.get(*batch).map_or(0, |o| o.value(*row));
            picks.push((offset, *batch, *row, None, false));
        }
        picks.sort_unstable();
        let rows: Vec<(usize, usize)> = picks.iter().map(|p| (p.1, p.2)).collect();
        let mut columns = self.take(&rows)?;
        columns.push(Arc::new(Int64Array::from_iter(picks.iter().map(|p| p.3))));
        columns.push(Arc::new(BooleanArray::from_iter(
            picks.iter().map(|p| Some(p.4)),
        )));
        Ok(RecordBatch::try_new_with_options(
            retained_schema(&self.schema),
            columns,
            &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
        )?)
    }

    fn take(&self, picks: &[(usize, usize)]) -> Result<Vec<ArrayRef>, EngineError> {
        (0..self.schema.fields().len())
            .map(|c| {
                if self.batches.is_empty() {
                    return Ok(datafusion::arrow::array::new_empty_array(
                        self.schema.field(c).data_type(),
                    ));
                }
                let arrays: Vec<&dyn Array> =
                    self.batches.iter().map(|b| b.column(c).as_ref()).collect();
                Ok(interleave(&arrays, picks)?)
            })
            .collect()
    }
}

/// The schema of a table's versions: its columns, then the validity columns.
pub(crate) fn versions_schema(table: &Schema) -> SchemaRef {
    let time = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(VALID_FROM, time.clone(), false));
    fields.push(Field::new(VALID_TO, time, true));
    Arc::new(Schema::new(fields))
}

/// The schema of a table's kept entries: its columns, then [`ENTRY_AT`] and [`ENTRY_LIVE`].
pub(crate) fn retained_schema(table: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(ENTRY_AT, DataType::Int64, true));
    fields.push(Field::new(ENTRY_LIVE, DataType::Boolean, false));
    Arc::new(Schema::new(fields))
}

/// Stream records waiting for the tables' watermark, in offset order.
#[derive(Debug, Clone)]
pub struct PendingStream {
    schema: SchemaRef,
    event_time: usize,
    batches: Vec<RecordBatch>,
}

impl PendingStream {
    /// Nothing waiting yet.
    pub(crate) fn new(schema: SchemaRef, event_time: usize) -> Self {
        Self {
            schema,
            event_time,
            batches: Vec::new(),
        }
    }

    /// Schema of the stream's records.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Number of records waiting.
    pub fn records(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The records waiting, in offset order.
    pub fn batches(&self) -> &[RecordBatch] {
        &self.batches
    }

    /// Adds records (after those already waiting: offsets only grow).
    pub fn push(&mut self, batch: RecordBatch) -> Result<(), EngineError> {
        if !same_types(&batch.schema(), &self.schema) {
            return Err(malformed("stream records do not have the stream's columns"));
        }
        if batch.num_rows() > 0 {
            self.batches.push(batch);
        }
        Ok(())
    }

    /// Takes out the records the tables are complete for: event time at or before `threshold_ms`
    /// (and those without event time, which can join nothing and need not wait). `None`: only those.
    pub fn take_ready(&mut self, threshold_ms: Option<i64>) -> Result<RecordBatch, EngineError> {
        let all = concat_batches(&self.schema, &self.batches)?;
        let times = millis(all.column(self.event_time))?;
        let ready: BooleanArray = times
            .iter()
            .map(|t| Some(t.is_none_or(|t| threshold_ms.is_some_and(|w| t <= w))))
            .collect();
        let waiting = datafusion::arrow::compute::not(&ready)?;
        let rest = filter_record_batch(&all, &waiting)?;
        self.batches = if rest.num_rows() > 0 {
            vec![rest]
        } else {
            Vec::new()
        };
        Ok(filter_record_batch(&all, &ready)?)
    }
}

/// Whether two schemas have the same column names and types (nullability aside).
pub(crate) fn same_types(a: &Schema, b: &Schema) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type())
}

/// An event time column (any timestamp unit or a date) as milliseconds since the epoch.
pub(crate) fn millis(column: &ArrayRef) -> Result<Int64Array, EngineError> {
    let ms = cast(column, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
    int64(&ms)
}

fn int64(column: &ArrayRef) -> Result<Int64Array, EngineError> {
    let ints = cast(column, &DataType::Int64)?;
    ints.as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .ok_or_else(|| malformed(format!("{} is not an integer", column.data_type())))
}

fn operation_types(batch: &RecordBatch, op: Option<usize>) -> Result<Vec<i32>, EngineError> {
    let Some(op) = op else {
        return Ok(vec![APPEND; batch.num_rows()]);
    };
    let ops = cast(batch.column(op), &DataType::Int32)?;
    let ops = ops
        .as_any()
        .downcast_ref::<Int32Array>()
        .ok_or_else(|| malformed("operation types are not integers"))?;
    Ok(ops.iter().map(|o| o.unwrap_or(APPEND)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::StringArray;
    use proptest::prelude::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("op", DataType::Int32, false),
            Field::new(
                "event_time",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ),
            Field::new("sym", DataType::Utf8, false),
            Field::new("price", DataType::Int64, false),
        ]))
    }

    fn columns() -> TableColumns {
        TableColumns {
            primary_key: vec![3],
            event_time: 2,
            offset: 0,
            op: Some(1),
        }
    }

    /// (offset, op, event time, sym, price)
    fn batch(rows: &[(i64, i32, i64, &str, i64)]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(
                    TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.2))
                        .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.4))),
            ],
        )
        .unwrap()
    }

    fn table() -> VersionedTable {
        VersionedTable::new(schema(), columns(), None).unwrap()
    }

    /// (sym, price, valid from, valid to)
    fn versions(table: &VersionedTable) -> Vec<(String, i64, i64, Option<i64>)> {
        let v = table.versions().unwrap();
        let sym = v.column(3).as_any().downcast_ref::<StringArray>().unwrap();
        let price = v.column(4).as_any().downcast_ref::<Int64Array>().unwrap();
        let from = int64(v.column(5)).unwrap();
        let to = int64(v.column(6)).unwrap();
        (0..v.num_rows())
            .map(|i| {
                (
                    sym.value(i).to_owned(),
                    price.value(i),
                    from.value(i),
                    to.is_valid(i).then(|| to.value(i)),
                )
            })
            .collect()
    }

    /// The price of `sym` as of `t`, by the definition (latest entry at or before `t`).
    fn as_of(rows: &[(i64, i32, i64, &str, i64)], sym: &str, t: i64) -> Option<i64> {
        let mut entries: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        let mut before: Option<&str> = None;
        for r in rows {
            let prev = before.take();
            match r.1 {
                CORRECT_FROM => before = Some(r.3),
                CORRECT_TO if prev.is_some_and(|k| k != r.3) && prev == Some(sym) => {
                    entries.insert(r.2, None);
                }
                _ => {}
            }
            if r.3 == sym && r.1 != CORRECT_FROM {
                entries.insert(r.2, (r.1 == APPEND || r.1 == CORRECT_TO).then_some(r.4));
            }
        }
        entries.range(..=t).next_back().and_then(|(_, p)| *p)
    }

    fn lookup(v: &[(String, i64, i64, Option<i64>)], sym: &str, t: i64) -> Option<i64> {
        v.iter()
            .find(|(s, _, from, to)| s == sym && *from <= t && to.is_none_or(|to| t < to))
            .map(|r| r.1)
    }

    #[test]
    fn a_correction_replaces_the_row_from_its_event_time_and_a_retraction_removes_the_key() {
        let mut t = table();
        t.apply(&batch(&[
            (0, APPEND, 10, "A", 1),
            (1, APPEND, 10, "B", 5),
            (2, CORRECT_FROM, 10, "A", 1),
            (3, CORRECT_TO, 20, "A", 2),
            (4, APPEND, 20, "B", 6),
            (5, RETRACT, 20, "B", 6),
            (6, CORRECT_FROM, 20, "A", 2),
            (7, CORRECT_TO, 30, "C", 2),
        ]))
        .unwrap();
        assert_eq!(
            versions(&t),
            [
                ("A".to_owned(), 1, 10, Some(20)),
                ("A".to_owned(), 2, 20, Some(30)),
                ("B".to_owned(), 5, 10, Some(20)),
                ("C".to_owned(), 2, 30, None),
            ],
            "B has no row from 20 on, A none from 30 on (its key became C)"
        );
    }

    #[test]
    fn pruning_keeps_the_latest_entry_at_or_before_the_watermark() {
        let mut t = table();
        t.apply(&batch(&[
            (0, APPEND, 10, "A", 1),
            (1, APPEND, 20, "A", 2),
            (2, APPEND, 40, "A", 3),
        ]))
        .unwrap();
        t.advance(25);
        t.prune();
        assert_eq!(
            versions(&t),
            [
                ("A".to_owned(), 2, 20, Some(40)),
                ("A".to_owned(), 3, 40, None)
            ]
        );
        assert_eq!(t.retained().unwrap().num_rows(), 2);
        t.advance(5);
        assert_eq!(t.watermark_ms(), Some(25), "a watermark never goes back");
    }

    #[test]
    fn waiting_records_are_taken_once_the_threshold_passes_them() {
        let mut s = PendingStream::new(schema(), 2);
        s.push(batch(&[
            (0, APPEND, 10, "A", 1),
            (1, APPEND, 30, "A", 1),
            (2, APPEND, 20, "A", 1),
        ]))
        .unwrap();
        assert_eq!(s.take_ready(None).unwrap().num_rows(), 0);
        let ready = s.take_ready(Some(20)).unwrap();
        assert_eq!(int64(ready.column(0)).unwrap().values(), &[0, 2]);
        assert_eq!(s.records(), 1);
    }

    fn changelog() -> impl Strategy<Value = Vec<(i64, i32, i64, &'static str, i64)>> {
        prop::collection::vec((0..4i32, 0..50i64, 0..3usize, 0..100i64), 0..40).prop_map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(i, (op, t, k, p))| (i as i64, op, t, ["A", "B", "C"][k], p))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn versions_give_the_latest_entry_at_or_before_each_time(rows in changelog()) {
            let mut t = table();
            t.apply(&batch(&rows)).unwrap();
            let v = versions(&t);
            for sym in ["A", "B", "C"] {
                for time in 0..55 {
                    prop_assert_eq!(lookup(&v, sym, time), as_of(&rows, sym, time));
                }
            }
        }

        #[test]
        fn replaying_what_is_retained_gives_the_same_answers_after_the_watermark(
            rows in changelog(), cut in 0..40usize, watermark in 0..50i64,
        ) {
            // A cut may fall between the halves of a correction: the CorrectFrom waits in what is kept.
            let cut = cut.min(rows.len());
            let mut whole = table();
            whole.apply(&batch(&rows)).unwrap();

            let mut first = table();
            first.apply(&batch(&rows[..cut])).unwrap();
            first.advance(watermark);
            first.prune();
            let mut second = VersionedTable::new(schema(), columns(), first.watermark_ms()).unwrap();
            second.restore(&first.retained().unwrap()).unwrap();
            second.apply(&batch(&rows[cut..])).unwrap();

            let (a, b) = (versions(&whole), versions(&second));
            for sym in ["A", "B", "C"] {
                for time in watermark..55 {
                    prop_assert_eq!(lookup(&a, sym, time), lookup(&b, sym, time));
                }
            }
        }
    }
}
