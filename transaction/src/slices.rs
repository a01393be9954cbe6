//! Reading a dataset's stored slices batch by batch, each checked against its hash first: the indexes the
//! Ledger and Snapshot merges keep, and the stored records a Snapshot merge retracts or corrects.

use super::*;

/// Why previous records could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// Storage failed.
    Store(StoreError),
    /// Parquet failed.
    Data(DataError),
}

/// Runs `read` on a blocking thread over a stored slice, checked against its hash first: the stored file
/// itself on a local disk, a copy staged in `dir` otherwise (removed once read).
pub(super) async fn with_slice<T: Send + 'static>(
    store: &DatasetStore,
    slice: &DataSlice,
    dir: &Path,
    what: &str,
    read: impl FnOnce(&Path) -> Result<T, DataError> + Send + 'static,
) -> Result<T, LoadError> {
    let path = store
        .stage_file(FileKind::Data, &slice.physical_hash, Some(slice.size), dir)
        .await
        .map_err(LoadError::Store)?;
    let staged = path.clone();
    let result = tokio::task::spawn_blocking(move || read(&staged)).await;
    if path.starts_with(dir) {
        let _ = std::fs::remove_file(&path);
    }
    result
        .map_err(|_| {
            LoadError::Data(DataError::Panicked {
                context: what.to_string(),
            })
        })?
        .map_err(LoadError::Data)
}

/// The primary keys of a dataset's records (all of them, retracted or not: a Ledger never retracts), read
/// slice by slice, each slice checked against its hash first and only its key columns decoded.
pub async fn ledger_index(
    store: &DatasetStore,
    chain: &Chain,
    primary_key: &[String],
    dir: &Path,
) -> Result<merge::LedgerIndex, LoadError> {
    let mut index = merge::LedgerIndex::new(primary_key);
    for s in chain.data_slices() {
        let columns = primary_key.to_vec();
        index = with_slice(store, s, dir, "reading a Ledger's keys", move |path| {
            let mut index = index;
            for batch in data::read_columns(path, &columns)? {
                index.add_history(&batch?)?;
            }
            Ok(index)
        })
        .await?;
    }
    Ok(index)
}

/// The state a Snapshot merge diffs against, replayed from a dataset's slices one batch at a time (each slice
/// checked against its hash first, only the key, compare and `op` columns decoded).
pub async fn snapshot_index(
    store: &DatasetStore,
    chain: &Chain,
    mut index: merge::SnapshotIndex,
    vocab: &DatasetVocabulary,
    dir: &Path,
) -> Result<merge::SnapshotIndex, LoadError> {
    let columns = index.history_columns(vocab);
    for (n, s) in chain.data_slices().enumerate() {
        let (columns, vocab) = (columns.clone(), vocab.clone());
        index = with_slice(store, s, dir, "replaying a Snapshot's state", move |path| {
            let mut index = index;
            let mut row = 0;
            for batch in data::read_columns(path, &columns)? {
                let batch = batch?;
                index.add_history(&batch, n, row, &vocab)?;
                row += batch.num_rows();
            }
            Ok(index)
        })
        .await?;
    }
    Ok(index)
}

/// The stored records `at` (any order, no repeats needed) with their data columns: one batch per slice they
/// are in, and where each record landed (batch, row).
pub async fn stored_records(
    store: &DatasetStore,
    chain: &Chain,
    at: &[merge::RecordAt],
    vocab: &DatasetVocabulary,
    dir: &Path,
) -> Result<(Vec<RecordBatch>, HashMap<merge::RecordAt, (usize, usize)>), LoadError> {
    let mut by_slice: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for a in at {
        by_slice.entry(a.slice).or_default().push(a.row);
    }
    let slices: Vec<&DataSlice> = chain.data_slices().collect();
    let mut batches = Vec::new();
    let mut places = HashMap::new();
    for (slice, mut rows) in by_slice {
        rows.sort_unstable();
        rows.dedup();
        let s = slices.get(slice).ok_or_else(|| {
            LoadError::Data(DataError::Column {
                message: format!("the chain has no data slice number {slice}"),
            })
        })?;
        let (wanted, v) = (rows.clone(), vocab.clone());
        let batch = with_slice(store, s, dir, "reading stored records", move |path| {
            data::data_columns(&data::read_rows(path, &wanted)?, &v)
        })
        .await?;
        for (i, row) in rows.iter().enumerate() {
            places.insert(merge::RecordAt { slice, row: *row }, (batches.len(), i));
        }
        batches.push(batch);
    }
    Ok((batches, places))
}
