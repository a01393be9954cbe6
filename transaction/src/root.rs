//! A root's transaction: the next source file (a polling source's, from a checked snapshot) or a pushed one
//! (`weir ingest`), read in batches, checked, merged and written.

use super::*;

use std::time::SystemTime;

use tracing::warn;
use weir_ingest::files_glob::{self, IngestedFiles};
use weir_ingest::push::{LastPush, RecordedPush, last_push};
use weir_ingest::source_file::{FileSnapshot, SnapshotError};
use weir_odf::FetchStep;

/// Batches a source file is decoded ahead of its checks and the slice's encoding.
const READ_AHEAD: usize = 2;

/// What a root's transaction read from: the snapshot of the source file it read (a glob's file), the
/// files of the source it did not ingest, and the source's last push when a push repeats it.
#[derive(Debug, Default)]
struct SourceRead {
    snapshot: Option<FileSnapshot>,
    notices: Vec<SourceNotice>,
    repeats: Option<LastPush>,
}

/// A file pushed into one of a root's push sources (`weir ingest`).
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The push source's name.
    pub source_name: String,
    /// The read step the file is read with: the source's, or one for the format the caller named.
    pub read: weir_odf::ReadStep,
    /// The file: given by the caller, or standard input copied to scratch.
    pub file: fetch::Fetched,
    /// Its snapshot before the read, checked after it; `None` for a copy this process made.
    pub snapshot: Option<FileSnapshot>,
    /// The SHA3-256 of the file's bytes, recorded with the push ([`RecordedPush`]).
    pub content: Multihash,
    /// Ingest the file even when the source's last push pushed exactly these bytes.
    pub again: bool,
}

/// The result of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// The transaction ran: committed, or nothing to do.
    Ingested(TxOutcome),
    /// The bytes are exactly what the source's last push pushed (the same size and SHA3-256), and
    /// [`Pushed::again`] was not set: nothing was read or committed. The block holds them.
    AlreadyIngested(LastPush),
}

impl Context {
    /// A root's transaction: the next source file read from a checked snapshot. A file that changed while
    /// it was read is refused whatever else went wrong with it (a truncated CSV line, say), since what was
    /// read is then neither its content before nor after; nothing is committed.
    pub(super) async fn ingest_once(&self, m: &DatasetManifest) -> Result<TxOutcome, TxError> {
        self.ingest_checked(m, &mut SourceRead::default(), None)
            .await
    }

    /// One transaction of a root's push source: `pushed` read, checked, merged and committed as a polled
    /// file is, and recorded with its content hash ([`RecordedPush`]). Bytes that are exactly what the
    /// source's last push recorded are not ingested a second time unless [`Pushed::again`] says so: a rerun
    /// of a push that committed and was killed before it could report finds them there.
    pub async fn ingest_pushed(
        &self,
        dataset: &str,
        pushed: Pushed,
    ) -> Result<PushOutcome, TxError> {
        let m = self
            .workspace
            .datasets
            .get(dataset)
            .ok_or_else(|| TxError::UnknownDataset {
                name: dataset.to_string(),
            })?
            .clone();
        let span = tracing::info_span!("transaction", dataset = %dataset, kind = "push");
        let mut read = SourceRead::default();
        let outcome = self
            .ingest_checked(&m, &mut read, Some(pushed))
            .instrument(span)
            .await?;
        Ok(match read.repeats {
            Some(last) => PushOutcome::AlreadyIngested(last),
            None => PushOutcome::Ingested(outcome),
        })
    }

