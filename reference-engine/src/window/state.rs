//! [`WindowState`]: the sans-IO state machine of a tumbling-window aggregation.
//!
//! It buffers pre-aggregated records (window start, keys, aggregate arguments, sign) of windows that
//! are still open, and on [`WindowState::advance`] aggregates and emits every window the watermark has
//! passed. Records are aggregated in arrival (offset) order, so the same records give the same result
//! however they were split into transactions.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, Float64Array, Int8Array, Int64Array, RecordBatch, TimestampMillisecondArray,
    UInt32Array,
};
use datafusion::arrow::compute::{cast, concat_batches, filter_record_batch, take};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use serde::{Deserialize, Serialize};

use crate::changelog::{APPEND, CORRECT_FROM, CORRECT_TO, RETRACT};
use crate::error::EngineError;

/// Column of the buffered records holding +1 (Append, CorrectTo) or -1 (Retract, CorrectFrom).
pub(crate) const SIGN_COLUMN: &str = "__weir_sign";

/// An aggregate function of the window form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregateKind {
    /// `count(x)` (non-null values) or `count(*)`.
    Count,
    /// `sum(x)`.
    Sum,
    /// `avg(x)`.
    Avg,
    /// `min(x)`.
    Min,
    /// `max(x)`.
    Max,
}

/// Where an output column of the aggregation comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputSource {
    /// The window start.
    Window,
    /// The window start shifted by this many milliseconds: `TUMBLE_END`, `window_end`,
    /// `window_end - INTERVAL '1' SECOND`, ...
    ShiftedWindow(i64),
    /// The window end shifted by this many milliseconds, for cumulating and session windows
    /// (`window_end`, `SESSION_END`, `window_time`); a tumbling or hopping window's end is its start
    /// shifted by the width (`ShiftedWindow`).
    WindowEnd(i64),
    /// The n-th GROUP BY key (besides the window).
    Key(usize),
    /// The n-th aggregate.
    Aggregate(usize),
}

/// What a window aggregation computes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSpec {
    /// Window width in milliseconds: of every window (tumbling, hopping), of the largest window
    /// (cumulating), or the gap closing a session (sessions).
    pub width_ms: i64,
    /// Number of GROUP BY keys besides the window.
    pub keys: usize,
    /// The aggregates, in argument order.
    pub aggregates: Vec<AggregateKind>,
    /// Source of each result column, in SELECT order.
    pub outputs: Vec<OutputSource>,
    /// For hopping windows: a window of `width_ms` starts every `slide_ms` (a divisor of the width).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slide_ms: Option<i64>,
    /// For cumulating windows: windows of one start (aligned to `width_ms`) end every `step_ms` (a
    /// divisor of the width), up to `width_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_ms: Option<i64>,
    /// Session windows: records of one key closer than `width_ms` (the gap) form one session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub session: bool,
}

impl WindowSpec {
    /// When the window known by `value` (the buffered window column: a tumbling or hopping window's
    /// start, a cumulating window's end, a session record's event time) closes at the earliest.
    pub(crate) fn closes_at(&self, value: i64) -> i64 {
        if self.step_ms.is_some() {
            value
        } else {
            value.saturating_add(self.width_ms)
        }
    }

    /// The start and end of the window known by `value` (not sessions: theirs are computed).
    fn bounds(&self, value: i64) -> (i64, i64) {
        if self.step_ms.is_some() {
            (super::cumulate::start_of(value, self.width_ms), value)
        } else {
            (value, value.saturating_add(self.width_ms))
        }
    }
}

/// Buffered records of open windows, and how far windows have been closed.
///
/// Buffered batches have the columns: window start (Timestamp(ms, UTC)), the keys, the aggregate
/// arguments, then `SIGN_COLUMN`.
#[derive(Debug, Clone)]
pub struct WindowState {
    spec: WindowSpec,
    buffered_schema: SchemaRef,
    result_schema: SchemaRef,
    buffered: Vec<RecordBatch>,
    closed_through_ms: Option<i64>,
    late_records: u64,
    /// Sessions only: each key's last emitted session end, as marker records (sign 0).
    session_ends: Option<RecordBatch>,
}

