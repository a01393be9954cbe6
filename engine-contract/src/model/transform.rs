//! [`Transform`] on the wire: ODF's types, with this protocol's FlatBuffers tables.
//!
//! Absent `queries` and `temporal_tables` stay absent and an empty vector stays empty, so a request
//! re-encodes to the bytes it was decoded from.

use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};

use super::decode::{
    DecodeError, optional_string, required, required_string, strings, unknown_union_tag,
};
use crate::generated as fb;
pub use weir_odf::{SqlQueryStep, TemporalTable, Transform, TransformSql};

/// The wire form of [`Transform`], the `Transform` union (tag 1 = `TransformSql`).
pub(crate) trait TransformWire: Sized {
    /// Decodes a `Transform` union field from its tag and value.
    fn from_fb(
        tag: fb::Transform,
        sql: Option<fb::TransformSql<'_>>,
        table: &'static str,
        field: &'static str,
    ) -> Result<Self, DecodeError>;

    /// Encodes the union: its tag and value.
    fn to_fb(&self, fbb: &mut FlatBufferBuilder<'_>) -> (fb::Transform, WIPOffset<UnionWIPOffset>);
}

impl TransformWire for Transform {
    fn from_fb(
        tag: fb::Transform,
        sql: Option<fb::TransformSql<'_>>,
        table: &'static str,
        field: &'static str,
    ) -> Result<Self, DecodeError> {
        match tag {
            fb::Transform::TransformSql => {
                Ok(Self::Sql(sql_from_fb(required(sql, table, field)?)?))
            }
            fb::Transform::NONE => Err(DecodeError::MissingField { table, field }),
            other => Err(unknown_union_tag(table, field, other.0, "1 (TransformSql)")),
        }
    }

    fn to_fb(&self, fbb: &mut FlatBufferBuilder<'_>) -> (fb::Transform, WIPOffset<UnionWIPOffset>) {
        match self {
            Self::Sql(sql) => (
                fb::Transform::TransformSql,
                sql_to_fb(sql, fbb).as_union_value(),
            ),
        }
    }
}

/// Decodes each table of an optional vector, keeping absence.
fn each<'a, T, U>(
    value: Option<flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<T>>>,
    decode: impl Fn(T::Inner) -> Result<U, DecodeError>,
) -> Result<Option<Vec<U>>, DecodeError>
where
    T: flatbuffers::Follow<'a> + 'a,
{
    value.map(|v| v.iter().map(decode).collect()).transpose()
}

fn sql_from_fb(sql: fb::TransformSql<'_>) -> Result<TransformSql, DecodeError> {
    const TABLE: &str = "TransformSql";
    Ok(TransformSql {
        engine: required_string(sql.engine(), TABLE, "engine")?,
        version: optional_string(sql.version()),
        query: optional_string(sql.query()),
        queries: each(sql.queries(), |step| {
            Ok(SqlQueryStep {
                alias: optional_string(step.alias()),
                query: required_string(step.query(), "SqlQueryStep", "query")?,
            })
        })?,
        temporal_tables: each(sql.temporal_tables(), |table| {
            Ok(TemporalTable {
                name: required_string(table.name(), "TemporalTable", "name")?,
                primary_key: strings(table.primary_key()),
            })
        })?,
    })
}

fn sql_to_fb<'b>(
    sql: &TransformSql,
    fbb: &mut FlatBufferBuilder<'b>,
) -> WIPOffset<fb::TransformSql<'b>> {
    let engine = fbb.create_string(&sql.engine);
    let version = sql.version.as_deref().map(|v| fbb.create_string(v));
    let query = sql.query.as_deref().map(|q| fbb.create_string(q));
    let queries = sql.queries.as_ref().map(|queries| {
        let steps: Vec<_> = queries
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
        fbb.create_vector(&steps)
    });
    let temporal_tables = sql.temporal_tables.as_ref().map(|tables| {
        let tables: Vec<_> = tables
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
        fbb.create_vector(&tables)
    });
    fb::TransformSql::create(
        fbb,
        &fb::TransformSqlArgs {
            engine: Some(engine),
            version,
            query,
            queries,
            temporal_tables,
        },
    )
}
