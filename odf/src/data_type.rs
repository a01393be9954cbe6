//! Logical data types of ODF schemas: the `DataType` union.

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::codec::{Builder, encode_each, encode_opt_str};
use crate::generated as fb;
use crate::{DataField, Error};

/// The logical type of a field (ODF's `DataType` union). Nullability is explicit: a nullable value is an
/// [`DataType::Option`] of its type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum DataType {
    /// Bytes, variable or fixed length.
    #[cfg_attr(feature = "serde", serde(alias = "binary"))]
    Binary(DataTypeBinary),
    /// Boolean.
    #[cfg_attr(feature = "serde", serde(alias = "bool"))]
    Bool,
    /// Calendar date.
    #[cfg_attr(feature = "serde", serde(alias = "date"))]
    Date,
    /// Decimal with fixed precision and scale.
    #[cfg_attr(feature = "serde", serde(alias = "decimal"))]
    Decimal(DataTypeDecimal),
    /// Elapsed time.
    #[cfg_attr(feature = "serde", serde(alias = "duration"))]
    Duration(DataTypeDuration),
    /// 16-bit float.
    #[cfg_attr(feature = "serde", serde(alias = "float16"))]
    Float16,
    /// 32-bit float.
    #[cfg_attr(feature = "serde", serde(alias = "float32"))]
    Float32,
    /// 64-bit float.
    #[cfg_attr(feature = "serde", serde(alias = "float64"))]
    Float64,
    /// 8-bit signed integer.
    #[cfg_attr(feature = "serde", serde(alias = "int8"))]
    Int8,
    /// 16-bit signed integer.
    #[cfg_attr(feature = "serde", serde(alias = "int16"))]
    Int16,
    /// 32-bit signed integer.
    #[cfg_attr(feature = "serde", serde(alias = "int32"))]
    Int32,
    /// 64-bit signed integer.
    #[cfg_attr(feature = "serde", serde(alias = "int64"))]
    Int64,
    /// 8-bit unsigned integer.
    #[cfg_attr(feature = "serde", serde(alias = "uInt8", alias = "uint8"))]
    UInt8,
    /// 16-bit unsigned integer.
    #[cfg_attr(feature = "serde", serde(alias = "uInt16", alias = "uint16"))]
    UInt16,
    /// 32-bit unsigned integer.
    #[cfg_attr(feature = "serde", serde(alias = "uInt32", alias = "uint32"))]
    UInt32,
    /// 64-bit unsigned integer.
    #[cfg_attr(feature = "serde", serde(alias = "uInt64", alias = "uint64"))]
    UInt64,
    /// List of items, variable or fixed length.
    #[cfg_attr(feature = "serde", serde(alias = "list"))]
    List(DataTypeList),
    /// Map from keys to values.
    #[cfg_attr(feature = "serde", serde(alias = "map"))]
    Map(DataTypeMap),
    /// Always null.
    #[cfg_attr(feature = "serde", serde(alias = "null"))]
    Null,
    /// A nullable value of the inner type.
    #[cfg_attr(feature = "serde", serde(alias = "option"))]
    Option(DataTypeOption),
    /// Nested fields.
    #[cfg_attr(feature = "serde", serde(alias = "struct"))]
    Struct(DataTypeStruct),
    /// Time of day.
    #[cfg_attr(feature = "serde", serde(alias = "time"))]
    Time(DataTypeTime),
    /// Instant, with an optional time zone.
    #[cfg_attr(feature = "serde", serde(alias = "timestamp"))]
    Timestamp(DataTypeTimestamp),
    /// UTF-8 text.
    #[cfg_attr(feature = "serde", serde(alias = "string"))]
    String,
}

/// [`DataType::Binary`]'s parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeBinary {
    /// Bytes per value of a fixed-size binary; variable length when absent.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub fixed_length: Option<u64>,
}

/// [`DataType::Decimal`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeDecimal {
    /// Total number of decimal digits.
    pub precision: u32,
    /// Digits after the decimal point (negative: zeros padded to the right).
    pub scale: i32,
}

/// [`DataType::Duration`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeDuration {
    /// The unit of measurement.
    pub unit: TimeUnit,
}

/// [`DataType::List`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeList {
    /// The items' type.
    pub item_type: Box<DataType>,
    /// Items per value of a fixed-size list; variable length when absent.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub fixed_length: Option<u64>,
}

/// [`DataType::Map`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeMap {
    /// The keys' type.
    pub key_type: Box<DataType>,
    /// The values' type.
    pub value_type: Box<DataType>,
    /// Whether the keys of each value are sorted.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub keys_sorted: Option<bool>,
}

/// [`DataType::Option`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeOption {
    /// The type of the value when there is one.
    pub inner: Box<DataType>,
}

