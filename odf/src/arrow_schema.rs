//! Arrow schemas and ODF schemas (feature `arrow`): the conversion kamu stores in `SetDataSchema`, and
//! schema equality by ODF's logical types.
//!
//! ```
//! use arrow::datatypes::{DataType as Arrow, Field, Schema, TimeUnit as ArrowUnit};
//! use weir_odf::{DataField, DataSchema, DataType, DataTypeTimestamp, TimeUnit};
//!
//! let arrow = Schema::new(vec![
//!     Field::new("system_time", Arrow::Timestamp(ArrowUnit::Millisecond, Some("UTC".into())), false),
//!     Field::new("city", Arrow::Utf8, true),
//! ]);
//! let odf = weir_odf::arrow_schema::data_schema_from_arrow(&arrow)?;
//! assert_eq!(odf, DataSchema::new(vec![
//!     DataField::new("system_time", DataType::Timestamp(DataTypeTimestamp {
//!         unit: TimeUnit::Millisecond,
//!         timezone: Some("UTC".into()),
//!     })),
//!     DataField::new("city", DataType::optional(DataType::String)),
//! ]));
//!
//! let as_views = Schema::new(vec![arrow.field(0).clone(), Field::new("city", Arrow::Utf8View, true)]);
//! assert!(weir_odf::arrow_schema::same_logical_schema(&arrow, &as_views));
//! # Ok::<(), weir_odf::arrow_schema::UnsupportedArrowType>(())
//! ```

use arrow::datatypes::{DataType as Arrow, Field, Fields, Schema, TimeUnit as ArrowUnit};

use crate::{
    DataField, DataSchema, DataType, DataTypeBinary, DataTypeDecimal, DataTypeDuration,
    DataTypeList, DataTypeMap, DataTypeStruct, DataTypeTime, DataTypeTimestamp, TimeUnit,
};

/// An Arrow type with no ODF logical type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}` has Arrow type {data_type}, which has no ODF logical type")]
pub struct UnsupportedArrowType {
    /// The field (`parent.child` for nested fields).
    pub field: String,
    /// The Arrow type.
    pub data_type: String,
}

/// The ODF schema of an Arrow schema, as kamu stores it in `SetDataSchema`: a nullable field becomes
/// `Option(type)` (so system columns, which are not nullable, stay required); `Utf8`, `LargeUtf8` and
/// `Utf8View` are `String`; `Timestamp(ms, "UTC")` is `Timestamp { unit: Millisecond, timezone: "UTC" }`.
/// The Arrow encoding (offset widths, views, dictionaries, `Date64`) is not recorded, as kamu strips it
/// before storing a schema. Field metadata is dropped.
pub fn data_schema_from_arrow(schema: &Schema) -> Result<DataSchema, UnsupportedArrowType> {
    Ok(DataSchema::new(fields_from_arrow(schema.fields(), "")?))
}

fn fields_from_arrow(
    fields: &Fields,
    parent: &str,
) -> Result<Vec<DataField>, UnsupportedArrowType> {
    fields.iter().map(|f| field_from_arrow(f, parent)).collect()
}

fn field_from_arrow(field: &Field, parent: &str) -> Result<DataField, UnsupportedArrowType> {
    let path = if parent.is_empty() {
        field.name().clone()
    } else {
        format!("{parent}.{}", field.name())
    };
    Ok(DataField::new(
        field.name().clone(),
        type_from_arrow(field, &path)?,
    ))
}

