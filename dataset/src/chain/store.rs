//! A dataset's files in an object store: content-addressed blocks, data slices and checkpoints, and the head.
//!
//! Layout under the storage root, per dataset:
//!
//! ```text
//! datasets/<name>/blocks/<multihash>       block manifests (FlatBuffers)
//! datasets/<name>/data/<multihash>         Parquet data slices
//! datasets/<name>/checkpoints/<multihash>  engine checkpoints
//! datasets/<name>/refs/head                the multihash of the last block, as text
//! ```
//!
//! Every file but the head is named by the hash of its content, so writing one again is harmless. A
//! transaction writes its data, checkpoint and blocks first and moves `refs/head` last with one atomic put:
//! a crash at any point before that leaves the previous head, and the files already written are reused (or
//! ignored) by the rerun.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tracing::{debug, info, warn};

use super::validate::{ChainSummary, ChainValidator, ChainViolation};
use weir_odf::Multihash;
use weir_odf::{DataSlice, MetadataBlock};

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The storage URL cannot be opened.
    #[error("cannot open storage {url}: {message}")]
    Open {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// A read or write failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The object path.
        path: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// A local file could not be read or written.
    #[error("{operation} {path}: {source}")]
    LocalIo {
        /// What was being done.
        operation: &'static str,
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file the chain references is not in the store.
    #[error("{path} is missing")]
    Missing {
        /// The file (its local path, or its object path on an object store).
        path: String,
    },
    /// A content-addressed file does not hash to its name (or is not the size the chain records).
    #[error(
        "{path} is corrupt: expected SHA3-256 {expected}{}, its content hashes to {actual} ({actual_size} bytes)",
        expected_size.map(|s| format!(" ({s} bytes)")).unwrap_or_default()
    )]
    HashMismatch {
        /// The file (its local path, or its object path on an object store).
        path: String,
        /// The hash it is named by / the chain records.
        expected: Multihash,
        /// The hash of what was read.
        actual: Multihash,
        /// The size the chain records, when it records one.
        expected_size: Option<u64>,
        /// The size of what was read.
        actual_size: u64,
    },
    /// A block does not decode.
    #[error("block {hash} of dataset `{dataset}` does not decode: {source}")]
    Decode {
        /// Dataset name.
        dataset: String,
        /// Block hash.
        hash: Multihash,
        /// Why.
        #[source]
        source: Box<weir_odf::Error>,
    },
    /// The head reference is not a multihash.
    #[error("head of dataset `{dataset}` ({path}) is not a multihash: {text:?}; {recovery}")]
    BadHead {
        /// Dataset name.
        dataset: String,
        /// The head file.
        path: String,
        /// What the file holds.
        text: String,
        /// Which block looks like the head, and how to restore it.
        recovery: String,
    },
    /// The dataset has blocks but no head reference: its head was lost, and treating it as a new dataset
    /// would create it again under a new id.
    #[error(
        "dataset `{dataset}` has {blocks} block(s) but no head reference ({path}); it is not a new dataset, its head was lost: {recovery}"
    )]
    HeadMissing {
        /// Dataset name.
        dataset: String,
        /// The head file.
        path: String,
        /// How many block files there are.
        blocks: usize,
        /// Which block looks like the head, and how to restore it.
        recovery: String,
    },
    /// The chain was written by Weir before it wrote ODF chains.
    #[error(
        "dataset `{dataset}` was written by an older Weir, before its chains were ODF's ({reason}); run `weir upgrade` to convert the workspace's datasets to the current format (`weir upgrade --dry-run` shows what it would change)"
    )]
    OldFormat {
        /// Dataset name.
        dataset: String,
        /// What gives the old format away.
        reason: String,
    },
    /// The chain breaks a rule.
    #[error("metadata chain of dataset `{dataset}` is invalid: {source}")]
    InvalidChain {
        /// Dataset name.
        dataset: String,
        /// The rule broken.
        #[source]
        source: ChainViolation,
    },
    /// Someone else moved the head during our transaction.
    #[error(
        "head of dataset `{dataset}` moved from {} to {} during the transaction",
        show_head(expected),
        show_head(found)
    )]
    HeadMoved {
        /// Dataset name.
        dataset: String,
        /// Head at the start.
        expected: Option<Multihash>,
        /// Head now.
        found: Option<Multihash>,
    },
    /// An append was given no events.
    #[error("dataset `{dataset}`: nothing to append")]
    NothingToAppend {
        /// Dataset name.
        dataset: String,
    },
}

fn show_head(head: &Option<Multihash>) -> String {
    head.map_or_else(|| "none".to_owned(), |h| h.to_string())
}

/// The storage of a whole workspace.
#[derive(Debug, Clone)]
pub struct Storage {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    local_root: Option<PathBuf>,
    url: String,
    /// Files this process stored on the local disk, hashed as written (see [`super::written`]).
    written: Arc<super::written::Written>,
}

/// What kind of content-addressed file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Block manifests.
    Block,
    /// Parquet data slices.
    Data,
    /// Engine checkpoints.
    Checkpoint,
}

impl FileKind {
    fn dir(self) -> &'static str {
        match self {
            FileKind::Block => "blocks",
            FileKind::Data => "data",
            FileKind::Checkpoint => "checkpoints",
        }
    }
}

