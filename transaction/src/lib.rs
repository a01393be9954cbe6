#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! One transaction of one dataset: ingest the next source file of a root, or run the next transform step of
//! a derivative, then commit: data, checkpoint and blocks first, the head last. A derivative whose transform
//! changed is validated and migrated first (`query_change`).

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod derivative;
mod pinned;
mod query_change;
mod root;
mod slices;
mod writer_chains;

pub use derivative::{EngineRun, PlannedInput, TransformPlan};
pub use pinned::InputMoved;
pub use query_change::is_migration;
pub use root::{PushOutcome, Pushed};
pub use slices::{LoadError, ledger_index, snapshot_index, stored_records};
pub use weir_dataset::chain::append::link_blocks;
pub(crate) use weir_dataset::chain::append::{record_engine, schema_event, set_version};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use chrono::{DateTime, Utc};
use tracing::{Instrument, info, info_span};

use weir_dataset::chain::store::{Chain, DatasetStore, FileKind, Storage, StoreError};
use weir_dataset::data::{self, DataError};
use weir_dataset::fault;
use weir_dataset::identity;
use weir_dataset::progress::{Phase, Progress, Report};
use weir_engines::contract::ContractViolation;
use weir_engines::exchange::{DataExchange, InputObjects, JobObjects};
use weir_engines::job::{RawQueryJob, TransformJob, TransformJobInput};
use weir_engines::output;
use weir_engines::{EngineFailure, EngineHandle, EngineResolver};
use weir_ingest::check::Checks;
use weir_ingest::error::{BadData, IngestError, Unit};
use weir_ingest::files_glob::SourceNotice;
use weir_ingest::write::SliceWriter;
use weir_ingest::{fetch, merge, read};
use weir_manifest::snapshot::DatasetManifest;
use weir_manifest::workspace::Workspace;
use weir_odf::Multihash;
use weir_odf::{
    AddData, Checkpoint, DataSlice, DatasetId, DatasetKind, DatasetVocabulary, DisablePushSource,
    ExecuteTransform, ExecuteTransformInput, MergeStrategy, MetadataEvent, OffsetInterval, Seed,
    SetTransform, Transform, TransformInput, TransformSql,
};

/// What a transaction failed with. The dataset keeps its previous head in every case.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// Storage failed or a chain is invalid.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Records could not be read or written.
    #[error("dataset `{dataset}`: {source}")]
    Data {
        /// The dataset.
        dataset: String,
        /// Why.
        #[source]
        source: DataError,
    },
    /// Ingest refused the source file's data.
    #[error("dataset `{dataset}`: {source}")]
    BadData {
        /// The dataset.
        dataset: String,
        /// What was refused, where (boxed: it is the largest of these errors).
        #[source]
        source: Box<BadData>,
    },
    /// The source could not be fetched.
    #[error("dataset `{dataset}`: {source}")]
    Fetch {
        /// The dataset.
        dataset: String,
        /// Why.
        #[source]
        source: fetch::FetchError,
    },
    /// A `prepare` step of the source failed.
    #[error("dataset `{dataset}`: {source}")]
    Prepare {
        /// The dataset.
        dataset: String,
        /// Why.
        #[source]
        source: weir_ingest::prepare::PrepareError,
    },
    /// An engine failed, rejected the query or broke the contract.
    #[error("dataset `{dataset}`: {source}")]
    Engine {
        /// The dataset.
        dataset: String,
        /// Why.
        #[source]
        source: EngineFailure,
    },
    /// The chain or manifest asks for something Weir does not do.
    #[error("dataset `{dataset}`: not supported: {message}")]
    Unsupported {
        /// The dataset.
        dataset: String,
        /// What.
        message: String,
    },
    /// Local scratch space failed.
    #[error("dataset `{dataset}`: scratch directory: {message}")]
    Scratch {
        /// The dataset.
        dataset: String,
        /// Why.
        message: String,
    },
    /// ValidateQuery refused the manifest's transform: nothing was recorded.
    #[error("dataset `{dataset}`: engine `{engine}` rejected the query: {source}")]
    InvalidTransform {
        /// The dataset.
        dataset: String,
        /// The engine.
        engine: String,
        /// The engine's message, positioned at the query in the manifest.
        #[source]
        source: Box<weir_manifest::snapshot::ManifestError>,
    },
    /// The manifest's transform changed in a way the recorded state cannot follow (its output schema
    /// changed, or the engine cannot migrate the state): nothing was recorded.
    #[error(
        "dataset `{dataset}`: the changed transform cannot continue the recorded one: {reason}"
    )]
    QueryChange {
        /// The dataset.
        dataset: String,
        /// Why.
        reason: String,
    },
    /// A derivative's input name leads to another dataset than the one it was computed from, or to none.
    #[error("{0}")]
    InputMoved(Box<InputMoved>),
    /// A dataset cannot be reset, renamed or deleted as asked.
    #[error("dataset `{dataset}`: {reason}")]
    Refused {
        /// The dataset.
        dataset: String,
        /// Why.
        reason: String,
    },
    /// The dataset is not in the workspace.
    #[error("unknown dataset `{name}`")]
    UnknownDataset {
        /// The name.
        name: String,
    },
}