    async fn ingest_checked(
        &self,
        m: &DatasetManifest,
        read: &mut SourceRead,
        push: Option<Pushed>,
    ) -> Result<TxOutcome, TxError> {
        let outcome = self.ingest_file(m, read, push).await;
        let outcome = match (outcome, read.snapshot.clone()) {
            // Found changed already (after the read): no second look needed.
            (Err(e @ TxError::BadData { .. }), _) if changed_while_read(&e) => Err(e),
            (Err(e @ (TxError::BadData { .. } | TxError::Data { .. })), Some(snapshot)) => {
                match tokio::task::spawn_blocking(move || snapshot.check_unchanged()).await {
                    Ok(Err(SnapshotError::Changed(changed))) => Err(TxError::BadData {
                        dataset: m.name.clone(),
                        source: Box::new(BadData::ChangedWhileRead(changed)),
                    }),
                    _ => Err(e),
                }
            }
            (outcome, _) => outcome,
        };
        for n in &read.notices {
            warn!(dataset = %m.name, file = n.file(), kind = n.kind(), "{n}");
        }
        match outcome? {
            TxOutcome::Committed {
                dataset,
                head,
                records,
                blocks,
                more,
                engine_time,
                ..
            } => Ok(TxOutcome::Committed {
                dataset,
                head,
                records,
                blocks,
                more,
                engine_time,
                notices: std::mem::take(&mut read.notices),
            }),
            TxOutcome::UpToDate { dataset, .. } => Ok(TxOutcome::UpToDate {
                dataset,
                notices: std::mem::take(&mut read.notices),
            }),
        }
    }

    /// The next file of a `FilesGlob` source, its snapshot taken, and what the glob holds that is not
    /// ingested; the next file of any other source.
    async fn next_source_file(
        &self,
        dataset: &str,
        fetch: &FetchStep,
        chain: &Chain,
        state: Option<&weir_odf::SourceState>,
        scratch: &Path,
        read: &mut SourceRead,
    ) -> Result<Option<fetch::Fetched>, TxError> {
        let fetch_err = |source| TxError::Fetch {
            dataset: dataset.to_string(),
            source,
        };
        let glob = match fetch {
            FetchStep::FilesGlob(glob) => glob,
            FetchStep::Url(url) => {
                return fetch::fetch_url(&self.workspace.root, url, state, scratch, &self.progress)
                    .await
                    .map_err(fetch_err);
            }
            // Refused when the manifest loads (`manifest::support`); a chain may still name one.
            other => {
                return Err(fetch_err(fetch::FetchError {
                    what: other.kind_name().to_owned(),
                    message: "this fetch step is not supported by Weir".into(),
                }));
            }
        };
        let ingested =
            IngestedFiles::from_adds(chain.blocks.iter().filter_map(|(_, b)| match &b.event {
                MetadataEvent::AddData(a) => Some(a),
                _ => None,
            }));
        let root = self.workspace.root.clone();
        let glob = glob.clone();
        let settle = self.source_settle();
        let progress = self.progress.clone();
        let scan = tokio::task::spawn_blocking(move || {
            files_glob::scan(
                &root,
                &glob,
                &ingested,
                settle,
                SystemTime::now(),
                &progress,
            )
        })
        .await
        .map_err(|_| TxError::Data {
            dataset: dataset.to_string(),
            source: DataError::Panicked {
                context: "looking at the source's files".into(),
            },
        })?
        .map_err(fetch_err)?;
        read.notices = scan.notices;
        Ok(scan.next.map(|pending| {
            read.snapshot = Some(pending.snapshot);
            pending.fetched
        }))
    }