/// [`DataType::Struct`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeStruct {
    /// The nested fields.
    pub fields: Vec<DataField>,
}

/// [`DataType::Time`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeTime {
    /// The unit of the value.
    pub unit: TimeUnit,
}

/// [`DataType::Timestamp`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DataTypeTimestamp {
    /// The unit, i.e. the precision.
    pub unit: TimeUnit,
    /// An Olson name (`America/New_York`), an offset (`+07:30`), or absent for a time without zone.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub timezone: Option<String>,
}

/// A unit of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum TimeUnit {
    /// Seconds.
    #[cfg_attr(feature = "serde", serde(alias = "second"))]
    Second,
    /// Milliseconds.
    #[cfg_attr(feature = "serde", serde(alias = "millisecond"))]
    Millisecond,
    /// Microseconds.
    #[cfg_attr(feature = "serde", serde(alias = "microsecond"))]
    Microsecond,
    /// Nanoseconds.
    #[cfg_attr(feature = "serde", serde(alias = "nanosecond"))]
    Nanosecond,
}

impl TimeUnit {
    fn encode(self) -> fb::TimeUnit {
        match self {
            TimeUnit::Second => fb::TimeUnit::Second,
            TimeUnit::Millisecond => fb::TimeUnit::Millisecond,
            TimeUnit::Microsecond => fb::TimeUnit::Microsecond,
            TimeUnit::Nanosecond => fb::TimeUnit::Nanosecond,
        }
    }

    pub(crate) fn decode(unit: fb::TimeUnit, field: &'static str) -> Result<Self, Error> {
        match unit {
            fb::TimeUnit::Second => Ok(TimeUnit::Second),
            fb::TimeUnit::Millisecond => Ok(TimeUnit::Millisecond),
            fb::TimeUnit::Microsecond => Ok(TimeUnit::Microsecond),
            fb::TimeUnit::Nanosecond => Ok(TimeUnit::Nanosecond),
            other => Err(Error::UnknownEnumValue {
                field,
                value: other.0.into(),
            }),
        }
    }
}

/// Decodes the `DataType` union of a host table whose union field is `$field`: the generated accessors are
/// `<field>_type()` and `<field>_as_data_type_<member>()`, passed in by name since their prefix differs per
/// host (`type_`, `item_type`, `key_type`, `value_type`, `inner`).
macro_rules! decode_data_type {
    ($t:expr, $name:literal, $tag:ident, $binary:ident, $decimal:ident, $duration:ident, $list:ident,
     $map:ident, $option:ident, $struct_:ident, $time:ident, $timestamp:ident) => {{
        let t = $t;
        let field: &'static str = $name;
        match t.$tag() {
            $crate::generated::DataType::DataTypeBinary => {
                Ok($crate::DataType::Binary($crate::DataTypeBinary {
                    fixed_length: $crate::codec::required(t.$binary(), field)?.fixed_length(),
                }))
            }
            $crate::generated::DataType::DataTypeBool => Ok($crate::DataType::Bool),
            $crate::generated::DataType::DataTypeDate => Ok($crate::DataType::Date),
            $crate::generated::DataType::DataTypeDecimal => {
                let d = $crate::codec::required(t.$decimal(), field)?;
                Ok($crate::DataType::Decimal($crate::DataTypeDecimal {
                    precision: d.precision(),
                    scale: d.scale(),
                }))
            }
            $crate::generated::DataType::DataTypeDuration => {
                Ok($crate::DataType::Duration($crate::DataTypeDuration {
                    unit: $crate::TimeUnit::decode(
                        $crate::codec::required(t.$duration(), field)?.unit(),
                        "DataTypeDuration.unit",
                    )?,
                }))
            }
            $crate::generated::DataType::DataTypeFloat16 => Ok($crate::DataType::Float16),
            $crate::generated::DataType::DataTypeFloat32 => Ok($crate::DataType::Float32),
            $crate::generated::DataType::DataTypeFloat64 => Ok($crate::DataType::Float64),
            $crate::generated::DataType::DataTypeInt8 => Ok($crate::DataType::Int8),
            $crate::generated::DataType::DataTypeInt16 => Ok($crate::DataType::Int16),
            $crate::generated::DataType::DataTypeInt32 => Ok($crate::DataType::Int32),
            $crate::generated::DataType::DataTypeInt64 => Ok($crate::DataType::Int64),
            $crate::generated::DataType::DataTypeUInt8 => Ok($crate::DataType::UInt8),
            $crate::generated::DataType::DataTypeUInt16 => Ok($crate::DataType::UInt16),
            $crate::generated::DataType::DataTypeUInt32 => Ok($crate::DataType::UInt32),
            $crate::generated::DataType::DataTypeUInt64 => Ok($crate::DataType::UInt64),
            $crate::generated::DataType::DataTypeList => {
                $crate::DataTypeList::decode($crate::codec::required(t.$list(), field)?)
                    .map($crate::DataType::List)
            }
            $crate::generated::DataType::DataTypeMap => {
                $crate::DataTypeMap::decode($crate::codec::required(t.$map(), field)?)
                    .map($crate::DataType::Map)
            }
            $crate::generated::DataType::DataTypeNull => Ok($crate::DataType::Null),
            $crate::generated::DataType::DataTypeOption => {
                $crate::DataTypeOption::decode($crate::codec::required(t.$option(), field)?)
                    .map($crate::DataType::Option)
            }
            $crate::generated::DataType::DataTypeStruct => {
                Ok($crate::DataType::Struct($crate::DataTypeStruct {
                    fields: $crate::codec::decode_each(
                        $crate::codec::required(
                            $crate::codec::required(t.$struct_(), field)?.fields(),
                            "DataTypeStruct.fields",
                        )?,
                        $crate::DataField::decode,
                    )?,
                }))
            }
            $crate::generated::DataType::DataTypeTime => {
                Ok($crate::DataType::Time($crate::DataTypeTime {
                    unit: $crate::TimeUnit::decode(
                        $crate::codec::required(t.$time(), field)?.unit(),
                        "DataTypeTime.unit",
                    )?,
                }))
            }
            $crate::generated::DataType::DataTypeTimestamp => {
                let ts = $crate::codec::required(t.$timestamp(), field)?;
                Ok($crate::DataType::Timestamp($crate::DataTypeTimestamp {
                    unit: $crate::TimeUnit::decode(ts.unit(), "DataTypeTimestamp.unit")?,
                    timezone: ts.timezone().map(str::to_owned),
                }))
            }
            $crate::generated::DataType::DataTypeString => Ok($crate::DataType::String),
            other => Err($crate::Error::UnknownUnionType {
                field,
                tag: other.0,
            }),
        }
    }};
}
pub(crate) use decode_data_type;

