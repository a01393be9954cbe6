//! A derivative's transaction: plan the next step from the inputs' chains, stage its inputs, run the engine,
//! check its output against the contract and store it.

use super::*;
use object_store::ObjectStoreExt;

impl Context {
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
            let prev_block = prev.and_then(|p| p.last_block_hash().copied());
            let prev_offset = prev.and_then(|p| p.last_offset());
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

    pub(super) async fn transform_once(&self, m: &DatasetManifest) -> Result<TxOutcome, TxError> {
        let name = m.name.clone();
        let store = self.storage.dataset(&name);
        let chain = store.chain().await?;
        let now = Utc::now();
        let mut events = metadata_events(&chain, m, now);
        if let Some(t) = self.transform_event(m, &chain).await? {
            let id = chain_dataset_id(&chain, &events);
            match self
                .change_transform(m, &store, &chain, id, t, &events, now)
                .await?
            {
                query_change::Change::Record(t) => {
                    events.insert(events.len().min(1), MetadataEvent::SetTransform(t));
                }
                query_change::Change::Migrated(outcome) => return Ok(outcome),
            }
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
            return Ok(TxOutcome::UpToDate {
                dataset: name,
                notices: Vec::new(),
            });
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
        let stored = self.store_run(store, chain, name, plan, engine, &run).await;
        // What an engine wrote to the store itself has been copied into place (or is not wanted).
        if let Some(objects) = &run.objects {
            objects.remove_outputs().await;
        }
        stored
    }

    /// Stores a run's data and checkpoint (not the block) and returns the step's event.
    async fn store_run(
        &self,
        store: &DatasetStore,
        chain: &Chain,
        name: &str,
        plan: &TransformPlan,
        engine: &EngineHandle,
        run: &EngineRun,
    ) -> Result<(ExecuteTransform, Option<MetadataEvent>, Duration), TxError> {
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
                // Copied while it was checked: moved into place. Otherwise copied (and hashed) now.
                let (physical_hash, size) = match &out.copied {
                    Some(copied) => {
                        store
                            .put_file_written(
                                FileKind::Data,
                                &copied.tmp,
                                copied.physical_hash,
                                copied.size,
                            )
                            .await?
                    }
                    None => match &run.objects {
                        Some(objects) => {
                            store
                                .put_file_copied(FileKind::Data, &out.file, &objects.new_data())
                                .await?
                        }
                        None => store.put_file_from(FileKind::Data, &out.file).await?,
                    },
                };
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
                let (physical_hash, size) = match &run.objects {
                    Some(objects) => {
                        store
                            .put_file_copied(FileKind::Checkpoint, path, &objects.new_checkpoint())
                            .await?
                    }
                    None => store.put_file_from(FileKind::Checkpoint, path).await?,
                };
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
                .map(|i| {
                    // An input with nothing new is written as kamu writes it: no new block or offset.
                    ExecuteTransformInput::advanced(
                        i.id,
                        i.prev_block,
                        i.prev_offset,
                        i.new_block,
                        i.new_offset,
                    )
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
        let job = match engine.exchange() {
            DataExchange::Local => {
                self.stage_step(store, name, id, plan, vocab, system_time, dir.path())
                    .await?
            }
            DataExchange::ObjectStore => {
                self.object_step(store, name, id, plan, vocab, system_time, dir.path())
                    .await?
            }
        };
        self.run_staged(store, chain, name, engine, vocab, job, dir)
            .await
    }

    /// Stages the input files of a planned step (and its checkpoint) into `dir`, and the job that runs it
    /// there.
    #[allow(clippy::too_many_arguments)]
    pub async fn stage_step(
        &self,
        store: &DatasetStore,
        name: &str,
        id: DatasetId,
        plan: &TransformPlan,
        vocab: &DatasetVocabulary,
        system_time: DateTime<Utc>,
        dir: &Path,
    ) -> Result<TransformJob, TxError> {
        self.build_job(store, name, id, plan, vocab, system_time, dir, true)
            .await
    }

    /// The job of a planned step, its input files staged into `dir` when `stage_files` (else it names no
    /// file: [`Self::object_step`] names objects).
    #[allow(clippy::too_many_arguments)]
    async fn build_job(
        &self,
        store: &DatasetStore,
        name: &str,
        id: DatasetId,
        plan: &TransformPlan,
        vocab: &DatasetVocabulary,
        system_time: DateTime<Utc>,
        dir: &Path,
        stage_files: bool,
    ) -> Result<TransformJob, TxError> {
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
            // The schema slice (the input's first) is often among the slices staged here: checked once.
            let mut schema_slice_staged = None;
            if let Some(iv) = interval
                && stage_files
            {
                for s in slices_in(&i.chain, iv) {
                    let staged = stage(
                        &in_store,
                        FileKind::Data,
                        &s.physical_hash,
                        Some(s.size),
                        dir,
                    )
                    .await?;
                    if s.physical_hash == i.schema_slice.physical_hash {
                        schema_slice_staged = Some(staged.clone());
                    }
                    data_paths.push(staged);
                }
            }
            let schema_file = if stage_files {
                schema_file(
                    &in_store,
                    &i.name,
                    &i.schema_slice,
                    schema_slice_staged.as_deref(),
                    dir,
                )
                .await?
            } else {
                PathBuf::new()
            };
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
                    b.event
                        .new_watermark()
                        .map(|event_time| weir_odf::Watermark {
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
            Some(c) if stage_files => Some(
                stage(
                    store,
                    FileKind::Checkpoint,
                    &c.physical_hash,
                    (c.size > 0).then_some(c.size),
                    dir,
                )
                .await?,
            ),
            _ => None,
        };
        let out_dir = dir.join("out");
        std::fs::create_dir_all(&out_dir).map_err(|e| TxError::Scratch {
            dataset: name.into(),
            message: e.to_string(),
        })?;
        Ok(TransformJob {
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
            output_schema: None,
            copy_output: store
                .local_dir(FileKind::Data)
                .map(|(root, dir)| output::CopyInto { root, dir }),
            objects: None,
        })
    }

    /// The job of a planned step for an engine that reads and writes the store itself
    /// (`exchange: object-store`): URLs of the input slices and the checkpoint where the storage keeps
    /// them, each checked to be there with its recorded size; a schema file per input written under the
    /// operation's own prefix; the output and new checkpoint fetched after the engine into `dir`.
    #[allow(clippy::too_many_arguments)]
    pub async fn object_step(
        &self,
        store: &DatasetStore,
        name: &str,
        id: DatasetId,
        plan: &TransformPlan,
        vocab: &DatasetVocabulary,
        system_time: DateTime<Utc>,
        dir: &Path,
    ) -> Result<TransformJob, TxError> {
        let storage = store.storage();
        let Some(bucket) = storage.s3_bucket() else {
            return Err(TxError::Scratch {
                dataset: name.into(),
                message: format!(
                    "the engine is configured with `exchange: object-store`, but the storage ({}) is not an `s3://` URL: set `storage: s3://bucket/prefix` in weir.yaml, or `exchange: local`",
                    storage.url()
                ),
            });
        };
        let mut job = self
            .build_job(store, name, id, plan, vocab, system_time, dir, false)
            .await?;
        let object_store = storage.object_store();
        let operation = weir_engine_runtime::OperationId::generate();
        let out_prefix = storage.path(&format!(".exchange/{}", operation.as_str()));
        let mut inputs = Vec::with_capacity(plan.inputs.len());
        let mut sizes = Vec::new();
        for (n, i) in plan.inputs.iter().enumerate() {
            let in_store = self.storage.dataset(&i.name);
            let interval = job.inputs[n].offset_interval;
            let mut data = Vec::new();
            if let Some(iv) = interval {
                for s in slices_in(&i.chain, iv) {
                    let key = in_store.object_path(FileKind::Data, &s.physical_hash);
                    sizes.push((key.clone(), s.size));
                    data.push(key);
                }
            }
            let schema_key = out_prefix.clone().join(format!("schema-{n}"));
            let schema = stored_slice_schema(&in_store, &i.schema_slice, &i.name).await?;
            let empty = empty_parquet(&schema).map_err(|message| TxError::Scratch {
                dataset: name.into(),
                message: format!("writing the schema file of input `{}`: {message}", i.name),
            })?;
            object_store
                .put(&schema_key, empty.into())
                .await
                .map_err(|e| TxError::Scratch {
                    dataset: name.into(),
                    message: format!("writing {}: {e}", storage.display(&schema_key)),
                })?;
            inputs.push(InputObjects {
                data,
                schema: schema_key,
                data_prefix: in_store.kind_prefix(FileKind::Data),
            });
        }
        let prev_checkpoint = plan.prev_checkpoint.as_ref().map(|c| {
            let key = store.object_path(FileKind::Checkpoint, &c.physical_hash);
            if c.size > 0 {
                sizes.push((key.clone(), c.size));
            }
            key
        });
        let objects = JobObjects {
            store: object_store,
            bucket: bucket.to_owned(),
            inputs,
            prev_checkpoint,
            checkpoint_prefix: store.kind_prefix(FileKind::Checkpoint),
            out_prefix,
        };
        if let Err(message) = objects.check_inputs(&sizes).await {
            objects.remove_outputs().await;
            return Err(TxError::Scratch {
                dataset: name.into(),
                message: format!(
                    "an input in the storage is not what the chain records: {message}"
                ),
            });
        }
        job.copy_output = None;
        job.objects = Some(objects);
        Ok(job)
    }

    /// Runs a staged step and checks its output against the contract.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_staged(
        &self,
        store: &DatasetStore,
        chain: &Chain,
        name: &str,
        engine: &EngineHandle,
        vocab: &DatasetVocabulary,
        mut job: TransformJob,
        dir: tempfile::TempDir,
    ) -> Result<EngineRun, TxError> {
        let progress = &self.progress;
        // The previous output's schema, normalised, from the footer of its last slice: the contract layer
        // holds the new output to it.
        job.output_schema = match chain.data_slices().last() {
            Some(s) => Some(data::normalized_schema(
                &stored_slice_schema(store, s, name).await?,
                vocab,
            )),
            None => None,
        };
        progress.phase(Phase::Engine);
        let started = Instant::now();
        let checked = async {
            let report = engine.transform(&job, progress).await?;
            let (output, took) = report.written.checked(&engine.identity().name)?;
            let output = output.cloned();
            Ok::<_, EngineFailure>((report, output, took))
        }
        .await;
        let (report, output, took) = match checked {
            Ok(checked) => checked,
            Err(source) => {
                // A rejected output is not stored: what the engine wrote to the store goes too.
                if let Some(objects) = &job.objects {
                    objects.remove_outputs().await;
                }
                return Err(TxError::Engine {
                    dataset: name.into(),
                    source,
                });
            }
        };
        let engine_time = started.elapsed().saturating_sub(took);
        fault::point("after-read", name);
        let checkpoint = job
            .new_checkpoint_path
            .is_file()
            .then(|| job.new_checkpoint_path.clone());
        Ok(EngineRun {
            report,
            output,
            checkpoint,
            engine_time,
            objects: job.objects.clone(),
            _files: dir,
        })
    }
}

/// What an engine produced for one step.
#[derive(Debug)]
pub struct EngineRun {
    /// The Success message.
    pub report: weir_engines::job::TransformReport,
    /// The data file, checked and hashed (`None` when there are no records).
    pub output: Option<output::CheckedOutput>,
    /// The checkpoint file.
    pub checkpoint: Option<PathBuf>,
    /// With `exchange: object-store`: where the engine wrote them in the store, which the run's holder
    /// removes once it has stored them ([`JobObjects::remove_outputs`]).
    pub objects: Option<JobObjects>,
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

/// The slices of `chain` that hold records of `interval`.
fn slices_in(chain: &Chain, interval: OffsetInterval) -> impl Iterator<Item = &DataSlice> {
    chain.data_slices().filter(move |s| {
        s.offset_interval.end >= interval.start && s.offset_interval.start <= interval.end
    })
}