impl Storage {
    /// Opens storage: a local directory (created if missing), or an object-store URL (`s3://bucket/prefix`,
    /// configured by the usual `AWS_*` environment variables, e.g. `AWS_ENDPOINT` for S3-compatible stores).
    pub fn open(location: &str) -> Result<Self, StoreError> {
        let open_err = |message: String| StoreError::Open {
            url: location.to_string(),
            message,
        };
        if location.contains("://") && !location.starts_with("file://") {
            let url = url::Url::parse(location).map_err(|e| open_err(e.to_string()))?;
            let opts: Vec<(String, String)> = std::env::vars()
                .filter(|(k, _)| k.starts_with("AWS_"))
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect();
            let (store, prefix) =
                object_store::parse_url_opts(&url, opts).map_err(|e| open_err(e.to_string()))?;
            return Ok(Self {
                store: Arc::from(store),
                prefix,
                local_root: None,
                url: location.to_string(),
                written: Arc::default(),
            });
        }
        let dir = PathBuf::from(location.strip_prefix("file://").unwrap_or(location));
        std::fs::create_dir_all(&dir).map_err(|e| open_err(e.to_string()))?;
        let dir = dir.canonicalize().map_err(|e| open_err(e.to_string()))?;
        let store = LocalFileSystem::new_with_prefix(&dir).map_err(|e| open_err(e.to_string()))?;
        Ok(Self {
            store: Arc::new(store),
            prefix: Path::default(),
            local_root: Some(dir),
            url: location.to_string(),
            written: Arc::default(),
        })
    }

    /// The location it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The store, for staging files to engines.
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// One dataset's files.
    pub fn dataset(&self, name: &str) -> DatasetStore {
        DatasetStore {
            storage: self.clone(),
            name: name.to_string(),
            prefix: self.prefix.clone().join("datasets").join(name),
        }
    }

    /// Where `weir upgrade` keeps a dataset's chain as it was before the upgrade: `upgrade-backup/<name>/`
    /// under the storage root, with the same layout as a dataset (`blocks/<hash>`, `refs/head`) and no data
    /// of its own (the old chain references the dataset's data and checkpoint files, which the upgrade
    /// keeps).
    pub fn upgrade_backup(&self, name: &str) -> DatasetStore {
        DatasetStore {
            storage: self.clone(),
            name: name.to_string(),
            prefix: self.prefix.clone().join("upgrade-backup").join(name),
        }
    }

    /// Moves every file of dataset `old` to dataset `new` (`weir rename`): one folder rename on a local disk,
    /// a copy of each object and then the deletion of the originals on an object store (so an interrupted
    /// rename leaves the old dataset whole). Fails if `new` has files already.
    pub async fn rename_dataset(&self, old: &str, new: &str) -> Result<(), StoreError> {
        self.move_dataset(old, new, false).await
    }

    /// Completes a rename of dataset `old` to `new` that may have been interrupted at any point: whatever of
    /// `old` is left is moved to `new` (objects already copied are copied again, with the same bytes), and
    /// a rename that already completed is left as it is.
    pub async fn resume_rename_dataset(&self, old: &str, new: &str) -> Result<(), StoreError> {
        self.move_dataset(old, new, true).await
    }

