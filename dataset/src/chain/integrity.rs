//! A dataset's files checked against its chain: every data slice's physical hash, size and logical hash, and
//! every checkpoint's physical hash and size (kamu's `verify --integrity`).

use std::path::Path;

use super::store::{Chain, DatasetStore, FileKind, StoreError};
use super::validate::ChainViolation;
use crate::data::{self, DataError};

/// Why a dataset's files do not match its chain.
#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    /// A file is missing, unreadable, or its bytes do not match its hash or size.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A data slice could not be decoded for its logical hash.
    #[error("dataset `{dataset}`: data file of block #{sequence_number}: {source}")]
    Data {
        /// The dataset.
        dataset: String,
        /// The block that names the file.
        sequence_number: u64,
        /// Why.
        #[source]
        source: DataError,
    },
}

/// What [`DatasetStore::check_integrity`] checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntegrityReport {
    /// Data slices checked (physical hash, size, logical hash).
    pub data_files: usize,
    /// Checkpoints checked (physical hash, size).
    pub checkpoints: usize,
}

impl DatasetStore {
    /// Checks every file `chain` (this dataset's chain as read) names: each data slice against its physical
    /// hash and size as it is read, then decoded as a stream for its logical hash; each checkpoint against its
    /// physical hash and size. Nothing is held whole; a slice of an object store is checked into `scratch`
    /// and removed after. `each` is called after every file with the counts so far, for progress.
    ///
    /// # Errors
    ///
    /// The first file that does not match: [`StoreError::InvalidChain`] for a logical hash other than the
    /// recorded one, the store's own errors for a missing, short or swapped file.
    pub async fn check_integrity(
        &self,
        chain: &Chain,
        scratch: &Path,
        mut each: impl FnMut(IntegrityReport),
    ) -> Result<IntegrityReport, IntegrityError> {
        let mut report = IntegrityReport::default();
        for (_, b) in &chain.blocks {
            let seq = b.sequence_number;
            if let Some(d) = b.event.new_data() {
                let staged = self
                    .stage_file(FileKind::Data, &d.physical_hash, Some(d.size), scratch)
                    .await?;
                // The footer's count of records against the block's offsets: a block that claims more (or
                // fewer) records than its slice holds is refused before any offset is taken from it.
                let rows = data::rows_in_file(&staged);
                let hashed = data::logical_hash_of_file(&staged).await;
                if staged.starts_with(scratch) {
                    let _ = std::fs::remove_file(&staged);
                }
                let (_, logical) = hashed.map_err(|source| IntegrityError::Data {
                    dataset: self.name().to_owned(),
                    sequence_number: seq,
                    source,
                })?;
                let rows = rows.map_err(|source| IntegrityError::Data {
                    dataset: self.name().to_owned(),
                    sequence_number: seq,
                    source,
                })?;
                if rows != d.offset_interval.len() {
                    return Err(StoreError::InvalidChain {
                        dataset: self.name().to_owned(),
                        source: ChainViolation::data_slice(
                            seq,
                            format!(
                                "data file {} holds {rows} record(s), but the block gives it offsets [{}, {}]",
                                d.physical_hash, d.offset_interval.start, d.offset_interval.end
                            ),
                        ),
                    }
                    .into());
                }
                if logical != d.logical_hash {
                    return Err(StoreError::InvalidChain {
                        dataset: self.name().to_owned(),
                        source: ChainViolation::data_slice(
                            seq,
                            format!(
                                "data file {} has logical hash {logical}, the block says {}",
                                d.physical_hash, d.logical_hash
                            ),
                        ),
                    }
                    .into());
                }
                report.data_files += 1;
                each(report);
            }
            if let Some(c) = b.event.new_checkpoint() {
                self.check_file(
                    FileKind::Checkpoint,
                    &c.physical_hash,
                    (c.size > 0).then_some(c.size),
                )
                .await?;
                report.checkpoints += 1;
                each(report);
            }
        }
        Ok(report)
    }
}
