//! [`Transform`]: what an engine computes (today: SQL with query steps).

use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};

use super::decode::{
    DecodeError, optional_string, required, required_string, strings, tables, unknown_union_tag,
};
use crate::generated as fb;

/// A transformation, the `Transform` union (tag 1 = `TransformSql`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Transform {
    /// SQL, as one query or as named steps.
    Sql(TransformSql),
}

/// A SQL transformation.
///
/// The reference coordinator always fills [`queries`](Self::queries) (named
/// steps, the last one unnamed or named after the output) and leaves
/// [`query`](Self::query) empty; [`TransformSql::steps`] gives the steps
/// whichever form was used.
///
/// ```
/// use engine_contract::model::{SqlQueryStep, TransformSql};
///
/// let sql = TransformSql::new("datafusion", "select * from foo");
/// assert_eq!(sql.steps(), vec![SqlQueryStep { alias: None, query: "select * from foo".into() }]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TransformSql {
    /// Engine name, e.g. `datafusion` (required).
    pub engine: String,
    /// Engine version constraint, if any.
    pub version: Option<String>,
    /// A single query (older form).
    pub query: Option<String>,
    /// Query steps, executed in order; each step's alias names its result
    /// for later steps.
    pub queries: Vec<SqlQueryStep>,
    /// Inputs to be seen as temporal tables.
    pub temporal_tables: Vec<TemporalTable>,
}

/// One step of a multi-step SQL transformation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SqlQueryStep {
    /// Name later steps use for this step's result (absent for the output).
    pub alias: Option<String>,
    /// The SQL.
    pub query: String,
}

/// An input to be seen as a temporal table keyed by `primary_key`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TemporalTable {
    /// Query alias of the input.
    pub name: String,
    /// Key columns.
    pub primary_key: Vec<String>,
}

impl TransformSql {
    /// A single-step SQL transformation in the reference coordinator's form
    /// (one unnamed step in `queries`).
    pub fn new(engine: impl Into<String>, query: impl Into<String>) -> Self {
        Self {
            engine: engine.into(),
            queries: vec![SqlQueryStep {
                alias: None,
                query: query.into(),
            }],
            ..Self::default()
        }
    }

    /// The steps to run: `queries`, or `query` as one unnamed step.
    pub fn steps(&self) -> Vec<SqlQueryStep> {
        if !self.queries.is_empty() {
            return self.queries.clone();
        }
        self.query
            .iter()
            .map(|query| SqlQueryStep {
                alias: None,
                query: query.clone(),
            })
            .collect()
    }

    fn from_fb(sql: fb::TransformSql<'_>) -> Result<Self, DecodeError> {
        const TABLE: &str = "TransformSql";
        Ok(Self {
            engine: required_string(sql.engine(), TABLE, "engine")?,
            version: optional_string(sql.version()),
            query: optional_string(sql.query()),
            queries: tables(sql.queries(), |step| {
                Ok(SqlQueryStep {
                    alias: optional_string(step.alias()),
                    query: required_string(step.query(), "SqlQueryStep", "query")?,
                })
            })?,
            temporal_tables: tables(sql.temporal_tables(), |table| {
                Ok(TemporalTable {
                    name: required_string(table.name(), "TemporalTable", "name")?,
                    primary_key: strings(table.primary_key()),
                })
            })?,
        })
    }

    fn to_fb<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> WIPOffset<fb::TransformSql<'b>> {
        let engine = fbb.create_string(&self.engine);
        let version = self.version.as_deref().map(|v| fbb.create_string(v));
        let query = self.query.as_deref().map(|q| fbb.create_string(q));
        let steps: Vec<_> = self
            .queries
            .iter()
            .map(|step| {
                let alias = step.alias.as_deref().map(|a| fbb.create_string(a));
                let query = fbb.create_string(&step.query);
                fb::SqlQueryStep::create(
                    fbb,
                    &fb::SqlQueryStepArgs {
                        alias,
                        query: Some(query),
                    },
                )
            })
            .collect();
        let queries = fbb.create_vector(&steps);
        let temporal: Vec<_> = self
            .temporal_tables
            .iter()
            .map(|table| {
                let name = fbb.create_string(&table.name);
                let keys: Vec<_> = table
                    .primary_key
                    .iter()
                    .map(|k| fbb.create_string(k))
                    .collect();
                let primary_key = fbb.create_vector(&keys);
                fb::TemporalTable::create(
                    fbb,
                    &fb::TemporalTableArgs {
                        name: Some(name),
                        primary_key: Some(primary_key),
                    },
                )
            })
            .collect();
        let temporal_tables = fbb.create_vector(&temporal);
        fb::TransformSql::create(
            fbb,
            &fb::TransformSqlArgs {
                engine: Some(engine),
                version,
                query,
                queries: Some(queries),
                temporal_tables: Some(temporal_tables),
            },
        )
    }
}

impl Transform {
    /// Decodes a `Transform` union field from its tag and value.
    pub(crate) fn from_fb(
        tag: fb::Transform,
        sql: Option<fb::TransformSql<'_>>,
        table: &'static str,
        field: &'static str,
    ) -> Result<Self, DecodeError> {
        match tag {
            fb::Transform::TransformSql => Ok(Self::Sql(TransformSql::from_fb(required(
                sql, table, field,
            )?)?)),
            fb::Transform::NONE => Err(DecodeError::MissingField { table, field }),
            other => Err(unknown_union_tag(table, field, other.0, "1 (TransformSql)")),
        }
    }

    /// Encodes the union: its tag and value.
    pub(crate) fn to_fb(
        &self,
        fbb: &mut FlatBufferBuilder<'_>,
    ) -> (fb::Transform, WIPOffset<UnionWIPOffset>) {
        match self {
            Self::Sql(sql) => (fb::Transform::TransformSql, sql.to_fb(fbb).as_union_value()),
        }
    }
}
