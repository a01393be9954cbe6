//! Writing a root's new records as one slice file, a batch at a time: system columns added with running
//! offsets, the Parquet file written to scratch with its physical hash taken as its bytes go out, ODF's
//! logical hash updated on another thread, the watermark per batch. The records are never held whole; the
//! file is then moved into the store by `DatasetStore::put_file_written`, which need not read it again.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use chrono::{DateTime, Utc};
use parquet::arrow::ArrowWriter;

use weir_dataset::data::{self, DataError};
use weir_odf::logical_hash::{HashingThread, LogicalHasher};
use weir_odf::{DatasetVocabulary, Multihash, Sha3Hasher};

/// Batches queued for the logical hash's thread: the writer runs at most this far ahead of it.
const HASH_QUEUE: usize = 16;

/// A file that hashes (SHA3-256, ODF's physical hash) and counts every byte written to it.
struct HashedFile {
    file: File,
    hasher: Sha3Hasher,
    size: u64,
}

impl Write for HashedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// The open slice file and its hashers.
struct Open {
    writer: ArrowWriter<HashedFile>,
    hasher: HashingThread,
    schema: SchemaRef,
}

/// A slice being written.
pub struct SliceWriter {
    path: PathBuf,
    first_offset: u64,
    system_time: DateTime<Utc>,
    vocab: DatasetVocabulary,
    open: Option<Open>,
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
    /// ODF's physical hash of the file (SHA3-256 of its bytes, taken as they were written).
    pub physical_hash: Multihash,
    /// The file's size in bytes.
    pub size: u64,
    /// The latest event time among them.
    pub max_event_time: Option<DateTime<Utc>>,
}

fn hash_err(e: weir_odf::logical_hash::LogicalHashError) -> DataError {
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
        let open = match &mut self.open {
            Some(open) => open,
            None => {
                let file = File::create(&self.path).map_err(|e| DataError::Column {
                    message: format!("creating {}: {e}", self.path.display()),
                })?;
                let file = HashedFile {
                    file,
                    hasher: Sha3Hasher::new(),
                    size: 0,
                };
                let writer = ArrowWriter::try_new(
                    file,
                    out.schema(),
                    Some(data::slice_writer_properties(&self.vocab)),
                )
                .map_err(data::parquet_err("writing a slice"))?;
                let hasher = LogicalHasher::new(&out.schema())
                    .and_then(|h| h.spawn(HASH_QUEUE))
                    .map_err(hash_err)?;
                self.open.insert(Open {
                    writer,
                    hasher,
                    schema: out.schema(),
                })
            }
        };
        open.writer
            .write(&out)
            .map_err(data::parquet_err("writing a slice"))?;
        self.rows += out.num_rows() as u64;
        open.hasher.update(out).map_err(hash_err)?;
        Ok(())
    }

    /// Closes the file (fsynced, so it can be moved into the store as it is); `None` when no record was
    /// written (and no file made).
    pub fn finish(self) -> Result<Option<WrittenSlice>, DataError> {
        let Some(open) = self.open else {
            return Ok(None);
        };
        let file = open
            .writer
            .into_inner()
            .map_err(data::parquet_err("writing a slice"))?;
        let logical_hash = open.hasher.finish().map_err(hash_err)?;
        file.file.sync_all().map_err(|e| DataError::Column {
            message: format!("writing {}: {e}", self.path.display()),
        })?;
        Ok(Some(WrittenSlice {
            file: self.path,
            schema: open.schema,
            rows: self.rows,
            logical_hash,
            physical_hash: file.hasher.finish(),
            size: file.size,
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
        let bytes = std::fs::read(&slice.file).unwrap();
        assert_eq!(slice.physical_hash, Multihash::sha3_256(&bytes));
        assert_eq!(slice.size, bytes.len() as u64);
    }

    #[test]
    fn system_columns_are_written_plain_without_a_dictionary_and_data_columns_keep_theirs() {
        use parquet::basic::Encoding;
        let dir = tempfile::tempdir().unwrap();
        let v = DatasetVocabulary::default();
        let mut w = SliceWriter::new(&dir.path().join("s.parquet"), 0, Utc::now(), &v);
        let cities = vec!["a"; 1000];
        w.write(&records(&cities, 1_000), &vec![0; cities.len()])
            .unwrap();
        let slice = w.finish().unwrap().unwrap();
        let reader = parquet::file::reader::SerializedFileReader::new(
            std::fs::File::open(&slice.file).unwrap(),
        )
        .unwrap();
        let metadata = parquet::file::reader::FileReader::metadata(&reader);
        for column in metadata.row_group(0).columns() {
            let name = column.column_path().string();
            let encodings: Vec<Encoding> = column.encodings().collect();
            let dictionary = encodings
                .iter()
                .any(|e| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY));
            if v.is_system_column(&name) {
                assert!(!dictionary, "{name}: {encodings:?}");
                assert!(
                    encodings.contains(&Encoding::PLAIN),
                    "{name}: {encodings:?}"
                );
            } else if name == "city" {
                assert!(dictionary, "{name}: {encodings:?}");
            }
        }
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
