//! Recognising the tumbling-window aggregation form in a plan and building its pre-aggregation plan.

use std::sync::Arc;

use datafusion::arrow::datatypes::IntervalMonthDayNano;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, ScalarFunction};
use datafusion::logical_expr::{
    Aggregate, Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, Operator, Projection,
};

use super::functions::{
    CUMULATE_END, CUMULATE_START, PARTITION_MARKER, SESSION_END, SESSION_START,
};
use super::state::{AggregateKind, OutputSource, WindowSpec};
use crate::changelog::lineage::{INPUT_CARRIER, OFFSET_CARRIER, OP_CARRIER, carry_lineage};
use crate::error::EngineError;
use crate::inputs::RegisteredInput;

/// Column of the pre-aggregation plan holding each record's window start.
pub(crate) const WINDOW_COLUMN: &str = "__weir_window";

/// A recognised window aggregation.
#[derive(Debug, Clone)]
pub(crate) struct WindowQuery {
    /// What to aggregate and how results map to output columns.
    pub spec: WindowSpec,
    /// Window start, keys, aggregate arguments, input op and offset of each input record, in offset order.
    pub pre_aggregation: LogicalPlan,
    /// The query's result columns (names and types as DataFusion plans them).
    pub result_schema: SchemaRef,
}

fn unsupported(reason: impl Into<String>) -> EngineError {
    EngineError::UnsupportedWindowAggregation {
        reason: reason.into(),
    }
}