impl WindowState {
    /// A state with nothing buffered.
    pub fn new(
        spec: WindowSpec,
        buffered_schema: SchemaRef,
        result_schema: SchemaRef,
        closed_through_ms: Option<i64>,
    ) -> Self {
        Self {
            spec,
            buffered_schema,
            result_schema,
            buffered: Vec::new(),
            closed_through_ms,
            late_records: 0,
            session_ends: None,
        }
    }

    /// What the aggregation computes.
    pub fn spec(&self) -> &WindowSpec {
        &self.spec
    }

    /// Schema of the buffered records.
    pub fn buffered_schema(&self) -> SchemaRef {
        Arc::clone(&self.buffered_schema)
    }

    /// Schema of the aggregation results (before system columns are added).
    pub fn result_schema(&self) -> SchemaRef {
        Arc::clone(&self.result_schema)
    }

    /// Records of windows still open.
    pub fn buffered(&self) -> &[RecordBatch] {
        &self.buffered
    }

    /// What a checkpoint keeps: the records of windows still open, then (sessions) each key's last
    /// emitted session end as a marker record of sign 0.
    pub fn checkpoint_records(&self) -> Vec<RecordBatch> {
        let mut records = self.buffered.clone();
        records.extend(self.session_ends.iter().cloned());
        records
    }

    /// Number of records of windows still open.
    pub fn buffered_records(&self) -> usize {
        self.buffered.iter().map(RecordBatch::num_rows).sum()
    }

    /// Windows ending at or before this instant (ms since the epoch) have been emitted.
    pub fn closed_through_ms(&self) -> Option<i64> {
        self.closed_through_ms
    }

    /// Records dropped so far because their window had already been emitted.
    pub fn late_records(&self) -> u64 {
        self.late_records
    }

    /// Restores buffered records (from a checkpoint, as [`Self::checkpoint_records`] gave them).
    pub fn restore(&mut self, batches: Vec<RecordBatch>) -> Result<(), EngineError> {
        let mut ends = Vec::new();
        for batch in batches {
            if batch.schema().fields() != self.buffered_schema.fields() {
                return Err(EngineError::CheckpointRead {
                    path: Default::default(),
                    reason: "its records do not have the expected columns".to_owned(),
                });
            }
            if self.spec.session {
                let signs = batch
                    .column(batch.num_columns() - 1)
                    .as_any()
                    .downcast_ref::<Int8Array>()
                    .cloned()
                    .ok_or_else(|| EngineError::CheckpointRead {
                        path: Default::default(),
                        reason: "its records have no sign".to_owned(),
                    })?;
                let marker: datafusion::arrow::array::BooleanArray =
                    signs.iter().map(|s| Some(s == Some(0))).collect();
                ends.push(filter_record_batch(&batch, &marker)?);
                let record = datafusion::arrow::compute::not(&marker)?;
                self.buffered.push(filter_record_batch(&batch, &record)?);
            } else {
                self.buffered.push(batch);
            }
        }
        self.buffered.retain(|b| b.num_rows() > 0);
        let ends = concat_batches(&self.buffered_schema, &ends)?;
        self.session_ends = (ends.num_rows() > 0).then_some(ends);
        Ok(())
    }

