//! Writing a root's new records as one slice file, a batch at a time: system columns added with running
//! offsets, the Parquet file written to scratch, ODF's logical hash and the watermark updated per batch. The
//! records are never held whole; the file is then stored by `DatasetStore::put_file_from`, which hashes it
//! while copying it into place.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use chrono::{DateTime, Utc};
use parquet::arrow::ArrowWriter;

use crate::data::{self, DataError};
use odf::logical_hash::LogicalHasher;
use odf::{DatasetVocabulary, Multihash};

/// A slice being written.
pub struct SliceWriter {
    path: PathBuf,
    first_offset: u64,
    system_time: DateTime<Utc>,
    vocab: DatasetVocabulary,
    open: Option<(ArrowWriter<File>, LogicalHasher, SchemaRef)>,
    rows: u64,
    max_event_time: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for SliceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SliceWriter")
            .field("path", &self.path)
            .field("first_offset", &self.first_offset)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

/// A written slice, ready to store.
#[derive(Debug, Clone)]
pub struct WrittenSlice {
    /// The Parquet file.
    pub file: PathBuf,
    /// Its schema (system columns first).
    pub schema: SchemaRef,
    /// Records written.
    pub rows: u64,
    /// ODF's logical hash of the records.
    pub logical_hash: Multihash,
    /// The latest event time among them.
    pub max_event_time: Option<DateTime<Utc>>,
}

fn hash_err(e: odf::logical_hash::LogicalHashError) -> DataError {
    DataError::Column {
        message: e.to_string(),
    }
}

impl SliceWriter {
    /// A slice at `path` whose first record gets `first_offset`, stamped with `system_time`.
    pub fn new(
        path: &Path,
        first_offset: u64,
        system_time: DateTime<Utc>,
        vocab: &DatasetVocabulary,
    ) -> Self {
        Self {
            path: path.to_path_buf(),
            first_offset,
            system_time,
            vocab: vocab.clone(),
            open: None,
            rows: 0,
            max_event_time: None,
        }
    }

    /// Appends records (data columns, event time among them) with their operation types.
    pub fn write(&mut self, records: &RecordBatch, ops: &[i32]) -> Result<(), DataError> {
        if records.num_rows() == 0 {
            return Ok(());
        }
        let out = data::with_system_columns(
            records,
            ops,
            self.first_offset + self.rows,
            self.system_time,
            &self.vocab,
        )?;
        if let Some(t) = data::max_time(&out, &self.vocab.event_time_column)? {
            self.max_event_time = Some(self.max_event_time.map_or(t, |m| m.max(t)));
        }
        let (writer, hasher, _) = match &mut self.open {
            Some(open) => open,
            None => {
                let file = File::create(&self.path).map_err(|e| DataError::Column {
                    message: format!("creating {}: {e}", self.path.display()),
                })?;
                let writer =
                    ArrowWriter::try_new(file, out.schema(), Some(data::writer_properties()))
                        .map_err(data::parquet_err("writing a slice"))?;
                let hasher = LogicalHasher::new(&out.schema()).map_err(hash_err)?;
                self.open.insert((writer, hasher, out.schema()))
            }
        };
        hasher.update(&out).map_err(hash_err)?;
        writer
            .write(&out)
            .map_err(data::parquet_err("writing a slice"))?;
        self.rows += out.num_rows() as u64;
        Ok(())
    }

    /// Closes the file; `None` when no record was written (and no file made).
    pub fn finish(self) -> Result<Option<WrittenSlice>, DataError> {
        let Some((writer, hasher, schema)) = self.open else {
            return Ok(None);
        };
        writer
            .close()
            .map_err(data::parquet_err("writing a slice"))?;
        Ok(Some(WrittenSlice {
            file: self.path,
            schema,
            rows: self.rows,
            logical_hash: hasher.finish(),
            max_event_time: self.max_event_time,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{StringArray, TimestampMillisecondArray};
    use arrow::datatypes::{Field, Schema};
    use bytes::Bytes;

    use super::*;

    fn records(cities: &[&str], millis: i64) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("event_time", data::utc_millis(), true),
            Field::new("city", arrow::datatypes::DataType::Utf8, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(
                    TimestampMillisecondArray::from(vec![millis; cities.len()])
                        .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from(cities.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn batches_written_one_by_one_equal_the_slice_written_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let now = Utc::now();
        let v = DatasetVocabulary::default();
        let mut w = SliceWriter::new(&dir.path().join("s.parquet"), 7, now, &v);
        w.write(&records(&["a", "b"], 1_000), &[0, 0]).unwrap();
        w.write(&records(&[], 5_000), &[]).unwrap();
        w.write(&records(&["c"], 3_000), &[0]).unwrap();
        let slice = w.finish().unwrap().unwrap();
        assert_eq!(slice.rows, 3);
        assert_eq!(slice.max_event_time.unwrap().timestamp_millis(), 3_000);

        let whole = arrow::compute::concat_batches(
            &records(&[], 0).schema(),
            &[records(&["a", "b"], 1_000), records(&["c"], 3_000)],
        )
        .unwrap();
        let at_once = data::with_system_columns(&whole, &[0, 0, 0], 7, now, &v).unwrap();
        let stored = data::read_parquet(Bytes::from(std::fs::read(&slice.file).unwrap())).unwrap();
        assert_eq!(stored, at_once);
        assert_eq!(slice.logical_hash, data::logical_hash(&[at_once]).unwrap());
    }

    #[test]
    fn no_records_make_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.parquet");
        let mut w = SliceWriter::new(&path, 0, Utc::now(), &DatasetVocabulary::default());
        w.write(&records(&[], 0), &[]).unwrap();
        assert!(w.finish().unwrap().is_none());
        assert!(!path.exists());
    }
}