/// The result of one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxOutcome {
    /// New blocks were committed.
    Committed {
        /// The dataset.
        dataset: String,
        /// The new head.
        head: Multihash,
        /// Records added.
        records: u64,
        /// Blocks added.
        blocks: u64,
        /// Whether the source / inputs may have more to do.
        more: bool,
        /// Wall time spent inside engine operations (a root's preprocess Raw query, a derivative's
        /// ExecuteTransform); the rest of the transaction is the coordinator's own work.
        engine_time: Duration,
        /// Source files this transaction saw and did not ingest (a root's), and why.
        notices: Vec<SourceNotice>,
    },
    /// Nothing to do.
    UpToDate {
        /// The dataset.
        dataset: String,
        /// Source files this transaction saw and did not ingest (a root's), and why.
        notices: Vec<SourceNotice>,
    },
}

/// Everything a transaction needs.
#[derive(Debug, Clone)]
pub struct Context {
    /// The workspace.
    pub workspace: Arc<Workspace>,
    /// Its storage.
    pub storage: Storage,
    /// Engines.
    pub engines: EngineResolver,
    /// Where transactions report how far they are (nobody by default).
    pub progress: Progress,
    /// The settle time of source files, overriding the workspace's (`weir pull --settle-secs`).
    pub source_settle: Option<Duration>,
}

impl Context {
    /// The same context, its transactions reporting to `progress`.
    pub fn with_progress(&self, progress: Progress) -> Self {
        Self {
            progress,
            ..self.clone()
        }
    }

    /// The settle time of source files: `weir pull --settle-secs`, or the workspace's.
    pub fn source_settle(&self) -> Duration {
        self.source_settle
            .unwrap_or_else(|| self.workspace.config.source_settle())
    }

    /// Runs the next transaction of `dataset`.
    pub async fn run_once(&self, dataset: &str) -> Result<TxOutcome, TxError> {
        let m = self
            .workspace
            .datasets
            .get(dataset)
            .ok_or_else(|| TxError::UnknownDataset {
                name: dataset.to_string(),
            })?
            .clone();
        let span = info_span!("transaction", dataset = %dataset, kind = ?m.kind);
        async {
            match m.kind {
                DatasetKind::Root => self.ingest_once(&m).await,
                DatasetKind::Derivative => self.transform_once(&m).await,
            }
        }
        .instrument(span)
        .await
    }