    /// Buffers the records of a pre-aggregation batch: window start, keys, arguments, then the input
    /// operation type, offset and input index (the last three columns). Records of windows already
    /// emitted are late and dropped.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), EngineError> {
        let copies;
        let batch = match (self.spec.slide_ms, self.spec.step_ms) {
            (Some(slide), _) => {
                copies = super::hop::hop_copies(batch, self.spec.width_ms, slide)?;
                &copies
            }
            (None, Some(step)) => {
                copies = super::cumulate::cumulate_copies(batch, self.spec.width_ms, step)?;
                &copies
            }
            (None, None) => batch,
        };
        let columns = batch.num_columns();
        if columns < 4 || columns - 2 != self.buffered_schema.fields().len() {
            return Err(EngineError::MalformedRequest {
                reason: "pre-aggregation batch has an unexpected number of columns".to_owned(),
            });
        }
        let ops = cast(batch.column(columns - 3), &DataType::Int32)?;
        let ops = ops
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int32Array>()
            .ok_or_else(|| EngineError::MalformedRequest {
                reason: "operation types are not integers".to_owned(),
            })?;
        let mut signs = Vec::with_capacity(ops.len());
        for op in ops.iter() {
            signs.push(match op {
                Some(APPEND) | Some(CORRECT_TO) | None => 1i8,
                Some(RETRACT) | Some(CORRECT_FROM) => -1i8,
                Some(other) => {
                    return Err(EngineError::InvalidOperationType {
                        column: "op".to_owned(),
                        value: other.to_string(),
                    });
                }
            });
        }
        let mut buffered: Vec<ArrayRef> = batch.columns()[..columns - 3].to_vec();
        buffered.push(Arc::new(Int8Array::from(signs)));
        let buffered = RecordBatch::try_new(self.buffered_schema(), buffered)?;
        let windows = window_starts(&buffered)?;
        let spec = &self.spec;
        let closed = self.closed_through_ms;
        let on_time: datafusion::arrow::array::BooleanArray = if spec.session {
            super::session::on_time(&buffered, spec.keys, self.session_ends.as_ref())?
        } else {
            windows
                .iter()
                .map(|value| {
                    Some(value.is_some_and(|v| closed.is_none_or(|c| spec.closes_at(v) > c)))
                })
                .collect()
        };
        let kept = filter_record_batch(&buffered, &on_time)?;
        let dropped = buffered.num_rows() - kept.num_rows();
        if dropped > 0 {
            self.late_records += dropped as u64;
            if spec.session {
                tracing::warn!(
                    dropped,
                    closed_through_ms = closed,
                    "dropped records without event time or of sessions already emitted"
                );
            } else {
                tracing::warn!(
                    dropped,
                    closed_through_ms = closed,
                    "dropped records without event time or of windows already emitted"
                );
            }
        }
        let buffered = kept;
        if buffered.num_rows() > 0 {
            self.buffered.push(buffered);
        }
        Ok(())
    }

    /// Emits every window ending at or before `watermark_ms`, aggregated, one record per group in
    /// window then key order; records of those windows leave the buffer.
    pub fn advance(&mut self, watermark_ms: i64) -> Result<RecordBatch, EngineError> {
        if self
            .closed_through_ms
            .is_some_and(|closed| closed >= watermark_ms)
        {
            return Ok(RecordBatch::new_empty(self.result_schema()));
        }
        if self.spec.session {
            let results = self.close_sessions(Some(watermark_ms))?;
            self.closed_through_ms = Some(watermark_ms);
            return Ok(results);
        }
        let spec = self.spec.clone();
        let (closed, open) = self.split(|value| spec.closes_at(value) <= watermark_ms)?;
        self.buffered = open;
        self.closed_through_ms = Some(watermark_ms);
        self.aggregate(&closed, None)
    }

    /// Emits every buffered window, whatever the watermark (finalising a query).
    pub fn flush(&mut self) -> Result<RecordBatch, EngineError> {
        if self.spec.session {
            return self.close_sessions(None);
        }
        let all = concat_batches(&self.buffered_schema, &self.buffered)?;
        self.buffered.clear();
        self.aggregate(&all, None)
    }

    /// Makes the sessions of the buffered records and emits those ending at or before `watermark_ms`
    /// (all with `None`), in session end then key order.
    fn close_sessions(&mut self, watermark_ms: Option<i64>) -> Result<RecordBatch, EngineError> {
        let all = concat_batches(&self.buffered_schema, &self.buffered)?;
        let closed = super::session::close(
            &all,
            self.spec.keys,
            self.spec.width_ms,
            watermark_ms,
            self.session_ends.as_ref(),
        )?;
        if closed.unmatched > 0 {
            tracing::warn!(
                dropped = closed.unmatched,
                "dropped retractions and corrections that match no record of an open session"
            );
        }
        self.buffered = if closed.open.num_rows() > 0 {
            vec![closed.open]
        } else {
            Vec::new()
        };
        self.session_ends = closed.ends;
        self.aggregate(&closed.emitted, Some(&closed.starts))
    }

    fn split(
        &self,
        closed: impl Fn(i64) -> bool,
    ) -> Result<(RecordBatch, Vec<RecordBatch>), EngineError> {
        let all = concat_batches(&self.buffered_schema, &self.buffered)?;
        let windows = window_starts(&all)?;
        let is_closed: datafusion::arrow::array::BooleanArray = windows
            .iter()
            .map(|start| Some(start.is_some_and(&closed)))
            .collect();
        let is_open = datafusion::arrow::compute::not(&is_closed)?;
        let closed_rows = filter_record_batch(&all, &is_closed)?;
        let open_rows = filter_record_batch(&all, &is_open)?;
        let open = if open_rows.num_rows() > 0 {
            vec![open_rows]
        } else {
            Vec::new()
        };
        Ok((closed_rows, open))
    }

    /// Aggregates records by (window, keys), in that order. Sessions give each record's session start
    /// (`session_starts`, the window column holding its end).
    fn aggregate(
        &self,
        records: &RecordBatch,
        session_starts: Option<&[i64]>,
    ) -> Result<RecordBatch, EngineError> {
        let keys = 1 + self.spec.keys;
        let key_columns: Vec<ArrayRef> = records.columns()[..keys].to_vec();
        let converter = RowConverter::new(
            key_columns
                .iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect(),
        )?;
        let rows = converter.convert_columns(&key_columns)?;
        let arguments: Vec<Argument> = self
            .spec
            .aggregates
            .iter()
            .enumerate()
            .map(|(i, kind)| Argument::new(*kind, records.column(keys + i)))
            .collect::<Result<_, _>>()?;
        let signs = records
            .column(records.num_columns() - 1)
            .as_any()
            .downcast_ref::<Int8Array>()
            .ok_or_else(|| EngineError::MalformedRequest {
                reason: "buffered records have no sign".to_owned(),
            })?
            .clone();

        let mut groups: BTreeMap<OwnedRow, Group> = BTreeMap::new();
        for row in 0..records.num_rows() {
            let sign = i64::from(signs.value(row));
            let group = groups
                .entry(rows.row(row).owned())
                .or_insert_with(|| Group {
                    first_row: row as u32,
                    records: 0,
                    accumulators: self
                        .spec
                        .aggregates
                        .iter()
                        .map(|k| Accumulator::new(*k))
                        .collect(),
                });
            group.records += sign;
            for (accumulator, argument) in group.accumulators.iter_mut().zip(&arguments) {
                accumulator.update(argument, row, sign)?;
            }
        }

        let live: Vec<&Group> = groups.values().filter(|g| g.records > 0).collect();
        let indices = UInt32Array::from_iter_values(live.iter().map(|g| g.first_row));
        // Each live group's window: its start and end.
        let values = window_starts(records)?;
        let bounds: Vec<(i64, i64)> = live
            .iter()
            .map(|g| {
                let row = g.first_row as usize;
                let value = values.value(row);
                match session_starts {
                    Some(starts) => (starts.get(row).copied().unwrap_or(value), value),
                    None => self.spec.bounds(value),
                }
            })
            .collect();
        let bound = |shift_ms: i64, end: bool| -> ArrayRef {
            let shifted: TimestampMillisecondArray = bounds
                .iter()
                .map(|&(start, stop)| Some(if end { stop } else { start }.saturating_add(shift_ms)))
                .collect();
            Arc::new(shifted.with_timezone_opt(values.timezone()))
        };
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.spec.outputs.len());
        for (field, source) in self.result_schema.fields().iter().zip(&self.spec.outputs) {
            let column = match *source {
                OutputSource::Window => bound(0, false),
                OutputSource::ShiftedWindow(shift_ms) => bound(shift_ms, false),
                OutputSource::WindowEnd(shift_ms) => bound(shift_ms, true),
                OutputSource::Key(k) => take(records.column(1 + k).as_ref(), &indices, None)?,
                OutputSource::Aggregate(a) => {
                    let values: Vec<Value> = live
                        .iter()
                        .map(|g| g.accumulators[a].finish())
                        .collect::<Result<_, _>>()?;
                    values_to_array(&values)
                }
            };
            columns.push(if column.data_type() == field.data_type() {
                column
            } else {
                cast(&column, field.data_type())?
            });
        }
        Ok(RecordBatch::try_new_with_options(
            self.result_schema(),
            columns,
            &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(live.len())),
        )?)
    }
}