/// The window aggregation in `plan`, `None` when the plan does not end in a GROUP BY.
pub(crate) fn recognise(
    plan: &LogicalPlan,
    inputs: &[RegisteredInput],
) -> Result<Option<WindowQuery>, EngineError> {
    let LogicalPlan::Projection(top) = plan else {
        return Ok(None);
    };
    let aggregate = match top.input.as_ref() {
        LogicalPlan::Aggregate(aggregate) => aggregate,
        LogicalPlan::Filter(filter)
            if matches!(filter.input.as_ref(), LogicalPlan::Aggregate(_)) =>
        {
            return Err(unsupported(
                "HAVING is not supported on a window aggregation; filter the input with WHERE",
            ));
        }
        _ => return Ok(None),
    };
    let carried = carry_lineage(&aggregate.input, inputs)?;
    let Some(input) = carried.inputs.first().and_then(|&i| inputs.get(i)) else {
        return Err(unsupported("the aggregation reads no input"));
    };
    let event_time = &input.vocab.event_time_column;

    // GROUP BY: one window over event time (`date_bin` or another window's bound, seen through the
    // subqueries below the aggregation, possibly shifted by constant intervals: window_start,
    // window_end, TUMBLE_END, ...); every other expression is a key.
    let mut shape: Option<WindowShape> = None;
    let mut partition: Option<Vec<Expr>> = None;
    // The GROUP BY expression the buffered window column is computed from, and its shift.
    let mut anchor: Option<(i64, Expr)> = None;
    let mut shifts: Vec<Option<(Bound, i64)>> = Vec::with_capacity(aggregate.group_expr.len());
    let mut keys = Vec::new();
    for expr in &aggregate.group_expr {
        if matches!(expr, Expr::GroupingSet(_)) {
            return Err(unsupported(
                "GROUPING SETS, CUBE and ROLLUP are not supported",
            ));
        }
        let resolved = inline_columns(expr, &aggregate.input);
        if let Some(term) = window_term(&resolved, event_time)? {
            match &shape {
                Some(other) if *other != term.shape => {
                    return Err(unsupported(
                        "GROUP BY has windows of different widths; group by one window",
                    ));
                }
                _ => shape = Some(term.shape),
            }
            if term.partition.is_some() {
                partition = term.partition;
            }
            if anchor.is_none() && term.shape.anchor() == term.bound {
                anchor = Some((term.shift_ms, expr.clone()));
            }
            shifts.push(Some((term.bound, term.shift_ms)));
        } else {
            shifts.push(None);
            let index = shifts.len() - 1;
            keys.push((index, expr.clone()));
        }
    }
    if let Some(shape) = shape
        && anchor.is_none()
    {
        return Err(unsupported(match shape {
            WindowShape::Cumulating { .. } => {
                "a cumulating window must be grouped by its end: GROUP BY window_start, window_end"
            }
            _ => {
                "a session window must be grouped by its start: GROUP BY SESSION(<time column>, <gap>) \
                 or GROUP BY window_start, window_end"
            }
        }));
    }
    if let Some(partition) = &partition {
        let resolved: Vec<Expr> = keys
            .iter()
            .map(|(_, key)| strip_alias(&inline_columns(key, &aggregate.input)).clone())
            .collect();
        let same = resolved.len() == partition.len()
            && resolved.iter().all(|key| partition.contains(key))
            && partition.iter().all(|column| resolved.contains(column));
        if !same {
            return Err(unsupported(
                "the GROUP BY keys of a session window table function must be its PARTITION BY \
                 columns (sessions are per key): TABLE(SESSION(TABLE t PARTITION BY (k1, k2), \
                 DESCRIPTOR(ts), gap)) ... GROUP BY window_start, window_end, k1, k2",
            ));
        }
    }
    let (Some(shape), Some((window_shift_ms, window_expr))) = (shape, anchor) else {
        return Err(EngineError::ChangelogUnsafe {
            explanation: format!(
                "it aggregates records without a tumbling window over `{event_time}`, and a retraction or \
                 correction of an aggregated record would need the previous aggregate. Group by a window: \
                 `GROUP BY date_bin(INTERVAL '1 hour', {event_time}), <keys>` (or Flink's \
                 `GROUP BY TUMBLE({event_time}, INTERVAL '1' HOUR)`)"
            ),
        });
    };

    // Aggregates.
    let mut aggregates = Vec::new();
    let mut arguments = Vec::new();
    for expr in &aggregate.aggr_expr {
        let (kind, argument) = aggregate_call(expr, aggregate)?;
        aggregates.push(kind);
        arguments.push(argument);
    }

    // SELECT list: each column a group key or an aggregate.
    let groups = aggregate.group_expr.len();
    let mut outputs = Vec::new();
    for expr in &top.expr {
        let not_a_column = || {
            unsupported(format!(
                "the output column `{expr}` must be a GROUP BY key, an aggregate or the window \
                 (its start or end, possibly plus or minus a constant interval) as it is \
                 (compute on the input below the GROUP BY instead)"
            ))
        };
        // `<window> +/- INTERVAL ... +/- ...` over a window group (or a session's end over its start).
        let Some((column, ends, extra_shift)) = shifted_column(expr)? else {
            return Err(not_a_column());
        };
        let index = aggregate
            .schema
            .index_of_column(column)
            .map_err(|e| unsupported(e.strip_backtrace()))?;
        let window_shift = shifts.get(index).copied().flatten();
        if (extra_shift != 0 || ends) && window_shift.is_none() {
            return Err(not_a_column());
        }
        outputs.push(if let Some((bound, shift)) = window_shift {
            let shift = shift.saturating_add(extra_shift);
            match (bound, ends) {
                (Bound::Start, false) if shift == 0 => OutputSource::Window,
                (Bound::Start, false) => OutputSource::ShiftedWindow(shift),
                (Bound::Start, true) => OutputSource::WindowEnd(shift),
                (Bound::End, false) => OutputSource::WindowEnd(shift),
                (Bound::End, true) => return Err(not_a_column()),
            }
        } else if index < groups {
            let key = keys
                .iter()
                .position(|(i, _)| *i == index)
                .ok_or_else(|| unsupported("a GROUP BY key could not be resolved"))?;
            OutputSource::Key(key)
        } else {
            OutputSource::Aggregate(index - groups)
        });
    }
    let result_schema: SchemaRef = Arc::new(top.schema.as_arrow().clone());
    for (field, source) in result_schema.fields().iter().zip(&outputs) {
        if field.name() == event_time
            && !matches!(
                source,
                OutputSource::Window | OutputSource::ShiftedWindow(_) | OutputSource::WindowEnd(_)
            )
        {
            return Err(unsupported(format!(
                "`{event_time}` must be the window (its start, or its end): \
                 `date_bin(...) AS {event_time}`, `TUMBLE_START(...) AS {event_time}` or `window_start AS {event_time}`"
            )));
        }
    }

    // Pre-aggregation plan: window start, keys and arguments per input record, in offset order.
    let window_type = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    let mut window_start = window_expr
        .cast_to(&window_type, aggregate.input.schema())
        .map_err(|e| unsupported(e.strip_backtrace()))?;
    if window_shift_ms != 0 {
        window_start = window_start
            - Expr::Literal(
                ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(
                    0,
                    0,
                    window_shift_ms.saturating_mul(1_000_000),
                ))),
                None,
            );
    }
    let mut exprs = vec![window_start.alias(WINDOW_COLUMN)];
    exprs.extend(
        keys.iter()
            .enumerate()
            .map(|(i, (_, key))| key.clone().alias(format!("__weir_key_{i}"))),
    );
    exprs.extend(
        arguments
            .iter()
            .enumerate()
            .map(|(i, argument)| argument.clone().alias(format!("__weir_arg_{i}"))),
    );
    exprs.extend(carried.carrier_exprs());
    let order = carried.order();
    let projection = Projection::try_new(exprs, Arc::new(carried.plan))
        .map_err(|e| unsupported(e.strip_backtrace()))?;
    let pre_aggregation = LogicalPlanBuilder::from(LogicalPlan::Projection(projection))
        .sort(order)
        .and_then(LogicalPlanBuilder::build)
        .map_err(|e| unsupported(e.strip_backtrace()))?;

    let (width_ms, slide_ms, step_ms, session) = match shape {
        WindowShape::Aligned { width_ms, slide_ms } => (width_ms, slide_ms, None, false),
        WindowShape::Cumulating { size_ms, step_ms } => (size_ms, None, Some(step_ms), false),
        WindowShape::Session { gap_ms } => (gap_ms, None, None, true),
    };
    Ok(Some(WindowQuery {
        spec: WindowSpec {
            width_ms,
            keys: keys.len(),
            aggregates,
            outputs,
            slide_ms,
            step_ms,
            session,
        },
        pre_aggregation,
        result_schema,
    }))
}

