//! Session windows (Flink's `SESSION`): the records of one key closer than the gap to each other form
//! one session, `[first, last + gap)`, emitted once the watermark reaches its end.
//!
//! Sessions are not known record by record: the window column of a buffered record is its event time
//! ([`super::functions::SESSION_START`]), and the sessions are made from the buffered records each time
//! the watermark moves ([`close`]). Retractions and corrections are applied first: a record with the same
//! key, event time and aggregate arguments as a retraction is taken out, so sessions are always those of
//! the records still present (a retraction can split a session in two, or end it earlier). A session
//! whose end the watermark has reached is emitted; the records of open sessions stay buffered.
//!
//! Once a key's session is emitted, records of that key before its end are late: they would belong to,
//! or join, a session already emitted. The end of each key's last emitted session is kept with the
//! buffered records as a marker record (sign 0, the end in the window column).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int8Array, RecordBatch, TimestampMillisecondArray, UInt32Array,
};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, take};
use datafusion::arrow::row::{OwnedRow, RowConverter, Rows, SortField};

use crate::error::EngineError;

/// The sessions made from buffered records at a watermark.
#[derive(Debug)]
pub(crate) struct Closed {
    /// Records of the sessions the watermark has closed, with their session's end in the window column
    /// (one record per present record; sign +1), by key then event time.
    pub emitted: RecordBatch,
    /// The start of each emitted record's session.
    pub starts: Vec<i64>,
    /// Records of the sessions still open (sign +1).
    pub open: RecordBatch,
    /// Marker records: each key's last emitted session end (the previous markers of keys with no
    /// session emitted now are kept).
    pub ends: Option<RecordBatch>,
    /// Retractions and corrections that matched no buffered record (dropped).
    pub unmatched: u64,
}

fn malformed(reason: &str) -> EngineError {
    EngineError::MalformedRequest {
        reason: reason.to_owned(),
    }
}

fn times(batch: &RecordBatch) -> Result<TimestampMillisecondArray, EngineError> {
    batch
        .column(0)
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .cloned()
        .ok_or_else(|| malformed("session times are not millisecond timestamps"))
}

fn signs(batch: &RecordBatch) -> Result<Int8Array, EngineError> {
    batch
        .column(batch.num_columns() - 1)
        .as_any()
        .downcast_ref::<Int8Array>()
        .cloned()
        .ok_or_else(|| malformed("buffered records have no sign"))
}

/// Compares the keys (columns 1 to `keys`) of records of several batches.
struct KeyRows {
    converter: Option<RowConverter>,
}

impl KeyRows {
    fn new(schema_batch: &RecordBatch, keys: usize) -> Result<Self, EngineError> {
        let converter = if keys == 0 {
            None
        } else {
            Some(RowConverter::new(
                (1..=keys)
                    .map(|i| SortField::new(schema_batch.column(i).data_type().clone()))
                    .collect(),
            )?)
        };
        Ok(Self { converter })
    }

    /// The keys of `batch`'s records; `None` when there are no keys (every record has the same).
    fn rows(&self, batch: &RecordBatch, keys: usize) -> Result<Option<Rows>, EngineError> {
        match &self.converter {
            Some(converter) => Ok(Some(converter.convert_columns(&batch.columns()[1..=keys])?)),
            None => Ok(None),
        }
    }
}

/// The key of record `row` (an empty key without keys).
fn key_of(rows: &Option<Rows>, row: usize) -> Option<OwnedRow> {
    rows.as_ref().map(|rows| rows.row(row).owned())
}

/// Which of `records` (buffered records, window column = event time) are on time: with an event time,
/// and not before the end of their key's last emitted session (`ends`, marker records).
pub(crate) fn on_time(
    records: &RecordBatch,
    keys: usize,
    ends: Option<&RecordBatch>,
) -> Result<BooleanArray, EngineError> {
    let times = times(records)?;
    let Some(ends) = ends.filter(|e| e.num_rows() > 0) else {
        return Ok(times.iter().map(|t| Some(t.is_some())).collect());
    };
    let key_rows = KeyRows::new(records, keys)?;
    let end_keys = key_rows.rows(ends, keys)?;
    let end_times = self::times(ends)?;
    let last_end: HashMap<Option<OwnedRow>, i64> = (0..ends.num_rows())
        .map(|i| (key_of(&end_keys, i), end_times.value(i)))
        .collect();
    let record_keys = key_rows.rows(records, keys)?;
    Ok((0..records.num_rows())
        .map(|row| {
            let on_time = times.is_valid(row)
                && last_end
                    .get(&key_of(&record_keys, row))
                    .is_none_or(|end| times.value(row) >= *end);
            Some(on_time)
        })
        .collect())
}