impl DataTypeList {
    pub(crate) fn decode(l: fb::DataTypeList<'_>) -> Result<Self, Error> {
        Ok(Self {
            item_type: Box::new(decode_data_type!(
                l,
                "DataTypeList.item_type",
                item_type_type,
                item_type_as_data_type_binary,
                item_type_as_data_type_decimal,
                item_type_as_data_type_duration,
                item_type_as_data_type_list,
                item_type_as_data_type_map,
                item_type_as_data_type_option,
                item_type_as_data_type_struct,
                item_type_as_data_type_time,
                item_type_as_data_type_timestamp
            )?),
            fixed_length: l.fixed_length(),
        })
    }
}

impl DataTypeMap {
    pub(crate) fn decode(m: fb::DataTypeMap<'_>) -> Result<Self, Error> {
        Ok(Self {
            key_type: Box::new(decode_data_type!(
                m,
                "DataTypeMap.key_type",
                key_type_type,
                key_type_as_data_type_binary,
                key_type_as_data_type_decimal,
                key_type_as_data_type_duration,
                key_type_as_data_type_list,
                key_type_as_data_type_map,
                key_type_as_data_type_option,
                key_type_as_data_type_struct,
                key_type_as_data_type_time,
                key_type_as_data_type_timestamp
            )?),
            value_type: Box::new(decode_data_type!(
                m,
                "DataTypeMap.value_type",
                value_type_type,
                value_type_as_data_type_binary,
                value_type_as_data_type_decimal,
                value_type_as_data_type_duration,
                value_type_as_data_type_list,
                value_type_as_data_type_map,
                value_type_as_data_type_option,
                value_type_as_data_type_struct,
                value_type_as_data_type_time,
                value_type_as_data_type_timestamp
            )?),
            keys_sorted: m.keys_sorted(),
        })
    }
}

impl DataTypeOption {
    pub(crate) fn decode(o: fb::DataTypeOption<'_>) -> Result<Self, Error> {
        Ok(Self {
            inner: Box::new(decode_data_type!(
                o,
                "DataTypeOption.inner",
                inner_type,
                inner_as_data_type_binary,
                inner_as_data_type_decimal,
                inner_as_data_type_duration,
                inner_as_data_type_list,
                inner_as_data_type_map,
                inner_as_data_type_option,
                inner_as_data_type_struct,
                inner_as_data_type_time,
                inner_as_data_type_timestamp
            )?),
        })
    }
}

/// An empty member table (`DataTypeBool`, `DataTypeInt64`, ...), as its generated builder writes it.
macro_rules! empty {
    ($fbb:expr, $builder:ident, $tag:ident) => {
        (
            fb::DataType::$tag,
            fb::$builder::new($fbb).finish().as_union_value(),
        )
    };
}

