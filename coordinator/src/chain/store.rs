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
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tracing::{debug, info};

use super::validate::{ChainSummary, ChainValidator, ChainViolation};
use odf::Multihash;
use odf::{DataSlice, MetadataBlock};

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
    /// A content-addressed file does not hash to its name.
    #[error("{path} is corrupt: its content hashes to {actual}")]
    HashMismatch {
        /// The object path.
        path: String,
        /// The hash of what was read.
        actual: Multihash,
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
        source: Box<odf::Error>,
    },
    /// The head reference is not a multihash.
    #[error("head of dataset `{dataset}` is not a multihash: {text:?}")]
    BadHead {
        /// Dataset name.
        dataset: String,
        /// What the file holds.
        text: String,
    },
    /// The chain was written by Weir before it wrote ODF chains.
    #[error(
        "dataset `{dataset}` was written by an older Weir, before its chains were ODF's ({reason}); it needs `weir upgrade`, which this build does not have yet: keep using the Weir that wrote it"
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

    /// Writes a workspace-level object atomically.
    pub async fn put(&self, path: &Path, bytes: Bytes) -> Result<(), StoreError> {
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
        let root = self.storage.local_root.as_ref()?;
        Some(
            root.join("datasets")
                .join(&self.name)
                .join(kind.dir())
                .join(hash.to_string()),
        )
    }

    /// The object path of a file (for staging from object stores).
    pub fn object_path(&self, kind: FileKind, hash: &Multihash) -> Path {
        self.file_path(kind, hash)
    }

    /// The current head, `None` for a dataset never written.
    pub async fn head(&self) -> Result<Option<Multihash>, StoreError> {
        let Some(bytes) = self.storage.get_opt(&self.head_path()).await? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        text.parse::<Multihash>()
            .map(Some)
            .map_err(|_| StoreError::BadHead {
                dataset: self.name.clone(),
                text,
            })
    }

    /// Writes content-addressed bytes and returns their hash.
    pub async fn put_file(&self, kind: FileKind, bytes: Bytes) -> Result<Multihash, StoreError> {
        let hash = Multihash::sha3_256(&bytes);
        let path = self.file_path(kind, &hash);
        debug!(dataset = %self.name, %path, size = bytes.len(), "writing");
        self.storage.put(&path, bytes).await?;
        Ok(hash)
    }

    /// Reads a content-addressed file and checks its hash.
    pub async fn get_file(&self, kind: FileKind, hash: &Multihash) -> Result<Bytes, StoreError> {
        let path = self.file_path(kind, hash);
        let bytes = self
            .storage
            .get_opt(&path)
            .await?
            .ok_or_else(|| StoreError::Io {
                operation: "read",
                path: path.to_string(),
                source: object_store::Error::NotFound {
                    path: path.to_string(),
                    source: "missing".into(),
                },
            })?;
        let actual = Multihash::sha3_256(&bytes);
        if actual != *hash {
            return Err(StoreError::HashMismatch {
                path: path.to_string(),
                actual,
            });
        }
        Ok(bytes)
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
    pub async fn set_head(
        &self,
        expected: Option<Multihash>,
        new: Multihash,
    ) -> Result<(), StoreError> {
        let found = self.head().await?;
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
        info!(dataset = %self.name, head = %new, "head moved");
        Ok(())
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
                && d.logical_hash.codec() == odf::Multicodec::Sha3_256
            {
                return Ok(Some(format!(
                    "block #{} has a logical hash with multicodec 0x16, not ODF's 0x300016",
                    b.sequence_number
                )));
            }
            if let odf::MetadataEvent::SetTransform(t) = &b.event
                && t.inputs.iter().any(|i| i.dataset_id().is_none())
            {
                return Ok(Some(format!(
                    "block #{} names transform inputs by name, not by dataset id",
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
