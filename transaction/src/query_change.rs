//! A derivative whose manifest's transform is not the one its chain records.
//!
//! Nothing about a new or changed transform is recorded before its engine has validated it (ValidateQuery
//! against the inputs' schemas, reading no data): an invalid query fails the pull with the engine's message
//! at the query's line in the manifest. Then:
//!
//! - a dataset's **first** transform is recorded (checked when its inputs have records; while they have none
//!   it is recorded unchecked, as ODF coordinators record it, and the engine checks it with the first step);
//! - a changed transform whose output columns differ from the dataset's is refused
//!   ([`TxError::QueryChange`]): its records would not be one dataset any more;
//! - a changed transform of a dataset whose last step left **no checkpoint** (a stateless query) is recorded
//!   and simply continues from the inputs' next records;
//! - a changed transform of a dataset **with a checkpoint** (open windows) is migrated: MigrateQuery with
//!   the previous checkpoint and both queries, then one transaction records the new `SetTransform` and an
//!   `ExecuteTransform` that consumes no input records, carries what the engine finalised (the windows the
//!   previous query had open, as its output) and the new query's checkpoint. An engine whose MigrateQuery
//!   refuses the state fails the pull (exit 11) and the dataset keeps its head. An engine without
//!   MigrateQuery (an ODF engine) is treated as ODF coordinators treat it: the new `SetTransform` is recorded
//!   and the next step hands the engine the previous checkpoint, for it to continue or refuse.
//!
//! `weir pull --recompute` is the way out of a refusal: the dataset is reset to its Seed and computed again
//! from its inputs with the new query ([`Context::reset`]).

use std::path::Path;

use arrow::datatypes::SchemaRef;
use chrono::{DateTime, Utc};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{Context, TxError, TxOutcome, commit, last_execute_transform, stage};
use weir_dataset::chain::store::{Chain, DatasetStore, FileKind};
use weir_dataset::data;
use weir_dataset::progress::Phase;
use weir_engines::job::{MigrateJob, TransformJobInput, ValidateJob};
use weir_engines::{ContractViolation, EngineFailure, EngineHandle};
use weir_manifest::snapshot::DatasetManifest;
use weir_odf::{
    Checkpoint, DataSlice, DatasetId, DatasetVocabulary, ExecuteTransform, ExecuteTransformInput,
    MetadataEvent, OffsetInterval, SetTransform,
};

/// What to do with a transform that is not the one in force.
#[derive(Debug)]
pub(super) enum Change {
    /// Record the transform in this transaction, with the step that follows.
    Record(SetTransform),
    /// The change was migrated and committed on its own.
    Migrated(TxOutcome),
}

impl Context {
    /// The inputs of `m`'s transform, each with a schema file staged in `dir` and no records to read, or
    /// `None` while an input has no records (and so no schema) yet.
    async fn schema_inputs(
        &self,
        m: &DatasetManifest,
        dir: &Path,
    ) -> Result<Option<Vec<TransformJobInput>>, TxError> {
        let Some(t) = &m.transform else {
            return Ok(None);
        };
        let mut inputs = Vec::new();
        for input in &t.inputs {
            let in_store = self.storage.dataset(&input.dataset_ref);
            let in_chain = in_store.chain().await?;
            let (Some(id), Some(slice)) = (
                in_chain.summary.dataset_id,
                in_chain.data_slices().next().cloned(),
            ) else {
                return Ok(None);
            };
            let schema_file =
                super::schema_file(&in_store, &input.dataset_ref, &slice, None, dir).await?;
            inputs.push(TransformJobInput {
                dataset_id: id,
                dataset_alias: input.dataset_ref.clone(),
                query_alias: input.query_alias().to_string(),
                vocab: DatasetVocabulary::from(&in_chain.summary.vocab.clone().unwrap_or_default()),
                offset_interval: None,
                data_paths: Vec::new(),
                schema_file,
                explicit_watermarks: Vec::new(),
            });
        }
        Ok(Some(inputs))
    }

