//! Arrow schemas as ODF records them: the `DataSchema` of a `SetDataSchema` event, and schema equality by
//! ODF's logical types.
//!
//! Interim home: branch `odf` is adding the same conversion to the `odf` crate (`odf::arrow_schema`,
//! feature `arrow`); once it is merged these two functions forward to it.

use arrow::datatypes::{DataType as Arrow, Field, Fields, Schema, TimeUnit as ArrowUnit};
use odf::{
    DataField, DataSchema, DataType, DataTypeBinary, DataTypeDecimal, DataTypeDuration,
    DataTypeList, DataTypeMap, DataTypeStruct, DataTypeTime, DataTypeTimestamp, TimeUnit,
};

/// An Arrow type with no ODF logical type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column `{field}` has Arrow type {data_type}, which has no ODF logical type")]
pub struct UnsupportedArrowType {
    /// The field (`parent.child` for nested fields).
    pub field: String,
    /// The Arrow type.
    pub data_type: String,
}

/// The ODF schema of an Arrow schema, as kamu stores it: a nullable field is `Option(type)` (so the system
/// columns, which are not nullable, stay required); `Utf8`, `LargeUtf8` and `Utf8View` are `String`; the
/// Arrow encoding (offset widths, views, dictionaries) and field metadata are not recorded.
pub fn data_schema_from_arrow(schema: &Schema) -> Result<DataSchema, UnsupportedArrowType> {
    Ok(DataSchema::new(fields(schema.fields(), "")?))
}

fn fields(fields: &Fields, parent: &str) -> Result<Vec<DataField>, UnsupportedArrowType> {
    fields
        .iter()
        .map(|f| {
            let path = if parent.is_empty() {
                f.name().clone()
            } else {
                format!("{parent}.{}", f.name())
            };
            Ok(DataField::new(f.name().clone(), field_type(f, &path)?))
        })
        .collect()
}

fn field_type(field: &Field, path: &str) -> Result<DataType, UnsupportedArrowType> {
    let unsupported = || UnsupportedArrowType {
        field: path.to_owned(),
        data_type: field.data_type().to_string(),
    };
    let length = |n: i32| u64::try_from(n).map_err(|_| unsupported());
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
            fixed_length: Some(length(*n)?),
        }),
        Arrow::Utf8 | Arrow::LargeUtf8 | Arrow::Utf8View => DataType::String,
        Arrow::List(item)
        | Arrow::LargeList(item)
        | Arrow::ListView(item)
        | Arrow::LargeListView(item) => DataType::List(DataTypeList {
            item_type: Box::new(field_type(item, path)?),
            fixed_length: None,
        }),
        Arrow::FixedSizeList(item, n) => DataType::List(DataTypeList {
            item_type: Box::new(field_type(item, path)?),
            fixed_length: Some(length(*n)?),
        }),
        Arrow::Struct(children) => DataType::Struct(DataTypeStruct {
            fields: fields(children, path)?,
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
                key_type: Box::new(field_type(&kv[0], path)?),
                value_type: Box::new(field_type(&kv[1], path)?),
                keys_sorted: Some(*keys_sorted),
            }),
            _ => return Err(unsupported()),
        },
        Arrow::Dictionary(_, values) => field_type(
            &Field::new(field.name(), values.as_ref().clone(), false),
            path,
        )?,
        Arrow::RunEndEncoded(_, values) => {
            field_type(&values.as_ref().clone().with_nullable(false), path)?
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

/// Whether two Arrow schemas are the same by ODF's logical types, as kamu compares them: same names and
/// types in the same order, where `Utf8`, `LargeUtf8` and `Utf8View` are one type (and the binary
/// encodings another). Nullability and metadata are ignored, as Weir always did (engines differ there).
pub fn same_logical_schema(a: &Schema, b: &Schema) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name() && same_type(x.data_type(), y.data_type()))
}

fn same_type(a: &Arrow, b: &Arrow) -> bool {
    use Arrow::*;
    match (a, b) {
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (List(x), List(y)) | (LargeList(x), LargeList(y)) => {
            x.name() == y.name() && same_type(x.data_type(), y.data_type())
        }
        (Struct(x), Struct(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(f, g)| f.name() == g.name() && same_type(f.data_type(), g.data_type()))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use odf::DataTypeOption;

    #[test]
    fn system_columns_stay_required_and_strings_are_one_type() {
        let utc = Arrow::Timestamp(ArrowUnit::Millisecond, Some("UTC".into()));
        let a = Schema::new(vec![
            Field::new("offset", Arrow::Int64, false),
            Field::new("system_time", utc.clone(), false),
            Field::new("city", Arrow::Utf8, true),
        ]);
        let s = data_schema_from_arrow(&a).unwrap();
        assert_eq!(s.fields[0].data_type, DataType::Int64);
        assert_eq!(
            s.fields[2].data_type,
            DataType::Option(DataTypeOption {
                inner: Box::new(DataType::String)
            })
        );
        let b = Schema::new(vec![
            a.field(0).clone(),
            a.field(1).clone(),
            Field::new("city", Arrow::Utf8View, true),
        ]);
        assert!(same_logical_schema(&a, &b));
        assert_eq!(data_schema_from_arrow(&b).unwrap(), s);
        let c = Schema::new(vec![
            a.field(0).clone(),
            a.field(1).clone(),
            Field::new("city", Arrow::Int64, true),
        ]);
        assert!(!same_logical_schema(&a, &c));
    }
}