    async fn move_dataset(&self, old: &str, new: &str, resume: bool) -> Result<(), StoreError> {
        let from = self.dataset(old).prefix;
        let to = self.dataset(new).prefix;
        if let Some(root) = &self.local_root {
            let dir = |p: &Path| {
                p.parts()
                    .fold(root.clone(), |d, part| d.join(part.as_ref()))
            };
            let (from_dir, to_dir) = (dir(&from), dir(&to));
            let io = |path: &std::path::Path| {
                let path = path.display().to_string();
                move |source| StoreError::LocalIo {
                    operation: "rename",
                    path,
                    source,
                }
            };
            let exists = || {
                Err(io(&to_dir)(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a dataset folder of that name exists",
                )))
            };
            if !resume && to_dir.exists() {
                return exists();
            }
            // Resumed: a folder that is gone has been moved already.
            if !from_dir.exists() {
                return Ok(());
            }
            if to_dir.exists() {
                return exists();
            }
            std::fs::rename(&from_dir, &to_dir).map_err(io(&from_dir))?;
            if let Some(parent) = to_dir.parent() {
                crate::durable::sync_dir(parent).map_err(io(parent))?;
            }
            return Ok(());
        }
        if !resume && !self.list(&to).await?.is_empty() {
            return Err(StoreError::Io {
                operation: "rename",
                path: self.display(&to),
                source: object_store::Error::AlreadyExists {
                    path: self.display(&to),
                    source: "a dataset of that name has files".into(),
                },
            });
        }
        let objects = self.list(&from).await?;
        let from_parts = from.parts().count();
        for object in &objects {
            let target = object
                .parts()
                .skip(from_parts)
                .fold(to.clone(), |p, part| p.join(part.as_ref()));
            self.store
                .copy(object, &target)
                .await
                .map_err(|source| StoreError::Io {
                    operation: "copy",
                    path: self.display(object),
                    source,
                })?;
        }
        for object in objects {
            self.delete_object(&object).await?;
        }
        Ok(())
    }

    async fn list(&self, prefix: &Path) -> Result<Vec<Path>, StoreError> {
        self.store
            .list(Some(prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|source| StoreError::Io {
                operation: "list",
                path: self.display(prefix),
                source,
            })
    }

    /// Removes every file of dataset `name` (`weir delete`).
    pub async fn delete_dataset(&self, name: &str) -> Result<(), StoreError> {
        let prefix = self.dataset(name).prefix;
        if let Some(root) = &self.local_root {
            let dir = prefix
                .parts()
                .fold(root.clone(), |d, part| d.join(part.as_ref()));
            return match std::fs::remove_dir_all(&dir) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(source) => Err(StoreError::LocalIo {
                    operation: "delete",
                    path: dir.display().to_string(),
                    source,
                }),
            };
        }
        for object in self.list(&prefix).await? {
            self.delete_object(&object).await?;
        }
        Ok(())
    }

    async fn delete_object(&self, path: &Path) -> Result<(), StoreError> {
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StoreError::Io {
                operation: "delete",
                path: self.display(path),
                source,
            }),
        }
    }

    /// A workspace-level object (e.g. `engines/compatibility.json`).
    pub fn path(&self, rel: &str) -> Path {
        rel.split('/')
            .fold(self.prefix.clone(), |p, part| p.join(part))
    }

    /// Reads a workspace-level object, `None` if absent.
    pub async fn get_opt(&self, path: &Path) -> Result<Option<Bytes>, StoreError> {
        match self.store.get(path).await {
            Ok(r) => r.bytes().await.map(Some).map_err(|source| StoreError::Io {
                operation: "read",
                path: path.to_string(),
                source,
            }),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(StoreError::Io {
                operation: "read",
                path: path.to_string(),
                source,
            }),
        }
    }

    /// Removes the temporary files a writer that was killed left in a local storage (a copy into the store
    /// or a write that never reached its rename: [`crate::durable::remove_stale_temporaries`]). Only for a
    /// writer that holds the workspace lock; a failure to look is logged, not an error.
    pub fn remove_stale_temporaries(&self) {
        let Some(root) = &self.local_root else {
            return;
        };
        match crate::durable::remove_stale_temporaries(root) {
            Ok(0) => {}
            Ok(removed) => info!(
                removed,
                storage = %root.display(),
                "removed temporary files a writer that was killed left in the storage"
            ),
            Err(e) => warn!(
                storage = %root.display(),
                error = %e,
                "could not look for temporary files left in the storage"
            ),
        }
    }

    /// The bucket of an `s3://` storage (`None` for local storage and other stores): engines that read
    /// and write the store directly are given `s3://<bucket>/<key>` URLs.
    pub fn s3_bucket(&self) -> Option<&str> {
        let rest = self.url.strip_prefix("s3://")?;
        let bucket = rest.split('/').next().unwrap_or_default();
        (!bucket.is_empty()).then_some(bucket)
    }

    /// The `s3://` URL of an object of an `s3://` storage.
    pub fn s3_url(&self, path: &Path) -> Option<String> {
        Some(format!("s3://{}/{path}", self.s3_bucket()?))
    }

    /// The local folder of the storage, when it is local.
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.local_root.as_deref()
    }

    /// The local file of an object path, when the storage is local.
    fn local_file(&self, path: &Path) -> Option<PathBuf> {
        let root = self.local_root.as_ref()?;
        Some(
            path.parts()
                .fold(root.clone(), |p, part| p.join(part.as_ref())),
        )
    }

    /// How an object is named in messages: its local path, or its URL on an object store. An object path
    /// is the whole key in its bucket (it starts with the storage's prefix), so the URL is the bucket's
    /// followed by that key.
    pub fn display(&self, path: &Path) -> String {
        match self.local_file(path) {
            Some(p) => p.display().to_string(),
            None => object_url(&self.url, path),
        }
    }

    /// Writes a workspace-level object atomically. On a local disk the write is durable when this returns
    /// (temporary file, fsync, rename, fsync of the folder: [`crate::durable`]); on an object store a
    /// completed PUT is as durable as the store makes it.
    pub async fn put(&self, path: &Path, bytes: Bytes) -> Result<(), StoreError> {
        if let (Some(root), Some(file)) = (self.local_root.clone(), self.local_file(path)) {
            let shown = file.display().to_string();
            tokio::task::spawn_blocking(move || crate::durable::write(&root, &file, &bytes))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|r| r)
                .map_err(|source| StoreError::LocalIo {
                    operation: "write",
                    path: shown.clone(),
                    source,
                })?;
            debug!(path = %shown, "written durably: file and folder fsynced");
            return Ok(());
        }
        self.store
            .put(path, PutPayload::from_bytes(bytes))
            .await
            .map(|_| ())
            .map_err(|source| StoreError::Io {
                operation: "write",
                path: path.to_string(),
                source,
            })
    }
}

/// The URL of the object `path` (its whole key) in the object store `storage_url` (`s3://bucket/prefix`):
/// the store's scheme and bucket, then the key.
///
/// ```
/// use weir_dataset::chain::store::object_url;
/// let key = object_store::path::Path::from("ws/datasets/readings/data/f1620ab");
/// assert_eq!(object_url("s3://bucket/ws", &key), "s3://bucket/ws/datasets/readings/data/f1620ab");
/// assert_eq!(object_url("s3://bucket", &key), "s3://bucket/ws/datasets/readings/data/f1620ab");
/// ```
pub fn object_url(storage_url: &str, path: &Path) -> String {
    match url::Url::parse(storage_url) {
        Ok(url) => format!(
            "{}://{}/{path}",
            url.scheme(),
            url.host_str().unwrap_or_default()
        ),
        Err(_) => format!("{}/{path}", storage_url.trim_end_matches('/')),
    }
}

/// One dataset's files.
#[derive(Debug, Clone)]
pub struct DatasetStore {
    storage: Storage,
    name: String,
    prefix: Path,
}

