//! Data schemas: the logical schema of a dataset's data files (`SetDataSchema.schema`).

use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_each, encode_each, required};
use crate::data_type::decode_data_type;
use crate::generated as fb;
use crate::{DataType, Error, ExtraAttributes};

/// The logical schema of data files: top-level fields (columns) in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataSchema {
    /// The columns.
    pub fields: Vec<DataField>,
    /// ODF extensions.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub extra: Option<ExtraAttributes>,
}

/// One field of a schema or struct.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataField {
    /// The field's name.
    pub name: String,
    /// Its logical type (ODF's `type`).
    #[cfg_attr(feature = "serde", serde(rename = "type"))]
    pub data_type: DataType,
    /// ODF extensions.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub extra: Option<ExtraAttributes>,
}

impl DataField {
    /// A field without extensions.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Self {
            name: name.into(),
            data_type,
            extra: None,
        }
    }

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::DataField<'b>> {
        let name = fbb.create_string(&self.name);
        let (type_tag, data_type) = self.data_type.encode(fbb);
        let extra = self.extra.as_ref().map(|e| e.encode(fbb));
        let mut b = fb::DataFieldBuilder::new(fbb);
        b.add_name(name);
        b.add_type_type(type_tag);
        b.add_type_(data_type);
        if let Some(x) = extra {
            b.add_extra(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::DataField<'_>) -> Result<Self, Error> {
        Ok(Self {
            name: required(t.name(), "DataField.name")?.to_owned(),
            data_type: decode_data_type!(
                t,
                "DataField.type",
                type_type,
                type__as_data_type_binary,
                type__as_data_type_decimal,
                type__as_data_type_duration,
                type__as_data_type_list,
                type__as_data_type_map,
                type__as_data_type_option,
                type__as_data_type_struct,
                type__as_data_type_time,
                type__as_data_type_timestamp
            )?,
            extra: t.extra().map(ExtraAttributes::decode).transpose()?,
        })
    }
}

impl DataSchema {
    /// A schema without extensions.
    pub fn new(fields: Vec<DataField>) -> Self {
        Self {
            fields,
            extra: None,
        }
    }

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::DataSchema<'b>> {
        let fields = encode_each(fbb, &self.fields, DataField::encode);
        let extra = self.extra.as_ref().map(|e| e.encode(fbb));
        let mut b = fb::DataSchemaBuilder::new(fbb);
        b.add_fields(fields);
        if let Some(x) = extra {
            b.add_extra(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::DataSchema<'_>) -> Result<Self, Error> {
        Ok(Self {
            fields: decode_each(
                required(t.fields(), "DataSchema.fields")?,
                DataField::decode,
            )?,
            extra: t.extra().map(ExtraAttributes::decode).transpose()?,
        })
    }
}