fn window_starts(batch: &RecordBatch) -> Result<TimestampMillisecondArray, EngineError> {
    batch
        .column(0)
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .cloned()
        .ok_or_else(|| EngineError::MalformedRequest {
            reason: "window starts are not millisecond timestamps".to_owned(),
        })
}

#[derive(Debug)]
struct Group {
    first_row: u32,
    records: i64,
    accumulators: Vec<Accumulator>,
}

/// An aggregate argument column, as integers or floats.
#[derive(Debug)]
enum Argument {
    /// Only null-ness matters (count).
    Presence(ArrayRef),
    Int(Int64Array),
    Float(Float64Array),
}

impl Argument {
    fn new(kind: AggregateKind, column: &ArrayRef) -> Result<Self, EngineError> {
        if kind == AggregateKind::Count {
            return Ok(Self::Presence(Arc::clone(column)));
        }
        if column.data_type().is_floating() {
            let floats = cast(column, &DataType::Float64)?;
            return Ok(Self::Float(downcast::<Float64Array>(&floats)?));
        }
        let ints = match column.data_type() {
            DataType::Date32 => cast(&cast(column, &DataType::Int32)?, &DataType::Int64)?,
            _ => cast(column, &DataType::Int64)?,
        };
        Ok(Self::Int(downcast::<Int64Array>(&ints)?))
    }
}