/// The ODF type of a field, `Option(...)` when it is nullable.
fn type_from_arrow(field: &Field, path: &str) -> Result<DataType, UnsupportedArrowType> {
    let unsupported = || UnsupportedArrowType {
        field: path.to_owned(),
        data_type: field.data_type().to_string(),
    };
    let t = match field.data_type() {
        Arrow::Null => DataType::Null,
        Arrow::Boolean => DataType::Bool,
        Arrow::Int8 => DataType::Int8,
        Arrow::Int16 => DataType::Int16,
        Arrow::Int32 => DataType::Int32,
        Arrow::Int64 => DataType::Int64,
        Arrow::UInt8 => DataType::UInt8,
        Arrow::UInt16 => DataType::UInt16,
        Arrow::UInt32 => DataType::UInt32,
        Arrow::UInt64 => DataType::UInt64,
        Arrow::Float16 => DataType::Float16,
        Arrow::Float32 => DataType::Float32,
        Arrow::Float64 => DataType::Float64,
        Arrow::Timestamp(unit, tz) => DataType::Timestamp(DataTypeTimestamp {
            unit: time_unit(*unit),
            timezone: tz.as_deref().map(str::to_owned),
        }),
        Arrow::Date32 | Arrow::Date64 => DataType::Date,
        Arrow::Time32(unit) | Arrow::Time64(unit) => DataType::Time(DataTypeTime {
            unit: time_unit(*unit),
        }),
        Arrow::Duration(unit) => DataType::Duration(DataTypeDuration {
            unit: time_unit(*unit),
        }),
        Arrow::Binary | Arrow::LargeBinary | Arrow::BinaryView => {
            DataType::Binary(DataTypeBinary { fixed_length: None })
        }
        Arrow::FixedSizeBinary(n) => DataType::Binary(DataTypeBinary {
            fixed_length: Some(u64::try_from(*n).map_err(|_| unsupported())?),
        }),
        Arrow::Utf8 | Arrow::LargeUtf8 | Arrow::Utf8View => DataType::String,
        Arrow::List(item)
        | Arrow::LargeList(item)
        | Arrow::ListView(item)
        | Arrow::LargeListView(item) => DataType::List(DataTypeList {
            item_type: Box::new(type_from_arrow(item, path)?),
            fixed_length: None,
        }),
        Arrow::FixedSizeList(item, n) => DataType::List(DataTypeList {
            item_type: Box::new(type_from_arrow(item, path)?),
            fixed_length: Some(u64::try_from(*n).map_err(|_| unsupported())?),
        }),
        Arrow::Struct(fields) => DataType::Struct(DataTypeStruct {
            fields: fields_from_arrow(fields, path)?,
        }),
        Arrow::Decimal32(p, s)
        | Arrow::Decimal64(p, s)
        | Arrow::Decimal128(p, s)
        | Arrow::Decimal256(p, s) => DataType::Decimal(DataTypeDecimal {
            precision: u32::from(*p),
            scale: i32::from(*s),
        }),
        Arrow::Map(entries, keys_sorted) => match entries.data_type() {
            Arrow::Struct(kv) if kv.len() == 2 => DataType::Map(DataTypeMap {
                key_type: Box::new(type_from_arrow(&kv[0], path)?),
                value_type: Box::new(type_from_arrow(&kv[1], path)?),
                keys_sorted: Some(*keys_sorted),
            }),
            _ => return Err(unsupported()),
        },
        Arrow::Dictionary(_, values) => {
            let values = Field::new(field.name(), values.as_ref().clone(), false);
            type_from_arrow(&values, path)?
        }
        Arrow::RunEndEncoded(_, values) => {
            type_from_arrow(&values.as_ref().clone().with_nullable(false), path)?
        }
        Arrow::Interval(_) | Arrow::Union(..) => return Err(unsupported()),
    };
    Ok(if field.is_nullable() {
        DataType::optional(t)
    } else {
        t
    })
}

fn time_unit(unit: ArrowUnit) -> TimeUnit {
    match unit {
        ArrowUnit::Second => TimeUnit::Second,
        ArrowUnit::Millisecond => TimeUnit::Millisecond,
        ArrowUnit::Microsecond => TimeUnit::Microsecond,
        ArrowUnit::Nanosecond => TimeUnit::Nanosecond,
    }
}

/// Whether two Arrow schemas are the same by ODF's logical types, as kamu compares them: same field names,
/// nullability and types in the same order, where `Utf8`, `LargeUtf8` and `Utf8View` are one type and
/// `Binary`, `LargeBinary` and `BinaryView` another, also inside lists, structs and maps. Schema and field
/// metadata are ignored.
pub fn same_logical_schema(a: &Schema, b: &Schema) -> bool {
    same_fields(a.fields(), b.fields())
}

fn same_fields(a: &Fields, b: &Fields) -> bool {
    a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| same_field(x, y))
}

fn same_field(a: &Field, b: &Field) -> bool {
    a.name() == b.name()
        && a.is_nullable() == b.is_nullable()
        && same_type(a.data_type(), b.data_type())
}

/// Arrow type equality with the string and binary encodings made one type each, recursively.
pub fn same_type(a: &Arrow, b: &Arrow) -> bool {
    use Arrow::*;
    match (a, b) {
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (List(x), List(y))
        | (LargeList(x), LargeList(y))
        | (ListView(x), ListView(y))
        | (LargeListView(x), LargeListView(y)) => same_field(x, y),
        (FixedSizeList(x, n), FixedSizeList(y, m)) => n == m && same_field(x, y),
        (Struct(x), Struct(y)) => same_fields(x, y),
        (Map(x, s), Map(y, t)) => s == t && same_field(x, y),
        (Dictionary(k, x), Dictionary(l, y)) => k == l && same_type(x, y),
        (RunEndEncoded(r, x), RunEndEncoded(s, y)) => r == s && same_field(x, y),
        _ => a == b,
    }
}
