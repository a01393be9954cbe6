//! Read steps: how raw data is read into records.

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::codec::{Builder, encode_opt_str, encode_strings};
use crate::generated as fb;

/// How raw data is read into structured records. Every format takes an optional DDL `schema`
/// (`["date TIMESTAMP", "city STRING"]`) to coerce values into.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum ReadStep {
    /// Comma-separated values.
    #[cfg_attr(feature = "serde", serde(alias = "csv"))]
    Csv(ReadStepCsv),
    /// One GeoJSON `FeatureCollection`.
    #[cfg_attr(feature = "serde", serde(alias = "geoJson", alias = "geojson"))]
    GeoJson(ReadStepGeoJson),
    /// An ESRI Shapefile.
    #[cfg_attr(
        feature = "serde",
        serde(alias = "esriShapefile", alias = "esrishapefile")
    )]
    EsriShapefile(ReadStepEsriShapefile),
    /// Apache Parquet.
    #[cfg_attr(feature = "serde", serde(alias = "parquet"))]
    Parquet(ReadStepParquet),
    /// A JSON array of objects.
    #[cfg_attr(feature = "serde", serde(alias = "json"))]
    Json(ReadStepJson),
    /// Newline-delimited JSON objects.
    #[cfg_attr(feature = "serde", serde(alias = "ndJson", alias = "ndjson"))]
    NdJson(ReadStepNdJson),
    /// Newline-delimited GeoJSON features.
    #[cfg_attr(feature = "serde", serde(alias = "ndGeoJson", alias = "ndgeojson"))]
    NdGeoJson(ReadStepNdGeoJson),
}

/// [`ReadStep::Csv`]'s parameters. Absent options take the defaults the spec gives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ReadStepCsv {
    /// DDL schema.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<Vec<String>>,
    /// Field separator (`,`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub separator: Option<String>,
    /// Text encoding (`utf8`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub encoding: Option<String>,
    /// Quote character (`"`); empty turns quoting off.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub quote: Option<String>,
    /// Escape character inside quotes (`\`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub escape: Option<String>,
    /// Whether the first line names the columns (false).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub header: Option<bool>,
    /// Whether to infer the schema from the data (false).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub infer_schema: Option<bool>,
    /// Text of a null value (empty).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub null_value: Option<String>,
    /// Date format (`rfc3339`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub date_format: Option<String>,
    /// Timestamp format (`rfc3339`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub timestamp_format: Option<String>,
}

/// [`ReadStep::GeoJson`]'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ReadStepGeoJson {
    /// DDL schema.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<Vec<String>>,
}

/// [`ReadStep::EsriShapefile`]'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ReadStepEsriShapefile {
    /// DDL schema.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<Vec<String>>,
    /// The `.shp` file inside a ZIP archive holding several (may be a glob).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub sub_path: Option<String>,
}

/// [`ReadStep::Parquet`]'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ReadStepParquet {
    /// DDL schema.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<Vec<String>>,
}

/// [`ReadStep::Json`]'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ReadStepJson {
    /// Path `a.b.c` to the array of objects (the root when absent).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub sub_path: Option<String>,
    /// DDL schema.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<Vec<String>>,
    /// Date format (`rfc3339`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub date_format: Option<String>,
    /// Text encoding (`utf8`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub encoding: Option<String>,
    /// Timestamp format (`rfc3339`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub timestamp_format: Option<String>,
}

/// [`ReadStep::NdJson`]'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ReadStepNdJson {
    /// DDL schema.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<Vec<String>>,
    /// Date format (`rfc3339`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub date_format: Option<String>,
    /// Text encoding (`utf8`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub encoding: Option<String>,
    /// Timestamp format (`rfc3339`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub timestamp_format: Option<String>,
}

/// [`ReadStep::NdGeoJson`]'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct ReadStepNdGeoJson {
    /// DDL schema.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub schema: Option<Vec<String>>,
}

