//! The checks every batch of a file passes before its records reach the merge strategy, batch by batch:
//! what a check must remember across batches (the file's schema, the primary keys seen) it keeps itself.
//!
//! In order: no system column; an event time that is a TIMESTAMP or a DATE and never empty (cast to
//! `Timestamp(ms, UTC)`; data without an event time column gets the ingest time, unless the dataset declares
//! its event time column, which the data must then have); the dataset's schema;
//! each primary key at most once in the file.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, TimestampMillisecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use chrono::{DateTime, Utc};

use crate::error::{BadData, IngestError, Place};
use crate::read::Placed;
use crate::schema::{self, type_name};
use weir_dataset::data::utc_millis;
use weir_odf::{DatasetVocabulary, MergeStrategy};

/// Refuses a schema with a column ODF's logical hash cannot hash (the slice could not be committed).
fn hashable(schema: &Schema, file: &str) -> Result<(), BadData> {
    match weir_odf::logical_hash::LogicalHasher::new(schema) {
        Ok(_) => Ok(()),
        Err(weir_odf::logical_hash::LogicalHashError::UnsupportedType { field, data_type }) => {
            Err(BadData::UnhashableType {
                file: file.to_string(),
                column: field,
                found: data_type,
            })
        }
        // Other errors concern batches, not a schema; the slice writer reports them.
        Err(_) => Ok(()),
    }
}

/// The checks of one file, fed its batches in order.
#[derive(Debug)]
pub struct Checks {
    file: String,
    vocab: DatasetVocabulary,
    ingest_time: DateTime<Utc>,
    /// The dataset's data columns; before its first data, those of the file's first batch.
    schema: Option<SchemaRef>,
    keys: Option<KeyIndex>,
    /// The dataset declares its event time column: data without it is refused.
    event_time_declared: bool,
}

impl Checks {
    /// Checks for `file`, going to a dataset with this vocabulary, merge strategy and schema (`None` before
    /// its first data); records without an event time column get `ingest_time`.
    pub fn new(
        file: &str,
        vocab: &DatasetVocabulary,
        merge: &MergeStrategy,
        dataset_schema: Option<SchemaRef>,
        ingest_time: DateTime<Utc>,
    ) -> Self {
        let keys = match merge {
            MergeStrategy::Append => None,
            // A snapshot is the full state: one row per key, or the state is ambiguous.
            MergeStrategy::Snapshot(s) => Some(KeyIndex::new(&s.primary_key)),
            // Ledger drops records whose key the dataset already holds. kamu's Ledger anti-joins the new
            // records against the previous ones only, so two records of one file with one key are both
            // appended (its code lists "input can contain duplicates" as a mode still to add); ODF says the
            // key identifies a record "throughout its lifetime". Two records with one key in one file are
            // then either a duplicate or a conflict, and keeping either silently loses data: refused.
            MergeStrategy::Ledger(l) => Some(KeyIndex::new(&l.primary_key)),
            // Refused when the manifest is loaded (manifest/support.rs).
            MergeStrategy::ChangelogStream(_) | MergeStrategy::UpsertStream(_) => None,
        };
        Self {
            file: file.to_string(),
            vocab: vocab.clone(),
            ingest_time,
            schema: dataset_schema,
            keys,
            event_time_declared: false,
        }
    }

    /// Data without the event time column is refused ([`BadData::MissingEventTime`]) instead of stamped
    /// with the ingest time: for a dataset whose `SetVocab` names its event time column.
    pub fn event_time_declared(mut self, declared: bool) -> Self {
        self.event_time_declared = declared;
        self
    }

    /// The data columns the file's records have once checked: the dataset's, or those of the file's first
    /// batch before the dataset's first data.
    pub fn schema(&self) -> Option<SchemaRef> {
        self.schema.clone()
    }

    /// The event time column's name.
    pub fn event_time(&self) -> &str {
        &self.vocab.event_time_column
    }