/// One session being made: its records (row and how many times it is present) and its first and last
/// event times.
struct Session {
    rows: Vec<(usize, i64)>,
    first: i64,
    last: i64,
}

/// Makes the sessions of `records` (buffered records: event time, keys, arguments, sign; no markers)
/// with `gap_ms`, and closes those whose end is at or before `watermark_ms` (all of them with `None`).
pub(crate) fn close(
    records: &RecordBatch,
    keys: usize,
    gap_ms: i64,
    watermark_ms: Option<i64>,
    ends: Option<&RecordBatch>,
) -> Result<Closed, EngineError> {
    let columns = records.num_columns();
    if columns < keys + 2 {
        return Err(malformed("buffered records lack their keys"));
    }
    let times = times(records)?;
    let signs = signs(records)?;

    // Retractions applied: how many times each (key, time, arguments) is present, in that order.
    let identity: Vec<ArrayRef> = (1..=keys)
        .chain([0])
        .chain(keys + 1..columns - 1)
        .map(|i| Arc::clone(records.column(i)))
        .collect();
    let converter = RowConverter::new(
        identity
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect(),
    )?;
    let identities = converter.convert_columns(&identity)?;
    let mut present: BTreeMap<_, (i64, Option<usize>)> = BTreeMap::new();
    for row in 0..records.num_rows() {
        if !times.is_valid(row) {
            continue;
        }
        let sign = i64::from(signs.value(row));
        let entry = present.entry(identities.row(row)).or_insert((0, None));
        entry.0 += sign;
        if sign > 0 && entry.1.is_none() {
            entry.1 = Some(row);
        }
    }

    // Sessions, key by key in time order.
    let key_rows = KeyRows::new(records, keys)?;
    let record_keys = key_rows.rows(records, keys)?;
    let same_key = |a: usize, b: usize| match &record_keys {
        Some(rows) => rows.row(a) == rows.row(b),
        None => true,
    };
    let mut unmatched = 0u64;
    let mut sessions: Vec<Session> = Vec::new();
    for (count, row) in present.into_values() {
        let row = match row {
            Some(row) if count > 0 => row,
            _ => {
                unmatched += count.unsigned_abs();
                continue;
            }
        };
        let time = times.value(row);
        match sessions.last_mut() {
            Some(session)
                if same_key(session.rows[0].0, row)
                    && time.saturating_sub(session.last) < gap_ms =>
            {
                session.rows.push((row, count));
                session.last = time;
            }
            _ => sessions.push(Session {
                rows: vec![(row, count)],
                first: time,
                last: time,
            }),
        }
    }

    let mut emitted = Vec::new();
    let mut emitted_ends = Vec::new();
    let mut starts = Vec::new();
    let mut open = Vec::new();
    // Per key, the last record of its last emitted session and that session's end.
    let mut last_emitted: Vec<(usize, i64)> = Vec::new();
    for session in &sessions {
        let end = session.last.saturating_add(gap_ms);
        let closed = watermark_ms.is_none_or(|watermark| end <= watermark);
        for &(row, count) in &session.rows {
            let row = u32::try_from(row).map_err(|_| malformed("too many buffered records"))?;
            for _ in 0..count {
                if closed {
                    emitted.push(row);
                    emitted_ends.push(end);
                    starts.push(session.first);
                } else {
                    open.push(row);
                }
            }
        }
        if closed && let Some(&(row, _)) = session.rows.last() {
            match last_emitted.last_mut() {
                Some(last) if same_key(last.0, row) => *last = (row, end),
                _ => last_emitted.push((row, end)),
            }
        }
    }

    let timezone = times.timezone().map(Arc::<str>::from);
    let with = |indices: Vec<u32>,
                window: Option<Vec<i64>>,
                sign: i8|
     -> Result<RecordBatch, EngineError> {
        let indices = UInt32Array::from(indices);
        let mut columns: Vec<ArrayRef> = records
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<Result<_, _>>()?;
        if let Some(window) = window {
            columns[0] = Arc::new(
                TimestampMillisecondArray::from(window).with_timezone_opt(timezone.clone()),
            );
        }
        let last = columns.len() - 1;
        columns[last] = Arc::new(Int8Array::from_value(sign, indices.len()));
        Ok(RecordBatch::try_new(records.schema(), columns)?)
    };
    let (marker_rows, marker_ends): (Vec<u32>, Vec<i64>) = last_emitted
        .iter()
        .map(|&(row, end)| (row as u32, end))
        .unzip();
    let new_ends = with(marker_rows, Some(marker_ends), 0)?;
    let ends = merge_ends(ends, new_ends, &key_rows, keys)?;
    Ok(Closed {
        emitted: with(emitted, Some(emitted_ends), 1)?,
        starts,
        open: with(open, None, 1)?,
        ends,
        unmatched,
    })
}

