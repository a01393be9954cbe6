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
use arrow::datatypes::{Field, Schema};
use arrow::row::{RowConverter, Rows, SortField};

use crate::data::{self, DataError, arrow_err};
use odf::{DatasetVocabulary, MergeStrategy};

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
                crate::manifest::support::merge_kind(other)
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
    for k in order {
        if let Some(&j) = state.get(&k)
            && !present.contains(&k)
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
        let s = MergeStrategy::Ledger(odf::MergeStrategyLedger {
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
        let s = MergeStrategy::Ledger(odf::MergeStrategyLedger {
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
        let s = MergeStrategy::Snapshot(odf::MergeStrategySnapshot {
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

    #[test]
    fn a_source_whose_columns_change_is_rejected() {
        let v = DatasetVocabulary::default();
        let first = merge(&MergeStrategy::Append, None, &rows(&[1], &["a"]), &v).unwrap();
        let prev = stored(&first, 0);
        let other = rows(&[2], &["b"]).project(&[0, 1]).unwrap();
        assert!(merge(&MergeStrategy::Append, Some(&prev), &other, &v).is_err());
    }
}
