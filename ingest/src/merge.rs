//! Merge strategies: how newly read records combine with what a root dataset already holds.
//!
//! Pure functions over Arrow batches: the previous records (with system columns, in offset order) and the
//! new records (data columns including the event time) in, the records to append and their operation
//! types out. Append keeps everything; Ledger drops records whose primary key was already seen; Snapshot
//! diffs a full snapshot against the state the changelog adds up to and emits appends (`+A`, op 0),
//! retractions (`-R`, op 1) and corrections (`-C` op 2 with the old row, then `+C` op 3 with the new).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{cast, interleave};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};

use weir_dataset::data::{self, DataError, arrow_err};
use weir_odf::{DatasetVocabulary, MergeStrategy};

/// `+A`: a new record.
pub const OP_APPEND: i32 = 0;
/// `-R`: a record retracted.
pub const OP_RETRACT: i32 = 1;
/// `-C`: the old value of a corrected record.
pub const OP_CORRECT_FROM: i32 = 2;
/// `+C`: the new value of a corrected record.
pub const OP_CORRECT_TO: i32 = 3;

/// The records to append and their operation types.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Data columns (with event time) of the records to append.
    pub data: RecordBatch,
    /// One operation type per record.
    pub ops: Vec<i32>,
}

/// Applies a merge strategy.
pub fn merge(
    strategy: &MergeStrategy,
    prev: Option<&RecordBatch>,
    new: &RecordBatch,
    vocab: &DatasetVocabulary,
) -> Result<Merged, DataError> {
    let prev_data = prev.map(|p| data::data_columns(p, vocab)).transpose()?;
    let new = match &prev_data {
        Some(p) if p.num_rows() > 0 || p.num_columns() > 0 => align(new, p)?,
        _ => new.clone(),
    };
    match strategy {
        MergeStrategy::Append => Ok(Merged {
            ops: vec![OP_APPEND; new.num_rows()],
            data: new,
        }),
        MergeStrategy::Ledger(ledger) => {
            let primary_key = &ledger.primary_key;
            let seen: HashSet<Vec<u8>> = match &prev_data {
                Some(p) => key_rows(p, primary_key)?
                    .iter()
                    .map(|r| r.as_ref().to_vec())
                    .collect(),
                None => HashSet::new(),
            };
            let keys = key_rows(&new, primary_key)?;
            let mut seen = seen;
            let keep: Vec<usize> = (0..new.num_rows())
                .filter(|&i| seen.insert(keys.row(i).as_ref().to_vec()))
                .collect();
            let data = take_rows(&[&new], &keep.iter().map(|&i| (0, i)).collect::<Vec<_>>())?;
            Ok(Merged {
                ops: vec![OP_APPEND; keep.len()],
                data,
            })
        }
        MergeStrategy::Snapshot(strategy) => {
            let primary_key = &strategy.primary_key;
            let compare_columns = &strategy.compare_columns;
            let empty = RecordBatch::new_empty(new.schema());
            let (prev_data, prev_ops) = match (prev, &prev_data) {
                (Some(p), Some(d)) => (d.clone(), data::op_values(p, vocab)?),
                _ => (empty, Vec::new()),
            };
            snapshot(
                &prev_data,
                &prev_ops,
                &new,
                primary_key,
                compare_columns.as_deref(),
                vocab,
            )
        }
        other => Err(DataError::Column {
            message: format!(
                "merge strategy `{}` is not supported by Weir",
                other.kind_name()
            ),
        }),
    }
}

/// What a Ledger merge keeps of a dataset's history, so that the history need not be held: the primary keys
/// of its records, each once, in Arrow's row format. It grows with the number of distinct keys (their
/// encoded size plus a hash-set entry each), not with the records or their other columns.
///
/// Fed the history's key columns a batch at a time ([`LedgerIndex::add_history`]), then the new records a
/// batch at a time ([`LedgerIndex::keep`]): a record whose key the dataset (or an earlier batch of the same
/// file) already holds is dropped, as [`merge`] does with the whole history at hand.
#[derive(Debug, Clone)]
pub struct LedgerIndex {
    primary_key: Vec<String>,
    seen: HashSet<Box<[u8]>>,
}