impl DatasetStore {
    /// The dataset name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn file_path(&self, kind: FileKind, hash: &Multihash) -> Path {
        self.prefix.clone().join(kind.dir()).join(hash.to_string())
    }

    fn head_path(&self) -> Path {
        self.prefix.clone().join("refs").join("head")
    }

    /// The local filesystem path of a file, when the storage is local.
    pub fn local_path(&self, kind: FileKind, hash: &Multihash) -> Option<PathBuf> {
        self.storage.local_file(&self.file_path(kind, hash))
    }

    /// The folder of the dataset's files (or its object-store URL), for messages.
    pub fn display_root(&self) -> String {
        self.display(&self.prefix)
    }

    /// The object path of a file (for staging from object stores).
    pub fn object_path(&self, kind: FileKind, hash: &Multihash) -> Path {
        self.file_path(kind, hash)
    }

    /// The object path of the folder of a kind of file (`<dataset>/data`, ...).
    pub fn kind_prefix(&self, kind: FileKind) -> Path {
        self.prefix.clone().join(kind.dir())
    }

    /// The workspace's storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    fn new_marker_path(&self) -> Path {
        self.prefix.clone().join("refs").join("new")
    }

    /// The file an object path names, for messages.
    pub fn display(&self, path: &Path) -> String {
        self.storage.display(path)
    }

    /// The file a content-addressed file is stored in, for messages.
    pub fn display_file(&self, kind: FileKind, hash: &Multihash) -> String {
        self.display(&self.file_path(kind, hash))
    }

    /// The current head, `None` for a dataset never committed.
    ///
    /// A dataset folder with blocks but no head (or a head that is not a multihash) is an error, never a
    /// new dataset: a lost head must not make `pull` create the dataset again under a new id. The only
    /// blocks a new dataset may have are those of a first transaction that did not commit, and such a
    /// transaction marks the dataset new (`refs/new`) before it writes any.
    pub async fn head(&self) -> Result<Option<Multihash>, StoreError> {
        let path = self.head_path();
        let Some(bytes) = self.storage.get_opt(&path).await? else {
            if self
                .storage
                .get_opt(&self.new_marker_path())
                .await?
                .is_some()
            {
                return Ok(None);
            }
            let blocks = self.block_hashes().await?;
            if blocks.is_empty() {
                return Ok(None);
            }
            return Err(StoreError::HeadMissing {
                dataset: self.name.clone(),
                path: self.display(&path),
                blocks: blocks.len(),
                recovery: self.recovery(&blocks).await,
            });
        };
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        match text.parse::<Multihash>() {
            Ok(h) => Ok(Some(h)),
            Err(_) => {
                let blocks = self.block_hashes().await?;
                Err(StoreError::BadHead {
                    dataset: self.name.clone(),
                    path: self.display(&path),
                    text,
                    recovery: self.recovery(&blocks).await,
                })
            }
        }
    }

    /// The head file as it is: `None` when there is none.
    async fn head_ref(&self) -> Result<Option<Multihash>, StoreError> {
        match self.head().await {
            Err(StoreError::HeadMissing { .. }) => Ok(None),
            other => other,
        }
    }

    /// The hashes of the block files present.
    async fn block_hashes(&self) -> Result<Vec<Multihash>, StoreError> {
        let dir = self.prefix.clone().join(FileKind::Block.dir());
        let metas: Vec<_> = self
            .storage
            .store
            .list(Some(&dir))
            .try_collect()
            .await
            .map_err(|source| StoreError::Io {
                operation: "list",
                path: dir.to_string(),
                source,
            })?;
        Ok(metas
            .iter()
            .filter_map(|m| m.location.filename()?.parse().ok())
            .collect())
    }

    /// How to recover from a lost or unreadable head: the block that looks like the head is the one no other
    /// block points to (the highest sequence number among them, if a transaction that did not commit left
    /// blocks too).
    async fn recovery(&self, blocks: &[Multihash]) -> String {
        let mut decoded = Vec::new();
        for h in blocks {
            if let Ok(b) = self.get_block(h).await {
                decoded.push((*h, b.sequence_number, b.prev_block_hash));
            }
        }
        let mut tips: Vec<(Multihash, u64)> = decoded
            .iter()
            .filter(|(h, _, _)| !decoded.iter().any(|(_, _, prev)| prev.as_ref() == Some(h)))
            .map(|(h, seq, _)| (*h, *seq))
            .collect();
        tips.sort_by_key(|(_, seq)| std::cmp::Reverse(*seq));
        let head = self.display(&self.head_path());
        match tips.as_slice() {
            [] => format!(
                "no block decodes, so none can serve as the head; restore `{head}` from a backup, or delete the dataset's folder to start it over (its derivatives will then reprocess)"
            ),
            [(h, seq), rest @ ..] => {
                let others = if rest.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (other blocks no block points to, left by transactions that did not commit: {})",
                        rest.iter()
                            .map(|(h, s)| format!("{h} #{s}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                format!(
                    "block {h} (sequence number {seq}) is the one no other block points to{others}; if it is the last committed block, restore the head with `printf %s {h} > {head}`, then run `weir validate`"
                )
            }
        }
    }

    /// Marks the dataset new before the first transaction writes its first block, so that a crash before
    /// the head exists leaves a new dataset (blocks ignored), not a dataset whose head was lost.
    pub async fn mark_new(&self) -> Result<(), StoreError> {
        self.storage
            .put(
                &self.new_marker_path(),
                Bytes::from_static(b"no block is committed yet\n"),
            )
            .await
    }

    /// Writes content-addressed bytes and returns their hash.
    pub async fn put_file(&self, kind: FileKind, bytes: Bytes) -> Result<Multihash, StoreError> {
        let hash = Multihash::sha3_256(&bytes);
        let path = self.file_path(kind, &hash);
        debug!(dataset = %self.name, %path, size = bytes.len(), "writing");
        self.storage.put(&path, bytes).await?;
        Ok(hash)
    }

    /// The storage root and the folder files of `kind` are stored in, when the store is on this machine.
    pub fn local_dir(&self, kind: FileKind) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
        let root = self.storage.local_root.clone()?;
        let dir = root.join("datasets").join(&self.name).join(kind.dir());
        Some((root, dir))
    }

    /// Stores the file at `src` under its content hash, reading it once: on a local disk it is copied into
    /// place while hashed (durably, as [`Storage::put`]); on an object store it is hashed, then uploaded in
    /// parts. Returns the hash and the size. Memory stays bounded whatever the file's size.
    pub async fn put_file_from(
        &self,
        kind: FileKind,
        src: &std::path::Path,
    ) -> Result<(Multihash, u64), StoreError> {
        let local = |operation: &'static str, path: &std::path::Path| {
            let path = path.display().to_string();
            move |source| StoreError::LocalIo {
                operation,
                path,
                source,
            }
        };
        if let Some((root, dir)) = self.local_dir(kind) {
            let from = src.to_path_buf();
            let into = dir.clone();
            let (tmp, size, hash) = tokio::task::spawn_blocking(move || {
                let mut hasher = weir_odf::Sha3Hasher::new();
                let (tmp, size) = crate::durable::copy_to_temp(&root, &into, &from, &mut hasher)?;
                Ok::<_, std::io::Error>((tmp, size, hasher.finish()))
            })
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|r| r)
            .map_err(local("copy", src))?;
            let target = dir.join(hash.to_string());
            let shown = target.clone();
            tokio::task::spawn_blocking(move || crate::durable::rename_into_place(&tmp, &target))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|r| r)
                .map_err(local("write", &shown))?;
            self.storage.written.remember(&shown, hash);
            debug!(
                dataset = %self.name,
                size,
                path = %shown.display(),
                "written durably: file and folder fsynced (hashed while copied)"
            );
            return Ok((hash, size));
        }
        let from = src.to_path_buf();
        let hash = tokio::task::spawn_blocking(move || {
            let mut hasher = weir_odf::Sha3Hasher::new();
            std::io::copy(&mut std::fs::File::open(&from)?, &mut hasher)?;
            Ok::<_, std::io::Error>(hasher.finish())
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|r| r)
        .map_err(local("read", src))?;
        let path = self.file_path(kind, &hash);
        let size = self.upload(&path, src).await?;
        Ok((hash, size))
    }

    /// Stores the object `from` of the same store, whose bytes are the local file `local` (downloaded and
    /// checked), under its content hash: `local` is hashed, and the object copied inside the store (S3
    /// CopyObject), so the bytes are not uploaded again; objects over CopyObject's 5 GiB limit, and local
    /// storage, take `local` as [`Self::put_file_from`] does. Returns the hash and the size.
    pub async fn put_file_copied(
        &self,
        kind: FileKind,
        local: &std::path::Path,
        from: &Path,
    ) -> Result<(Multihash, u64), StoreError> {
        const COPY_LIMIT: u64 = 5 << 30;
        let size = std::fs::metadata(local)
            .map_err(|source| StoreError::LocalIo {
                operation: "read",
                path: local.display().to_string(),
                source,
            })?
            .len();
        if self.storage.local_root.is_some() || size > COPY_LIMIT {
            return self.put_file_from(kind, local).await;
        }
        let src = local.to_path_buf();
        let hash = tokio::task::spawn_blocking(move || {
            let mut hasher = weir_odf::Sha3Hasher::new();
            std::io::copy(&mut std::fs::File::open(&src)?, &mut hasher)?;
            Ok::<_, std::io::Error>(hasher.finish())
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|r| r)
        .map_err(|source| StoreError::LocalIo {
            operation: "read",
            path: local.display().to_string(),
            source,
        })?;
        let path = self.file_path(kind, &hash);
        self.storage
            .store
            .copy(from, &path)
            .await
            .map_err(|source| StoreError::Io {
                operation: "copy",
                path: path.to_string(),
                source,
            })?;
        debug!(dataset = %self.name, %from, %path, size, "copied inside the store");
        Ok((hash, size))
    }

    /// Uploads the local file `src` to `path` in the object store, in parts; returns its size.
    async fn upload(&self, path: &Path, src: &std::path::Path) -> Result<u64, StoreError> {
        let local = |operation: &'static str| {
            let path = src.display().to_string();
            move |source| StoreError::LocalIo {
                operation,
                path,
                source,
            }
        };
        let mut upload =
            object_store::buffered::BufWriter::new(self.storage.store.clone(), path.clone());
        let mut file = tokio::fs::File::open(src).await.map_err(local("read"))?;
        let size = tokio::io::copy(&mut file, &mut upload)
            .await
            .map_err(local("upload"))?;
        tokio::io::AsyncWriteExt::shutdown(&mut upload)
            .await
            .map_err(local("upload"))?;
        debug!(dataset = %self.name, %path, size, "uploaded");
        Ok(size)
    }

    /// Stores a file this process wrote at `src` and hashed as it wrote it (`hash`, `size`), without
    /// reading it again: on a local disk it is renamed into place (and its folder fsynced; `src` must
    /// already be fsynced), or, when `src` is on another file system, copied while hashed and the copy
    /// checked against `hash`; on an object store it is uploaded in parts. `src` is gone afterwards.
    pub async fn put_file_written(
        &self,
        kind: FileKind,
        src: &std::path::Path,
        hash: Multihash,
        size: u64,
    ) -> Result<(Multihash, u64), StoreError> {
        let Some((root, dir)) = self.local_dir(kind) else {
            let path = self.file_path(kind, &hash);
            self.upload(&path, src).await?;
            let _ = std::fs::remove_file(src);
            return Ok((hash, size));
        };
        let target = dir.join(hash.to_string());
        let (from, into) = (src.to_path_buf(), target.clone());
        let moved = tokio::task::spawn_blocking(move || {
            crate::durable::create_dir_all(&root, &dir)?;
            match std::fs::rename(&from, &into) {
                Ok(()) => crate::durable::sync_dir(&dir).map(|()| true),
                Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|r| r)
        .map_err(|source| StoreError::LocalIo {
            operation: "move",
            path: src.display().to_string(),
            source,
        })?;
        if moved {
            self.storage.written.remember(&target, hash);
            debug!(
                dataset = %self.name,
                size,
                path = %target.display(),
                "written durably: file fsynced as written, moved into place, folder fsynced"
            );
            return Ok((hash, size));
        }
        let (copied, copied_size) = self.put_file_from(kind, src).await?;
        if copied != hash {
            return Err(StoreError::HashMismatch {
                path: self.display(&self.file_path(kind, &copied)),
                expected: hash,
                actual: copied,
                expected_size: Some(size),
                actual_size: copied_size,
            });
        }
        let _ = std::fs::remove_file(src);
        Ok((hash, size))
    }

    /// Reads a content-addressed file and checks its hash.
    pub async fn get_file(&self, kind: FileKind, hash: &Multihash) -> Result<Bytes, StoreError> {
        let path = self.file_path(kind, hash);
        let bytes = self
            .storage
            .get_opt(&path)
            .await?
            .ok_or_else(|| StoreError::Missing {
                path: self.display(&path),
            })?;
        let actual = Multihash::sha3_256(&bytes);
        if actual != *hash {
            return Err(StoreError::HashMismatch {
                path: self.display(&path),
                expected: *hash,
                actual,
                expected_size: None,
                actual_size: bytes.len() as u64,
            });
        }
        Ok(bytes)
    }

    /// Checks a stored file against its hash (its name, which the chain records) and, when the chain records
    /// one, its size, reading it as a stream.
    pub async fn check_file(
        &self,
        kind: FileKind,
        hash: &Multihash,
        size: Option<u64>,
    ) -> Result<(), StoreError> {
        self.read_checked(kind, hash, size, None).await.map(|_| ())
    }

    /// A stored file, checked against its hash and size as it is read, at a local path an engine can read:
    /// the stored file itself on a local disk (hashed in place, not copied), a checked copy in `dir`
    /// otherwise. A file that does not match is an error: an engine never sees unchecked bytes.
    pub async fn stage_file(
        &self,
        kind: FileKind,
        hash: &Multihash,
        size: Option<u64>,
        dir: &std::path::Path,
    ) -> Result<PathBuf, StoreError> {
        self.read_checked(kind, hash, size, Some(dir)).await
    }

    /// Streams a stored file through SHA3-256 (copying it into `copy_to` on an object store) and checks it.
    async fn read_checked(
        &self,
        kind: FileKind,
        hash: &Multihash,
        size: Option<u64>,
        copy_to: Option<&std::path::Path>,
    ) -> Result<PathBuf, StoreError> {
        let path = self.file_path(kind, hash);
        let shown = self.display(&path);
        let (local, actual, actual_size) = match self.storage.local_file(&path) {
            Some(file) => match self.storage.written.unchanged(&file, hash) {
                // Hashed as this process wrote it, and the same file since: not read again.
                Some(n) => {
                    debug!(dataset = %self.name, path = %shown, "written and hashed by this process, unchanged since");
                    (file, *hash, n)
                }
                None => {
                    let f = file.clone();
                    let (actual, n) = tokio::task::spawn_blocking(move || hash_local(&f))
                        .await
                        .map_err(|e| std::io::Error::other(e.to_string()))
                        .and_then(|r| r)
                        .map_err(|source| local_err(&shown, source))?;
                    (file, actual, n)
                }
            },
            None => {
                let target = copy_to.map(|d| d.join(hash.to_string()));
                let (actual, n) = self.hash_remote(&path, target.as_deref()).await?;
                (target.unwrap_or_default(), actual, n)
            }
        };
        if actual != *hash || size.is_some_and(|s| s != actual_size) {
            if copy_to.is_some() && self.storage.local_root.is_none() {
                let _ = std::fs::remove_file(&local);
            }
            return Err(StoreError::HashMismatch {
                path: shown,
                expected: *hash,
                actual,
                expected_size: size,
                actual_size,
            });
        }
        Ok(local)
    }

    async fn hash_remote(
        &self,
        path: &Path,
        copy_to: Option<&std::path::Path>,
    ) -> Result<(Multihash, u64), StoreError> {
        use tokio::io::AsyncWriteExt;
        let shown = self.display(path);
        let io_err = |source| StoreError::Io {
            operation: "read",
            path: shown.clone(),
            source,
        };
        let mut stream = match self.storage.store.get(path).await {
            Ok(r) => r.into_stream(),
            Err(object_store::Error::NotFound { .. }) => {
                return Err(StoreError::Missing { path: shown });
            }
            Err(source) => return Err(io_err(source)),
        };
        let mut out = match copy_to {
            Some(p) => Some(
                tokio::fs::File::create(p)
                    .await
                    .map_err(|e| local_err(&p.display().to_string(), e))?,
            ),
            None => None,
        };
        let mut hasher = weir_odf::Sha3Hasher::new();
        let mut n = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(io_err)?;
            hasher.update(&chunk);
            n += chunk.len() as u64;
            if let (Some(f), Some(p)) = (out.as_mut(), copy_to) {
                f.write_all(&chunk)
                    .await
                    .map_err(|e| local_err(&p.display().to_string(), e))?;
            }
        }
        if let (Some(f), Some(p)) = (out.as_mut(), copy_to) {
            f.flush()
                .await
                .map_err(|e| local_err(&p.display().to_string(), e))?;
        }
        Ok((hasher.finish(), n))
    }

    /// Removes a content-addressed file (`weir upgrade` removes the blocks of the chain it replaced, which it
    /// keeps in the dataset's upgrade backup). A file already gone is not an error.
    pub async fn remove_file(&self, kind: FileKind, hash: &Multihash) -> Result<(), StoreError> {
        let path = self.file_path(kind, hash);
        match self.storage.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StoreError::Io {
                operation: "delete",
                path: self.display(&path),
                source,
            }),
        }
    }

    /// Encodes and writes a block; returns its hash.
    pub async fn put_block(&self, block: &MetadataBlock) -> Result<Multihash, StoreError> {
        self.put_file(FileKind::Block, Bytes::from(block.encode()))
            .await
    }

    /// Reads and decodes a block.
    pub async fn get_block(&self, hash: &Multihash) -> Result<MetadataBlock, StoreError> {
        let bytes = self.get_file(FileKind::Block, hash).await?;
        MetadataBlock::decode(&bytes).map_err(|source| StoreError::Decode {
            dataset: self.name.clone(),
            hash: *hash,
            source: Box::new(source),
        })
    }

    /// Moves the head from `expected` to `new`: the commit point of a transaction.
    ///
    /// On a local disk every file of the transaction was already written durably (fsynced, with its
    /// folder) by [`Storage::put`], and the head is replaced the same way: written to a temporary file,
    /// fsynced, renamed over `refs/head`, and the folder fsynced. So the head never names a block that a
    /// power loss could take away. On an object store, durability is the store's.
    pub async fn set_head(
        &self,
        expected: Option<Multihash>,
        new: Multihash,
    ) -> Result<(), StoreError> {
        let found = self.head_ref().await?;
        if found != expected {
            return Err(StoreError::HeadMoved {
                dataset: self.name.clone(),
                expected,
                found,
            });
        }
        self.storage
            .put(&self.head_path(), Bytes::from(new.to_string()))
            .await?;
        if expected.is_none() {
            let marker = self.new_marker_path();
            match self.storage.store.delete(&marker).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => {
                    return Err(StoreError::Io {
                        operation: "delete",
                        path: self.display(&marker),
                        source,
                    });
                }
            }
        }
        info!(dataset = %self.name, head = %new, "head moved");
        Ok(())
    }

    /// Writes the head reference without comparing it with the one there: for an upgrade backup
    /// ([`Storage::upgrade_backup`]), which records the head of the chain it keeps. A dataset's head moves
    /// only through [`DatasetStore::set_head`].
    pub async fn record_head(&self, head: Multihash) -> Result<(), StoreError> {
        self.storage
            .put(&self.head_path(), Bytes::from(head.to_string()))
            .await
    }

    /// The whole chain, oldest block first, validated.
    pub async fn chain(&self) -> Result<Chain, StoreError> {
        let head = self.head().await?;
        self.chain_at(head).await
    }

    /// The chain ending at `head`, oldest block first, validated.
    pub async fn chain_at(&self, head: Option<Multihash>) -> Result<Chain, StoreError> {
        let mut blocks = Vec::new();
        let mut next = head;
        while let Some(h) = next {
            let b = self.get_block(&h).await?;
            next = b.prev_block_hash;
            blocks.push((h, b));
        }
        blocks.reverse();
        let mut v = ChainValidator::default();
        for (h, b) in &blocks {
            if let Err(source) = v.push(*h, b) {
                if let Some(reason) = self.old_format(&blocks).await? {
                    return Err(StoreError::OldFormat {
                        dataset: self.name.clone(),
                        reason,
                    });
                }
                return Err(StoreError::InvalidChain {
                    dataset: self.name.clone(),
                    source,
                });
            }
        }
        Ok(Chain {
            blocks,
            summary: v.summary().clone(),
        })
    }

    /// What marks a chain as written by Weir before its chains were ODF's, if anything: a block whose bytes
    /// are not odf's encoding of it (the old engine record in a slot ODF does not have), a logical hash
    /// with multicodec 0x16 instead of 0x300016, transform inputs by name.
    async fn old_format(
        &self,
        blocks: &[(Multihash, MetadataBlock)],
    ) -> Result<Option<String>, StoreError> {
        for (h, b) in blocks {
            if let Some(d) = b.event.new_data()
                && d.logical_hash.codec() == weir_odf::Multicodec::Sha3_256
            {
                return Ok(Some(format!(
                    "block #{} has a logical hash with multicodec 0x16, not ODF's 0x300016",
                    b.sequence_number
                )));
            }
            if let weir_odf::MetadataEvent::SetTransform(t) = &b.event
                && t.inputs.iter().any(|i| i.dataset_id().is_none())
            {
                return Ok(Some(format!(
                    "block #{} names transform inputs by name, not by dataset id",
                    b.sequence_number
                )));
            }
            if let weir_odf::MetadataEvent::ExecuteTransform(e) = &b.event
                && e.query_inputs
                    .iter()
                    .any(super::legacy::repeats_its_position)
            {
                return Ok(Some(format!(
                    "block #{} writes a transform input with nothing new as its previous block and offset repeated, a form kamu refuses",
                    b.sequence_number
                )));
            }
            let bytes = self.get_file(FileKind::Block, h).await?;
            if b.encode() != bytes {
                return Ok(Some(format!(
                    "block #{} is not in ODF's canonical encoding",
                    b.sequence_number
                )));
            }
        }
        Ok(None)
    }
}