    /// A scratch folder for one operation on `dataset`, removed when dropped (under `TMPDIR`).
    ///
    /// # Errors
    ///
    /// [`TxError::Scratch`] when the folder cannot be made.
    pub fn scratch(&self, dataset: &str) -> Result<tempfile::TempDir, TxError> {
        tempfile::Builder::new()
            .prefix(&format!("weir-{dataset}-"))
            .tempdir()
            .map_err(|e| TxError::Scratch {
                dataset: dataset.to_string(),
                message: e.to_string(),
            })
    }
}

/// A stored file at a local path the engine can read, checked against its hash (and its size, when the
/// chain records one) first: the stored file itself on a local disk, a checked copy in `dir` otherwise.
/// A file that does not match is a storage error, and the engine never sees it.
pub async fn stage(
    store: &DatasetStore,
    kind: FileKind,
    hash: &Multihash,
    size: Option<u64>,
    dir: &Path,
) -> Result<PathBuf, TxError> {
    Ok(store.stage_file(kind, hash, size, dir).await?)
}

/// An empty Parquet file with the schema of an input's records (the footer of its `slice`), at
/// `dir/schema-<slice hash>`: the `schema_file` the engine contract gives an engine, which holds no records
/// (a stored slice in its place would show an input with nothing new the records of that slice).
///
/// `staged` is the slice's file when this transaction has just staged it (checked against its hash by
/// [`stage`]), so that it is not read and hashed a second time; otherwise the slice is staged here.
pub async fn schema_file(
    store: &DatasetStore,
    dataset: &str,
    slice: &DataSlice,
    staged: Option<&Path>,
    dir: &Path,
) -> Result<PathBuf, TxError> {
    let path = dir.join(format!("schema-{}", slice.physical_hash));
    if path.exists() {
        return Ok(path);
    }
    // The slice is checked against its hash first (the stored file itself on a local disk, a checked copy
    // in `dir` otherwise): a swapped or corrupt slice is a storage error, never a schema.
    let checked = match staged {
        Some(staged) => staged.to_path_buf(),
        None => {
            stage(
                store,
                FileKind::Data,
                &slice.physical_hash,
                Some(slice.size),
                dir,
            )
            .await?
        }
    };
    let scratch = |e: String| TxError::Scratch {
        dataset: dataset.to_string(),
        message: format!("writing the schema file {}: {e}", path.display()),
    };
    let footer = std::fs::File::open(&checked).map_err(|e| scratch(e.to_string()))?;
    let schema = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(footer)
        .map_err(|e| TxError::Data {
            dataset: dataset.to_string(),
            source: DataError::Column {
                message: format!("reading the schema of {}: {e}", checked.display()),
            },
        })?
        .schema()
        .clone();
    let file = std::fs::File::create(&path).map_err(|e| scratch(e.to_string()))?;
    let writer =
        parquet::arrow::ArrowWriter::try_new(file, schema, Some(data::writer_properties()))
            .map_err(|e| scratch(e.to_string()))?;
    writer.close().map_err(|e| scratch(e.to_string()))?;
    Ok(path)
}

/// An empty Parquet file of `schema`, in memory (a schema file written to an object store).
fn empty_parquet(schema: &arrow::datatypes::SchemaRef) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let writer = parquet::arrow::ArrowWriter::try_new(
        &mut bytes,
        schema.clone(),
        Some(data::writer_properties()),
    )
    .map_err(|e| e.to_string())?;
    writer.close().map_err(|e| e.to_string())?;
    Ok(bytes)
}

fn last_execute_transform(chain: &Chain) -> Option<&ExecuteTransform> {
    chain.blocks.iter().rev().find_map(|(_, b)| match &b.event {
        MetadataEvent::ExecuteTransform(e) => Some(e),
        _ => None,
    })
}

fn chain_dataset_id(chain: &Chain, pending: &[MetadataEvent]) -> DatasetId {
    chain.summary.dataset_id.unwrap_or_else(|| {
        pending
            .iter()
            .find_map(|e| match e {
                MetadataEvent::Seed(s) => Some(s.dataset_id),
                _ => None,
            })
            .unwrap_or(DatasetId::from_key([0; 32]))
    })
}