impl LedgerIndex {
    /// An empty index of `primary_key`.
    pub fn new(primary_key: &[String]) -> Self {
        Self {
            primary_key: primary_key.to_vec(),
            seen: HashSet::new(),
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Adds the keys of records the dataset already holds (any batch with the key columns).
    pub fn add_history(&mut self, batch: &RecordBatch) -> Result<(), DataError> {
        let keys = key_rows(batch, &self.primary_key)?;
        self.seen.extend(keys.iter().map(|r| Box::from(r.as_ref())));
        Ok(())
    }

    /// The records of `new` whose key is not held yet, in order; their keys are held from now on.
    pub fn keep(&mut self, new: &RecordBatch) -> Result<RecordBatch, DataError> {
        let keys = key_rows(new, &self.primary_key)?;
        let keep: Vec<(usize, usize)> = (0..new.num_rows())
            .filter(|&i| self.seen.insert(Box::from(keys.row(i).as_ref())))
            .map(|i| (0, i))
            .collect();
        if keep.len() == new.num_rows() {
            return Ok(new.clone());
        }
        take_rows(&[new], &keep)
    }
}

/// What a Snapshot merge keeps of a dataset's history, so that neither the history nor the state it adds up
/// to is held: per primary key whose record is current, a 16-byte digest of its compare columns and where
/// that record is (slice, row), plus the order keys entered the state. It grows with the number of current
/// keys (their encoded size plus about 40 bytes each), not with the history's records or their columns.
///
/// Fed the history a batch at a time ([`SnapshotIndex::add_history`]: key, compare and `op` columns), then
/// the new snapshot a batch at a time ([`SnapshotIndex::diff`]), it says which records to append: a new key
/// `+A`, a changed one `-C` (the old record, fetched from its slice by [`SnapshotIndex::finish`]'s list) then
/// `+C`, and, once the snapshot has been read, a key it no longer holds `-R`, in the order the keys entered
/// the state. Equal to [`merge`] with the whole history at hand.
#[derive(Debug, Clone)]
pub struct SnapshotIndex {
    primary_key: Vec<String>,
    compare: Vec<String>,
    state: HashMap<Box<[u8]>, Current>,
    next_seq: u64,
    present: HashSet<Box<[u8]>>,
    kept: usize,
}

/// A current record of the state.
#[derive(Debug, Clone, Copy)]
struct Current {
    digest: [u8; 16],
    at: RecordAt,
    seq: u64,
}

/// Where a stored record is: its slice (in chain order) and its row in that slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordAt {
    /// The slice, counted from the chain's first.
    pub slice: usize,
    /// The row in the slice, from 0.
    pub row: usize,
}

/// One record of the merge's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// A stored record (the old value of a correction, or a retraction).
    Stored(RecordAt),
    /// Row `row` of the `batch`-th batch [`SnapshotIndex::diff`] kept of the new snapshot.
    New {
        /// The batch.
        batch: usize,
        /// Its row.
        row: usize,
    },
}

impl SnapshotIndex {
    /// An empty index of `primary_key`; a record changes when its `compare` columns do.
    pub fn new(primary_key: &[String], compare: &[String]) -> Self {
        Self {
            primary_key: primary_key.to_vec(),
            compare: compare.to_vec(),
            state: HashMap::new(),
            next_seq: 0,
            present: HashSet::new(),
            kept: 0,
        }
    }

    /// The compare columns of a snapshot merge: those the strategy names, or every column but the primary key
    /// and the event time.
    pub fn compare_columns(
        schema: &Schema,
        primary_key: &[String],
        compare_columns: Option<&[String]>,
        vocab: &DatasetVocabulary,
    ) -> Vec<String> {
        match compare_columns {
            Some(c) if !c.is_empty() => c.to_vec(),
            _ => schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .filter(|n| !primary_key.contains(n) && n != &vocab.event_time_column)
                .collect(),
        }
    }

    /// The columns [`SnapshotIndex::add_history`] reads: key, compare and `op`.
    pub fn history_columns(&self, vocab: &DatasetVocabulary) -> Vec<String> {
        let mut c = self.primary_key.clone();
        c.extend(
            self.compare
                .iter()
                .filter(|n| !self.primary_key.contains(n))
                .cloned(),
        );
        c.push(vocab.operation_type_column.clone());
        c
    }

    /// Keys in the state.
    pub fn len(&self) -> usize {
        self.state.len()
    }

    /// Whether the state is empty.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }

