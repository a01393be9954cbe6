//! One transaction of one dataset: ingest the next source file of a root, or run the next transform step of
//! a derivative, then commit: data, checkpoint and blocks first, the head last.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use chrono::{DateTime, Utc};
use tracing::{Instrument, info, info_span};

use crate::chain::store::{Chain, DatasetStore, FileKind, Storage, StoreError};
use crate::chain::validate::ChainSummary;
use crate::data::{self, DataError};
use crate::engine::contract::ContractViolation;
use crate::engine::identity::{self, EngineIdentity};
use crate::engine::job::{RawQueryJob, TransformJob, TransformJobInput};
use crate::engine::output;
use crate::engine::{EngineFailure, EngineHandle, EngineResolver};
use crate::fault;
use crate::ingest::check::Checks;
use crate::ingest::error::{BadData, IngestError, Unit};
use crate::ingest::write::SliceWriter;
use crate::ingest::{self, fetch, merge, read};
use crate::manifest::snapshot::DatasetManifest;
use crate::manifest::workspace::Workspace;
use crate::progress::{Phase, Progress, Report};
use odf::Multihash;
use odf::{
    AddData, Checkpoint, DataSchema, DataSlice, DatasetId, DatasetKind, DatasetVocabulary,
    ExecuteTransform, ExecuteTransformInput, MergeStrategy, MetadataBlock, MetadataEvent,
    OffsetInterval, Seed, SetDataSchema, SetTransform, Transform, TransformInput, TransformSql,
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
    },
    /// Nothing to do.
    UpToDate {
        /// The dataset.
        dataset: String,
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
}