/// The column under `expr`, whether it is a session's end over the column (`SESSION_END`, the end
/// of the session whose start is the column), and the constant intervals added to it (`col`,
/// `col + INTERVAL ..`, ...).
fn shifted_column(expr: &Expr) -> Result<Option<(&Column, bool, i64)>, EngineError> {
    match strip_alias(expr) {
        Expr::Column(column) => Ok(Some((column, false, 0))),
        Expr::Cast(cast) => shifted_column(&cast.expr),
        Expr::ScalarFunction(function) if function.func.name() == SESSION_END => {
            match function
                .args
                .get(1)
                .map(shifted_column)
                .transpose()?
                .flatten()
            {
                Some((column, false, 0)) => Ok(Some((column, true, 0))),
                _ => Ok(None),
            }
        }
        Expr::BinaryExpr(binary) if matches!(binary.op, Operator::Plus | Operator::Minus) => {
            let Some((column, ends, shift)) = shifted_column(&binary.left)? else {
                return Ok(None);
            };
            let Some(ms) = interval_ms(&binary.right)? else {
                return Ok(None);
            };
            let ms = if binary.op == Operator::Minus {
                -ms
            } else {
                ms
            };
            Ok(Some((column, ends, shift.saturating_add(ms))))
        }
        _ => Ok(None),
    }
}