impl ReadStep {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::ReadStep, WIPOffset<UnionWIPOffset>) {
        let schema = |fbb: &mut Builder<'b>, s: &Option<Vec<String>>| {
            s.as_ref().map(|s| encode_strings(fbb, s))
        };
        match self {
            ReadStep::Csv(x) => {
                let s = schema(fbb, &x.schema);
                let separator = encode_opt_str(fbb, x.separator.as_ref());
                let encoding = encode_opt_str(fbb, x.encoding.as_ref());
                let quote = encode_opt_str(fbb, x.quote.as_ref());
                let escape = encode_opt_str(fbb, x.escape.as_ref());
                let null_value = encode_opt_str(fbb, x.null_value.as_ref());
                let date_format = encode_opt_str(fbb, x.date_format.as_ref());
                let timestamp_format = encode_opt_str(fbb, x.timestamp_format.as_ref());
                let mut b = fb::ReadStepCsvBuilder::new(fbb);
                if let Some(v) = s {
                    b.add_schema(v);
                }
                if let Some(v) = separator {
                    b.add_separator(v);
                }
                if let Some(v) = encoding {
                    b.add_encoding(v);
                }
                if let Some(v) = quote {
                    b.add_quote(v);
                }
                if let Some(v) = escape {
                    b.add_escape(v);
                }
                if let Some(v) = x.header {
                    b.add_header(v);
                }
                if let Some(v) = x.infer_schema {
                    b.add_infer_schema(v);
                }
                if let Some(v) = null_value {
                    b.add_null_value(v);
                }
                if let Some(v) = date_format {
                    b.add_date_format(v);
                }
                if let Some(v) = timestamp_format {
                    b.add_timestamp_format(v);
                }
                (fb::ReadStep::ReadStepCsv, b.finish().as_union_value())
            }
            ReadStep::GeoJson(x) => {
                let s = schema(fbb, &x.schema);
                let mut b = fb::ReadStepGeoJsonBuilder::new(fbb);
                if let Some(v) = s {
                    b.add_schema(v);
                }
                (fb::ReadStep::ReadStepGeoJson, b.finish().as_union_value())
            }
            ReadStep::EsriShapefile(x) => {
                let s = schema(fbb, &x.schema);
                let sub_path = encode_opt_str(fbb, x.sub_path.as_ref());
                let mut b = fb::ReadStepEsriShapefileBuilder::new(fbb);
                if let Some(v) = s {
                    b.add_schema(v);
                }
                if let Some(v) = sub_path {
                    b.add_sub_path(v);
                }
                (
                    fb::ReadStep::ReadStepEsriShapefile,
                    b.finish().as_union_value(),
                )
            }
            ReadStep::Parquet(x) => {
                let s = schema(fbb, &x.schema);
                let mut b = fb::ReadStepParquetBuilder::new(fbb);
                if let Some(v) = s {
                    b.add_schema(v);
                }
                (fb::ReadStep::ReadStepParquet, b.finish().as_union_value())
            }
            ReadStep::Json(x) => {
                let sub_path = encode_opt_str(fbb, x.sub_path.as_ref());
                let s = schema(fbb, &x.schema);
                let date_format = encode_opt_str(fbb, x.date_format.as_ref());
                let encoding = encode_opt_str(fbb, x.encoding.as_ref());
                let timestamp_format = encode_opt_str(fbb, x.timestamp_format.as_ref());
                let mut b = fb::ReadStepJsonBuilder::new(fbb);
                if let Some(v) = sub_path {
                    b.add_sub_path(v);
                }
                if let Some(v) = s {
                    b.add_schema(v);
                }
                if let Some(v) = date_format {
                    b.add_date_format(v);
                }
                if let Some(v) = encoding {
                    b.add_encoding(v);
                }
                if let Some(v) = timestamp_format {
                    b.add_timestamp_format(v);
                }
                (fb::ReadStep::ReadStepJson, b.finish().as_union_value())
            }
            ReadStep::NdJson(x) => {
                let s = schema(fbb, &x.schema);
                let date_format = encode_opt_str(fbb, x.date_format.as_ref());
                let encoding = encode_opt_str(fbb, x.encoding.as_ref());
                let timestamp_format = encode_opt_str(fbb, x.timestamp_format.as_ref());
                let mut b = fb::ReadStepNdJsonBuilder::new(fbb);
                if let Some(v) = s {
                    b.add_schema(v);
                }
                if let Some(v) = date_format {
                    b.add_date_format(v);
                }
                if let Some(v) = encoding {
                    b.add_encoding(v);
                }
                if let Some(v) = timestamp_format {
                    b.add_timestamp_format(v);
                }
                (fb::ReadStep::ReadStepNdJson, b.finish().as_union_value())
            }
            ReadStep::NdGeoJson(x) => {
                let s = schema(fbb, &x.schema);
                let mut b = fb::ReadStepNdGeoJsonBuilder::new(fbb);
                if let Some(v) = s {
                    b.add_schema(v);
                }
                (fb::ReadStep::ReadStepNdGeoJson, b.finish().as_union_value())
            }
        }
    }
}