impl Context {
    /// The same context, its transactions reporting to `progress`.
    pub fn with_progress(&self, progress: Progress) -> Self {
        Self {
            progress,
            ..self.clone()
        }
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

    pub(crate) fn scratch(&self, dataset: &str) -> Result<tempfile::TempDir, TxError> {
        tempfile::Builder::new()
            .prefix(&format!("weir-{dataset}-"))
            .tempdir()
            .map_err(|e| TxError::Scratch {
                dataset: dataset.to_string(),
                message: e.to_string(),
            })
    }

    async fn ingest_once(&self, m: &DatasetManifest) -> Result<TxOutcome, TxError> {
        let name = m.name.clone();
        let data_err = |source| TxError::Data {
            dataset: name.clone(),
            source,
        };
        let store = self.storage.dataset(&m.name);
        let chain = store.chain().await?;
        let now = Utc::now();
        let mut events = metadata_events(&chain, m, now);
        let Some(src) = &m.polling_source else {
            return Ok(TxOutcome::UpToDate { dataset: name });
        };
        if chain.summary.push_source {
            return Err(TxError::Unsupported {
                dataset: name,
                message:
                    "the chain declares a push source (AddPushSource), which Weir does not pull"
                        .into(),
            });
        }
        let vocab = DatasetVocabulary::from(&m.vocab.clone().unwrap_or_default());
        let state = chain.blocks.iter().rev().find_map(|(_, b)| match &b.event {
            MetadataEvent::AddData(a) => a.new_source_state.clone(),
            _ => None,
        });
        let scratch = self.scratch(&name)?;
        let progress = &self.progress;
        let next = fetch::next_pending(
            &self.workspace.root,
            &src.fetch,
            state.as_ref(),
            scratch.path(),
            progress,
        )
        .await
        .map_err(|source| TxError::Fetch {
            dataset: name.clone(),
            source,
        })?;
        let mut records = 0;
        let mut engine_time = Duration::ZERO;
        if let Some(file) = next {
            info!(dataset = %name, file = %file.name, bytes = file.size, "ingesting");
            // Every check of the file's data runs before anything is written.
            let schema = ingest::schema::dataset_schema(&store, &chain, &vocab)
                .await
                .map_err(|e| ingest_err(&name, e))?;
            let dataset_schema = schema.clone();
            let mut checks = Checks::new(&file.name, &vocab, &src.merge, schema, now);
            let first = chain.summary.last_offset.map_or(0, |o| o + 1);
            let mut slice =
                SliceWriter::new(&scratch.path().join("slice.parquet"), first, now, &vocab);
            let source = read::Source::File(file.path.clone());
            // The records that reach the checks: the file's, or the preprocess query's output.
            let (batches, total_bytes) = match &src.preprocess {
                None => (
                    read::read_batches(&src.read, &source, &file.name, Some(checks.event_time()))
                        .map_err(|e| ingest_err(&name, e))?,
                    Some(file.size),
                ),
                Some(pre) => {
                    let (out, time) = self
                        .preprocess(
                            &name,
                            pre.sql(),
                            &src.read,
                            &source,
                            &file.name,
                            scratch.path(),
                        )
                        .await?;
                    engine_time = time;
                    (out, None)
                }
            };
            progress.phase(Phase::Ingest);
            match &src.merge {
                // Appended as read: each checked batch goes to the slice file, nothing is held.
                MergeStrategy::Append => {
                    ingest::check_each(batches, &mut checks, progress, total_bytes, |b| {
                        let ops = vec![merge::OP_APPEND; b.num_rows()];
                        Ok(slice.write(&b, &ops)?)
                    })
                    .map_err(|e| ingest_err(&name, e))?;
                }
                // Only the history's keys are held (see `LedgerIndex`).
                MergeStrategy::Ledger(ledger) => {
                    let mut index =
                        ledger_index(&store, &chain, &ledger.primary_key, scratch.path())
                            .await
                            .map_err(|e| self.tx_err(&name, e))?;
                    ingest::check_each(batches, &mut checks, progress, total_bytes, |b| {
                        let kept = index.keep(&b)?;
                        let ops = vec![merge::OP_APPEND; kept.num_rows()];
                        Ok(slice.write(&kept, &ops)?)
                    })
                    .map_err(|e| ingest_err(&name, e))?;
                }
                // A snapshot is diffed against the state the changelog adds up to, kept as an index (see
                // `SnapshotIndex`); the records it corrects or retracts are read back from their slices.
                MergeStrategy::Snapshot(snap) => {
                    let pk = &snap.primary_key;
                    let given = snap.compare_columns.as_deref();
                    let index_for = |schema: &arrow::datatypes::Schema| {
                        merge::SnapshotIndex::new(
                            pk,
                            &merge::SnapshotIndex::compare_columns(schema, pk, given, &vocab),
                        )
                    };
                    let mut index = match (&dataset_schema, chain.data_slices().next()) {
                        (Some(schema), Some(_)) => Some(
                            snapshot_index(
                                &store,
                                &chain,
                                index_for(schema),
                                &vocab,
                                scratch.path(),
                            )
                            .await
                            .map_err(|e| self.tx_err(&name, e))?,
                        ),
                        _ => None,
                    };
                    let mut kept = Vec::new();
                    let mut picks = Vec::new();
                    ingest::check_each(batches, &mut checks, progress, total_bytes, |b| {
                        let index = index.get_or_insert_with(|| index_for(&b.schema()));
                        let (k, p) = index.diff(&b)?;
                        kept.extend(k);
                        picks.extend(p);
                        Ok(())
                    })
                    .map_err(|e| ingest_err(&name, e))?;
                    if let Some(index) = index {
                        picks.extend(index.finish());
                    }
                    let at: Vec<merge::RecordAt> = picks
                        .iter()
                        .filter_map(|(p, _)| match p {
                            merge::Pick::Stored(a) => Some(*a),
                            merge::Pick::New { .. } => None,
                        })
                        .collect();
                    let (stored, places) =
                        stored_records(&store, &chain, &at, &vocab, scratch.path())
                            .await
                            .map_err(|e| self.tx_err(&name, e))?;
                    if let Some(schema) = checks.schema() {
                        let merged = merge::gather(&schema, &kept, &stored, &places, &picks)
                            .map_err(data_err)?;
                        slice.write(&merged.data, &merged.ops).map_err(data_err)?;
                    }
                }
                other => {
                    return Err(TxError::Unsupported {
                        dataset: name,
                        message: format!(
                            "merge strategy `{}`",
                            crate::manifest::support::merge_kind(other)
                        ),
                    });
                }
            }
            fault::point("after-read", &name);
            let mut watermark = chain.summary.watermark;
            let new_data = match slice.finish().map_err(data_err)? {
                None => None,
                Some(written) => {
                    if let Some(w) = written.max_event_time {
                        watermark = Some(watermark.map_or(w, |p| p.max(w)));
                    }
                    records = written.rows;
                    if let Some(schema) =
                        schema_event(chain.summary.schema.as_ref(), &written.schema)
                            .map_err(data_err)?
                    {
                        events.push(schema);
                    }
                    let (physical_hash, size) =
                        store.put_file_from(FileKind::Data, &written.file).await?;
                    Some(DataSlice {
                        logical_hash: written.logical_hash,
                        physical_hash,
                        offset_interval: OffsetInterval {
                            start: first,
                            end: first + written.rows - 1,
                        },
                        size,
                    })
                }
            };
            fault::point("after-data", &name);
            // Root datasets write no checkpoint; the step exists so every transaction passes the same steps.
            fault::point("after-checkpoint", &name);
            events.push(MetadataEvent::AddData(AddData {
                prev_checkpoint: None,
                prev_offset: chain.summary.last_offset,
                new_data,
                new_checkpoint: None,
                new_watermark: watermark,
                new_source_state: Some(file.state),
                extra: None,
            }));
        }
        if events.is_empty() {
            return Ok(TxOutcome::UpToDate { dataset: name });
        }
        let more = events
            .iter()
            .any(|e| matches!(e, MetadataEvent::AddData(_)));
        progress.phase(Phase::Commit);
        commit(&store, &chain, events, now, records, more, engine_time).await
    }

    fn tx_err(&self, dataset: &str, e: LoadError) -> TxError {
        match e {
            LoadError::Store(s) => TxError::Store(s),
            LoadError::Data(source) => TxError::Data {
                dataset: dataset.to_string(),
                source,
            },
        }
    }

    /// Runs the preprocess query on the engine over the source file's records (streamed into the engine's
    /// input file as they are read); returns the engine's output, to be read a batch at a time with its
    /// records numbered as output rows, and the wall time of the engine call.
    async fn preprocess(
        &self,
        dataset: &str,
        sql: &TransformSql,
        read_step: &odf::ReadStep,
        source: &read::Source,
        file: &str,
        dir: &Path,
    ) -> Result<(read::Batches, Duration), TxError> {
        let engine = self
            .engines
            .resolve(&sql.engine)
            .map_err(|source| TxError::Engine {
                dataset: dataset.into(),
                source,
            })?;
        let input = dir.join("input.parquet");
        let output = dir.join("output.parquet");
        self.progress.phase(Phase::Ingest);
        let raw = read::read_batches(read_step, source, file, None)
            .map_err(|e| ingest_err(dataset, e))?;
        let total = source.size();
        let progress = self.progress.clone();
        let path = input.clone();
        let read_rows =
            tokio::task::spawn_blocking(move || write_raw(raw, &path, &progress, total))
                .await
                .map_err(|_| TxError::Data {
                    dataset: dataset.into(),
                    source: DataError::Panicked {
                        context: "reading the source for the preprocess query".into(),
                    },
                })?
                .map_err(|e| ingest_err(dataset, e))?;
        let job = RawQueryJob {
            input_data_paths: vec![input],
            transform: sql.clone(),
            output_data_path: output.clone(),
        };
        self.progress.finish(
            Report::new(Phase::Engine)
                .detail("preprocess")
                .total_rows(Some(read_rows)),
        );
        let started = Instant::now();
        let n = engine
            .raw_query(&job, &self.progress)
            .await
            .map_err(|source| TxError::Engine {
                dataset: dataset.into(),
                source,
            })?;
        let engine_time = started.elapsed();
        let violation = |violation| TxError::Engine {
            dataset: dataset.into(),
            source: EngineFailure::Contract {
                engine: sql.engine.clone(),
                violation,
            },
        };
        if !output.is_file() {
            return Err(violation(ContractViolation::ClaimsRowsButNoFile {
                interval: OffsetInterval {
                    start: 0,
                    end: n.saturating_sub(1),
                },
            }));
        }
        let out = read::read_batches(
            &odf::ReadStep::Parquet(odf::ReadStepParquet::default()),
            &read::Source::File(output),
            "the preprocess query's output",
            None,
        )
        .map_err(|e| ingest_err(dataset, e))?
        .placed_as(Unit::OutputRow);
        // The footer's count is checked now; the reader refuses a file whose pages hold another.
        let found = out.total_rows.unwrap_or(0);
        if found != n {
            return Err(violation(ContractViolation::RecordCountMismatch {
                claimed: n,
                found,
            }));
        }
        Ok((out, engine_time))
    }

    /// Plans the next transform step of a derivative: `None` when its inputs have nothing new.
    pub async fn plan_transform(
        &self,
        m: &DatasetManifest,
        chain: &Chain,
    ) -> Result<Option<TransformPlan>, TxError> {
        let Some(t) = &m.transform else {
            return Ok(None);
        };
        if chain.summary.transform.is_none() {
            // The transform's SetTransform is written once every input has a Seed.
            let ids = self.input_ids(m).await?;
            if ids.iter().any(Option::is_none) {
                return Ok(None);
            }
        }
        let last = last_execute_transform(chain);
        let mut inputs = Vec::new();
        let mut any_new = false;
        for input in &t.inputs {
            let in_store = self.storage.dataset(&input.dataset_ref);
            let in_chain = in_store.chain().await?;
            let Some(id) = in_chain.summary.dataset_id else {
                return Ok(None);
            };
            // Every input needs data (its schema) before the transform can run.
            let Some(first_slice) = in_chain.data_slices().next().cloned() else {
                return Ok(None);
            };
            let prev = last.and_then(|e| e.query_inputs.iter().find(|q| q.dataset_id == id));
            let prev_block = prev.and_then(|p| p.new_block_hash);
            let prev_offset = prev.and_then(|p| p.new_offset);
            let new_offset = in_chain.summary.last_offset;
            let new_block = in_chain.summary.head;
            let prev_watermark = match prev_block {
                Some(h) => in_chain
                    .up_to(&h)
                    .and_then(|bs| bs.iter().rev().find_map(|(_, b)| b.event.new_watermark())),
                None => None,
            };
            if new_offset > prev_offset || in_chain.summary.watermark > prev_watermark {
                any_new = true;
            }
            inputs.push(PlannedInput {
                name: input.dataset_ref.clone(),
                query_alias: input.query_alias().to_string(),
                id,
                chain: in_chain,
                prev_block,
                new_block,
                prev_offset,
                new_offset,
                schema_slice: first_slice,
            });
        }
        if !any_new {
            return Ok(None);
        }
        Ok(Some(TransformPlan {
            transform: t.transform.sql().clone().normalize(),
            inputs,
            prev_checkpoint: last.and_then(|e| e.new_checkpoint.clone()),
            prev_offset: chain.summary.last_offset,
        }))
    }

    async fn transform_once(&self, m: &DatasetManifest) -> Result<TxOutcome, TxError> {
        let name = m.name.clone();
        let store = self.storage.dataset(&name);
        let chain = store.chain().await?;
        let now = Utc::now();
        let mut events = metadata_events(&chain, m, now);
        if let Some(t) = self.transform_event(m, &chain).await? {
            events.insert(events.len().min(1), MetadataEvent::SetTransform(t));
        }
        let mut records = 0;
        let mut engine_time = Duration::ZERO;
        let plan = self.plan_transform(m, &chain).await?;
        if let Some(plan) = &plan {
            let engine = self
                .engines
                .resolve(&plan.transform.engine)
                .map_err(|source| TxError::Engine {
                    dataset: name.clone(),
                    source,
                })?;
            let vocab = DatasetVocabulary::from(&m.vocab.clone().unwrap_or_default());
            let id = chain_dataset_id(&chain, &events);
            record_engine(&chain.summary, &mut events, engine.identity());
            let (step, schema, step_engine_time) = self
                .execute(&store, &chain, &name, id, plan, &engine, &vocab, now)
                .await?;
            events.extend(schema);
            engine_time = step_engine_time;
            records = step
                .new_data
                .as_ref()
                .map_or(0, |d| d.offset_interval.len());
            events.push(MetadataEvent::ExecuteTransform(step));
        }
        if events.is_empty() {
            return Ok(TxOutcome::UpToDate { dataset: name });
        }
        self.progress.phase(Phase::Commit);
        commit(
            &store,
            &chain,
            events,
            now,
            records,
            plan.is_some(),
            engine_time,
        )
        .await
    }

    /// Runs a planned step on `engine` and stores its data and checkpoint (not the block). Returns the
    /// step's event and the wall time spent inside the engine.
    #[allow(clippy::too_many_arguments)]
    pub async fn execute(
        &self,
        store: &DatasetStore,
        chain: &Chain,
        name: &str,
        id: DatasetId,
        plan: &TransformPlan,
        engine: &EngineHandle,
        vocab: &DatasetVocabulary,
        system_time: DateTime<Utc>,
    ) -> Result<(ExecuteTransform, Option<MetadataEvent>, Duration), TxError> {
        let run = self
            .run_engine(store, chain, name, id, plan, engine, vocab, system_time)
            .await?;
        let violation = |violation| TxError::Engine {
            dataset: name.to_string(),
            source: EngineFailure::Contract {
                engine: engine.identity().name.clone(),
                violation,
            },
        };
        let data_err = |source| TxError::Data {
            dataset: name.to_string(),
            source,
        };
        let mut schema = None;
        let new_data = match &run.output {
            Some(out) => {
                schema =
                    schema_event(chain.summary.schema.as_ref(), &out.schema).map_err(data_err)?;
                let (physical_hash, size) = store.put_file_from(FileKind::Data, &out.file).await?;
                Some(DataSlice {
                    logical_hash: out.logical_hash,
                    physical_hash,
                    offset_interval: OffsetInterval {
                        start: plan.next_offset(),
                        end: plan.next_offset() + out.rows - 1,
                    },
                    size,
                })
            }
            None => None,
        };
        fault::point("after-data", name);
        let new_checkpoint = match &run.checkpoint {
            Some(path) => {
                let (physical_hash, size) = store.put_file_from(FileKind::Checkpoint, path).await?;
                Some(Checkpoint {
                    physical_hash,
                    size,
                })
            }
            None => plan.prev_checkpoint.clone(),
        };
        fault::point("after-checkpoint", name);
        if let (Some(prev), Some(new)) = (chain.summary.watermark, run.report.new_watermark)
            && new < prev
        {
            return Err(violation(ContractViolation::WatermarkRegressed));
        }
        let step = ExecuteTransform {
            query_inputs: plan
                .inputs
                .iter()
                .map(|i| ExecuteTransformInput {
                    dataset_id: i.id,
                    prev_block_hash: i.prev_block,
                    new_block_hash: i.new_block,
                    prev_offset: i.prev_offset,
                    new_offset: i.new_offset,
                })
                .collect(),
            prev_checkpoint: plan.prev_checkpoint.as_ref().map(|c| c.physical_hash),
            prev_offset: plan.prev_offset,
            new_data,
            new_checkpoint,
            new_watermark: run.report.new_watermark.or(chain.summary.watermark),
        };
        Ok((step, schema, run.engine_time))
    }

    /// Stages inputs, runs the engine, and checks its output against the contract.
    #[allow(clippy::too_many_arguments)]
    pub async fn run_engine(
        &self,
        store: &DatasetStore,
        chain: &Chain,
        name: &str,
        id: DatasetId,
        plan: &TransformPlan,
        engine: &EngineHandle,
        vocab: &DatasetVocabulary,
        system_time: DateTime<Utc>,
    ) -> Result<EngineRun, TxError> {
        let dir = self.scratch(name)?;
        let progress = &self.progress;
        progress.phase(Phase::Stage);
        let mut inputs = Vec::new();
        for i in &plan.inputs {
            let in_store = self.storage.dataset(&i.name);
            let interval = match (i.prev_offset, i.new_offset) {
                (p, Some(n)) if Some(n) > p => Some(OffsetInterval {
                    start: p.map_or(0, |p| p + 1),
                    end: n,
                }),
                _ => None,
            };
            let mut data_paths = Vec::new();
            if let Some(iv) = interval {
                for s in i.chain.data_slices() {
                    if s.offset_interval.end >= iv.start && s.offset_interval.start <= iv.end {
                        data_paths.push(
                            stage(
                                &in_store,
                                FileKind::Data,
                                &s.physical_hash,
                                Some(s.size),
                                dir.path(),
                            )
                            .await?,
                        );
                    }
                }
            }
            let schema_file = stage(
                &in_store,
                FileKind::Data,
                &i.schema_slice.physical_hash,
                Some(i.schema_slice.size),
                dir.path(),
            )
            .await?;
            let in_vocab =
                DatasetVocabulary::from(&i.chain.summary.vocab.clone().unwrap_or_default());
            let blocks = match i.prev_block {
                Some(p) => {
                    let from = i
                        .chain
                        .blocks
                        .iter()
                        .position(|(h, _)| *h == p)
                        .map_or(0, |x| x + 1);
                    &i.chain.blocks[from..]
                }
                None => &i.chain.blocks[..],
            };
            let explicit_watermarks = blocks
                .iter()
                .filter_map(|(_, b)| {
                    b.event.new_watermark().map(|event_time| odf::Watermark {
                        system_time: b.system_time,
                        event_time,
                    })
                })
                .collect();
            inputs.push(TransformJobInput {
                dataset_id: i.id,
                dataset_alias: i.name.clone(),
                query_alias: i.query_alias.clone(),
                vocab: in_vocab,
                offset_interval: interval,
                data_paths,
                schema_file,
                explicit_watermarks,
            });
        }
        let prev_checkpoint_path = match &plan.prev_checkpoint {
            // A replay knows only the hash of the checkpoint it resumes from (size 0).
            Some(c) => Some(
                stage(
                    store,
                    FileKind::Checkpoint,
                    &c.physical_hash,
                    (c.size > 0).then_some(c.size),
                    dir.path(),
                )
                .await?,
            ),
            None => None,
        };
        let out_dir = dir.path().join("out");
        std::fs::create_dir_all(&out_dir).map_err(|e| TxError::Scratch {
            dataset: name.into(),
            message: e.to_string(),
        })?;
        let job = TransformJob {
            dataset_id: id,
            dataset_alias: name.to_string(),
            system_time,
            vocab: vocab.clone(),
            transform: plan.transform.clone(),
            inputs,
            next_offset: plan.next_offset(),
            prev_checkpoint_path,
            new_checkpoint_path: out_dir.join("checkpoint"),
            new_data_path: out_dir.join("data"),
        };
        progress.phase(Phase::Engine);
        let started = Instant::now();
        let report = engine
            .transform(&job, progress)
            .await
            .map_err(|source| TxError::Engine {
                dataset: name.into(),
                source,
            })?;
        let engine_time = started.elapsed();
        fault::point("after-read", name);
        let violation = |violation| TxError::Engine {
            dataset: name.to_string(),
            source: EngineFailure::Contract {
                engine: engine.identity().name.clone(),
                violation,
            },
        };
        // The previous output's schema, normalised, from the footer of its last slice.
        let previous_schema = match chain.data_slices().last() {
            Some(s) => Some(data::normalized_schema(
                &ingest::schema::slice_schema(store, s)
                    .await
                    .map_err(|e| ingest_err(name, e))?,
                vocab,
            )),
            None => None,
        };
        let data_path = job.new_data_path.clone();
        let next_offset = plan.next_offset();
        let claimed = report.new_offset_interval;
        let output_vocab = vocab.clone();
        progress.phase(Phase::Check);
        let check_progress = progress.clone();
        let output = tokio::task::spawn_blocking(move || {
            output::check(
                &data_path,
                next_offset,
                claimed,
                previous_schema.as_ref(),
                &output_vocab,
                &check_progress,
            )
        })
        .await
        .map_err(|_| TxError::Data {
            dataset: name.into(),
            source: data::DataError::Panicked {
                context: "checking an engine's output".into(),
            },
        })?
        .map_err(|e| match e {
            output::OutputError::Contract(v) => violation(v),
            output::OutputError::Data(source) => TxError::Data {
                dataset: name.into(),
                source,
            },
        })?;
        let checkpoint = job
            .new_checkpoint_path
            .is_file()
            .then(|| job.new_checkpoint_path.clone());
        Ok(EngineRun {
            report,
            output,
            checkpoint,
            engine_time,
            _files: dir,
        })
    }
}

/// What an engine produced for one step.
#[derive(Debug)]
pub struct EngineRun {
    /// The Success message.
    pub report: crate::engine::job::TransformReport,
    /// The data file, checked and hashed (`None` when there are no records).
    pub output: Option<output::CheckedOutput>,
    /// The checkpoint file.
    pub checkpoint: Option<PathBuf>,
    /// Wall time of the engine's ExecuteTransform call alone (no staging, reading or checking).
    pub engine_time: Duration,
    /// The scratch folder holding the files above, removed when the run is dropped.
    _files: tempfile::TempDir,
}

/// One input of a planned step.
#[derive(Debug, Clone)]
pub struct PlannedInput {
    /// Input dataset name.
    pub name: String,
    /// SQL table name.
    pub query_alias: String,
    /// Input id.
    pub id: DatasetId,
    /// Input chain (up to `new_block`).
    pub chain: Chain,
    /// Input head consumed before.
    pub prev_block: Option<Multihash>,
    /// Input head consumed now.
    pub new_block: Option<Multihash>,
    /// Last offset consumed before.
    pub prev_offset: Option<u64>,
    /// Last offset consumed now.
    pub new_offset: Option<u64>,
    /// A slice whose file carries the input's schema.
    pub schema_slice: DataSlice,
}

/// A planned transform step.
#[derive(Debug, Clone)]
pub struct TransformPlan {
    /// The SQL.
    pub transform: TransformSql,
    /// Inputs in order.
    pub inputs: Vec<PlannedInput>,
    /// Checkpoint to resume from.
    pub prev_checkpoint: Option<Checkpoint>,
    /// Last output offset.
    pub prev_offset: Option<u64>,
}

impl TransformPlan {
    /// First offset of the output.
    pub fn next_offset(&self) -> u64 {
        self.prev_offset.map_or(0, |o| o + 1)
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

/// A `SetDataSchema` for records of Arrow schema `schema` about to be written, when the schema in force
/// (`in_force`, the chain's last `SetDataSchema`) is not theirs: always before the first data.
pub(crate) fn schema_event(
    in_force: Option<&DataSchema>,
    schema: &arrow::datatypes::Schema,
) -> Result<Option<MetadataEvent>, DataError> {
    let schema =
        odf::arrow_schema::data_schema_from_arrow(schema).map_err(|e| DataError::Column {
            message: e.to_string(),
        })?;
    if in_force == Some(&schema) {
        return Ok(None);
    }
    Ok(Some(MetadataEvent::SetDataSchema(SetDataSchema::new(
        schema,
    ))))
}

/// Makes the `SetTransform` in force record `engine` before a step runs: the pending one of this
/// transaction gets it, or, when the chain's records another engine, a copy with the new version is added.
pub(crate) fn record_engine(
    summary: &ChainSummary,
    events: &mut Vec<MetadataEvent>,
    engine: &EngineIdentity,
) {
    let version = Some(engine.to_version());
    let pending = events.iter_mut().rev().find_map(|e| match e {
        MetadataEvent::SetTransform(t) => Some(t),
        _ => None,
    });
    if let Some(t) = pending {
        set_version(t, version);
        return;
    }
    if let Some(t) = &summary.transform
        && t.transform.sql().version != version
    {
        let mut t = t.clone();
        set_version(&mut t, version);
        events.push(MetadataEvent::SetTransform(t));
    }
}

/// Sets the engine a `SetTransform` records (its `TransformSql.version`).
pub(crate) fn set_version(t: &mut SetTransform, version: Option<String>) {
    let Transform::Sql(sql) = &mut t.transform;
    sql.version = version;
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
            dataset_id: crate::chain::new_dataset_id(&m.name, now),
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

/// A transaction's blocks with their hashes, linked after the head of the chain `summary` sums up, numbered
/// on from its last block and sharing the transaction's system time (as kamu commits a SetDataSchema with its
/// data).
pub fn link_blocks(
    summary: &ChainSummary,
    events: Vec<MetadataEvent>,
    now: DateTime<Utc>,
) -> Vec<(Multihash, MetadataBlock)> {
    let mut prev = summary.head;
    let first = summary.last_sequence_number.map_or(0, |s| s + 1);
    let mut out = Vec::with_capacity(events.len());
    for (sequence_number, event) in (first..).zip(events) {
        let block = MetadataBlock {
            system_time: now,
            prev_block_hash: prev,
            sequence_number,
            event,
        };
        let hash = MetadataBlock::hash(&block.encode());
        prev = Some(hash);
        out.push((hash, block));
    }
    out
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
    let mut prev = chain.summary.head;
    if chain.summary.head.is_none() {
        // Until the head exists, blocks in the folder are those of a first transaction that did not
        // commit, not a chain whose head was lost.
        store.mark_new().await?;
    }
    for (hash, block) in link_blocks(&chain.summary, events, now) {
        let written = store.put_block(&block).await?;
        debug_assert_eq!(written, hash);
        prev = Some(written);
    }
    fault::point("after-blocks", store.name());
    let head = prev.ok_or_else(|| TxError::Scratch {
        dataset: store.name().into(),
        message: "no blocks".into(),
    })?;
    store.set_head(chain.summary.head, head).await?;
    fault::point("after-head", store.name());
    let engine_ms = engine_time.as_millis() as u64;
    info!(dataset = %store.name(), head = %head, records, blocks, engine_ms, "transaction committed");
    Ok(TxOutcome::Committed {
        dataset: store.name().to_string(),
        head,
        records,
        blocks,
        more,
        engine_time,
    })
}

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
async fn with_slice<T: Send + 'static>(
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

/// Reads a preprocess query's input as the read step says and writes it to `path`, a batch at a time;
/// returns the records written.
fn write_raw(
    raw: read::Batches,
    path: &Path,
    progress: &Progress,
    total_bytes: Option<u64>,
) -> Result<u64, IngestError> {
    let file = std::fs::File::create(path).map_err(|e| {
        IngestError::Data(DataError::Column {
            message: format!("writing the preprocess query's input: {e}"),
        })
    })?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        file,
        raw.schema.clone(),
        Some(data::writer_properties()),
    )
    .map_err(|e| IngestError::Data(data::parquet_err("writing the preprocess query's input")(e)))?;
    let mut rows = 0u64;
    let mut raw = raw;
    while let Some(placed) = raw.next() {
        let placed = placed?;
        rows += placed.batch.num_rows() as u64;
        writer.write(&placed.batch).map_err(|e| {
            IngestError::Data(data::parquet_err("writing the preprocess query's input")(e))
        })?;
        progress.report(
            Report::new(Phase::Ingest)
                .rows(rows)
                .bytes(raw.bytes_read())
                .total_bytes(total_bytes),
        );
    }
    writer.close().map_err(|e| {
        IngestError::Data(data::parquet_err("writing the preprocess query's input")(e))
    })?;
    Ok(rows)
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