/// `expr` with the columns it reads replaced by the expressions that compute them in the projections
/// of `plan` (through subquery aliases and filters), as far as projections go.
fn inline_columns(expr: &Expr, plan: &LogicalPlan) -> Expr {
    let mut expr = expr.clone();
    let mut plan = plan;
    loop {
        match plan {
            LogicalPlan::Projection(projection) => {
                let inlined = expr.clone().transform_up(|e| match &e {
                    Expr::Column(column) => match projection.schema.index_of_column(column) {
                        Ok(i) => Ok(Transformed::yes(strip_alias(&projection.expr[i]).clone())),
                        Err(_) => Ok(Transformed::no(e)),
                    },
                    _ => Ok(Transformed::no(e)),
                });
                match inlined {
                    Ok(inlined) => expr = inlined.data,
                    Err(_) => return expr,
                }
                plan = &projection.input;
            }
            LogicalPlan::SubqueryAlias(alias) => {
                // Columns qualified by the alias are the input's columns at the same positions.
                let inlined = expr.clone().transform_up(|e| match &e {
                    Expr::Column(column) => match alias.schema.index_of_column(column) {
                        Ok(i) => Ok(Transformed::yes(Expr::Column(Column::from(
                            alias.input.schema().qualified_field(i),
                        )))),
                        Err(_) => Ok(Transformed::no(e)),
                    },
                    _ => Ok(Transformed::no(e)),
                });
                match inlined {
                    Ok(inlined) => expr = inlined.data,
                    Err(_) => return expr,
                }
                plan = &alias.input;
            }
            LogicalPlan::Filter(filter) => plan = &filter.input,
            _ => return expr,
        }
    }
}

/// The shape of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WindowShape {
    /// Windows aligned to the epoch, known by their start: tumbling (`slide_ms` none) or hopping.
    Aligned {
        width_ms: i64,
        slide_ms: Option<i64>,
    },
    /// Cumulating windows, known by their end.
    Cumulating { size_ms: i64, step_ms: i64 },
    /// Sessions, known (record by record) by their start.
    Session { gap_ms: i64 },
}

impl WindowShape {
    /// The bound whose GROUP BY expression gives the buffered window column.
    fn anchor(self) -> Bound {
        match self {
            Self::Cumulating { .. } => Bound::End,
            Self::Aligned { .. } | Self::Session { .. } => Bound::Start,
        }
    }
}

/// Which bound of its window a window term is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Start,
    End,
}

/// A GROUP BY expression that is a window's bound plus or minus constant intervals.
#[derive(Debug, Clone)]
struct WindowTerm {
    shape: WindowShape,
    bound: Bound,
    shift_ms: i64,
    /// A session table function's PARTITION BY columns.
    partition: Option<Vec<Expr>>,
}

/// The window term `expr` is: `date_bin(<interval>, <event time>[, origin])`, a hopping window's start,
/// a cumulating or session window's start or end, plus or minus constant intervals.
fn window_term(expr: &Expr, event_time: &str) -> Result<Option<WindowTerm>, EngineError> {
    match strip_cast(expr) {
        Expr::BinaryExpr(binary) if matches!(binary.op, Operator::Plus | Operator::Minus) => {
            let Some(term) = window_term(&binary.left, event_time)? else {
                return Ok(None);
            };
            let Some(ms) = interval_ms(&binary.right)? else {
                return Ok(None);
            };
            let ms = if binary.op == Operator::Minus {
                -ms
            } else {
                ms
            };
            Ok(Some(WindowTerm {
                shift_ms: term.shift_ms.saturating_add(ms),
                ..term
            }))
        }
        other => window_bound(other, event_time),
    }
}

/// Whether argument `i` of a window function is the event time column.
fn on_event_time(function: &ScalarFunction, i: usize, event_time: &str) -> bool {
    matches!(function.args.get(i).map(strip_cast), Some(Expr::Column(c)) if c.name == event_time)
}

/// The positive constant interval (ms) argument `i` of a window function.
fn constant_interval(function: &ScalarFunction, i: usize, what: &str) -> Result<i64, EngineError> {
    function
        .args
        .get(i)
        .map(interval_ms)
        .transpose()?
        .flatten()
        .filter(|ms| *ms > 0)
        .ok_or_else(|| unsupported(format!("{what} must be positive constant intervals")))
}