    async fn ingest_file(
        &self,
        m: &DatasetManifest,
        read: &mut SourceRead,
        push: Option<Pushed>,
    ) -> Result<TxOutcome, TxError> {
        let name = m.name.clone();
        let data_err = |source| TxError::Data {
            dataset: name.clone(),
            source,
        };
        let store = self.storage.dataset(&m.name);
        let chain = store.chain().await?;
        let now = Utc::now();
        let mut events = metadata_events(&chain, m, now);
        // The steps the records go through: the polling source's, or the push source's.
        let (read_step, preprocess, merge) = match (&push, &m.polling_source) {
            (Some(p), _) => {
                let Some(src) = m
                    .push_sources
                    .iter()
                    .find(|s| s.source_name == p.source_name)
                else {
                    return Err(TxError::Unsupported {
                        dataset: name,
                        message: format!(
                            "the manifest declares no push source `{}`",
                            p.source_name
                        ),
                    });
                };
                (p.read.clone(), src.preprocess.as_ref(), &src.merge)
            }
            (None, Some(src)) => {
                if chain.summary.push_source {
                    return Err(TxError::Unsupported {
                        dataset: name,
                        message: "the chain declares a push source (AddPushSource) and the manifest a polling source; a dataset takes one or the other".into(),
                    });
                }
                (src.read.clone(), src.preprocess.as_ref(), &src.merge)
            }
            // A root fed by push sources only: a pull records its metadata, `weir ingest` its data.
            (None, None) => {
                if events.is_empty() {
                    return Ok(TxOutcome::UpToDate {
                        dataset: name,
                        notices: Vec::new(),
                    });
                }
                self.progress.phase(Phase::Commit);
                let chain_ref = &chain;
                return commit(&store, chain_ref, events, now, 0, false, Duration::ZERO).await;
            }
        };
        // What this push records, and whether the source's last push recorded the same.
        let push_record = push
            .as_ref()
            .map(|p| RecordedPush::new(&p.source_name, p.file.size, &p.content));
        if let (Some(p), Some(record)) = (&push, &push_record)
            && !p.again
            && let Some(last) = last_push(&chain.blocks, &events, &p.source_name)
            && last.pushed == *record
        {
            info!(dataset = %name, block = %last.block, "the source's last push holds these bytes already");
            read.repeats = Some(last);
            return Ok(TxOutcome::UpToDate {
                dataset: name,
                notices: Vec::new(),
            });
        }
        let read_step = &read_step;
        let pushed = push.is_some();
        let vocab = DatasetVocabulary::from(&m.vocab.clone().unwrap_or_default());
        let state = chain.blocks.iter().rev().find_map(|(_, b)| match &b.event {
            MetadataEvent::AddData(a) => a.new_source_state.clone(),
            _ => None,
        });
        let scratch = self.scratch(&name)?;
        let progress = &self.progress;
        let next = match (push, &m.polling_source) {
            (Some(p), _) => {
                read.snapshot = p.snapshot;
                Some(p.file)
            }
            (None, Some(src)) => {
                self.next_source_file(
                    &name,
                    &src.fetch,
                    &chain,
                    state.as_ref(),
                    scratch.path(),
                    read,
                )
                .await?
            }
            (None, None) => None,
        };
        let mut records = 0;
        let mut engine_time = Duration::ZERO;
        if let Some(file) = next {
            // A polling source's file goes through its prepare steps; a pushed file is read as given.
            let (file, default_event_time) = match (pushed, &m.polling_source) {
                (false, Some(src)) => {
                    // Taken before the prepare steps, from the fetched file itself.
                    let default_event_time =
                        weir_ingest::event_time::for_records_without_one(&src.fetch, &file, now)
                            .map_err(|source| TxError::Fetch {
                                dataset: name.clone(),
                                source,
                            })?;
                    let file = weir_ingest::prepare::prepare(
                        src.prepare.as_deref().unwrap_or_default(),
                        &src.read,
                        file,
                        &self.workspace.root,
                        scratch.path(),
                    )
                    .await
                    .map_err(|source| TxError::Prepare {
                        dataset: name.clone(),
                        source,
                    })?;
                    (file, default_event_time)
                }
                _ => (file, now),
            };
            info!(dataset = %name, file = %file.name, bytes = file.size, "ingesting");
            // Every check of the file's data runs before anything is written.
            let schema = stored_dataset_schema(&store, &chain, &vocab, &name).await?;
            let dataset_schema = schema.clone();
            let declared = m
                .vocab
                .as_ref()
                .is_some_and(|v| v.event_time_column.is_some());
            let mut checks = Checks::new(&file.name, &vocab, merge, schema, default_event_time)
                .event_time_declared(declared);
            let first = chain.summary.last_offset.map_or(0, |o| o + 1);
            let mut slice =
                SliceWriter::new(&scratch.path().join("slice.parquet"), first, now, &vocab);
            let source = read::Source::File(file.path.clone());
            // The records that reach the checks: the file's, or the preprocess query's output.
            let (batches, total_bytes) = match preprocess {
                None => (
                    read::read_batches(read_step, &source, &file.name, Some(checks.event_time()))
                        .map_err(|e| ingest_err(&name, e))?
                        // Decoding overlaps with the checks and the slice's encoding.
                        .read_ahead(READ_AHEAD),
                    Some(file.size),
                ),
                Some(pre) => {
                    let (out, time) = self
                        .preprocess(
                            &name,
                            pre.sql(),
                            read_step,
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
            match merge {
                // Appended as read: each checked batch goes to the slice file, nothing is held.
                MergeStrategy::Append => {
                    weir_ingest::check_each(batches, &mut checks, progress, total_bytes, |b| {
                        // A test hook: pause or abort with part of the source read.
                        fault::point("during-read", &name);
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
                    weir_ingest::check_each(batches, &mut checks, progress, total_bytes, |b| {
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
                    weir_ingest::check_each(batches, &mut checks, progress, total_bytes, |b| {
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
                            weir_manifest::support::merge_kind(other)
                        ),
                    });
                }
            }
            fault::point("after-read", &name);
            // What was read is the file as it was before the read only if it is still that file now.
            if let Some(snapshot) = read.snapshot.clone() {
                let progress = self.progress.clone();
                tokio::task::spawn_blocking(move || snapshot.check_unchanged_reporting(&progress))
                    .await
                    .map_err(|_| TxError::Data {
                        dataset: name.clone(),
                        source: DataError::Panicked {
                            context: "checking the source file after the read".into(),
                        },
                    })?
                    .map_err(|e| match e {
                        SnapshotError::Changed(changed) => TxError::BadData {
                            dataset: name.clone(),
                            source: Box::new(BadData::ChangedWhileRead(changed)),
                        },
                        SnapshotError::Io { .. } => TxError::Fetch {
                            dataset: name.clone(),
                            source: fetch::FetchError {
                                what: file.name.clone(),
                                message: e.to_string(),
                            },
                        },
                    })?;
            }
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
                    let (physical_hash, size) = store
                        .put_file_written(
                            FileKind::Data,
                            &written.file,
                            written.physical_hash,
                            written.size,
                        )
                        .await?;
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
                // A push source resumes from nothing: its data comes when it is pushed.
                new_source_state: (!pushed).then_some(file.state),
                // What the file was when it was read (a glob's file): later pulls compare it with it. A push
                // records what it pushed too: a push of the same bytes after it is a repeat.
                extra: match &push_record {
                    Some(p) => p.to_extra(read.snapshot.as_ref().map(|s| s.recorded()).as_ref()),
                    None => read.snapshot.as_ref().and_then(|s| s.recorded().to_extra()),
                },
            }));
        }
        if events.is_empty() {
            return Ok(TxOutcome::UpToDate {
                dataset: name,
                notices: Vec::new(),
            });
        }
        let more = events
            .iter()
            .any(|e| matches!(e, MetadataEvent::AddData(_)));
        progress.phase(Phase::Commit);
        commit(&store, &chain, events, now, records, more, engine_time).await
    }

    pub(super) fn tx_err(&self, dataset: &str, e: LoadError) -> TxError {
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
    pub(super) async fn preprocess(
        &self,
        dataset: &str,
        sql: &TransformSql,
        read_step: &weir_odf::ReadStep,
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
            &weir_odf::ReadStep::Parquet(weir_odf::ReadStepParquet::default()),
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
}

/// Whether `e` is a source file refused for changing while it was read.
fn changed_while_read(e: &TxError) -> bool {
    matches!(e, TxError::BadData { source, .. } if matches!(**source, BadData::ChangedWhileRead(_)))
}

/// Reads a preprocess query's input as the read step says and writes it to `path`, a batch at a time;
/// returns the records written.
pub(super) fn write_raw(
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