fn downcast<T: Clone + 'static>(array: &ArrayRef) -> Result<T, EngineError> {
    array
        .as_any()
        .downcast_ref::<T>()
        .cloned()
        .ok_or_else(|| EngineError::MalformedRequest {
            reason: format!("unexpected aggregate argument type {}", array.data_type()),
        })
}

/// A finished aggregate value.
#[derive(Debug, Clone, Copy)]
enum Value {
    Null,
    Int(i64),
    Float(f64),
}

fn values_to_array(values: &[Value]) -> ArrayRef {
    if values.iter().any(|v| matches!(v, Value::Float(_))) {
        Arc::new(Float64Array::from_iter(values.iter().map(|v| match *v {
            Value::Float(f) => Some(f),
            Value::Int(i) => Some(i as f64),
            Value::Null => None,
        })))
    } else {
        Arc::new(Int64Array::from_iter(values.iter().map(|v| match *v {
            Value::Int(i) => Some(i),
            _ => None,
        })))
    }
}

/// A float as a totally ordered key.
fn float_key(value: f64) -> i64 {
    let bits = value.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

fn key_float(key: i64) -> f64 {
    f64::from_bits((key ^ (((key >> 63) as u64) >> 1) as i64) as u64)
}

/// Running state of one aggregate of one group; every update may be a retraction (sign -1).
#[derive(Debug)]
enum Accumulator {
    Count(i64),
    Sum {
        kind: AggregateKind,
        int: i128,
        float: f64,
        is_float: bool,
        values: i64,
    },
    Extreme {
        max: bool,
        is_float: bool,
        values: BTreeMap<i64, i64>,
    },
}

impl Accumulator {
    fn new(kind: AggregateKind) -> Self {
        match kind {
            AggregateKind::Count => Self::Count(0),
            AggregateKind::Sum | AggregateKind::Avg => Self::Sum {
                kind,
                int: 0,
                float: 0.0,
                is_float: false,
                values: 0,
            },
            AggregateKind::Min | AggregateKind::Max => Self::Extreme {
                max: kind == AggregateKind::Max,
                is_float: false,
                values: BTreeMap::new(),
            },
        }
    }

    fn update(&mut self, argument: &Argument, row: usize, sign: i64) -> Result<(), EngineError> {
        match (self, argument) {
            (Self::Count(n), Argument::Presence(column)) => {
                if column.is_valid(row) {
                    *n += sign;
                }
            }
            (Self::Sum { int, values, .. }, Argument::Int(column)) => {
                if column.is_valid(row) {
                    *int += i128::from(column.value(row)) * i128::from(sign);
                    *values += sign;
                }
            }
            (
                Self::Sum {
                    float,
                    is_float,
                    values,
                    ..
                },
                Argument::Float(column),
            ) => {
                if column.is_valid(row) {
                    *float += column.value(row) * sign as f64;
                    *is_float = true;
                    *values += sign;
                }
            }
            (Self::Extreme { values, .. }, Argument::Int(column)) => {
                if column.is_valid(row) {
                    *values.entry(column.value(row)).or_insert(0) += sign;
                }
            }
            (
                Self::Extreme {
                    values, is_float, ..
                },
                Argument::Float(column),
            ) => {
                if column.is_valid(row) {
                    *is_float = true;
                    *values.entry(float_key(column.value(row))).or_insert(0) += sign;
                }
            }
            _ => {
                return Err(EngineError::MalformedRequest {
                    reason: "aggregate argument of an unexpected kind".to_owned(),
                });
            }
        }
        Ok(())
    }

    fn finish(&self) -> Result<Value, EngineError> {
        Ok(match self {
            Self::Count(n) => Value::Int(*n),
            Self::Sum { values, .. } if *values <= 0 => Value::Null,
            Self::Sum {
                kind: AggregateKind::Avg,
                int,
                float,
                is_float,
                values,
            } => {
                let sum = if *is_float { *float } else { *int as f64 };
                Value::Float(sum / *values as f64)
            }
            Self::Sum {
                float,
                is_float: true,
                ..
            } => Value::Float(*float),
            Self::Sum { int, .. } => {
                Value::Int(i64::try_from(*int).map_err(|_| EngineError::Overflow {
                    what: format!("the window sum {int}"),
                })?)
            }
            Self::Extreme {
                max,
                is_float,
                values,
            } => {
                let mut present = values.iter().filter(|(_, n)| **n > 0).map(|(k, _)| *k);
                let key = if *max {
                    present.next_back()
                } else {
                    present.next()
                };
                match key {
                    None => Value::Null,
                    Some(k) if *is_float => Value::Float(key_float(k)),
                    Some(k) => Value::Int(k),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};
    use proptest::prelude::*;

    const HOUR: i64 = 3_600_000;

    fn ts() -> DataType {
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
    }

    fn state() -> WindowState {
        let spec = WindowSpec {
            width_ms: HOUR,
            keys: 1,
            aggregates: vec![
                AggregateKind::Count,
                AggregateKind::Sum,
                AggregateKind::Min,
                AggregateKind::Max,
                AggregateKind::Avg,
            ],
            outputs: vec![
                OutputSource::Window,
                OutputSource::Key(0),
                OutputSource::Aggregate(0),
                OutputSource::Aggregate(1),
                OutputSource::Aggregate(2),
                OutputSource::Aggregate(3),
                OutputSource::Aggregate(4),
            ],
            slide_ms: None,
            step_ms: None,
            session: false,
        };
        let buffered = Arc::new(Schema::new(vec![
            Field::new("__weir_window", ts(), true),
            Field::new("__weir_key_0", DataType::Utf8, true),
            Field::new("__weir_arg_0", DataType::Int64, true),
            Field::new("__weir_arg_1", DataType::Int64, true),
            Field::new("__weir_arg_2", DataType::Int64, true),
            Field::new("__weir_arg_3", DataType::Int64, true),
            Field::new("__weir_arg_4", DataType::Int64, true),
            Field::new(SIGN_COLUMN, DataType::Int8, false),
        ]));
        let result = Arc::new(Schema::new(vec![
            Field::new("event_time", ts(), true),
            Field::new("city", DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
            Field::new("total", DataType::Int64, true),
            Field::new("low", DataType::Int64, true),
            Field::new("high", DataType::Int64, true),
            Field::new("mean", DataType::Float64, true),
        ]));
        WindowState::new(spec, buffered, result, None)
    }

    /// (event time ms, city, value, op), as a pre-aggregation batch.
    fn batch(records: &[(i64, &str, i64, i32)]) -> RecordBatch {
        let window = TimestampMillisecondArray::from_iter_values(
            records.iter().map(|r| r.0 - r.0.rem_euclid(HOUR)),
        )
        .with_timezone("UTC");
        let value =
            || Arc::new(Int64Array::from_iter_values(records.iter().map(|r| r.2))) as ArrayRef;
        let schema = Arc::new(Schema::new(vec![
            Field::new("__weir_window", ts(), true),
            Field::new("__weir_key_0", DataType::Utf8, true),
            Field::new("__weir_arg_0", DataType::Int64, true),
            Field::new("__weir_arg_1", DataType::Int64, true),
            Field::new("__weir_arg_2", DataType::Int64, true),
            Field::new("__weir_arg_3", DataType::Int64, true),
            Field::new("__weir_arg_4", DataType::Int64, true),
            Field::new("__weir_op", DataType::Int32, false),
            Field::new("__weir_offset", DataType::Int64, false),
            Field::new("__weir_input", DataType::Int32, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(window),
                Arc::new(StringArray::from_iter_values(records.iter().map(|r| r.1))),
                value(),
                value(),
                value(),
                value(),
                value(),
                Arc::new(Int32Array::from_iter_values(records.iter().map(|r| r.3))),
                Arc::new(Int64Array::from_iter_values(0..records.len() as i64)),
                Arc::new(Int32Array::from_value(0, records.len())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_window_is_emitted_once_the_watermark_reaches_its_end() {
        let mut state = state();
        state
            .push(&batch(&[
                (10, "b", 5, APPEND),
                (20, "a", 7, APPEND),
                (HOUR + 1, "a", 1, APPEND),
            ]))
            .unwrap();
        assert_eq!(state.advance(HOUR - 1).unwrap().num_rows(), 0);
        let out = state.advance(HOUR).unwrap();
        assert_eq!(out.num_rows(), 2);
        let cities = out
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!((cities.value(0), cities.value(1)), ("a", "b"));
        assert_eq!(state.buffered_records(), 1);
    }

    #[test]
    fn retractions_and_corrections_are_subtracted_before_the_window_closes() {
        let mut state = state();
        state
            .push(&batch(&[
                (1, "a", 5, APPEND),
                (2, "a", 9, APPEND),
                (2, "a", 9, CORRECT_FROM),
                (2, "a", 3, CORRECT_TO),
                (3, "b", 4, APPEND),
                (3, "b", 4, RETRACT),
            ]))
            .unwrap();
        let out = state.advance(HOUR).unwrap();
        assert_eq!(out.num_rows(), 1, "group b was fully retracted");
        let int = |c: usize| {
            out.column(c)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(0)
        };
        assert_eq!((int(2), int(3), int(4), int(5)), (2, 8, 3, 5));
        let mean = out
            .column(6)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap()
            .value(0);
        assert_eq!(mean, 4.0);
    }

    #[test]
    fn records_of_an_emitted_window_are_late_and_dropped() {
        let mut state = state();
        state.push(&batch(&[(1, "a", 1, APPEND)])).unwrap();
        state.advance(HOUR).unwrap();
        state
            .push(&batch(&[(2, "a", 1, APPEND), (HOUR, "a", 1, APPEND)]))
            .unwrap();
        assert_eq!(state.late_records(), 1);
        assert_eq!(state.buffered_records(), 1);
    }

    #[test]
    fn float_keys_keep_order() {
        let values = [-3.5, -0.0, 0.0, 1.25, f64::INFINITY, f64::NEG_INFINITY];
        let mut keys: Vec<i64> = values.iter().map(|v| float_key(*v)).collect();
        keys.sort_unstable();
        let back: Vec<f64> = keys.iter().map(|k| key_float(*k)).collect();
        assert_eq!(
            back,
            [f64::NEG_INFINITY, -3.5, -0.0, 0.0, 1.25, f64::INFINITY]
        );
    }

    proptest! {
        #[test]
        fn splitting_records_and_watermarks_does_not_change_the_output(
            records in prop::collection::vec((0..6 * HOUR, 0..3usize, -50..50i64), 1..80),
            cuts in prop::collection::vec(0..80usize, 0..6),
        ) {
            let cities = ["x", "y", "z"];
            let mut sorted = records.clone();
            sorted.sort_by_key(|r| r.0);
            let rows: Vec<(i64, &str, i64, i32)> = sorted.iter().map(|r| (r.0, cities[r.1], r.2, APPEND)).collect();
            let end = 7 * HOUR;

            let mut whole = state();
            whole.push(&batch(&rows)).unwrap();
            let expected = whole.advance(end).unwrap();

            let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(rows.len())).collect();
            bounds.push(0);
            bounds.push(rows.len());
            bounds.sort_unstable();
            bounds.dedup();
            let mut split = state();
            let mut outputs = Vec::new();
            for pair in bounds.windows(2) {
                let part = &rows[pair[0]..pair[1]];
                split.push(&batch(part)).unwrap();
                // The watermark trails the newest event: nothing later is ever late.
                let watermark = part.last().map(|r| r.0 - r.0.rem_euclid(HOUR)).unwrap_or(0);
                outputs.push(split.advance(watermark).unwrap());
            }
            outputs.push(split.advance(end).unwrap());
            let got = concat_batches(&split.result_schema(), &outputs).unwrap();
            prop_assert_eq!(got, expected);
        }
    }
}