/// The metadata events a manifest needs that the chain does not have yet.
pub fn metadata_events(
    chain: &Chain,
    m: &DatasetManifest,
    now: DateTime<Utc>,
) -> Vec<MetadataEvent> {
    let mut events = Vec::new();
    if chain.blocks.is_empty() {
        events.push(MetadataEvent::Seed(Seed {
            dataset_id: weir_dataset::chain::new_dataset_id(&m.name, now),
            dataset_kind: m.kind,
        }));
    }
    if let Some(src) = &m.polling_source {
        let mut src = src.clone();
        if let Some(p) = &src.preprocess {
            src.preprocess = Some(Transform::Sql(p.sql().clone().normalize()));
        }
        if chain.summary.polling_source.as_ref() != Some(&src) {
            events.push(MetadataEvent::SetPollingSource(src));
        }
    }
    for push in &m.push_sources {
        let mut push = push.clone();
        if let Some(p) = &push.preprocess {
            push.preprocess = Some(Transform::Sql(p.sql().clone().normalize()));
        }
        // The source of that name in force: the last AddPushSource of it, unless disabled since.
        let recorded = chain.blocks.iter().rev().find_map(|(_, b)| match &b.event {
            MetadataEvent::AddPushSource(a) if a.source_name == push.source_name => Some(Some(a)),
            MetadataEvent::DisablePushSource(d) if d.source_name == push.source_name => Some(None),
            _ => None,
        });
        match recorded {
            Some(Some(a)) if *a == push => {}
            // A push source is named once in force: a changed one is disabled, then added again.
            Some(Some(_)) => {
                events.push(MetadataEvent::DisablePushSource(DisablePushSource {
                    source_name: push.source_name.clone(),
                }));
                events.push(MetadataEvent::AddPushSource(push));
            }
            _ => events.push(MetadataEvent::AddPushSource(push)),
        }
    }
    if let Some(v) = &m.vocab
        && chain.summary.vocab.as_ref() != Some(v)
    {
        events.push(MetadataEvent::SetVocab(v.clone()));
    }
    for e in &m.info {
        let recorded = chain
            .blocks
            .iter()
            .rev()
            .find(|(_, b)| b.event.name() == e.name())
            .map(|(_, b)| &b.event);
        if recorded != Some(e) {
            events.push(e.clone());
        }
    }
    events
}

impl Context {
    /// The dataset id of each input of a derivative's transform, by its name in the workspace (`None` for
    /// an input not written yet).
    pub async fn input_ids(&self, m: &DatasetManifest) -> Result<Vec<Option<DatasetId>>, TxError> {
        let mut ids = Vec::new();
        for input in m.transform.iter().flat_map(|t| &t.inputs) {
            let chain = self.storage.dataset(&input.dataset_ref).chain().await?;
            ids.push(chain.summary.dataset_id);
        }
        Ok(ids)
    }

    /// The manifest's transform as the chain records it: inputs by dataset id, each with an alias (the
    /// manifest's, or the input's name), queries normalised, no engine recorded yet. `None` if an input has
    /// no Seed yet.
    pub async fn resolved_transform(
        &self,
        m: &DatasetManifest,
    ) -> Result<Option<SetTransform>, TxError> {
        let Some(t) = &m.transform else {
            return Ok(None);
        };
        let ids = self.input_ids(m).await?;
        let mut inputs = Vec::new();
        for (input, id) in t.inputs.iter().zip(ids) {
            let Some(id) = id else {
                return Ok(None);
            };
            inputs.push(TransformInput {
                dataset_ref: id.to_string(),
                alias: Some(input.query_alias().to_owned()),
            });
        }
        Ok(Some(SetTransform {
            inputs,
            transform: Transform::Sql(identity::without_engine(
                &t.transform.sql().clone().normalize(),
            )),
        }))
    }

