//! Query parameters: `?` and `$1` placeholders, their types where DataFusion infers them, and values bound
//! from a row of an Arrow batch (what a Flight SQL client sends for a prepared statement).

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, Statement, Value, ValueWithSpan, visit_expressions, visit_expressions_mut,
};

use crate::error::SqlError;

/// Numbers the `?` placeholders of a statement `$1`, `$2`, … in the order they appear in its text (the
/// DB-API's `qmark` style, which ADBC and `flightsql-dbapi` use); DataFusion itself knows only `$n`.
/// Mixing `?` with `$n` is refused: which value is which would be a guess.
pub(crate) fn number_question_marks(statement: &mut DfStatement) -> Result<(), SqlError> {
    let Some(inner) = inner_statement(statement) else {
        return Ok(());
    };
    let mut marks = Vec::new();
    let mut numbered = false;
    let _ = visit_expressions(&*inner, |expr: &Expr| {
        if let Expr::Value(ValueWithSpan {
            value: Value::Placeholder(p),
            span,
        }) = expr
        {
            if p == "?" {
                marks.push((span.start.line, span.start.column));
            } else {
                numbered = true;
            }
        }
        ControlFlow::<()>::Continue(())
    });
    if marks.is_empty() {
        return Ok(());
    }
    if numbered {
        return Err(SqlError::Parameters {
            message: "the statement mixes `?` and `$n` placeholders; use one style".to_owned(),
        });
    }
    marks.sort_unstable();
    let mut visited = 0usize;
    let _ = visit_expressions_mut(inner, |expr: &mut Expr| {
        if let Expr::Value(ValueWithSpan {
            value: Value::Placeholder(p),
            span,
        }) = expr
            && p == "?"
        {
            // Spans give the text's order; a statement without spans keeps the visiting order.
            let position = (span.start.line, span.start.column);
            let index = match marks.binary_search(&position) {
                Ok(i) if position != (0, 0) => i,
                _ => visited,
            };
            visited += 1;
            *p = format!("${}", index + 1);
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(())
}

fn inner_statement(statement: &mut DfStatement) -> Option<&mut Statement> {
    match statement {
        DfStatement::Statement(s) => Some(s.as_mut()),
        DfStatement::Explain(explain) => inner_statement(explain.statement.as_mut()),
        _ => None,
    }
}

/// A statement's parameters: each placeholder's id (`$1`, `$name`) and the type DataFusion inferred for
/// it, if any; positional ones first, by number, then named ones by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Parameters(Vec<(String, Option<DataType>)>);

impl Parameters {
    pub(crate) fn new(types: HashMap<String, Option<DataType>>) -> Self {
        let mut params: Vec<_> = types.into_iter().collect();
        params.sort_by(|(a, _), (b, _)| position(a).cmp(&position(b)).then_with(|| a.cmp(b)));
        Self(params)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The parameters as a schema: one nullable field per placeholder, named by its id; a type DataFusion
    /// could not infer is `Null` (any value binds).
    pub(crate) fn schema(&self) -> Schema {
        Schema::new(
            self.0
                .iter()
                .map(|(id, t)| Field::new(id, t.clone().unwrap_or(DataType::Null), true))
                .collect::<Vec<_>>(),
        )
    }

    /// The values of row `row` of `batch`, for these parameters: by position (column `i` is `$i+1`) when the
    /// placeholders are all positional, by column name (`name` or `$name`) otherwise. A dense or sparse
    /// union value (what `flightsql-dbapi` sends) is its member's value.
    pub(crate) fn values(&self, batch: &RecordBatch, row: usize) -> Result<ParamValues, SqlError> {
        let value = |column: usize| -> Result<ScalarValue, SqlError> {
            let scalar = ScalarValue::try_from_array(batch.column(column), row).map_err(|e| {
                SqlError::Parameters {
                    message: format!("reading bound parameter {}: {e}", column + 1),
                }
            })?;
            Ok(without_union(scalar))
        };
        let positional = self.0.iter().all(|(id, _)| position(id).is_some());
        if positional {
            let needed = self
                .0
                .iter()
                .filter_map(|(id, _)| position(id))
                .max()
                .unwrap_or(0);
            if batch.num_columns() != needed {
                return Err(SqlError::Parameters {
                    message: format!(
                        "the statement has {needed} parameter(s), {} bound",
                        batch.num_columns()
                    ),
                });
            }
            let values = (0..needed).map(value).collect::<Result<Vec<_>, _>>()?;
            return Ok(ParamValues::from(values));
        }
        let schema = batch.schema();
        let mut named = HashMap::new();
        for (id, _) in &self.0 {
            let name = id.trim_start_matches('$');
            let column = schema
                .fields()
                .iter()
                .position(|f| f.name() == id || f.name() == name)
                .ok_or_else(|| SqlError::Parameters {
                    message: format!(
                        "no value is bound for parameter {id} (bind a column named `{name}`)"
                    ),
                })?;
            named.insert(name.to_owned(), value(column)?);
        }
        Ok(ParamValues::from(named))
    }
}

/// `$3` is parameter 3; a named one (`$city`) has no position.
fn position(id: &str) -> Option<usize> {
    id.strip_prefix('$')?.parse().ok()
}

fn without_union(scalar: ScalarValue) -> ScalarValue {
    match scalar {
        ScalarValue::Union(Some((_, value)), _, _) => without_union(*value),
        ScalarValue::Union(None, _, _) => ScalarValue::Null,
        other => other,
    }
}
