//! An engine's data file, read once as a stream of record batches: checked against the contract
//! ([`OutputCheck`]), hashed with ODF's logical hash on another thread, and kept as the engine wrote it, so
//! it is stored byte for byte. Only a file whose system columns have another integer type than the stored
//! one (offset Int64, op Int32) is re-encoded, batch by batch, beside it. No step holds more than a few
//! batches, whatever the size of the file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::contract::{ContractViolation, OutputCheck};
use weir_dataset::data;
use weir_dataset::progress::{Phase, Progress, Report};
use weir_odf::{DatasetVocabulary, Multihash, OffsetInterval};

/// Rows per batch read from an engine's file: enough to keep the hasher and the checks busy, few enough
/// that a handful in flight stay small.
pub const BATCH_ROWS: usize = 64 * 1024;

/// Batches queued for the hashing thread: the reader stays at most this far ahead.
const HASH_QUEUE: usize = 4;

/// An engine output that met the contract.
#[derive(Debug, Clone)]
pub struct CheckedOutput {
    /// The file to store: the engine's own, or its re-encoded copy.
    pub file: PathBuf,
    /// The records' schema, system columns normalised.
    pub schema: SchemaRef,
    /// How many records.
    pub rows: u64,
    /// ODF's logical hash of the records.
    pub logical_hash: Multihash,
    /// `file` copied into the store's folder while it was checked, when the job asked for it
    /// ([`CopyInto`]) and the file is stored as the engine wrote it.
    pub copied: Option<Arc<Copied>>,
}

/// A folder of the store on this machine that an engine's file is copied into, under a temporary name,
/// while the contract layer reads it, so that the store takes the copy without reading the file again.
#[derive(Debug, Clone)]
pub struct CopyInto {
    /// The storage root (folders below it are created durably).
    pub root: PathBuf,
    /// The folder the file ends up in.
    pub dir: PathBuf,
}

/// An engine's file copied (and fsynced) into the store's folder under a temporary name, hashed as it
/// was copied: the bytes the store keeps are these, whatever happens to the engine's file afterwards.
/// The temporary file is removed when this is dropped, unless the store has moved it into place.
#[derive(Debug)]
pub struct Copied {
    /// The temporary file.
    pub tmp: PathBuf,
    /// Its size.
    pub size: u64,
    /// SHA3-256 of its bytes (ODF's physical hash).
    pub physical_hash: Multihash,
}