impl DataType {
    /// A nullable value of `inner`.
    pub fn optional(inner: DataType) -> Self {
        DataType::Option(DataTypeOption {
            inner: Box::new(inner),
        })
    }

    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::DataType, WIPOffset<UnionWIPOffset>) {
        match self {
            DataType::Binary(x) => {
                let mut b = fb::DataTypeBinaryBuilder::new(fbb);
                if let Some(n) = x.fixed_length {
                    b.add_fixed_length(n);
                }
                (fb::DataType::DataTypeBinary, b.finish().as_union_value())
            }
            DataType::Bool => empty!(fbb, DataTypeBoolBuilder, DataTypeBool),
            DataType::Date => empty!(fbb, DataTypeDateBuilder, DataTypeDate),
            DataType::Decimal(x) => {
                let mut b = fb::DataTypeDecimalBuilder::new(fbb);
                b.add_precision(x.precision);
                b.add_scale(x.scale);
                (fb::DataType::DataTypeDecimal, b.finish().as_union_value())
            }
            DataType::Duration(x) => {
                let mut b = fb::DataTypeDurationBuilder::new(fbb);
                b.add_unit(x.unit.encode());
                (fb::DataType::DataTypeDuration, b.finish().as_union_value())
            }
            DataType::Float16 => empty!(fbb, DataTypeFloat16Builder, DataTypeFloat16),
            DataType::Float32 => empty!(fbb, DataTypeFloat32Builder, DataTypeFloat32),
            DataType::Float64 => empty!(fbb, DataTypeFloat64Builder, DataTypeFloat64),
            DataType::Int8 => empty!(fbb, DataTypeInt8Builder, DataTypeInt8),
            DataType::Int16 => empty!(fbb, DataTypeInt16Builder, DataTypeInt16),
            DataType::Int32 => empty!(fbb, DataTypeInt32Builder, DataTypeInt32),
            DataType::Int64 => empty!(fbb, DataTypeInt64Builder, DataTypeInt64),
            DataType::UInt8 => empty!(fbb, DataTypeUInt8Builder, DataTypeUInt8),
            DataType::UInt16 => empty!(fbb, DataTypeUInt16Builder, DataTypeUInt16),
            DataType::UInt32 => empty!(fbb, DataTypeUInt32Builder, DataTypeUInt32),
            DataType::UInt64 => empty!(fbb, DataTypeUInt64Builder, DataTypeUInt64),
            DataType::List(x) => {
                let (item_tag, item) = x.item_type.encode(fbb);
                let mut b = fb::DataTypeListBuilder::new(fbb);
                b.add_item_type_type(item_tag);
                b.add_item_type(item);
                if let Some(n) = x.fixed_length {
                    b.add_fixed_length(n);
                }
                (fb::DataType::DataTypeList, b.finish().as_union_value())
            }
            DataType::Map(x) => {
                let (key_tag, key) = x.key_type.encode(fbb);
                let (value_tag, value) = x.value_type.encode(fbb);
                let mut b = fb::DataTypeMapBuilder::new(fbb);
                b.add_key_type_type(key_tag);
                b.add_key_type(key);
                b.add_value_type_type(value_tag);
                b.add_value_type(value);
                if let Some(sorted) = x.keys_sorted {
                    b.add_keys_sorted(sorted);
                }
                (fb::DataType::DataTypeMap, b.finish().as_union_value())
            }
            DataType::Null => empty!(fbb, DataTypeNullBuilder, DataTypeNull),
            DataType::Option(x) => {
                let (inner_tag, inner) = x.inner.encode(fbb);
                let mut b = fb::DataTypeOptionBuilder::new(fbb);
                b.add_inner_type(inner_tag);
                b.add_inner(inner);
                (fb::DataType::DataTypeOption, b.finish().as_union_value())
            }
            DataType::Struct(x) => {
                let fields = encode_each(fbb, &x.fields, DataField::encode);
                let mut b = fb::DataTypeStructBuilder::new(fbb);
                b.add_fields(fields);
                (fb::DataType::DataTypeStruct, b.finish().as_union_value())
            }
            DataType::Time(x) => {
                let mut b = fb::DataTypeTimeBuilder::new(fbb);
                b.add_unit(x.unit.encode());
                (fb::DataType::DataTypeTime, b.finish().as_union_value())
            }
            DataType::Timestamp(x) => {
                let timezone = encode_opt_str(fbb, x.timezone.as_ref());
                let mut b = fb::DataTypeTimestampBuilder::new(fbb);
                b.add_unit(x.unit.encode());
                if let Some(tz) = timezone {
                    b.add_timezone(tz);
                }
                (fb::DataType::DataTypeTimestamp, b.finish().as_union_value())
            }
            DataType::String => empty!(fbb, DataTypeStringBuilder, DataTypeString),
        }
    }
}