/// The previous markers of keys without a new one, then the new ones.
fn merge_ends(
    previous: Option<&RecordBatch>,
    new: RecordBatch,
    key_rows: &KeyRows,
    keys: usize,
) -> Result<Option<RecordBatch>, EngineError> {
    let Some(previous) = previous.filter(|p| p.num_rows() > 0) else {
        return Ok((new.num_rows() > 0).then_some(new));
    };
    if new.num_rows() == 0 {
        return Ok(Some(previous.clone()));
    }
    let new_keys = key_rows.rows(&new, keys)?;
    let replaced: std::collections::HashSet<Option<OwnedRow>> =
        (0..new.num_rows()).map(|i| key_of(&new_keys, i)).collect();
    let previous_keys = key_rows.rows(previous, keys)?;
    let kept: BooleanArray = (0..previous.num_rows())
        .map(|i| Some(!replaced.contains(&key_of(&previous_keys, i))))
        .collect();
    let kept = filter_record_batch(previous, &kept)?;
    Ok(Some(concat_batches(&new.schema(), [&kept, &new])?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    const GAP: i64 = 10;

    /// Buffered records (time, key, argument, sign).
    fn records(rows: &[(i64, &str, i64, i8)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "__weir_window",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
            Field::new("__weir_key_0", DataType::Utf8, true),
            Field::new("__weir_arg_0", DataType::Int64, true),
            Field::new("__weir_sign", DataType::Int8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(
                    TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.0))
                        .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(Int8Array::from_iter_values(rows.iter().map(|r| r.3))),
            ],
        )
        .unwrap()
    }

    fn window(batch: &RecordBatch) -> Vec<i64> {
        times(batch).unwrap().values().to_vec()
    }

    #[test]
    fn records_closer_than_the_gap_form_one_session_per_key() {
        let buffered = records(&[
            (0, "a", 1, 1),
            (9, "a", 2, 1),
            (30, "a", 3, 1),
            (5, "b", 4, 1),
        ]);
        let closed = close(&buffered, 1, GAP, Some(20), None).unwrap();
        // a: [0, 19) closed; a: [30, 40) open; b: [5, 15) closed.
        assert_eq!(window(&closed.emitted), [19, 19, 15]);
        assert_eq!(closed.starts, [0, 0, 5]);
        assert_eq!(window(&closed.open), [30]);
        assert_eq!(window(closed.ends.as_ref().unwrap()), [19, 15]);
        assert_eq!(
            signs(closed.ends.as_ref().unwrap())
                .unwrap()
                .values()
                .to_vec(),
            [0, 0]
        );
    }

    #[test]
    fn a_retraction_takes_its_record_out_and_can_split_a_session() {
        let buffered = records(&[
            (0, "a", 1, 1),
            (8, "a", 2, 1),
            (16, "a", 3, 1),
            (8, "a", 2, -1),
            (50, "a", 9, -1),
        ]);
        let closed = close(&buffered, 1, GAP, Some(12), None).unwrap();
        assert_eq!(
            window(&closed.emitted),
            [10],
            "[0, 10) without the record at 8"
        );
        assert_eq!(window(&closed.open), [16]);
        assert_eq!(closed.unmatched, 1);
    }

    #[test]
    fn records_before_their_keys_last_emitted_session_end_are_late() {
        let ends = records(&[(19, "a", 0, 0)]);
        let incoming = records(&[(18, "a", 1, 1), (19, "a", 1, 1), (3, "b", 1, 1)]);
        let on_time = on_time(&incoming, 1, Some(&ends)).unwrap();
        assert_eq!(
            on_time.iter().collect::<Vec<_>>(),
            [Some(false), Some(true), Some(true)]
        );
    }
}
