//! Transforms: engine-specific queries that shape data (ODF's `Transform` union has one member, SQL).

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::Error;
use crate::codec::{
    Builder, decode_each, decode_strings, encode_each, encode_opt_str, encode_strings, required,
};
use crate::generated as fb;

/// Engine-specific processing queries that shape the resulting data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum Transform {
    /// SQL run by a named engine.
    #[cfg_attr(feature = "serde", serde(alias = "sql"))]
    Sql(TransformSql),
}

/// A SQL transform.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct TransformSql {
    /// The engine (`datafusion`, `flink`, ...).
    pub engine: String,
    /// The engine version, if pinned.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub version: Option<String>,
    /// One query: a convenience for writing by hand. Stored blocks never set it; see [`TransformSql::normalize`].
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub query: Option<String>,
    /// Steps of a multi-step query; the step without alias is the output.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub queries: Option<Vec<SqlQueryStep>>,
    /// Flink's temporal tables.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub temporal_tables: Option<Vec<TemporalTable>>,
}

/// One step of a multi-step SQL transform: `CREATE TEMPORARY VIEW <alias> AS (<query>)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SqlQueryStep {
    /// The view's name; the step without one is the transform's output.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub alias: Option<String>,
    /// The SQL.
    pub query: String,
}

/// Flink's temporal table of an input stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct TemporalTable {
    /// The input's name.
    pub name: String,
    /// The table's primary key columns.
    pub primary_key: Vec<String>,
}

impl Transform {
    /// The SQL transform.
    pub fn sql(&self) -> &TransformSql {
        match self {
            Transform::Sql(sql) => sql,
        }
    }

    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::Transform, WIPOffset<UnionWIPOffset>) {
        match self {
            Transform::Sql(sql) => (
                fb::Transform::TransformSql,
                sql.encode(fbb).as_union_value(),
            ),
        }
    }

    /// Decodes a `Transform` union from its tag and its SQL member (the host table's `…_as_transform_sql()`).
    pub(crate) fn decode(
        tag: fb::Transform,
        sql: Option<fb::TransformSql<'_>>,
        field: &'static str,
    ) -> Result<Self, Error> {
        match tag {
            fb::Transform::TransformSql => {
                Ok(Transform::Sql(TransformSql::decode(required(sql, field)?)?))
            }
            other => Err(Error::UnknownUnionType {
                field,
                tag: other.0,
            }),
        }
    }
}

impl TransformSql {
    /// A one-step SQL transform in the form ODF stores (one step without alias in `queries`).
    ///
    /// ```
    /// use weir_odf::{SqlQueryStep, TransformSql};
    /// let sql = TransformSql::new("datafusion", "select * from foo");
    /// assert_eq!(sql.steps(), vec![SqlQueryStep { alias: None, query: "select * from foo".into() }]);
    /// ```
    pub fn new(engine: impl Into<String>, query: impl Into<String>) -> Self {
        Self {
            engine: engine.into(),
            version: None,
            query: None,
            queries: Some(vec![SqlQueryStep {
                alias: None,
                query: query.into(),
            }]),
            temporal_tables: None,
        }
    }

    /// The steps to run, whichever form was used: `queries`, then `query` as a last step without alias.
    pub fn steps(&self) -> Vec<SqlQueryStep> {
        self.clone().normalize().queries.unwrap_or_default()
    }

    /// The form ODF stores: `query` moved to the end of `queries` as a step without alias.
    pub fn normalize(mut self) -> Self {
        if let Some(query) = self.query.take() {
            self.queries
                .get_or_insert_with(Vec::new)
                .push(SqlQueryStep { alias: None, query });
        }
        self
    }

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::TransformSql<'b>> {
        let engine = fbb.create_string(&self.engine);
        let version = encode_opt_str(fbb, self.version.as_ref());
        let query = encode_opt_str(fbb, self.query.as_ref());
        let queries = self
            .queries
            .as_ref()
            .map(|q| encode_each(fbb, q, SqlQueryStep::encode));
        let temporal_tables = self
            .temporal_tables
            .as_ref()
            .map(|t| encode_each(fbb, t, TemporalTable::encode));
        let mut b = fb::TransformSqlBuilder::new(fbb);
        b.add_engine(engine);
        if let Some(x) = version {
            b.add_version(x);
        }
        if let Some(x) = query {
            b.add_query(x);
        }
        if let Some(x) = queries {
            b.add_queries(x);
        }
        if let Some(x) = temporal_tables {
            b.add_temporal_tables(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::TransformSql<'_>) -> Result<Self, Error> {
        Ok(Self {
            engine: required(t.engine(), "TransformSql.engine")?.to_owned(),
            version: t.version().map(str::to_owned),
            query: t.query().map(str::to_owned),
            queries: t
                .queries()
                .map(|q| decode_each(q, SqlQueryStep::decode))
                .transpose()?,
            temporal_tables: t
                .temporal_tables()
                .map(|q| decode_each(q, TemporalTable::decode))
                .transpose()?,
        })
    }
}

impl SqlQueryStep {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SqlQueryStep<'b>> {
        let alias = encode_opt_str(fbb, self.alias.as_ref());
        let query = fbb.create_string(&self.query);
        let mut b = fb::SqlQueryStepBuilder::new(fbb);
        if let Some(x) = alias {
            b.add_alias(x);
        }
        b.add_query(query);
        b.finish()
    }

    pub(crate) fn decode(t: fb::SqlQueryStep<'_>) -> Result<Self, Error> {
        Ok(Self {
            alias: t.alias().map(str::to_owned),
            query: required(t.query(), "SqlQueryStep.query")?.to_owned(),
        })
    }
}

impl TemporalTable {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::TemporalTable<'b>> {
        let name = fbb.create_string(&self.name);
        let primary_key = encode_strings(fbb, &self.primary_key);
        let mut b = fb::TemporalTableBuilder::new(fbb);
        b.add_name(name);
        b.add_primary_key(primary_key);
        b.finish()
    }

    pub(crate) fn decode(t: fb::TemporalTable<'_>) -> Result<Self, Error> {
        Ok(Self {
            name: required(t.name(), "TemporalTable.name")?.to_owned(),
            primary_key: decode_strings(required(t.primary_key(), "TemporalTable.primary_key")?),
        })
    }
}