/// The window bound `expr` is, unshifted.
fn window_bound(expr: &Expr, event_time: &str) -> Result<Option<WindowTerm>, EngineError> {
    let Expr::ScalarFunction(function) = strip_alias(expr) else {
        return Ok(None);
    };
    let term = |shape, bound| {
        Ok(Some(WindowTerm {
            shape,
            bound,
            shift_ms: 0,
            partition: None,
        }))
    };
    match function.func.name() {
        super::hop::HOP_FUNCTION => {
            if !on_event_time(function, 2, event_time) {
                return Err(unsupported(format!(
                    "the hopping window must be over `{event_time}`: HOP({event_time}, <slide>, <size>)"
                )));
            }
            let what = "a hopping window's slide and size";
            let (slide_ms, width_ms) = (
                constant_interval(function, 0, what)?,
                constant_interval(function, 1, what)?,
            );
            if width_ms % slide_ms != 0 {
                return Err(unsupported(
                    "a hopping window's size must be a whole multiple of its slide",
                ));
            }
            let shape = WindowShape::Aligned {
                width_ms,
                slide_ms: (slide_ms != width_ms).then_some(slide_ms),
            };
            term(shape, Bound::Start)
        }
        name @ (CUMULATE_START | CUMULATE_END) => {
            if !on_event_time(function, 2, event_time) {
                return Err(unsupported(format!(
                    "the cumulating window must be over `{event_time}`: \
                     TABLE(CUMULATE(TABLE t, DESCRIPTOR({event_time}), <step>, <size>))"
                )));
            }
            let what = "a cumulating window's step and size";
            let (step_ms, size_ms) = (
                constant_interval(function, 0, what)?,
                constant_interval(function, 1, what)?,
            );
            if size_ms % step_ms != 0 {
                return Err(unsupported(
                    "a cumulating window's size must be a whole multiple of its step",
                ));
            }
            let bound = if name == CUMULATE_END {
                Bound::End
            } else {
                Bound::Start
            };
            term(WindowShape::Cumulating { size_ms, step_ms }, bound)
        }
        SESSION_START => {
            if !on_event_time(function, 1, event_time) {
                return Err(unsupported(format!(
                    "the session window must be over `{event_time}`: SESSION({event_time}, <gap>)"
                )));
            }
            let gap_ms = constant_interval(function, 0, "a session window's gap")?;
            let partition = match function.args.get(2) {
                Some(Expr::Literal(
                    ScalarValue::Utf8(Some(marker))
                    | ScalarValue::Utf8View(Some(marker))
                    | ScalarValue::LargeUtf8(Some(marker)),
                    _,
                )) if marker == PARTITION_MARKER => Some(
                    function.args[3..]
                        .iter()
                        .map(|e| strip_alias(e).clone())
                        .collect(),
                ),
                _ => None,
            };
            Ok(Some(WindowTerm {
                shape: WindowShape::Session { gap_ms },
                bound: Bound::Start,
                shift_ms: 0,
                partition,
            }))
        }
        SESSION_END => {
            let gap_ms = constant_interval(function, 0, "a session window's gap")?;
            match function
                .args
                .get(1)
                .map(|e| window_term(e, event_time))
                .transpose()?
                .flatten()
            {
                Some(start)
                    if start.shape == (WindowShape::Session { gap_ms })
                        && start.bound == Bound::Start
                        && start.shift_ms == 0 =>
                {
                    Ok(Some(WindowTerm {
                        bound: Bound::End,
                        ..start
                    }))
                }
                _ => Err(unsupported(
                    "a session's end must be SESSION_END(<time column>, <gap>) of the session grouped by",
                )),
            }
        }
        "date_bin" => {
            if !on_event_time(function, 1, event_time) {
                return Err(unsupported(format!(
                    "the window must bin `{event_time}`: date_bin(INTERVAL '...', {event_time})"
                )));
            }
            let width_ms = function
                .args
                .first()
                .map(interval_ms)
                .transpose()?
                .flatten()
                .ok_or_else(|| {
                    unsupported(
                        "the window width must be a constant interval, e.g. INTERVAL '1 hour'",
                    )
                })?;
            if width_ms <= 0 {
                return Err(unsupported(
                    "the window width must be a positive whole number of milliseconds",
                ));
            }
            let shape = WindowShape::Aligned {
                width_ms,
                slide_ms: None,
            };
            term(shape, Bound::Start)
        }
        _ => Ok(None),
    }
}