    /// Replays a batch of stored records (rows `first_row..` of slice `slice`) onto the state.
    pub fn add_history(
        &mut self,
        batch: &RecordBatch,
        slice: usize,
        first_row: usize,
        vocab: &DatasetVocabulary,
    ) -> Result<(), DataError> {
        let keys = key_rows(batch, &self.primary_key)?;
        let digests = digests(batch, &self.compare)?;
        let ops = data::op_values(batch, vocab)?;
        for (i, op) in ops.iter().enumerate() {
            let k: Box<[u8]> = Box::from(keys.row(i).as_ref());
            match *op {
                OP_RETRACT | OP_CORRECT_FROM => {
                    self.state.remove(&k);
                }
                _ => {
                    let at = RecordAt {
                        slice,
                        row: first_row + i,
                    };
                    match self.state.get_mut(&k) {
                        Some(c) => {
                            c.digest = digests[i];
                            c.at = at;
                        }
                        None => {
                            let seq = self.next_seq;
                            self.next_seq += 1;
                            self.state.insert(
                                k,
                                Current {
                                    digest: digests[i],
                                    at,
                                    seq,
                                },
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Diffs the next batch of the new snapshot against the state: the records to append for it, in order,
    /// with their operation types, and the batch's rows they need (`None` when they need none of them).
    #[allow(clippy::type_complexity)]
    pub fn diff(
        &mut self,
        new: &RecordBatch,
    ) -> Result<(Option<RecordBatch>, Vec<(Pick, i32)>), DataError> {
        let keys = key_rows(new, &self.primary_key)?;
        let digests = digests(new, &self.compare)?;
        let mut out = Vec::new();
        let mut rows = Vec::new();
        let batch = self.kept;
        for (i, digest) in digests.iter().enumerate() {
            let k: Box<[u8]> = Box::from(keys.row(i).as_ref());
            // The checks refuse a key twice in one snapshot; should one get here, the first row counts.
            if !self.present.insert(k.clone()) {
                continue;
            }
            let new_pick = Pick::New {
                batch,
                row: rows.len(),
            };
            match self.state.get(&k) {
                None => {
                    out.push((new_pick, OP_APPEND));
                    rows.push((0, i));
                }
                Some(c) if c.digest != *digest => {
                    out.push((Pick::Stored(c.at), OP_CORRECT_FROM));
                    out.push((new_pick, OP_CORRECT_TO));
                    rows.push((0, i));
                }
                Some(_) => {}
            }
        }
        if rows.is_empty() {
            return Ok((None, out));
        }
        self.kept += 1;
        let kept = if rows.len() == new.num_rows() {
            new.clone()
        } else {
            take_rows(&[new], &rows)?
        };
        Ok((Some(kept), out))
    }

    /// Once the whole snapshot was diffed: the retractions of keys it no longer holds, in the order the keys
    /// entered the state.
    pub fn finish(self) -> Vec<(Pick, i32)> {
        let mut gone: Vec<&Current> = self
            .state
            .iter()
            .filter(|(k, _)| !self.present.contains(*k))
            .map(|(_, c)| c)
            .collect();
        gone.sort_by_key(|c| c.seq);
        gone.into_iter()
            .map(|c| (Pick::Stored(c.at), OP_RETRACT))
            .collect()
    }
}

/// A 16-byte digest (SHA3-256, truncated) of each row's `columns` in Arrow's row format.
fn digests(batch: &RecordBatch, columns: &[String]) -> Result<Vec<[u8; 16]>, DataError> {
    if columns.is_empty() {
        return Ok(vec![[0; 16]; batch.num_rows()]);
    }
    let rows = key_rows(batch, columns)?;
    Ok(rows
        .iter()
        .map(|r| {
            let h = weir_odf::Multihash::sha3_256(r.as_ref());
            let mut d = [0u8; 16];
            d.copy_from_slice(&h.digest()[..16]);
            d
        })
        .collect())
}

/// The records a streamed Snapshot merge appends, gathered in `picks` order from the new snapshot's kept
/// batches and the stored records read back (`stored`, placed by `at`), every column cast to `schema`.
pub fn gather(
    schema: &SchemaRef,
    kept: &[RecordBatch],
    stored: &[RecordBatch],
    at: &HashMap<RecordAt, (usize, usize)>,
    picks: &[(Pick, i32)],
) -> Result<Merged, DataError> {
    let target = RecordBatch::new_empty(schema.clone());
    let mut sources = Vec::with_capacity(kept.len() + stored.len() + 1);
    sources.push(target.clone());
    for b in kept.iter().chain(stored) {
        sources.push(align(b, &target)?);
    }
    let mut indices = Vec::with_capacity(picks.len());
    for (pick, _) in picks {
        indices.push(match pick {
            Pick::New { batch, row } => (1 + batch, *row),
            Pick::Stored(a) => {
                let (batch, row) = at.get(a).ok_or_else(|| DataError::Column {
                    message: format!("stored record {a:?} was not read back"),
                })?;
                (1 + kept.len() + batch, *row)
            }
        });
    }
    let refs: Vec<&RecordBatch> = sources.iter().collect();
    Ok(Merged {
        data: take_rows(&refs, &indices)?,
        ops: picks.iter().map(|(_, op)| *op).collect(),
    })
}

/// Casts `new` to the column types of `prev` (same columns required, order taken from `prev`).
fn align(new: &RecordBatch, prev: &RecordBatch) -> Result<RecordBatch, DataError> {
    let ps = prev.schema();
    let ns = new.schema();
    let mut names_new: Vec<_> = ns.fields().iter().map(|f| f.name().clone()).collect();
    let mut names_prev: Vec<_> = ps.fields().iter().map(|f| f.name().clone()).collect();
    names_new.sort();
    names_prev.sort();
    if names_new != names_prev {
        return Err(DataError::Column {
            message: format!(
                "the source's columns changed: the dataset has [{}], the new data has [{}]",
                data::schema_text(&ps),
                data::schema_text(&ns)
            ),
        });
    }
    let columns = ps
        .fields()
        .iter()
        .map(|f| {
            let c = new
                .column_by_name(f.name())
                .ok_or_else(|| DataError::Column {
                    message: f.name().clone(),
                })?;
            cast(c, f.data_type()).map_err(arrow_err(format!(
                "casting new `{}` to the dataset's type",
                f.name()
            )))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let fields: Vec<Field> = ps
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(arrow_err("aligning new data"))
}

fn key_rows(batch: &RecordBatch, columns: &[String]) -> Result<Rows, DataError> {
    let cols = columns
        .iter()
        .map(|c| {
            batch
                .column_by_name(c)
                .cloned()
                .ok_or_else(|| DataError::Column {
                    message: format!("the data has no primary key column `{c}`"),
                })
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    let conv = RowConverter::new(
        cols.iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect(),
    )
    .map_err(arrow_err("comparing rows"))?;
    conv.convert_columns(&cols)
        .map_err(arrow_err("comparing rows"))
}

/// Gathers rows `(batch index, row index)` from batches of one schema, as one batch with the first's schema.
fn take_rows(batches: &[&RecordBatch], picks: &[(usize, usize)]) -> Result<RecordBatch, DataError> {
    let schema = batches[0].schema();
    let columns = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn arrow::array::Array> =
                batches.iter().map(|b| b.column(c).as_ref()).collect();
            interleave(&arrays, picks).map_err(arrow_err("gathering rows"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, columns).map_err(arrow_err("gathering rows"))
}

fn snapshot(
    prev: &RecordBatch,
    prev_ops: &[i32],
    new: &RecordBatch,
    primary_key: &[String],
    compare_columns: Option<&[String]>,
    vocab: &DatasetVocabulary,
) -> Result<Merged, DataError> {
    // The state the changelog adds up to: key -> row of `prev` holding its current value.
    let prev_keys = key_rows(prev, primary_key)?;
    let mut state: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut order: Vec<Vec<u8>> = Vec::new();
    for (i, op) in prev_ops.iter().enumerate() {
        let k = prev_keys.row(i).as_ref().to_vec();
        match *op {
            OP_RETRACT | OP_CORRECT_FROM => {
                state.remove(&k);
            }
            _ => {
                if state.insert(k.clone(), i).is_none() {
                    order.push(k);
                }
            }
        }
    }
    let compare: Vec<String> = match compare_columns {
        Some(c) if !c.is_empty() => c.to_vec(),
        _ => new
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| !primary_key.contains(n) && n != &vocab.event_time_column)
            .collect(),
    };
    let prev_cmp = key_rows(prev, &compare)?;
    let new_cmp = key_rows(new, &compare)?;
    let new_keys = key_rows(new, primary_key)?;
    let mut picks = Vec::new();
    let mut ops = Vec::new();
    let mut present = HashSet::new();
    for i in 0..new.num_rows() {
        let k = new_keys.row(i).as_ref().to_vec();
        if !present.insert(k.clone()) {
            tracing::warn!(
                row = i,
                "snapshot holds the primary key twice; keeping the first row"
            );
            continue;
        }
        match state.get(&k) {
            None => {
                picks.push((1, i));
                ops.push(OP_APPEND);
            }
            Some(&j) if prev_cmp.row(j) != new_cmp.row(i) => {
                picks.push((0, j));
                ops.push(OP_CORRECT_FROM);
                picks.push((1, i));
                ops.push(OP_CORRECT_TO);
            }
            Some(_) => {}
        }
    }
    // A key retracted and added again entered the state twice: it is retracted once, at its last entry.
    let mut last_entry: HashMap<&[u8], usize> = HashMap::new();
    for (n, k) in order.iter().enumerate() {
        last_entry.insert(k.as_slice(), n);
    }
    for (n, k) in order.iter().enumerate() {
        if last_entry.get(k.as_slice()) != Some(&n) {
            continue;
        }
        if let Some(&j) = state.get(k)
            && !present.contains(k)
        {
            picks.push((0, j));
            ops.push(OP_RETRACT);
        }
    }
    let data = take_rows(&[prev, new], &picks)?;
    Ok(Merged { data, ops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
    use arrow::datatypes::DataType;
    use chrono::Utc;

    fn rows(ids: &[i64], names: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("event_time", data::utc_millis(), true),
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(TimestampMillisecondArray::from(vec![0; ids.len()]).with_timezone("UTC")),
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(names.to_vec())),
            ],
        )
        .unwrap()
    }

    fn stored(m: &Merged, first: u64) -> RecordBatch {
        data::with_system_columns(
            &m.data,
            &m.ops,
            first,
            Utc::now(),
            &DatasetVocabulary::default(),
        )
        .unwrap()
    }

    fn names(b: &RecordBatch) -> Vec<String> {
        let c = b
            .column_by_name("name")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .clone();
        c.iter()
            .map(|v| v.unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn ledger_drops_records_already_seen() {
        let v = DatasetVocabulary::default();
        let s = MergeStrategy::Ledger(weir_odf::MergeStrategyLedger {
            primary_key: vec!["id".into()],
        });
        let first = merge(&s, None, &rows(&[1, 2], &["a", "b"]), &v).unwrap();
        let prev = stored(&first, 0);
        let second = merge(&s, Some(&prev), &rows(&[2, 3, 3], &["b", "c", "c2"]), &v).unwrap();
        assert_eq!(names(&second.data), ["c"]);
        assert_eq!(second.ops, [OP_APPEND]);
    }

    #[test]
    fn a_ledger_index_drops_what_the_history_or_an_earlier_batch_holds_as_merge_does() {
        let v = DatasetVocabulary::default();
        let s = MergeStrategy::Ledger(weir_odf::MergeStrategyLedger {
            primary_key: vec!["id".into()],
        });
        let prev = stored(
            &merge(&s, None, &rows(&[1, 2], &["a", "b"]), &v).unwrap(),
            0,
        );
        let mut index = LedgerIndex::new(&["id".to_string()]);
        // The history's key column alone is enough.
        index
            .add_history(
                &prev
                    .project(&[prev.schema().index_of("id").unwrap()])
                    .unwrap(),
            )
            .unwrap();
        assert_eq!(index.len(), 2);
        let first = index.keep(&rows(&[2, 3], &["b", "c"])).unwrap();
        let second = index.keep(&rows(&[3, 4, 1], &["c2", "d", "a2"])).unwrap();
        assert_eq!(names(&first), ["c"]);
        assert_eq!(names(&second), ["d"]);
        let whole = merge(
            &s,
            Some(&prev),
            &rows(&[2, 3, 4, 1], &["b", "c", "d", "a2"]),
            &v,
        )
        .unwrap();
        assert_eq!(names(&whole.data), ["c", "d"]);
    }

    #[test]
    fn snapshot_emits_appends_corrections_and_retractions() {
        let v = DatasetVocabulary::default();
        let s = MergeStrategy::Snapshot(weir_odf::MergeStrategySnapshot {
            primary_key: vec!["id".into()],
            compare_columns: None,
        });
        let first = merge(&s, None, &rows(&[1, 2, 3], &["a", "b", "c"]), &v).unwrap();
        assert_eq!(first.ops, [OP_APPEND; 3]);
        let prev = stored(&first, 0);
        // 1 unchanged, 2 renamed, 3 gone, 4 new.
        let second = merge(&s, Some(&prev), &rows(&[1, 2, 4], &["a", "B", "d"]), &v).unwrap();
        assert_eq!(
            second.ops,
            [OP_CORRECT_FROM, OP_CORRECT_TO, OP_APPEND, OP_RETRACT]
        );
        assert_eq!(names(&second.data), ["b", "B", "d", "c"]);
        // Replaying the changelog: the third snapshot equal to the second changes nothing.
        let both =
            arrow::compute::concat_batches(&prev.schema(), &[prev.clone(), stored(&second, 3)])
                .unwrap();
        let third = merge(&s, Some(&both), &rows(&[1, 2, 4], &["a", "B", "d"]), &v).unwrap();
        assert!(third.ops.is_empty());
    }

    /// A streamed Snapshot merge over `history` (stored batches, one slice each) and `new` (batches).
    fn streamed(history: &[RecordBatch], new: &[RecordBatch]) -> Merged {
        let v = DatasetVocabulary::default();
        let pk = vec!["id".to_string()];
        let compare = SnapshotIndex::compare_columns(&new[0].schema(), &pk, None, &v);
        let mut index = SnapshotIndex::new(&pk, &compare);
        for (n, h) in history.iter().enumerate() {
            // Only the columns it asks for, in two batches to cross a batch boundary.
            let cols: Vec<usize> = index
                .history_columns(&v)
                .iter()
                .map(|c| h.schema().index_of(c).unwrap())
                .collect();
            let h = h.project(&cols).unwrap();
            let half = h.num_rows() / 2;
            index.add_history(&h.slice(0, half), n, 0, &v).unwrap();
            index
                .add_history(&h.slice(half, h.num_rows() - half), n, half, &v)
                .unwrap();
        }
        let mut kept = Vec::new();
        let mut picks = Vec::new();
        for b in new {
            let (k, p) = index.diff(b).unwrap();
            kept.extend(k);
            picks.extend(p);
        }
        picks.extend(index.finish());
        let mut at = HashMap::new();
        let mut stored = Vec::new();
        for (n, h) in history.iter().enumerate() {
            for r in 0..h.num_rows() {
                at.insert(RecordAt { slice: n, row: r }, (stored.len(), r));
            }
            stored.push(data::data_columns(h, &v).unwrap());
        }
        gather(&new[0].schema(), &kept, &stored, &at, &picks).unwrap()
    }

    #[test]
    fn a_streamed_snapshot_merge_equals_the_whole_history_merge() {
        let v = DatasetVocabulary::default();
        let s = MergeStrategy::Snapshot(weir_odf::MergeStrategySnapshot {
            primary_key: vec!["id".into()],
            compare_columns: None,
        });
        let first = merge(&s, None, &rows(&[1, 2, 3], &["a", "b", "c"]), &v).unwrap();
        let prev = stored(&first, 0);
        // 1 unchanged, 2 renamed, 3 gone, 4 new; the new snapshot in two batches.
        let new = [rows(&[1, 2], &["a", "B"]), rows(&[4], &["d"])];
        let whole = merge(
            &s,
            Some(&prev),
            &arrow::compute::concat_batches(&new[0].schema(), &new).unwrap(),
            &v,
        )
        .unwrap();
        let streamed_once = streamed(std::slice::from_ref(&prev), &new);
        assert_eq!(streamed_once.ops, whole.ops);
        assert_eq!(names(&streamed_once.data), names(&whole.data));
        assert_eq!(names(&streamed_once.data), ["b", "B", "d", "c"]);
        // The second slice replayed on the first: an equal snapshot changes nothing, a later one retracts.
        let second = stored(&streamed_once, 3);
        let again = streamed(
            &[prev.clone(), second.clone()],
            &[rows(&[1, 2, 4], &["a", "B", "d"])],
        );
        assert!(again.ops.is_empty());
        let fewer = streamed(&[prev, second], &[rows(&[4], &["d"])]);
        assert_eq!(fewer.ops, [OP_RETRACT, OP_RETRACT]);
        assert_eq!(names(&fewer.data), ["a", "B"]);
    }

    #[test]
    fn a_source_whose_columns_change_is_rejected() {
        let v = DatasetVocabulary::default();
        let first = merge(&MergeStrategy::Append, None, &rows(&[1], &["a"]), &v).unwrap();
        let prev = stored(&first, 0);
        let other = rows(&[2], &["b"]).project(&[0, 1]).unwrap();
        assert!(merge(&MergeStrategy::Append, Some(&prev), &other, &v).is_err());
    }
}
