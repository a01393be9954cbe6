//! [`OutputLayout`]: checks a query's output schema against ODF's rules and adds the system columns.
//!
//! Output records are `offset` (Int64), `op` (Int32), `system_time` (Timestamp(ms, UTC)), then the
//! query's columns in order (without `op`, which moved first). `event_time` is required and UTC;
//! timestamps of any unit are written in milliseconds. These are the types existing engines write.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::changelog::lineage::RESERVED_PREFIX;
use crate::error::EngineError;
use crate::request::DatasetVocabulary;

/// Time zone names taken as UTC.
const UTC_NAMES: [&str; 5] = ["UTC", "+00:00", "Z", "Etc/UTC", "+00"];

/// How query result columns become output columns.
#[derive(Debug, Clone)]
pub(crate) struct OutputLayout {
    schema: SchemaRef,
    /// Query result column of each output column after the three system columns.
    data_columns: Vec<usize>,
    /// Query result column holding `op`, if the query outputs one.
    op_column: Option<usize>,
    op_name: String,
}

impl OutputLayout {
    /// Checks the query's result schema (without any lineage carriers).
    pub(crate) fn new(query: &Schema, vocab: &DatasetVocabulary) -> Result<Self, EngineError> {
        let mut data_columns = Vec::new();
        let mut op_column = None;
        let mut fields = vec![
            Field::new(&vocab.offset_column, DataType::Int64, false),
            Field::new(&vocab.operation_type_column, DataType::Int32, false),
            Field::new(
                &vocab.system_time_column,
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ),
        ];
        let mut has_event_time = false;
        for (index, field) in query.fields().iter().enumerate() {
            let name = field.name();
            // A chained step's output read with `*`: its system columns are the engine's, never output.
            if crate::chain::INTERMEDIATE_SYSTEM_COLUMNS.contains(&name.as_str()) {
                continue;
            }
            if *name == vocab.offset_column || *name == vocab.system_time_column {
                return Err(EngineError::SystemColumnInOutput {
                    column: name.clone(),
                });
            }
            if name.starts_with(RESERVED_PREFIX) {
                return Err(EngineError::ReservedColumnInOutput {
                    column: name.clone(),
                });
            }
            if *name == vocab.operation_type_column {
                if !field.data_type().is_integer() {
                    return Err(EngineError::OperationTypeColumnType {
                        column: name.clone(),
                        found: field.data_type().to_string(),
                    });
                }
                op_column = Some(index);
                continue;
            }
            let data_type = if *name == vocab.event_time_column {
                has_event_time = true;
                event_time_type(name, field.data_type())?
            } else {
                classic_type(field.data_type())
            };
            fields.push(Field::new(name, data_type, field.is_nullable()));
            data_columns.push(index);
        }
        if !has_event_time {
            return Err(EngineError::MissingEventTime {
                column: vocab.event_time_column.clone(),
            });
        }
        Ok(Self {
            schema: Arc::new(Schema::new(fields)),
            data_columns,
            op_column,
            op_name: vocab.operation_type_column.clone(),
        })
    }

    /// The output file's schema.
    pub(crate) fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The query's own `op` values, checked and as Int32, if it outputs `op`.
    pub(crate) fn query_op(&self, batch: &RecordBatch) -> Result<Option<Vec<i32>>, EngineError> {
        let Some(index) = self.op_column else {
            return Ok(None);
        };
        let column = cast(batch.column(index), &DataType::Int64)?;
        let values = column
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| EngineError::OperationTypeColumnType {
                column: self.op_name.clone(),
                found: batch.column(index).data_type().to_string(),
            })?;
        let mut ops = Vec::with_capacity(values.len());
        for value in values.iter() {
            match value {
                Some(v @ 0..=3) => ops.push(v as i32),
                Some(v) => {
                    return Err(EngineError::InvalidOperationType {
                        column: self.op_name.clone(),
                        value: v.to_string(),
                    });
                }
                None => {
                    return Err(EngineError::InvalidOperationType {
                        column: self.op_name.clone(),
                        value: "null".to_owned(),
                    });
                }
            }
        }
        Ok(Some(ops))
    }

    /// The output batch: system columns, then the query's data columns.
    pub(crate) fn assemble(
        &self,
        batch: &RecordBatch,
        ops: Vec<i32>,
        first_offset: i64,
        system_time_ms: i64,
    ) -> Result<RecordBatch, EngineError> {
        let rows = batch.num_rows();
        let last = first_offset
            .checked_add(rows as i64)
            .ok_or_else(|| EngineError::Overflow {
                what: format!("output offset {first_offset} + {rows} records"),
            })?;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        columns.push(Arc::new(Int64Array::from_iter_values(first_offset..last)));
        columns.push(Arc::new(Int32Array::from(ops)));
        columns.push(Arc::new(
            TimestampMillisecondArray::from_value(system_time_ms, rows).with_timezone("UTC"),
        ));
        for (field, &index) in self.schema.fields()[3..].iter().zip(&self.data_columns) {
            let column = batch.column(index);
            if column.data_type() == field.data_type() {
                columns.push(Arc::clone(column));
            } else {
                columns.push(cast(column, field.data_type())?);
            }
        }
        Ok(RecordBatch::try_new(self.schema(), columns)?)
    }
}