/// A loaded, validated chain.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    /// Blocks with their hashes, oldest first.
    pub blocks: Vec<(Multihash, MetadataBlock)>,
    /// What they add up to.
    pub summary: ChainSummary,
}

impl Chain {
    /// Data slices in offset order.
    pub fn data_slices(&self) -> impl Iterator<Item = &DataSlice> {
        self.blocks.iter().filter_map(|(_, b)| b.event.new_data())
    }

    /// The prefix of the chain up to and including block `hash`.
    pub fn up_to(&self, hash: &Multihash) -> Option<&[(Multihash, MetadataBlock)]> {
        let i = self.blocks.iter().position(|(h, _)| h == hash)?;
        Some(&self.blocks[..=i])
    }
}

impl Chain {
    /// A chain made of the given blocks (a prefix of a stored chain), validated again.
    pub fn from_blocks(
        dataset: &str,
        blocks: &[(Multihash, MetadataBlock)],
    ) -> Result<Chain, StoreError> {
        let mut v = ChainValidator::default();
        for (h, b) in blocks {
            v.push(*h, b).map_err(|source| StoreError::InvalidChain {
                dataset: dataset.to_string(),
                source,
            })?;
        }
        Ok(Chain {
            blocks: blocks.to_vec(),
            summary: v.summary().clone(),
        })
    }
}