    /// Checks one batch; returns its records as the merge strategy takes them.
    pub fn check(&mut self, placed: &Placed) -> Result<RecordBatch, IngestError> {
        let batch = self.with_event_time(placed)?;
        let batch = match &self.schema {
            Some(s) => schema::conform(&batch, s, &self.file)?,
            None => {
                hashable(&batch.schema(), &self.file)?;
                self.schema = Some(batch.schema());
                batch
            }
        };
        if let Some(keys) = &mut self.keys {
            keys.check(&batch, placed, &self.file)?;
        }
        Ok(batch)
    }

    /// Ensures an event time column of type `Timestamp(ms, UTC)` with no empty value; without one, the
    /// ingest time is used, unless the event time column is declared.
    fn with_event_time(&self, placed: &Placed) -> Result<RecordBatch, IngestError> {
        let batch = &placed.batch;
        let vocab = &self.vocab;
        let schema = batch.schema();
        let mut fields: Vec<Field> = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        let mut found = false;
        for (f, c) in schema.fields().iter().zip(batch.columns()) {
            if [
                &vocab.offset_column,
                &vocab.operation_type_column,
                &vocab.system_time_column,
            ]
            .contains(&f.name())
            {
                return Err(BadData::SystemColumn {
                    file: self.file.clone(),
                    column: f.name().clone(),
                }
                .into());
            }
            if f.name() == &vocab.event_time_column {
                found = true;
                if !matches!(
                    c.data_type(),
                    DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
                ) {
                    return Err(BadData::EventTimeType {
                        file: self.file.clone(),
                        column: f.name().clone(),
                        found: type_name(c.data_type()),
                    }
                    .into());
                }
                if let Some(i) = (0..c.len()).find(|&i| c.is_null(i)) {
                    return Err(BadData::NullEventTime {
                        file: self.file.clone(),
                        place: placed.places.place(i),
                        column: f.name().clone(),
                    }
                    .into());
                }
                let c = cast(c, &utc_millis()).map_err(schema::arrow(&format!(
                    "reading `{}` as a UTC timestamp",
                    f.name()
                )))?;
                fields.push(Field::new(f.name(), utc_millis(), true));
                columns.push(c);
            } else {
                fields.push(f.as_ref().clone().with_nullable(true));
                columns.push(c.clone());
            }
        }
        if !found && self.event_time_declared {
            return Err(BadData::MissingEventTime {
                file: self.file.clone(),
                column: vocab.event_time_column.clone(),
            }
            .into());
        }
        if !found {
            fields.push(Field::new(&vocab.event_time_column, utc_millis(), true));
            columns.push(Arc::new(
                TimestampMillisecondArray::from(vec![
                    self.ingest_time.timestamp_millis();
                    batch.num_rows()
                ])
                .with_timezone("UTC"),
            ));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(schema::arrow("adding event time"))
    }
}

/// The primary keys of a file seen so far and where each was first seen.
#[derive(Debug)]
struct KeyIndex {
    columns: Vec<String>,
    converter: Option<RowConverter>,
    seen: HashMap<Box<[u8]>, Place>,
}

impl KeyIndex {
    fn new(columns: &[String]) -> Self {
        Self {
            columns: columns.to_vec(),
            converter: None,
            seen: HashMap::new(),
        }
    }

