//! `SetDataSchema`: the schema of the data slices that follow.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, encode_bytes};
use crate::generated as fb;
use crate::{DataSchema, Error};

/// Sets the logical schema of every data slice added after it. kamu requires one before the first event
/// that carries data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SetDataSchema {
    /// Deprecated: an Arrow schema in Arrow's own FlatBuffers form (older chains).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub raw_arrow_schema: Option<Vec<u8>>,
    /// The logical schema (to become required).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<DataSchema>,
}

impl SetDataSchema {
    /// A `SetDataSchema` of a logical schema, as kamu writes it (no raw Arrow schema).
    pub fn new(schema: DataSchema) -> Self {
        Self {
            raw_arrow_schema: None,
            schema: Some(schema),
        }
    }

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SetDataSchema<'b>> {
        let raw = self.raw_arrow_schema.as_ref().map(|r| encode_bytes(fbb, r));
        let schema = self.schema.as_ref().map(|s| s.encode(fbb));
        let mut b = fb::SetDataSchemaBuilder::new(fbb);
        if let Some(x) = raw {
            b.add_raw_arrow_schema(x);
        }
        if let Some(x) = schema {
            b.add_schema(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::SetDataSchema<'_>) -> Result<Self, Error> {
        Ok(Self {
            raw_arrow_schema: t.raw_arrow_schema().map(|r| r.bytes().to_vec()),
            schema: t.schema().map(DataSchema::decode).transpose()?,
        })
    }
}