    /// ValidateQuery of `m`'s transform on the engine it names: the output schema (system columns
    /// normalised), or `None` while an input has no records to give its schema, or when the engine does
    /// not implement ValidateQuery (an ODF engine; it then checks the query when data arrives). An
    /// InvalidQuery is [`TxError::InvalidTransform`], positioned at the query in the manifest.
    pub async fn validate_transform(
        &self,
        m: &DatasetManifest,
        id: DatasetId,
    ) -> Result<Option<SchemaRef>, TxError> {
        let Some(t) = &m.transform else {
            return Ok(None);
        };
        let dir = self.scratch(&m.name)?;
        let Some(inputs) = self.schema_inputs(m, dir.path()).await? else {
            return Ok(None);
        };
        let sql = t.transform.sql().clone().normalize();
        let engine = self.engine_for(&m.name, &sql.engine)?;
        let vocab = DatasetVocabulary::from(&m.vocab.clone().unwrap_or_default());
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).map_err(|e| TxError::Scratch {
            dataset: m.name.clone(),
            message: e.to_string(),
        })?;
        let job = ValidateJob {
            dataset_id: id,
            dataset_alias: m.name.clone(),
            vocab: vocab.clone(),
            transform: sql,
            inputs,
            output_schema_path: out.join("schema"),
        };
        match engine.validate_query(&job).await {
            Ok(_) => {}
            Err(EngineFailure::InvalidQuery { engine, message }) => {
                return Err(TxError::InvalidTransform {
                    dataset: m.name.clone(),
                    engine,
                    source: Box::new(m.transform_query_error(message)),
                });
            }
            Err(EngineFailure::NotSupported { engine, operation }) => {
                tracing::info!(dataset = %m.name, %engine, %operation, "the engine cannot validate queries; it checks the query when data arrives");
                return Ok(None);
            }
            Err(source) => {
                return Err(TxError::Engine {
                    dataset: m.name.clone(),
                    source,
                });
            }
        }
        let schema = read_schema(&job.output_schema_path).map_err(|message| TxError::Engine {
            dataset: m.name.clone(),
            source: EngineFailure::Contract {
                engine: engine.identity().name.clone(),
                violation: ContractViolation::BadDataFile {
                    message: format!("the output schema file of ValidateQuery: {message}"),
                },
            },
        })?;
        Ok(Some(data::normalized_schema(&schema, &vocab)))
    }

    fn engine_for(&self, dataset: &str, engine: &str) -> Result<EngineHandle, TxError> {
        self.engines
            .resolve(engine)
            .map_err(|source| TxError::Engine {
                dataset: dataset.to_string(),
                source,
            })
    }

    /// Decides, and for a stateful dataset carries out, the change from the transform in force to `wanted`
    /// (see the module docs). `events` are the transaction's metadata events so far (its Seed, vocabulary
    /// and info); a migration commits them with the change.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn change_transform(
        &self,
        m: &DatasetManifest,
        store: &DatasetStore,
        chain: &Chain,
        id: DatasetId,
        wanted: SetTransform,
        events: &[MetadataEvent],
        now: DateTime<Utc>,
    ) -> Result<Change, TxError> {
        let name = &m.name;
        let validated = self.validate_transform(m, id).await?;
        let Some(in_force) = chain.summary.transform.clone() else {
            // The first transform, checked when its inputs have records to give their schemas; while
            // they have none it is recorded unchecked (as ODF coordinators record it) and the engine
            // checks it with the first step.
            return Ok(Change::Record(wanted));
        };
        let vocab = DatasetVocabulary::from(&m.vocab.clone().unwrap_or_default());
        let previous_schema = match chain.data_slices().last() {
            Some(s) => Some(data::normalized_schema(
                &super::stored_slice_schema(store, s, name).await?,
                &vocab,
            )),
            None => None,
        };
        if let (Some(now_schema), Some(prev)) = (&validated, &previous_schema)
            && !data::same_logical_columns(prev, now_schema)
        {
            return Err(TxError::QueryChange {
                dataset: name.clone(),
                reason: format!(
                    "its output columns change from [{}] to [{}]",
                    data::schema_text(prev),
                    data::schema_text(now_schema)
                ),
            });
        }
        let Some(last) = last_execute_transform(chain).cloned() else {
            return Ok(Change::Record(wanted));
        };
        let Some(prev_checkpoint) = last.new_checkpoint.clone() else {
            // A stateless query: the new one continues from the inputs' next records.
            return Ok(Change::Record(wanted));
        };
        let wanted_again = wanted.clone();
        self.migrate(
            m,
            store,
            chain,
            id,
            Migration {
                in_force,
                wanted,
                last,
                prev_checkpoint,
                previous_schema,
            },
            events,
            now,
        )
        .await
        .map(|migrated| migrated.map_or(Change::Record(wanted_again), Change::Migrated))
    }

    #[allow(clippy::too_many_arguments)]
    async fn migrate(
        &self,
        m: &DatasetManifest,
        store: &DatasetStore,
        chain: &Chain,
        id: DatasetId,
        migration: Migration,
        events: &[MetadataEvent],
        now: DateTime<Utc>,
    ) -> Result<Option<TxOutcome>, TxError> {
        let name = &m.name;
        let Migration {
            in_force,
            wanted,
            last,
            prev_checkpoint,
            previous_schema,
        } = migration;
        let dir = self.scratch(name)?;
        self.progress.phase(Phase::Stage);
        let Some(inputs) = self.schema_inputs(m, dir.path()).await? else {
            return Err(TxError::QueryChange {
                dataset: name.clone(),
                reason: "an input of the new query has no records to take its schema from".into(),
            });
        };
        let next_transform = wanted.transform.sql().clone();
        let engine = self.engine_for(name, &next_transform.engine)?;
        let prev_checkpoint_path = stage(
            store,
            FileKind::Checkpoint,
            &prev_checkpoint.physical_hash,
            (prev_checkpoint.size > 0).then_some(prev_checkpoint.size),
            dir.path(),
        )
        .await?;
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).map_err(|e| TxError::Scratch {
            dataset: name.clone(),
            message: e.to_string(),
        })?;
        let vocab = DatasetVocabulary::from(&m.vocab.clone().unwrap_or_default());
        let next_offset = chain.summary.last_offset.map_or(0, |o| o + 1);
        let job = MigrateJob {
            dataset_id: id,
            dataset_alias: name.clone(),
            system_time: now,
            vocab: vocab.clone(),
            prev_transform: in_force.transform.sql().clone(),
            next_transform,
            inputs,
            next_offset,
            prev_checkpoint_path: Some(prev_checkpoint_path),
            new_checkpoint_path: out.join("checkpoint"),
            new_data_path: out.join("data"),
            output_schema: previous_schema,
        };
        self.progress.phase(Phase::Engine);
        let started = std::time::Instant::now();
        let report = match engine.migrate_query(&job, &self.progress).await {
            Ok(r) => r,
            Err(EngineFailure::NotSupported { engine, .. }) => {
                tracing::info!(dataset = %name, %engine, "the engine has no MigrateQuery: the next step gets the previous checkpoint");
                return Ok(None);
            }
            Err(EngineFailure::InvalidQuery { engine, message }) => {
                return Err(TxError::QueryChange {
                    dataset: name.clone(),
                    reason: format!("engine `{engine}` cannot migrate its state: {message}"),
                });
            }
            Err(source) => {
                return Err(TxError::Engine {
                    dataset: name.clone(),
                    source,
                });
            }
        };
        let (checked, took) =
            report
                .written
                .checked(&engine.identity().name)
                .map_err(|source| TxError::Engine {
                    dataset: name.clone(),
                    source,
                })?;
        let engine_time = started.elapsed().saturating_sub(took);
        let violation = |violation| TxError::Engine {
            dataset: name.clone(),
            source: EngineFailure::Contract {
                engine: engine.identity().name.clone(),
                violation,
            },
        };
        let mut events = events.to_vec();
        events.push(MetadataEvent::SetTransform(wanted));
        super::record_engine(&chain.summary, &mut events, engine.identity());
        let mut records = 0;
        let new_data = match checked {
            Some(out) => {
                if let Some(schema) =
                    super::schema_event(chain.summary.schema.as_ref(), &out.schema).map_err(
                        |source| TxError::Data {
                            dataset: name.clone(),
                            source,
                        },
                    )?
                {
                    events.push(schema);
                }
                let (physical_hash, size) = store.put_file_from(FileKind::Data, &out.file).await?;
                records = out.rows;
                Some(DataSlice {
                    logical_hash: out.logical_hash,
                    physical_hash,
                    offset_interval: OffsetInterval {
                        start: next_offset,
                        end: next_offset + out.rows - 1,
                    },
                    size,
                })
            }
            None => None,
        };
        let new_checkpoint = if report.new_checkpoint_written {
            if !job.new_checkpoint_path.is_file() {
                return Err(violation(ContractViolation::BadDataFile {
                    message: "MigrateQuery says it wrote a checkpoint but there is none".into(),
                }));
            }
            let (physical_hash, size) = store
                .put_file_from(FileKind::Checkpoint, &job.new_checkpoint_path)
                .await?;
            Some(Checkpoint {
                physical_hash,
                size,
            })
        } else {
            None
        };
        if let (Some(prev), Some(new)) = (chain.summary.watermark, report.new_watermark)
            && new < prev
        {
            return Err(violation(ContractViolation::WatermarkRegressed));
        }
        // The step consumes no input records: every input stays where the last step left it.
        let query_inputs = job
            .inputs
            .iter()
            .map(|i| {
                let consumed = last
                    .query_inputs
                    .iter()
                    .find(|q| q.dataset_id == i.dataset_id);
                // Nothing new from any input, written as kamu writes it: the position carried on in the
                // `prev_*`, no new block or offset.
                ExecuteTransformInput {
                    dataset_id: i.dataset_id,
                    prev_block_hash: consumed.and_then(|q| q.last_block_hash().copied()),
                    new_block_hash: None,
                    prev_offset: consumed.and_then(|q| q.last_offset()),
                    new_offset: None,
                }
            })
            .collect();
        events.push(MetadataEvent::ExecuteTransform(ExecuteTransform {
            query_inputs,
            prev_checkpoint: Some(prev_checkpoint.physical_hash),
            prev_offset: chain.summary.last_offset,
            new_data,
            new_checkpoint,
            new_watermark: report.new_watermark.or(chain.summary.watermark),
        }));
        tracing::info!(dataset = %name, records, "transform migrated");
        self.progress.phase(Phase::Commit);
        commit(store, chain, events, now, records, true, engine_time)
            .await
            .map(Some)
    }
}

/// A migration's inputs.
struct Migration {
    in_force: SetTransform,
    wanted: SetTransform,
    last: ExecuteTransform,
    prev_checkpoint: Checkpoint,
    previous_schema: Option<SchemaRef>,
}

/// The Arrow schema in the footer of the Parquet file at `path`.
fn read_schema(path: &Path) -> Result<SchemaRef, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .map(|b| b.schema().clone())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether a recorded step is a migration: it follows a `SetTransform` and reads nothing new from any input
/// (no input has a new block: a step that runs the query always has one, since it runs only when an input
/// has new records or a new watermark, each of which comes with a new block).
pub fn is_migration(previous: Option<&MetadataEvent>, step: &ExecuteTransform) -> bool {
    matches!(previous, Some(MetadataEvent::SetTransform(_)))
        && step.query_inputs.iter().all(|q| !q.has_new())
}