impl Drop for Copied {
    fn drop(&mut self) {
        // Gone already once the store renamed it into place.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Copies `path` into `into` on a thread of its own, hashing it, while the caller reads it.
fn spawn_copy(
    path: &Path,
    into: CopyInto,
) -> std::io::Result<std::thread::JoinHandle<std::io::Result<Copied>>> {
    let from = path.to_path_buf();
    std::thread::Builder::new()
        .name("weir-output-copy".into())
        .spawn(move || {
            let mut hasher = weir_odf::Sha3Hasher::new();
            let (tmp, size) =
                weir_dataset::durable::copy_to_temp(&into.root, &into.dir, &from, &mut hasher)?;
            Ok(Copied {
                tmp,
                size,
                physical_hash: hasher.finish(),
            })
        })
}

/// Why an output could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The engine broke the contract.
    #[error(transparent)]
    Contract(#[from] ContractViolation),
    /// Reading, hashing or re-encoding failed on this side.
    #[error(transparent)]
    Data(#[from] data::DataError),
}

fn bad_file(e: impl std::fmt::Display) -> OutputError {
    OutputError::Contract(ContractViolation::BadDataFile {
        message: e.to_string(),
    })
}

/// Checks the file an engine wrote at `path` (absent when it wrote none) against its Success, and hashes
/// it. `Ok(None)` when there are no records. With `copy_into`, a file kept as written is also copied there
/// (hashed) on another thread while it is checked ([`CheckedOutput::copied`]); a copy that fails leaves
/// `copied` empty, for the store to copy the file itself and report why.
pub fn check(
    path: &Path,
    next_offset: u64,
    claimed: Option<OffsetInterval>,
    previous_schema: Option<&SchemaRef>,
    vocab: &DatasetVocabulary,
    copy_into: Option<CopyInto>,
    progress: &Progress,
) -> Result<Option<CheckedOutput>, OutputError> {
    let builder = match File::open(path) {
        Ok(file) => Some(ParquetRecordBatchReaderBuilder::try_new(file).map_err(bad_file)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(bad_file(format!("{}: {e}", path.display()))),
    };
    let rows = builder
        .as_ref()
        .map(|b| u64::try_from(b.metadata().file_metadata().num_rows()).unwrap_or(0));
    let file_schema = builder.as_ref().map(|b| b.schema().clone());
    let Some(mut check) = OutputCheck::start(
        next_offset,
        claimed,
        rows,
        file_schema.as_ref(),
        previous_schema,
        vocab,
    )?
    else {
        return Ok(None);
    };
    let (Some(builder), Some(file_schema)) = (builder, file_schema) else {
        // `start` refuses claimed records without a file.
        return Ok(None);
    };
    let schema = data::normalized_schema(&file_schema, vocab);
    let reader = builder
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(bad_file)?;
    let rewrite_to = (schema != file_schema).then(|| path.with_extension("normalized.parquet"));
    let mut writer = match &rewrite_to {
        Some(to) => {
            let file = File::create(to).map_err(|e| data::DataError::Column {
                message: format!("creating {}: {e}", to.display()),
            })?;
            Some(
                ArrowWriter::try_new(
                    file,
                    schema.clone(),
                    Some(data::slice_writer_properties(vocab)),
                )
                .map_err(data::parquet_err("re-encoding an engine's output"))?,
            )
        }
        None => None,
    };
    // The copy reads the same file beside the check (from the page cache the engine's writes left). If
    // the check fails first, dropping the handle detaches the thread, and what it copied is removed when
    // its result is dropped.
    let copy = match copy_into.filter(|_| rewrite_to.is_none()) {
        Some(into) => match spawn_copy(path, into) {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::warn!(error = %e, "could not start copying an engine's output while checking it");
                None
            }
        },
        None => None,
    };
    let hash_err = |e: weir_odf::logical_hash::LogicalHashError| {
        OutputError::Data(data::DataError::Column {
            message: e.to_string(),
        })
    };
    // The logical hash runs on its own thread, at most `HASH_QUEUE` batches behind the reader.
    let mut hasher = weir_odf::logical_hash::LogicalHasher::new(&schema)
        .and_then(|h| h.spawn(HASH_QUEUE))
        .map_err(hash_err)?;
    let mut done = 0u64;
    for batch in reader {
        let batch = batch.map_err(bad_file)?;
        check.batch(&batch)?;
        done += batch.num_rows() as u64;
        progress.report(Report::new(Phase::Check).rows(done).total_rows(rows));
        let batch = data::normalize_system_columns(&batch, vocab)?;
        if let Some(w) = writer.as_mut() {
            w.write(&batch)
                .map_err(data::parquet_err("re-encoding an engine's output"))?;
        }
        hasher.update(batch).map_err(hash_err)?;
    }
    let hashed = hasher.finish().map_err(hash_err)?;
    let rows = check.finish()?;
    progress.finish(Report::new(Phase::Check).rows(rows).total_rows(Some(rows)));
    if let Some(w) = writer {
        w.close()
            .map_err(data::parquet_err("re-encoding an engine's output"))?;
    }
    let copied = match copy.map(std::thread::JoinHandle::join) {
        Some(Ok(Ok(copied))) => Some(Arc::new(copied)),
        Some(Ok(Err(e))) => {
            tracing::warn!(path = %path.display(), error = %e, "copying an engine's output while checking it failed; the store copies it again");
            None
        }
        Some(Err(_)) => {
            tracing::warn!(path = %path.display(), "the thread copying an engine's output panicked; the store copies it again");
            None
        }
        None => None,
    };
    Ok(Some(CheckedOutput {
        file: rewrite_to.unwrap_or_else(|| path.to_path_buf()),
        schema,
        rows,
        logical_hash: hashed,
        copied,
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn write(path: &Path, batches: &[RecordBatch]) {
        let mut w = ArrowWriter::try_new(
            File::create(path).unwrap(),
            batches[0].schema(),
            Some(data::writer_properties()),
        )
        .unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
    }

    fn batch(offsets: ArrayRef) -> RecordBatch {
        let n = offsets.len();
        let schema = Schema::new(vec![
            Field::new("offset", offsets.data_type().clone(), false),
            Field::new("city", DataType::Utf8, false),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![offsets, Arc::new(StringArray::from(vec!["x"; n]))],
        )
        .unwrap()
    }

    fn int64(range: std::ops::Range<i64>) -> RecordBatch {
        batch(Arc::new(Int64Array::from_iter_values(range)))
    }

    const V: fn() -> DatasetVocabulary = DatasetVocabulary::default;

    /// The folder `dir` of a store under `root/store`, and where to copy into it while checking.
    fn copy_into(root: &Path, dir: &str) -> (PathBuf, CopyInto) {
        let store = root.join("store");
        let into = CopyInto {
            root: store.clone(),
            dir: store.join(dir),
        };
        (store.join(dir), into)
    }

    #[test]
    fn a_file_in_the_stored_form_is_kept_as_written_and_hashed_like_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        // Several row groups and more rows than one read batch: the checks span batch boundaries.
        let parts: Vec<_> = (0..3)
            .map(|i| int64(10 + i * 70_000..10 + (i + 1) * 70_000))
            .collect();
        write(&path, &parts);
        let claimed = OffsetInterval::new(10, 10 + 210_000 - 1);
        let out = check(&path, 10, claimed, None, &V(), None, &Progress::none())
            .unwrap()
            .unwrap();
        assert_eq!(out.file, path, "stored as written");
        assert_eq!(out.rows, 210_000);
        let expected = weir_odf::logical_hash::of_batches(parts[0].schema_ref(), &parts).unwrap();
        assert_eq!(out.logical_hash, expected);
    }

    #[test]
    fn a_copy_asked_for_holds_the_checked_bytes_with_their_hash_and_is_removed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        write(&path, &[int64(0..100_000)]);
        let (data, into) = copy_into(dir.path(), "datasets/x/data");
        let claimed = OffsetInterval::new(0, 99_999);
        let out = check(&path, 0, claimed, None, &V(), Some(into), &Progress::none())
            .unwrap()
            .unwrap();
        let copied = out.copied.clone().expect("a copy was asked for");
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(std::fs::read(&copied.tmp).unwrap(), bytes);
        assert_eq!(copied.size, bytes.len() as u64);
        assert_eq!(copied.physical_hash, Multihash::sha3_256(&bytes));
        assert!(copied.tmp.starts_with(&data));
        let tmp = copied.tmp.clone();
        drop((out, copied));
        assert!(!tmp.exists(), "an unused copy is removed");
    }

    #[test]
    fn a_file_that_fails_the_check_leaves_no_copy_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        write(&path, &[int64(0..100_000)]);
        let (data, into) = copy_into(dir.path(), "data");
        // The engine claims one record fewer than it wrote.
        let claimed = OffsetInterval::new(0, 99_998);
        let err = check(&path, 0, claimed, None, &V(), Some(into), &Progress::none());
        assert!(matches!(err, Err(OutputError::Contract(_))), "{err:?}");
        // The detached copy thread removes its file once it ends.
        let left = || std::fs::read_dir(&data).map(|d| d.count()).unwrap_or(0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while left() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(left(), 0, "the copy of a refused file is removed");
    }

    #[test]
    fn a_re_encoded_file_is_not_copied_while_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        write(
            &path,
            &[batch(Arc::new(UInt64Array::from(vec![0u64, 1, 2])))],
        );
        let (_, into) = copy_into(dir.path(), "data");
        let out = check(
            &path,
            0,
            OffsetInterval::new(0, 2),
            None,
            &V(),
            Some(into),
            &Progress::none(),
        )
        .unwrap()
        .unwrap();
        assert_ne!(out.file, path, "re-encoded");
        assert!(
            out.copied.is_none(),
            "the store copies the re-encoded file itself"
        );
    }

    #[test]
    fn unsigned_offsets_are_re_encoded_beside_the_file_with_the_same_logical_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        write(
            &path,
            &[batch(Arc::new(UInt64Array::from(vec![0u64, 1, 2])))],
        );
        let out = check(
            &path,
            0,
            OffsetInterval::new(0, 2),
            None,
            &V(),
            None,
            &Progress::none(),
        )
        .unwrap()
        .unwrap();
        assert_ne!(out.file, path);
        let stored =
            data::read_parquet(bytes::Bytes::from(std::fs::read(&out.file).unwrap())).unwrap();
        assert_eq!(stored.schema().field(0).data_type(), &DataType::Int64);
        assert_eq!(out.logical_hash, data::logical_hash(&[stored]).unwrap());
        assert_eq!(
            out.logical_hash,
            data::logical_hash(&[int64(0..3)]).unwrap()
        );
    }

    #[test]
    fn a_gap_in_a_later_batch_is_a_violation_naming_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        let mut second: Vec<i64> = (BATCH_ROWS as i64..2 * BATCH_ROWS as i64).collect();
        second[5] += 1;
        write(
            &path,
            &[
                int64(0..BATCH_ROWS as i64),
                batch(Arc::new(Int64Array::from(second))),
            ],
        );
        let claimed = OffsetInterval::new(0, 2 * BATCH_ROWS as u64 - 1);
        match check(&path, 0, claimed, None, &V(), None, &Progress::none()) {
            Err(OutputError::Contract(ContractViolation::NonContiguousOffsets {
                index,
                expected,
                ..
            })) => {
                assert_eq!(index, BATCH_ROWS + 5);
                assert_eq!(expected, BATCH_ROWS as u64 + 5);
            }
            other => panic!("expected a gap, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_file_a_miscount_and_garbage_are_violations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        assert!(matches!(
            check(
                &path,
                0,
                OffsetInterval::new(0, 1),
                None,
                &V(),
                None,
                &Progress::none()
            ),
            Err(OutputError::Contract(
                ContractViolation::ClaimsRowsButNoFile { .. }
            ))
        ));
        assert!(
            check(&path, 0, None, None, &V(), None, &Progress::none())
                .unwrap()
                .is_none()
        );
        write(&path, &[int64(0..3)]);
        assert!(matches!(
            check(
                &path,
                0,
                OffsetInterval::new(0, 1),
                None,
                &V(),
                None,
                &Progress::none()
            ),
            Err(OutputError::Contract(
                ContractViolation::RecordCountMismatch {
                    claimed: 2,
                    found: 3
                }
            ))
        ));
        std::fs::write(&path, b"not parquet").unwrap();
        assert!(matches!(
            check(
                &path,
                0,
                OffsetInterval::new(0, 1),
                None,
                &V(),
                None,
                &Progress::none()
            ),
            Err(OutputError::Contract(ContractViolation::BadDataFile { .. }))
        ));
    }

    #[test]
    fn a_changed_schema_is_a_violation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.parquet");
        write(&path, &[int64(0..3)]);
        let previous = Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("town", DataType::Utf8, false),
        ]));
        assert!(matches!(
            check(
                &path,
                0,
                OffsetInterval::new(0, 2),
                Some(&previous),
                &V(),
                None,
                &Progress::none()
            ),
            Err(OutputError::Contract(
                ContractViolation::SchemaChanged { .. }
            ))
        ));
    }
}