    fn check(
        &mut self,
        batch: &RecordBatch,
        placed: &Placed,
        file: &str,
    ) -> Result<(), IngestError> {
        let cols = self
            .columns
            .iter()
            .map(|c| {
                batch
                    .column_by_name(c)
                    .cloned()
                    .ok_or_else(|| BadData::MissingKeyColumn {
                        file: file.to_string(),
                        column: c.clone(),
                    })
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let converter = match &mut self.converter {
            Some(c) => c,
            None => self.converter.insert(
                RowConverter::new(
                    cols.iter()
                        .map(|c| SortField::new(c.data_type().clone()))
                        .collect(),
                )
                .map_err(schema::arrow("comparing primary keys"))?,
            ),
        };
        let rows = converter
            .convert_columns(&cols)
            .map_err(schema::arrow("comparing primary keys"))?;
        for (i, row) in rows.iter().enumerate() {
            let here = placed.places.place(i);
            if let Some(first) = self.seen.get(row.as_ref()) {
                return Err(BadData::DuplicateKey {
                    file: file.to_string(),
                    columns: self.columns.join(", "),
                    values: key_values(&cols, i),
                    first: *first,
                    second: here,
                }
                .into());
            }
            self.seen.insert(row.as_ref().into(), here);
        }
        Ok(())
    }
}

/// The values of row `i`, strings quoted, as a user would write them.
fn key_values(cols: &[ArrayRef], i: usize) -> String {
    let options = FormatOptions::default().with_null("NULL");
    cols.iter()
        .map(|c| {
            let text = ArrayFormatter::try_new(c.as_ref(), &options)
                .map(|f| f.value(i).to_string())
                .unwrap_or_default();
            match c.data_type() {
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View if c.is_valid(i) => {
                    format!("\"{text}\"")
                }
                _ => text,
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Places, Unit};
    use arrow::array::{Int64Array, StringArray};

    fn placed(ids: &[i64], names: &[Option<&str>], first_line: u64) -> Placed {
        let batch = RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
            ("name", Arc::new(StringArray::from(names.to_vec()))),
        ])
        .unwrap();
        Placed {
            places: Places::run(Unit::Line, first_line, ids.len()),
            batch,
        }
    }

    fn snapshot() -> MergeStrategy {
        MergeStrategy::Snapshot(weir_odf::MergeStrategySnapshot {
            primary_key: vec!["id".into(), "name".into()],
            compare_columns: None,
        })
    }

    #[test]
    fn a_key_seen_in_an_earlier_batch_of_the_file_is_refused_with_both_lines() {
        let mut checks = Checks::new(
            "s.csv",
            &DatasetVocabulary::default(),
            &snapshot(),
            None,
            Utc::now(),
        );
        checks
            .check(&placed(&[1, 2], &[Some("a"), None], 2))
            .unwrap();
        let err = checks
            .check(&placed(&[3, 2], &[Some("c"), None], 4))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "s.csv line 5: primary key (id, name) = (2, NULL) is already at line 3"
        );
    }

    #[test]
    fn append_keeps_equal_records() {
        let mut checks = Checks::new(
            "a.csv",
            &DatasetVocabulary::default(),
            &MergeStrategy::Append,
            None,
            Utc::now(),
        );
        checks
            .check(&placed(&[1, 1], &[Some("a"), Some("a")], 2))
            .unwrap();
    }

    #[test]
    fn an_integer_event_time_is_refused_with_its_type() {
        let vocab = DatasetVocabulary {
            event_time_column: "id".into(),
            ..DatasetVocabulary::default()
        };
        let mut checks = Checks::new(
            "p.parquet",
            &vocab,
            &MergeStrategy::Append,
            None,
            Utc::now(),
        );
        let err = checks
            .check(&placed(&[1], &[Some("a")], 1))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "p.parquet, column \"id\": the event time must be a TIMESTAMP or a DATE, found BIGINT"
        );
    }

    #[test]
    fn a_file_without_the_declared_event_time_column_is_refused() {
        let vocab = DatasetVocabulary {
            event_time_column: "observed_at".into(),
            ..DatasetVocabulary::default()
        };
        let mut checks = Checks::new("a.csv", &vocab, &MergeStrategy::Append, None, Utc::now())
            .event_time_declared(true);
        let err = checks
            .check(&placed(&[1], &[Some("a")], 2))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("a.csv: the event time column \"observed_at\" is not in the data"),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_event_time_gets_the_ingest_time() {
        let mut checks = Checks::new(
            "a.csv",
            &DatasetVocabulary::default(),
            &MergeStrategy::Append,
            None,
            Utc::now(),
        );
        let b = checks.check(&placed(&[1], &[Some("a")], 2)).unwrap();
        assert_eq!(b.schema().field(2).name(), "event_time");
        assert_eq!(b.column(2).null_count(), 0);
    }
}
