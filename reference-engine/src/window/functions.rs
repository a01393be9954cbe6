//! The scalar functions that cumulating and session windows are rewritten onto (`window::syntax`),
//! registered in every session. Each gives, per record, one bound of the first window holding it; the
//! window operator adds the record's other windows ([`super::cumulate`]) or merges records into
//! sessions ([`super::session`]):
//!
//! - `cumulate_window_start(step, size, ts)`: the start of the window of `size` (aligned to the epoch)
//!   holding `ts`, shared by all its cumulating windows;
//! - `cumulate_window_end(step, size, ts)`: the end of the smallest cumulating window holding `ts`
//!   (the first multiple of `step` after the start that is later than `ts`);
//! - `session_window_start(gap, ts[, 'PARTITION BY', column...])`: `ts`, the start of a session of one
//!   record; the columns after `'PARTITION BY'` are the session table function's partition columns,
//!   which the window operator checks against the GROUP BY keys;
//! - `session_window_end(gap, start)`: `start + gap`, the end of a session of one record.
//!
//! All return Timestamp(ms, UTC). Outside a window aggregation they mean nothing (a record's other
//! windows and its session are made by the operator), and queries using them otherwise are refused.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, TimestampMillisecondArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::exec_err;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use super::hop::{HOP_FUNCTION, interval_ms};

/// `cumulate_window_start(step, size, ts)`.
pub(crate) const CUMULATE_START: &str = "cumulate_window_start";
/// `cumulate_window_end(step, size, ts)`.
pub(crate) const CUMULATE_END: &str = "cumulate_window_end";
/// `session_window_start(gap, ts[, 'PARTITION BY', column...])`.
pub(crate) const SESSION_START: &str = "session_window_start";
/// `session_window_end(gap, start)`.
pub(crate) const SESSION_END: &str = "session_window_end";
/// The literal that starts a session's partition columns in [`SESSION_START`]'s arguments.
pub(crate) const PARTITION_MARKER: &str = "PARTITION BY";

/// Which bound a [`WindowBound`] function computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Bound {
    CumulateStart,
    CumulateEnd,
    SessionStart,
    SessionEnd,
}

impl Bound {
    fn name(self) -> &'static str {
        match self {
            Self::CumulateStart => CUMULATE_START,
            Self::CumulateEnd => CUMULATE_END,
            Self::SessionStart => SESSION_START,
            Self::SessionEnd => SESSION_END,
        }
    }

    /// How many constant intervals lead the arguments.
    fn intervals(self) -> usize {
        match self {
            Self::CumulateStart | Self::CumulateEnd => 2,
            Self::SessionStart | Self::SessionEnd => 1,
        }
    }

    /// The bound for the record at `t` (ms), given the leading intervals (positive, ms).
    fn at(self, intervals: &[i64], t: i64) -> i64 {
        match (self, intervals) {
            (Self::CumulateStart, [_, size]) => t.div_euclid(*size).saturating_mul(*size),
            (Self::CumulateEnd, [step, size]) => {
                let start = t.div_euclid(*size).saturating_mul(*size);
                let steps = t.saturating_sub(start).div_euclid(*step).saturating_add(1);
                start.saturating_add(steps.saturating_mul(*step))
            }
            (Self::SessionStart, _) => t,
            (Self::SessionEnd, [gap]) => t.saturating_add(*gap),
            _ => t,
        }
    }
}

/// One of the window bound functions.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct WindowBound {
    bound: Bound,
    signature: Signature,
}

impl WindowBound {
    /// Every window bound function, to register in a session.
    pub(crate) fn udfs() -> Vec<ScalarUDF> {
        [
            Bound::CumulateStart,
            Bound::CumulateEnd,
            Bound::SessionStart,
            Bound::SessionEnd,
        ]
        .into_iter()
        .map(|bound| {
            ScalarUDF::new_from_impl(Self {
                bound,
                signature: Signature::variadic_any(Volatility::Immutable),
            })
        })
        .collect()
    }
}

impl ScalarUDFImpl for WindowBound {
    fn name(&self) -> &str {
        self.bound.name()
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
        let name = self.bound.name();
        let leading = self.bound.intervals();
        let exact = matches!(
            self.bound,
            Bound::CumulateStart | Bound::CumulateEnd | Bound::SessionEnd
        );
        if args.args.len() < leading + 1 || (exact && args.args.len() != leading + 1) {
            return exec_err!("{name} takes {leading} constant interval(s) and a time");
        }
        let mut intervals = Vec::with_capacity(leading);
        for value in &args.args[..leading] {
            match interval_ms(value).filter(|ms| *ms > 0) {
                Some(ms) => intervals.push(ms),
                None => {
                    return exec_err!(
                        "{name}: the window sizes must be positive constant intervals"
                    );
                }
            }
        }
        let times = args.args[leading].to_array(args.number_rows)?;
        let ms = cast(&times, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let ms = cast(&ms, &DataType::Int64)?;
        let Some(ms) = ms.as_any().downcast_ref::<Int64Array>() else {
            return exec_err!("{name}: the time is not a timestamp");
        };
        let bounds: TimestampMillisecondArray = ms
            .iter()
            .map(|t| t.map(|t| self.bound.at(&intervals, t)))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(bounds.with_timezone("UTC"))))
    }
}

/// The window function (`HOP`, `CUMULATE` or `SESSION`) that `plan`, which aggregates nothing, uses,
/// if any: a record of such a window belongs to several windows or to a session that only the window
/// operator makes, so a query using one is only meaningful as a window aggregation. (A plan that
/// aggregates is a window aggregation or chained steps, or is refused for its aggregation.)
pub(crate) fn multi_window_function(plan: &LogicalPlan) -> Option<&'static str> {
    let aggregates = plan
        .exists(|node| Ok(matches!(node, LogicalPlan::Aggregate(_))))
        .unwrap_or(true);
    if aggregates {
        return None;
    }
    let mut found = None;
    let _ = plan.apply_with_subqueries(|node| {
        for expr in node.expressions() {
            let _ = expr.apply(|e| {
                if let Expr::ScalarFunction(function) = e {
                    found = match function.func.name() {
                        HOP_FUNCTION => Some("HOP"),
                        CUMULATE_START | CUMULATE_END => Some("CUMULATE"),
                        SESSION_START | SESSION_END => Some("SESSION"),
                        _ => found,
                    };
                }
                Ok(if found.is_some() {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            });
        }
        Ok(if found.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 24 * HOUR;

    #[test]
    fn cumulating_bounds_are_the_size_window_start_and_the_first_step_end_after_the_record() {
        let at = |bound: Bound, t| bound.at(&[HOUR, DAY], t);
        assert_eq!(at(Bound::CumulateStart, DAY + 5), DAY);
        assert_eq!(at(Bound::CumulateEnd, DAY + 5), DAY + HOUR);
        assert_eq!(
            at(Bound::CumulateEnd, DAY + HOUR),
            DAY + 2 * HOUR,
            "a record at a step's end is in the next window"
        );
        assert_eq!(at(Bound::CumulateEnd, DAY - 1), DAY);
        assert_eq!(at(Bound::CumulateStart, -1), -DAY);
        assert_eq!(at(Bound::CumulateEnd, -1), 0);
    }

    #[test]
    fn a_lone_record_is_a_session_from_it_to_it_plus_the_gap() {
        assert_eq!(Bound::SessionStart.at(&[HOUR], 42), 42);
        assert_eq!(Bound::SessionEnd.at(&[HOUR], 42), 42 + HOUR);
    }
}