/// A raw query's output schema as ODF engines write it: view types in their classic forms and
/// every timestamp as Timestamp(ms, "UTC"). A timestamp with a time zone keeps its instant; a naive
/// one is taken as UTC (ODF's times are UTC); sub-millisecond digits are dropped.
pub(crate) fn raw_query_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| {
                let data_type = match f.data_type() {
                    DataType::Timestamp(..) => utc_millis(),
                    other => classic_type(other),
                };
                Field::new(f.name(), data_type, f.is_nullable())
            })
            .collect::<Vec<_>>(),
    ))
}

fn utc_millis() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// `batch` with its columns cast to `schema`'s types (see [`raw_query_schema`]).
pub(crate) fn cast_to_schema(
    batch: &RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch, EngineError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(Arc::clone(column))
            } else {
                cast(column, field.data_type())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

/// View types written as their classic forms, which every Parquet/Arrow reader knows.
fn classic_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

/// The written type of `event_time`: a UTC timestamp in milliseconds, or a date.
fn event_time_type(name: &str, data_type: &DataType) -> Result<DataType, EngineError> {
    match data_type {
        DataType::Timestamp(_, Some(tz)) if UTC_NAMES.contains(&tz.as_ref()) => Ok(
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        ),
        DataType::Timestamp(_, Some(tz)) => Err(EngineError::EventTimeNotUtc {
            column: name.to_owned(),
            found: format!("{data_type} (time zone {tz})"),
        }),
        DataType::Timestamp(_, None) => Err(EngineError::EventTimeNotUtc {
            column: name.to_owned(),
            found: format!("{data_type}, a naive timestamp without time zone"),
        }),
        DataType::Date32 | DataType::Date64 => Ok(data_type.clone()),
        other => Err(EngineError::EventTimeNotUtc {
            column: name.to_owned(),
            found: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(fields: Vec<Field>) -> Schema {
        Schema::new(fields)
    }

    fn utc() -> DataType {
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
    }

    #[test]
    fn system_columns_come_first_and_op_moves_there() {
        let query = schema(vec![
            Field::new("city", DataType::Utf8, true),
            Field::new("op", DataType::UInt8, false),
            Field::new(
                "event_time",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into())),
                true,
            ),
        ]);
        let layout = OutputLayout::new(&query, &DatasetVocabulary::default()).unwrap();
        let names: Vec<_> = layout
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["offset", "op", "system_time", "city", "event_time"]);
        assert_eq!(layout.schema().field(4).data_type(), &utc());
        assert_eq!(layout.op_column, Some(1));
    }

    #[test]
    fn date_event_time_is_kept() {
        let query = schema(vec![Field::new("event_time", DataType::Date32, false)]);
        let layout = OutputLayout::new(&query, &DatasetVocabulary::default()).unwrap();
        assert_eq!(layout.schema().field(3).data_type(), &DataType::Date32);
    }

    #[test]
    fn event_time_in_another_time_zone_is_refused() {
        let query = schema(vec![Field::new(
            "event_time",
            DataType::Timestamp(TimeUnit::Millisecond, Some("Europe/Paris".into())),
            false,
        )]);
        let error = OutputLayout::new(&query, &DatasetVocabulary::default()).unwrap_err();
        assert!(
            error.to_string().contains("time zone Europe/Paris"),
            "{error}"
        );
    }

    #[test]
    fn raw_query_timestamps_become_utc_milliseconds_and_keep_their_instant() {
        use datafusion::arrow::array::{TimestampNanosecondArray, TimestampSecondArray};
        let query = schema(vec![
            Field::new(
                "naive",
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                false,
            ),
            Field::new(
                "paris",
                DataType::Timestamp(TimeUnit::Second, Some("Europe/Paris".into())),
                false,
            ),
            Field::new("text", DataType::Utf8View, false),
            Field::new("day", DataType::Date32, false),
        ]);
        let output = raw_query_schema(&query);
        let types: Vec<_> = output
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(types, [utc(), utc(), DataType::Utf8, DataType::Date32]);

        let batch = RecordBatch::try_new(
            Arc::new(query),
            vec![
                Arc::new(TimestampNanosecondArray::from(vec![
                    1_672_531_200_123_456_789,
                ])),
                Arc::new(
                    TimestampSecondArray::from(vec![1_672_531_200]).with_timezone("Europe/Paris"),
                ),
                Arc::new(datafusion::arrow::array::StringViewArray::from(vec!["a"])),
                Arc::new(datafusion::arrow::array::Date32Array::from(vec![19_358])),
            ],
        )
        .unwrap();
        let cast = cast_to_schema(&batch, &output).unwrap();
        let millis = |i: usize| {
            cast.column(i)
                .as_any()
                .downcast_ref::<TimestampMillisecondArray>()
                .unwrap()
                .value(0)
        };
        assert_eq!(
            millis(0),
            1_672_531_200_123,
            "naive: taken as UTC, to milliseconds"
        );
        assert_eq!(millis(1), 1_672_531_200_000, "zoned: the same instant");
    }

    #[test]
    fn reserved_prefix_is_refused() {
        let query = schema(vec![
            Field::new("event_time", utc(), false),
            Field::new("__weir_x", DataType::Int64, false),
        ]);
        let error = OutputLayout::new(&query, &DatasetVocabulary::default()).unwrap_err();
        assert!(
            matches!(error, EngineError::ReservedColumnInOutput { .. }),
            "{error}"
        );
    }
}