    /// Whether `m` has a transform recorded and the manifest's is another one.
    pub async fn transform_changed(&self, m: &DatasetManifest) -> Result<bool, TxError> {
        let chain = self.storage.dataset(&m.name).chain().await?;
        Ok(chain.summary.transform.is_some() && self.transform_event(m, &chain).await?.is_some())
    }

    /// The `SetTransform` to append when the manifest's transform is not the one in force (ignoring the
    /// engine the chain records); it keeps the engine recorded so far, which a step may then replace.
    async fn transform_event(
        &self,
        m: &DatasetManifest,
        chain: &Chain,
    ) -> Result<Option<SetTransform>, TxError> {
        let Some(mut wanted) = self.resolved_transform(m).await? else {
            return Ok(None);
        };
        let in_force = chain.summary.transform.as_ref();
        let same = in_force.is_some_and(|t| {
            t.inputs == wanted.inputs
                && identity::without_engine(t.transform.sql()) == *wanted.transform.sql()
        });
        if same {
            return Ok(None);
        }
        if let Some(t) = in_force {
            set_version(&mut wanted, t.transform.sql().version.clone());
        }
        Ok(Some(wanted))
    }
}

/// Writes the blocks of a transaction, then moves the head: the commit point.
async fn commit(
    store: &DatasetStore,
    chain: &Chain,
    events: Vec<MetadataEvent>,
    now: DateTime<Utc>,
    records: u64,
    more: bool,
    engine_time: Duration,
) -> Result<TxOutcome, TxError> {
    let blocks = events.len() as u64;
    let head = store.append(chain, events, now).await?;
    let engine_ms = engine_time.as_millis() as u64;
    info!(dataset = %store.name(), head = %head, records, blocks, engine_ms, "transaction committed");
    Ok(TxOutcome::Committed {
        dataset: store.name().to_string(),
        head,
        records,
        blocks,
        more,
        engine_time,
        notices: Vec::new(),
    })
}

/// The Arrow schema of a stored slice of `dataset`, from its footer. A footer that cannot be read is
/// diagnosed against the slice's recorded hash and size, so a missing, truncated or altered file is the
/// storage error it is (exit 8, naming the file and the hashes), not a failure of the transaction.
pub async fn stored_slice_schema(
    store: &DatasetStore,
    slice: &weir_odf::DataSlice,
    dataset: &str,
) -> Result<arrow::datatypes::SchemaRef, TxError> {
    match weir_ingest::schema::slice_schema(store, slice).await {
        Ok(schema) => Ok(schema),
        Err(e) => {
            store
                .check_file(FileKind::Data, &slice.physical_hash, Some(slice.size))
                .await?;
            Err(ingest_err(dataset, e))
        }
    }
}

/// A root dataset's schema (see [`weir_ingest::schema::dataset_schema`]), its first slice diagnosed as in
/// [`stored_slice_schema`] when it cannot be read: a missing or damaged file is exit 8.
pub(crate) async fn stored_dataset_schema(
    store: &DatasetStore,
    chain: &Chain,
    vocab: &weir_odf::DatasetVocabulary,
    dataset: &str,
) -> Result<Option<arrow::datatypes::SchemaRef>, TxError> {
    match weir_ingest::schema::dataset_schema(store, chain, vocab).await {
        Ok(schema) => Ok(schema),
        Err(e) => {
            if let Some(first) = chain.data_slices().next() {
                store
                    .check_file(FileKind::Data, &first.physical_hash, Some(first.size))
                    .await?;
            }
            Err(ingest_err(dataset, e))
        }
    }
}

fn ingest_err(dataset: &str, e: IngestError) -> TxError {
    match e {
        IngestError::BadData(source) => TxError::BadData {
            dataset: dataset.to_string(),
            source: Box::new(source),
        },
        IngestError::Data(source) => TxError::Data {
            dataset: dataset.to_string(),
            source,
        },
        IngestError::Store(s) => TxError::Store(s),
    }
}