/// The length in milliseconds of a constant interval, `None` when `expr` is no interval literal.
pub(crate) fn interval_ms(expr: &Expr) -> Result<Option<i64>, EngineError> {
    let ns: i128 = match strip_cast(expr) {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) => {
            if v.months != 0 {
                return Err(unsupported(
                    "an interval of months has no fixed length; use days or less",
                ));
            }
            i128::from(v.days) * 86_400_000_000_000 + i128::from(v.nanoseconds)
        }
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => {
            i128::from(v.days) * 86_400_000_000_000 + i128::from(v.milliseconds) * 1_000_000
        }
        Expr::Literal(ScalarValue::DurationMillisecond(Some(v)), _) => i128::from(*v) * 1_000_000,
        Expr::Literal(ScalarValue::DurationSecond(Some(v)), _) => i128::from(*v) * 1_000_000_000,
        _ => return Ok(None),
    };
    if ns % 1_000_000 != 0 {
        return Err(unsupported(
            "window widths and shifts must be whole numbers of milliseconds",
        ));
    }
    i64::try_from(ns / 1_000_000)
        .map(Some)
        .map_err(|_| unsupported("the interval is too large"))
}

/// The kind and argument of one aggregate call.
fn aggregate_call(
    expr: &Expr,
    aggregate: &Aggregate,
) -> Result<(AggregateKind, Expr), EngineError> {
    let Expr::AggregateFunction(AggregateFunction { func, params }) = strip_alias(expr) else {
        return Err(unsupported(format!("`{expr}` is not an aggregate call")));
    };
    let kind = match func.name() {
        "count" => AggregateKind::Count,
        "sum" => AggregateKind::Sum,
        "avg" => AggregateKind::Avg,
        "min" => AggregateKind::Min,
        "max" => AggregateKind::Max,
        other => {
            return Err(unsupported(format!(
                "the aggregate `{other}` is not supported; use count, sum, avg, min or max"
            )));
        }
    };
    if params.distinct || params.filter.is_some() || !params.order_by.is_empty() {
        return Err(unsupported(format!(
            "`{expr}`: DISTINCT, FILTER and ORDER BY inside aggregates are not supported"
        )));
    }
    let [argument] = params.args.as_slice() else {
        return Err(unsupported(format!(
            "`{expr}` must have exactly one argument"
        )));
    };
    let data_type = argument
        .get_type(aggregate.input.schema())
        .map_err(|e| unsupported(e.strip_backtrace()))?;
    let numeric = data_type.is_integer() || data_type.is_floating();
    let ordered = numeric
        || matches!(
            data_type,
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
        );
    let supported = match kind {
        AggregateKind::Count => true,
        AggregateKind::Sum | AggregateKind::Avg => numeric,
        AggregateKind::Min | AggregateKind::Max => ordered,
    };
    if !supported {
        return Err(unsupported(format!(
            "`{expr}` over {data_type} is not supported in a window aggregation"
        )));
    }
    Ok((kind, argument.clone()))
}

fn strip_alias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => strip_alias(&alias.expr),
        other => other,
    }
}

fn strip_cast(expr: &Expr) -> &Expr {
    match expr {
        Expr::Cast(cast) => strip_cast(&cast.expr),
        Expr::TryCast(cast) => strip_cast(&cast.expr),
        Expr::Alias(alias) => strip_cast(&alias.expr),
        other => other,
    }
}

/// The schema of the buffered records: window start, keys, arguments, sign.
pub(crate) fn buffered_schema(pre_aggregation: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = pre_aggregation
        .fields()
        .iter()
        .filter(|f| ![OP_CARRIER, OFFSET_CARRIER, INPUT_CARRIER].contains(&f.name().as_str()))
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(super::state::SIGN_COLUMN, DataType::Int8, false));
    Arc::new(Schema::new(fields))
}