/// Hashes a local file as a stream: its SHA3-256 multihash and its size.
fn hash_local(file: &std::path::Path) -> std::io::Result<(Multihash, u64)> {
    let mut f = std::fs::File::open(file)?;
    let mut hasher = weir_odf::Sha3Hasher::new();
    let n = std::io::copy(&mut f, &mut hasher)?;
    Ok((hasher.finish(), n))
}

fn local_err(path: &str, source: std::io::Error) -> StoreError {
    if source.kind() == std::io::ErrorKind::NotFound {
        StoreError::Missing {
            path: path.to_string(),
        }
    } else {
        StoreError::LocalIo {
            operation: "read",
            path: path.to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A local store in a temporary folder (`store/` below it; the folder itself is free for sources).
    fn local_storage() -> (tempfile::TempDir, Storage) {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let storage = Storage::open(dir.path().join("store").to_str().expect("utf-8"))
            .expect("a local store");
        (dir, storage)
    }

    #[tokio::test]
    async fn a_file_this_process_stored_and_then_changed_in_place_is_refused_when_staged() {
        let (dir, storage) = local_storage();
        let store = storage.dataset("readings");
        let scratch = tempfile::tempdir().expect("a scratch folder");
        for (n, stored_by) in ["moved", "copied"].into_iter().enumerate() {
            let src = dir.path().join(format!("slice-{n}.parquet"));
            let bytes = format!("the slice's bytes, {stored_by}").into_bytes();
            std::fs::write(&src, &bytes).expect("written");
            let hash = Multihash::sha3_256(&bytes);
            let size = bytes.len() as u64;
            let (stored, _) = if stored_by == "moved" {
                store
                    .put_file_written(FileKind::Data, &src, hash, size)
                    .await
            } else {
                store.put_file_from(FileKind::Data, &src).await
            }
            .expect("stored");
            assert_eq!(stored, hash);
            let staged = store
                .stage_file(FileKind::Data, &hash, Some(size), scratch.path())
                .await
                .expect("unchanged: handed out");
            assert_eq!(std::fs::read(&staged).expect("readable"), bytes);

            // Changed in place (same length, same inode) after it was stored: hashed again, and refused.
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut changed = bytes.clone();
            changed[0] ^= 1;
            std::fs::write(&staged, &changed).expect("overwritten");
            let err = store
                .stage_file(FileKind::Data, &hash, Some(size), scratch.path())
                .await
                .expect_err("a changed file is never handed out");
            assert!(
                matches!(&err, StoreError::HashMismatch { actual, .. } if *actual == Multihash::sha3_256(&changed)),
                "{stored_by}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn a_file_written_and_hashed_here_is_moved_into_place_and_reads_back_checked() {
        let (dir, storage) = local_storage();
        let store = storage.dataset("readings");
        let src = dir.path().join("slice.parquet");
        let bytes = b"the slice's bytes".to_vec();
        std::fs::write(&src, &bytes).expect("written");
        let hash = Multihash::sha3_256(&bytes);

        let (stored, size) = store
            .put_file_written(FileKind::Data, &src, hash, bytes.len() as u64)
            .await
            .expect("stored");
        assert_eq!((stored, size), (hash, bytes.len() as u64));
        assert!(!src.exists(), "moved, not copied");
        assert_eq!(
            store
                .get_file(FileKind::Data, &hash)
                .await
                .expect("checked"),
            Bytes::from(bytes)
        );
    }

    #[tokio::test]
    async fn on_an_object_store_a_file_written_here_is_uploaded_under_its_hash() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let storage = Storage::open("memory:///weir").expect("an in-memory object store");
        let store = storage.dataset("readings");
        let src = dir.path().join("slice.parquet");
        let bytes = vec![7u8; 3 * 1024 * 1024];
        std::fs::write(&src, &bytes).expect("written");
        let hash = Multihash::sha3_256(&bytes);

        store
            .put_file_written(FileKind::Data, &src, hash, bytes.len() as u64)
            .await
            .expect("uploaded");
        assert!(!src.exists());
        assert_eq!(
            store
                .get_file(FileKind::Data, &hash)
                .await
                .expect("checked"),
            Bytes::from(bytes)
        );
    }
}