/// Decodes the required `read` union of a source table (`SetPollingSource`, `AddPushSource`).
macro_rules! decode_read_step {
    ($t:expr, $field:literal) => {{
        use $crate::codec::{decode_strings, required};
        use $crate::generated::ReadStep as Tag;
        let t = $t;
        let field: &'static str = $field;
        let schema = |s: Option<$crate::codec::Strings<'_>>| s.map(decode_strings);
        let owned = |s: Option<&str>| s.map(str::to_owned);
        match t.read_type() {
            Tag::ReadStepCsv => {
                let x = required(t.read_as_read_step_csv(), field)?;
                Ok($crate::ReadStep::Csv($crate::ReadStepCsv {
                    schema: schema(x.schema()),
                    separator: owned(x.separator()),
                    encoding: owned(x.encoding()),
                    quote: owned(x.quote()),
                    escape: owned(x.escape()),
                    header: x.header(),
                    infer_schema: x.infer_schema(),
                    null_value: owned(x.null_value()),
                    date_format: owned(x.date_format()),
                    timestamp_format: owned(x.timestamp_format()),
                }))
            }
            Tag::ReadStepGeoJson => {
                let x = required(t.read_as_read_step_geo_json(), field)?;
                Ok($crate::ReadStep::GeoJson($crate::ReadStepGeoJson {
                    schema: schema(x.schema()),
                }))
            }
            Tag::ReadStepEsriShapefile => {
                let x = required(t.read_as_read_step_esri_shapefile(), field)?;
                Ok($crate::ReadStep::EsriShapefile(
                    $crate::ReadStepEsriShapefile {
                        schema: schema(x.schema()),
                        sub_path: owned(x.sub_path()),
                    },
                ))
            }
            Tag::ReadStepParquet => {
                let x = required(t.read_as_read_step_parquet(), field)?;
                Ok($crate::ReadStep::Parquet($crate::ReadStepParquet {
                    schema: schema(x.schema()),
                }))
            }
            Tag::ReadStepJson => {
                let x = required(t.read_as_read_step_json(), field)?;
                Ok($crate::ReadStep::Json($crate::ReadStepJson {
                    sub_path: owned(x.sub_path()),
                    schema: schema(x.schema()),
                    date_format: owned(x.date_format()),
                    encoding: owned(x.encoding()),
                    timestamp_format: owned(x.timestamp_format()),
                }))
            }
            Tag::ReadStepNdJson => {
                let x = required(t.read_as_read_step_nd_json(), field)?;
                Ok($crate::ReadStep::NdJson($crate::ReadStepNdJson {
                    schema: schema(x.schema()),
                    date_format: owned(x.date_format()),
                    encoding: owned(x.encoding()),
                    timestamp_format: owned(x.timestamp_format()),
                }))
            }
            Tag::ReadStepNdGeoJson => {
                let x = required(t.read_as_read_step_nd_geo_json(), field)?;
                Ok($crate::ReadStep::NdGeoJson($crate::ReadStepNdGeoJson {
                    schema: schema(x.schema()),
                }))
            }
            other => Err($crate::Error::UnknownUnionType {
                field,
                tag: other.0,
            }),
        }
    }};
}
pub(crate) use decode_read_step;

impl ReadStep {
    /// The `kind` this read step is written with in a manifest (`Csv`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            ReadStep::Csv(_) => "Csv",
            ReadStep::GeoJson(_) => "GeoJson",
            ReadStep::EsriShapefile(_) => "EsriShapefile",
            ReadStep::Parquet(_) => "Parquet",
            ReadStep::Json(_) => "Json",
            ReadStep::NdJson(_) => "NdJson",
            ReadStep::NdGeoJson(_) => "NdGeoJson",
        }
    }
}
