//! Hopping windows: windows of `size` starting every `slide` (Flink's `HOP`, RisingWave's `hop`), on
//! the tumbling-window operator. Each record belongs to `size / slide` windows; the pre-aggregation
//! plan gives it the latest one ([`HOP_FUNCTION`], registered in every session) and
//! [`hop_copies`] adds the earlier ones before the records are buffered.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, RecordBatch, TimestampMillisecondArray, UInt32Array,
};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::EngineError;

/// `hop_window_start(slide, size, ts)`: the start of the latest window of `size` every `slide` (aligned
/// to the epoch) that holds `ts`, as Timestamp(ms, UTC).
pub(crate) const HOP_FUNCTION: &str = "hop_window_start";

/// The [`HOP_FUNCTION`] scalar function.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct HopWindowStart {
    signature: Signature,
}

impl HopWindowStart {
    /// The function, to register in a session.
    pub(crate) fn udf() -> ScalarUDF {
        ScalarUDF::new_from_impl(Self {
            signature: Signature::any(3, Volatility::Immutable),
        })
    }
}

/// The length in milliseconds of a constant interval argument (days or less), `None` otherwise.
pub(crate) fn interval_ms(value: &ColumnarValue) -> Option<i64> {
    match value {
        ColumnarValue::Scalar(ScalarValue::IntervalMonthDayNano(Some(v))) if v.months == 0 => {
            Some(i64::from(v.days) * 86_400_000 + v.nanoseconds / 1_000_000)
        }
        ColumnarValue::Scalar(ScalarValue::IntervalDayTime(Some(v))) => {
            Some(i64::from(v.days) * 86_400_000 + i64::from(v.milliseconds))
        }
        _ => None,
    }
}

impl ScalarUDFImpl for HopWindowStart {
    fn name(&self) -> &str {
        HOP_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(
            TimeUnit::Millisecond,
            Some("UTC".into()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [slide, _size, time] = args.args.as_slice() else {
            return exec_err!("{HOP_FUNCTION} takes a slide, a size and a time");
        };
        let Some(slide) = interval_ms(slide).filter(|s| *s > 0) else {
            return exec_err!("{HOP_FUNCTION}: the slide must be a positive constant interval");
        };
        let times = time.to_array(args.number_rows)?;
        let ms = cast(&times, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let ms = cast(&ms, &DataType::Int64)?;
        let ms = ms
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .cloned()
            .unwrap_or_else(|| datafusion::arrow::array::Int64Array::new_null(times.len()));
        let starts: TimestampMillisecondArray = ms
            .iter()
            .map(|t| t.map(|t| t.div_euclid(slide).saturating_mul(slide)))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(starts.with_timezone("UTC"))))
    }
}

/// Each pre-aggregated record once per window of `size_ms` every `slide_ms` that holds it: its copies
/// follow it (offset order is kept), the first with the latest window (column 0), each next one
/// `slide_ms` earlier. `size_ms` is a multiple of `slide_ms`, so every copy's window holds the record.
pub(crate) fn hop_copies(
    batch: &RecordBatch,
    size_ms: i64,
    slide_ms: i64,
) -> Result<RecordBatch, EngineError> {
    let copies = usize::try_from(size_ms / slide_ms.max(1))
        .unwrap_or(1)
        .max(1);
    let rows = batch.num_rows();
    let indices = UInt32Array::from_iter_values(
        (0..rows as u32).flat_map(|i| std::iter::repeat_n(i, copies)),
    );
    let mut columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<std::result::Result<_, _>>()?;
    let starts = columns[0]
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .cloned()
        .ok_or_else(|| EngineError::MalformedRequest {
            reason: "window starts are not millisecond timestamps".to_owned(),
        })?;
    let shifted: TimestampMillisecondArray = starts
        .iter()
        .enumerate()
        .map(|(i, start)| start.map(|s| s.saturating_sub((i % copies) as i64 * slide_ms)))
        .collect();
    columns[0] = Arc::new(shifted.with_timezone_opt(starts.timezone()));
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{Field, Schema};

    #[test]
    fn each_record_is_copied_into_every_window_that_holds_it() {
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "w",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
            Field::new("x", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(
                    TimestampMillisecondArray::from(vec![Some(60), None]).with_timezone("UTC"),
                ),
                Arc::new(Int64Array::from(vec![1, 2])),
            ],
        )
        .unwrap();
        let copies = hop_copies(&batch, 90, 30).unwrap();
        let starts = copies
            .column(0)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap();
        assert_eq!(
            starts.iter().collect::<Vec<_>>(),
            [Some(60), Some(30), Some(0), None, None, None]
        );
        let x = copies
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(x.values().to_vec(), [1, 1, 1, 2, 2, 2]);
    }
}
