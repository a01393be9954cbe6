//! The rules every metadata chain keeps, as a sans-IO state machine fed one block at a time, oldest first.
//!
//! They are the rules kamu enforces when it appends blocks (full validation): the Seed first, sequence
//! numbers and `prev_block_hash` links, events allowed for the dataset's kind, a `SetDataSchema` before the
//! first data, `SetTransform` inputs given by dataset id with an alias, contiguous offsets, monotonic
//! watermarks and system times, and `ExecuteTransform` inputs that continue where the previous step stopped.
//! [`check_input_against_chain`] checks an `ExecuteTransform` input against the input's own chain, where the
//! caller has it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use weir_odf::{
    DataSchema, DatasetId, DatasetKind, ExecuteTransformInput, MetadataBlock, MetadataEvent,
    Multihash, SetPollingSource, SetTransform, SetVocab,
};

fn show(h: &Option<Multihash>) -> String {
    h.map_or_else(|| "none".to_owned(), |h| h.to_string())
}

fn show_offset(o: &Option<u64>) -> String {
    o.map_or_else(|| "none".to_owned(), |o| o.to_string())
}

fn kind_name(kind: &DatasetKind) -> &'static str {
    match kind {
        DatasetKind::Root => "Root",
        DatasetKind::Derivative => "Derivative",
    }
}

/// A broken rule of the chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainViolation {
    /// The first block is not a Seed, or a Seed appears later.
    #[error("block {sequence_number}: a chain starts with exactly one Seed, found {event}")]
    SeedMisplaced {
        /// The block.
        sequence_number: u64,
        /// Its event.
        event: &'static str,
    },
    /// Sequence numbers are not 0, 1, 2, ...
    #[error("block {found}: expected sequence number {expected}")]
    SequenceGap {
        /// Expected number.
        expected: u64,
        /// Found number.
        found: u64,
    },
    /// The previous-block link does not point at the previous block.
    #[error(
        "block {sequence_number}: prev_block_hash {} does not link to the previous block {}",
        show(found),
        show(expected)
    )]
    BrokenLink {
        /// The block.
        sequence_number: u64,
        /// The previous block's hash.
        expected: Option<Multihash>,
        /// The link found.
        found: Option<Multihash>,
    },
    /// Offsets are not contiguous.
    #[error("block {sequence_number}: offsets are not contiguous: {message}")]
    OffsetGap {
        /// The block.
        sequence_number: u64,
        /// What is wrong.
        message: String,
    },
    /// The watermark went backwards.
    #[error("block {sequence_number}: watermark {found} is older than the previous {previous}")]
    WatermarkRegressed {
        /// The block.
        sequence_number: u64,
        /// Previous watermark.
        previous: DateTime<Utc>,
        /// The new one.
        found: DateTime<Utc>,
    },
    /// The system time went backwards.
    #[error(
        "block {sequence_number}: system time {found} is older than the previous block's {previous}"
    )]
    SystemTimeRegressed {
        /// The block.
        sequence_number: u64,
        /// Previous block's system time.
        previous: DateTime<Utc>,
        /// This block's.
        found: DateTime<Utc>,
    },
    /// An event that does not belong to the dataset's kind.
    #[error(
        "block {sequence_number}: {event} is not allowed in a {} dataset",
        kind_name(kind)
    )]
    WrongKind {
        /// The block.
        sequence_number: u64,
        /// Its event.
        event: &'static str,
        /// The dataset kind.
        kind: DatasetKind,
    },
    /// A data block came before its source / transform / schema was set.
    #[error("block {sequence_number}: {event} before any {needs}")]
    MissingDefinition {
        /// The block.
        sequence_number: u64,
        /// Its event.
        event: &'static str,
        /// What must come first.
        needs: &'static str,
    },
    /// A `SetTransform` input is not given by dataset id with an alias.
    #[error(
        "block {sequence_number}: SetTransform input {index} (`{dataset_ref}`) must be a dataset id (`did:odf:...`) with an alias"
    )]
    UnresolvedTransformInput {
        /// The block.
        sequence_number: u64,
        /// The input's position.
        index: usize,
        /// What the input names.
        dataset_ref: String,
    },
    /// A data slice's file does not match its `DataSlice` (size, logical hash).
    #[error("block {sequence_number}: {message}")]
    DataSliceMismatch {
        /// The block.
        sequence_number: u64,
        /// What differs.
        message: String,
    },
    /// An `ExecuteTransform` that neither adds data nor advances an input, its checkpoint or its watermark.
    #[error(
        "block {sequence_number}: ExecuteTransform neither has data nor advances an input, its checkpoint or its watermark"
    )]
    NoOp {
        /// The block.
        sequence_number: u64,
    },
    /// An offset that cannot be a record's: ODF's `offset` column is a signed 64-bit integer.
    #[error(
        "block {sequence_number}: offset {offset} is beyond the largest a record can have ({})",
        i64::MAX
    )]
    OffsetOutOfRange {
        /// The block.
        sequence_number: u64,
        /// The offset.
        offset: u64,
    },
    /// An `ExecuteTransform`'s inputs do not match the transform in force or the previous step.
    #[error("block {sequence_number}: ExecuteTransform input {index}: {message}")]
    InconsistentInput {
        /// The block.
        sequence_number: u64,
        /// The input's position.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

impl ChainViolation {
    /// A data slice whose file does not match what the block says (size or logical hash).
    pub fn data_slice(sequence_number: u64, message: String) -> Self {
        ChainViolation::DataSliceMismatch {
            sequence_number,
            message,
        }
    }
}

/// What a valid chain adds up to.
#[derive(Debug, Clone, Default)]
pub struct ChainSummary {
    /// Dataset id from the Seed.
    pub dataset_id: Option<DatasetId>,
    /// Kind from the Seed.
    pub kind: Option<DatasetKind>,
    /// Hash of the last block.
    pub head: Option<Multihash>,
    /// Sequence number of the last block.
    pub last_sequence_number: Option<u64>,
    /// Last offset written.
    pub last_offset: Option<u64>,
    /// Records (rows) written.
    pub num_records: u64,
    /// Latest watermark.
    pub watermark: Option<DateTime<Utc>>,
    /// System time of the last block.
    pub last_updated: Option<DateTime<Utc>>,
    /// The source in force.
    pub polling_source: Option<SetPollingSource>,
    /// Whether the chain declared a push source (`AddPushSource`), which Weir does not pull.
    pub push_source: bool,
    /// The transform in force.
    pub transform: Option<SetTransform>,
    /// The vocabulary in force.
    pub vocab: Option<SetVocab>,
    /// The schema in force (the last `SetDataSchema`).
    pub schema: Option<DataSchema>,
    /// Per input of the transform: the input block and offset the last step consumed up to.
    pub consumed: HashMap<DatasetId, (Option<Multihash>, Option<u64>)>,
}

/// Checks blocks one at a time, oldest first.
///
/// ```
/// use weir_dataset::chain::validate::ChainValidator;
/// let v = ChainValidator::default();
/// assert!(v.summary().head.is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ChainValidator {
    summary: ChainSummary,
}

impl ChainValidator {
    /// Checks the next block, whose manifest hashes to `hash`.
    pub fn push(&mut self, hash: Multihash, block: &MetadataBlock) -> Result<(), ChainViolation> {
        let s = &mut self.summary;
        let seq = block.sequence_number;
        let expected = s.last_sequence_number.map_or(0, |n| n + 1);
        if seq != expected {
            return Err(ChainViolation::SequenceGap {
                expected,
                found: seq,
            });
        }
        if block.prev_block_hash != s.head {
            return Err(ChainViolation::BrokenLink {
                sequence_number: seq,
                expected: s.head,
                found: block.prev_block_hash,
            });
        }
        let is_seed = matches!(block.event, MetadataEvent::Seed(_));
        if (seq == 0) != is_seed {
            return Err(ChainViolation::SeedMisplaced {
                sequence_number: seq,
                event: block.event.name(),
            });
        }
        if let Some(previous) = s.last_updated
            && block.system_time < previous
        {
            return Err(ChainViolation::SystemTimeRegressed {
                sequence_number: seq,
                previous,
                found: block.system_time,
            });
        }
        let kind = s.kind.unwrap_or(DatasetKind::Root);
        let wrong_kind = |event: &'static str| ChainViolation::WrongKind {
            sequence_number: seq,
            event,
            kind,
        };
        match &block.event {
            MetadataEvent::Seed(seed) => {
                s.dataset_id = Some(seed.dataset_id);
                s.kind = Some(seed.dataset_kind);
            }
            MetadataEvent::SetPollingSource(p) => {
                if kind != DatasetKind::Root {
                    return Err(wrong_kind("SetPollingSource"));
                }
                s.polling_source = Some(p.clone());
            }
            MetadataEvent::DisablePollingSource(_) => {
                if kind != DatasetKind::Root {
                    return Err(wrong_kind("DisablePollingSource"));
                }
                s.polling_source = None;
            }
            MetadataEvent::AddPushSource(_) | MetadataEvent::DisablePushSource(_) => {
                if kind != DatasetKind::Root {
                    return Err(wrong_kind(block.event.name()));
                }
                s.push_source = matches!(block.event, MetadataEvent::AddPushSource(_));
            }
            MetadataEvent::SetTransform(t) => {
                if kind != DatasetKind::Derivative {
                    return Err(wrong_kind("SetTransform"));
                }
                for (index, input) in t.inputs.iter().enumerate() {
                    if input.dataset_id().is_none() || input.alias.is_none() {
                        return Err(ChainViolation::UnresolvedTransformInput {
                            sequence_number: seq,
                            index,
                            dataset_ref: input.dataset_ref.clone(),
                        });
                    }
                }
                s.transform = Some(t.clone());
            }
            MetadataEvent::SetVocab(v) => s.vocab = Some(v.clone()),
            MetadataEvent::SetDataSchema(d) => {
                s.schema = d.schema.clone().or(Some(DataSchema::new(Vec::new())))
            }
            MetadataEvent::SetInfo(_)
            | MetadataEvent::SetLicense(_)
            | MetadataEvent::SetAttachments(_) => {}
            MetadataEvent::AddData(_) | MetadataEvent::ExecuteTransform(_) => {
                let (allowed, needs, defined) = match &block.event {
                    MetadataEvent::AddData(_) => (
                        kind == DatasetKind::Root,
                        "SetPollingSource or AddPushSource",
                        s.polling_source.is_some() || s.push_source,
                    ),
                    _ => (
                        kind == DatasetKind::Derivative,
                        "SetTransform",
                        s.transform.is_some(),
                    ),
                };
                if !allowed {
                    return Err(wrong_kind(block.event.name()));
                }
                if !defined {
                    return Err(ChainViolation::MissingDefinition {
                        sequence_number: seq,
                        event: block.event.name(),
                        needs,
                    });
                }
                if block.event.new_data().is_some() && s.schema.is_none() {
                    return Err(ChainViolation::MissingDefinition {
                        sequence_number: seq,
                        event: block.event.name(),
                        needs: "SetDataSchema",
                    });
                }
                if let MetadataEvent::ExecuteTransform(e) = &block.event {
                    check_step_inputs(seq, e, s)?;
                }
                let prev_offset = block.event.prev_offset().flatten();
                if prev_offset != s.last_offset {
                    return Err(ChainViolation::OffsetGap {
                        sequence_number: seq,
                        message: format!(
                            "prev_offset is {} but the last offset is {}",
                            show_offset(&prev_offset),
                            show_offset(&s.last_offset)
                        ),
                    });
                }
                for offset in [
                    prev_offset,
                    block.event.new_data().map(|d| d.offset_interval.end),
                ]
                .into_iter()
                .flatten()
                {
                    if i64::try_from(offset).is_err() {
                        return Err(ChainViolation::OffsetOutOfRange {
                            sequence_number: seq,
                            offset,
                        });
                    }
                }
                if let Some(slice) = block.event.new_data() {
                    // Offsets fit in i64 (checked above and when they were recorded), so this cannot wrap.
                    let start = s.last_offset.map_or(0, |o| o.saturating_add(1));
                    if slice.offset_interval.start != start
                        || slice.offset_interval.end < slice.offset_interval.start
                    {
                        return Err(ChainViolation::OffsetGap {
                            sequence_number: seq,
                            message: format!(
                                "new data covers [{}, {}] but must start at {start}",
                                slice.offset_interval.start, slice.offset_interval.end
                            ),
                        });
                    }
                    s.last_offset = Some(slice.offset_interval.end);
                    s.num_records = s.num_records.saturating_add(slice.offset_interval.len());
                }
                if let Some(w) = block.event.new_watermark() {
                    if let Some(prev) = s.watermark
                        && w < prev
                    {
                        return Err(ChainViolation::WatermarkRegressed {
                            sequence_number: seq,
                            previous: prev,
                            found: w,
                        });
                    }
                    s.watermark = Some(w);
                }
            }
        }
        s.head = Some(hash);
        s.last_sequence_number = Some(seq);
        s.last_updated = Some(block.system_time);
        Ok(())
    }

    /// The state after the blocks pushed so far.
    pub fn summary(&self) -> &ChainSummary {
        &self.summary
    }
}

/// An `ExecuteTransform`'s inputs: one per input of the transform in force, by id and in order, each
/// continuing where the previous step of that input stopped, never going back.
fn check_step_inputs(
    seq: u64,
    e: &weir_odf::ExecuteTransform,
    s: &mut ChainSummary,
) -> Result<(), ChainViolation> {
    let bad = |index: usize, message: String| ChainViolation::InconsistentInput {
        sequence_number: seq,
        index,
        message,
    };
    let ids: Vec<Option<DatasetId>> = s
        .transform
        .as_ref()
        .map(|t| t.inputs.iter().map(|i| i.dataset_id()).collect())
        .unwrap_or_default();
    if e.query_inputs.len() != ids.len() {
        return Err(bad(
            e.query_inputs.len(),
            format!(
                "the step has {} inputs but the transform in force has {}",
                e.query_inputs.len(),
                ids.len()
            ),
        ));
    }
    for (index, (q, id)) in e.query_inputs.iter().zip(&ids).enumerate() {
        if Some(q.dataset_id) != *id {
            return Err(bad(
                index,
                format!(
                    "dataset {} is not the transform's input {index}",
                    q.dataset_id
                ),
            ));
        }
        let (block, offset) = s.consumed.get(&q.dataset_id).cloned().unwrap_or_default();
        if q.prev_block_hash != block || q.prev_offset != offset {
            return Err(bad(
                index,
                format!(
                    "starts after block {} offset {} but the previous step stopped at block {} offset {}",
                    show(&q.prev_block_hash),
                    show_offset(&q.prev_offset),
                    show(&block),
                    show_offset(&offset)
                ),
            ));
        }
        // kamu's rules for an input's interval: nothing new is written as no new block and no new offset,
        // never as the previous ones again.
        if q.new_block_hash.is_some() && q.new_block_hash == q.prev_block_hash {
            return Err(bad(
                index,
                "its new block is its previous block (an input with nothing new has no new block; kamu: invalid input block interval)".into(),
            ));
        }
        if q.new_offset.is_some() && q.new_offset == q.prev_offset {
            return Err(bad(
                index,
                "its new offset is its previous offset (an input with no new records has no new offset; kamu: invalid input offset interval)".into(),
            ));
        }
        if q.new_offset.is_some() && q.new_block_hash.is_none() {
            return Err(bad(index, "has a new offset but no new block".into()));
        }
        if let (Some(prev), Some(new)) = (q.prev_offset, q.new_offset)
            && new < prev
        {
            return Err(bad(index, "goes back to before the previous step".into()));
        }
    }
    let checkpoint_unchanged =
        e.new_checkpoint.as_ref().map(|c| c.physical_hash) == e.prev_checkpoint;
    if e.new_data.is_none()
        && checkpoint_unchanged
        && e.new_watermark == s.watermark
        && e.query_inputs.iter().all(|q| q.new_block_hash.is_none())
    {
        return Err(ChainViolation::NoOp {
            sequence_number: seq,
        });
    }
    for q in &e.query_inputs {
        s.consumed.insert(
            q.dataset_id,
            (q.last_block_hash().copied(), q.last_offset()),
        );
    }
    Ok(())
}

/// Checks an `ExecuteTransform` input against the input dataset's chain (`blocks`, oldest first): its
/// `new_block_hash` is a block of that chain, its last offset (`new_offset`, or the previous one when it read
/// no new records) is the last offset written up to that block,
/// and its `prev_block_hash`, if any, comes no later.
pub fn check_input_against_chain(
    sequence_number: u64,
    index: usize,
    input: &ExecuteTransformInput,
    blocks: &[(Multihash, MetadataBlock)],
) -> Result<(), ChainViolation> {
    let bad = |message: String| ChainViolation::InconsistentInput {
        sequence_number,
        index,
        message,
    };
    let position = |h: &Multihash| blocks.iter().position(|(b, _)| b == h);
    let Some(new) = input.new_block_hash else {
        return if input.new_offset.is_none() {
            Ok(())
        } else {
            Err(bad("has a new offset but no new block".into()))
        };
    };
    let Some(at) = position(&new) else {
        return Err(bad(format!(
            "block {new} is not in the chain of {}",
            input.dataset_id
        )));
    };
    let last_offset = blocks[..=at]
        .iter()
        .filter_map(|(_, b)| b.event.new_data())
        .map(|d| d.offset_interval.end)
        .next_back();
    // With no new records the offset is the previous one (kamu leaves `new_offset` out).
    if last_offset != input.last_offset() {
        return Err(bad(format!(
            "new offset {} but the input's last offset at block {new} is {}",
            show_offset(&input.last_offset()),
            show_offset(&last_offset)
        )));
    }
    if let Some(prev) = input.prev_block_hash {
        match position(&prev) {
            Some(p) if p <= at => {}
            _ => {
                return Err(bad(format!(
                    "previous block {prev} is not in the chain of {} before block {new}",
                    input.dataset_id
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_odf::*;

    fn block(seq: u64, prev: Option<Multihash>, event: MetadataEvent) -> MetadataBlock {
        MetadataBlock {
            system_time: DateTime::from_timestamp(1_700_000_000 + seq as i64, 0).unwrap(),
            prev_block_hash: prev,
            sequence_number: seq,
            event,
        }
    }

    const ROOT_ID: DatasetId = DatasetId::from_key([1; 32]);

    fn seed(kind: DatasetKind) -> MetadataEvent {
        MetadataEvent::Seed(Seed {
            dataset_id: ROOT_ID,
            dataset_kind: kind,
        })
    }

    fn source() -> MetadataEvent {
        MetadataEvent::SetPollingSource(SetPollingSource {
            fetch: FetchStep::FilesGlob(FetchStepFilesGlob {
                path: "*.csv".into(),
                event_time: None,
                cache: None,
                order: None,
            }),
            prepare: None,
            read: ReadStep::Csv(ReadStepCsv {
                header: Some(true),
                ..Default::default()
            }),
            preprocess: None,
            merge: MergeStrategy::Append,
        })
    }

    fn schema() -> MetadataEvent {
        MetadataEvent::SetDataSchema(SetDataSchema::new(DataSchema::new(vec![DataField::new(
            "offset",
            DataType::Int64,
        )])))
    }

    fn slice(start: u64, end: u64) -> DataSlice {
        DataSlice {
            logical_hash: Multihash::sha3_256(b"l"),
            physical_hash: Multihash::sha3_256(b"p"),
            offset_interval: OffsetInterval { start, end },
            size: 1,
        }
    }

    fn add(prev: Option<u64>, start: u64, end: u64) -> MetadataEvent {
        MetadataEvent::AddData(AddData {
            prev_offset: prev,
            new_data: Some(slice(start, end)),
            ..Default::default()
        })
    }

    fn transform(dataset_ref: &str, alias: Option<&str>) -> MetadataEvent {
        MetadataEvent::SetTransform(SetTransform {
            inputs: vec![TransformInput {
                dataset_ref: dataset_ref.into(),
                alias: alias.map(str::to_owned),
            }],
            transform: Transform::Sql(TransformSql {
                engine: "datafusion".into(),
                version: None,
                query: None,
                queries: Some(vec![SqlQueryStep {
                    alias: None,
                    query: "select * from root".into(),
                }]),
                temporal_tables: None,
            }),
        })
    }

    fn step(
        prev: Option<(Multihash, u64)>,
        new: (Multihash, u64),
        out: Option<(u64, u64)>,
    ) -> MetadataEvent {
        MetadataEvent::ExecuteTransform(ExecuteTransform {
            query_inputs: vec![ExecuteTransformInput {
                dataset_id: ROOT_ID,
                prev_block_hash: prev.map(|p| p.0),
                new_block_hash: Some(new.0),
                prev_offset: prev.map(|p| p.1),
                new_offset: Some(new.1),
            }],
            prev_offset: out.and_then(|(s, _)| s.checked_sub(1)),
            new_data: out.map(|(s, e)| slice(s, e)),
            ..Default::default()
        })
    }

    fn run(events: Vec<MetadataEvent>) -> Result<ChainSummary, ChainViolation> {
        let mut v = ChainValidator::default();
        let mut prev = None;
        for (i, e) in events.into_iter().enumerate() {
            let h = Multihash::sha3_256(&i.to_le_bytes());
            v.push(h, &block(i as u64, prev, e))?;
            prev = Some(h);
        }
        Ok(v.summary().clone())
    }

    #[test]
    fn contiguous_root_chain_adds_up_its_records() {
        let s = run(vec![
            seed(DatasetKind::Root),
            source(),
            schema(),
            add(None, 0, 9),
            add(Some(9), 10, 14),
        ])
        .unwrap();
        assert_eq!(s.num_records, 15);
        assert_eq!(s.last_offset, Some(14));
    }

    #[test]
    fn an_offset_gap_is_reported_with_its_block() {
        let err = run(vec![
            seed(DatasetKind::Root),
            source(),
            schema(),
            add(None, 0, 9),
            add(Some(9), 11, 14),
        ])
        .unwrap_err();
        assert!(matches!(
            err,
            ChainViolation::OffsetGap {
                sequence_number: 4,
                ..
            }
        ));
    }

    #[test]
    fn data_before_a_source_is_rejected() {
        let err = run(vec![seed(DatasetKind::Root), add(None, 0, 9)]).unwrap_err();
        assert!(matches!(
            err,
            ChainViolation::MissingDefinition {
                sequence_number: 1,
                ..
            }
        ));
    }

    #[test]
    fn data_before_a_set_data_schema_is_rejected() {
        let err = run(vec![seed(DatasetKind::Root), source(), add(None, 0, 9)]).unwrap_err();
        assert_eq!(
            err,
            ChainViolation::MissingDefinition {
                sequence_number: 2,
                event: "AddData",
                needs: "SetDataSchema",
            }
        );
        assert_eq!(err.to_string(), "block 2: AddData before any SetDataSchema");
    }

    #[test]
    fn transform_inputs_must_be_ids_with_aliases() {
        let id = ROOT_ID.to_string();
        assert!(
            run(vec![
                seed(DatasetKind::Derivative),
                transform(&id, Some("root"))
            ])
            .is_ok()
        );
        for bad in [transform("root", Some("root")), transform(&id, None)] {
            assert!(matches!(
                run(vec![seed(DatasetKind::Derivative), bad]).unwrap_err(),
                ChainViolation::UnresolvedTransformInput {
                    sequence_number: 1,
                    index: 0,
                    ..
                }
            ));
        }
    }

    #[test]
    fn a_step_must_continue_where_the_previous_step_of_its_input_stopped() {
        let id = ROOT_ID.to_string();
        let (a, b) = (Multihash::sha3_256(b"a"), Multihash::sha3_256(b"b"));
        let base = || {
            vec![
                seed(DatasetKind::Derivative),
                transform(&id, Some("root")),
                schema(),
            ]
        };
        let mut good = base();
        good.extend([
            step(None, (a, 4), Some((0, 4))),
            step(Some((a, 4)), (b, 9), Some((5, 9))),
        ]);
        assert!(run(good).is_ok());
        let mut skipped = base();
        skipped.extend([
            step(None, (a, 4), Some((0, 4))),
            step(Some((b, 6)), (b, 9), Some((5, 9))),
        ]);
        assert!(matches!(
            run(skipped).unwrap_err(),
            ChainViolation::InconsistentInput {
                sequence_number: 4,
                index: 0,
                ..
            }
        ));
    }

    #[test]
    fn system_time_going_back_is_rejected() {
        let mut v = ChainValidator::default();
        let h0 = Multihash::sha3_256(b"0");
        v.push(h0, &block(0, None, seed(DatasetKind::Root)))
            .unwrap();
        let mut b = block(1, Some(h0), source());
        b.system_time = DateTime::from_timestamp(1_600_000_000, 0).unwrap();
        assert!(matches!(
            v.push(Multihash::sha3_256(b"1"), &b).unwrap_err(),
            ChainViolation::SystemTimeRegressed { .. }
        ));
    }

    #[test]
    fn an_input_is_checked_against_the_input_chain() {
        let root: Vec<(Multihash, MetadataBlock)> =
            [seed(DatasetKind::Root), source(), schema(), add(None, 0, 9)]
                .into_iter()
                .enumerate()
                .map(|(i, e)| {
                    (
                        Multihash::sha3_256(&i.to_le_bytes()),
                        block(i as u64, None, e),
                    )
                })
                .collect();
        let head = root[3].0;
        let input = |offset| ExecuteTransformInput {
            dataset_id: ROOT_ID,
            prev_block_hash: None,
            new_block_hash: Some(head),
            prev_offset: None,
            new_offset: Some(offset),
        };
        assert!(check_input_against_chain(4, 0, &input(9), &root).is_ok());
        assert!(check_input_against_chain(4, 0, &input(8), &root).is_err());
    }

    #[test]
    fn a_chain_without_seed_or_with_a_broken_link_is_rejected() {
        assert!(matches!(
            run(vec![source()]).unwrap_err(),
            ChainViolation::SeedMisplaced { .. }
        ));
        let mut v = ChainValidator::default();
        v.push(
            Multihash::sha3_256(b"a"),
            &block(0, None, seed(DatasetKind::Root)),
        )
        .unwrap();
        let err = v
            .push(
                Multihash::sha3_256(b"b"),
                &block(1, Some(Multihash::sha3_256(b"x")), source()),
            )
            .unwrap_err();
        assert!(matches!(
            err,
            ChainViolation::BrokenLink {
                sequence_number: 1,
                ..
            }
        ));
    }

    #[test]
    fn transform_events_do_not_belong_in_a_root_dataset() {
        let t = transform(&ROOT_ID.to_string(), Some("root"));
        let err = run(vec![seed(DatasetKind::Root), t]).unwrap_err();
        assert!(matches!(err, ChainViolation::WrongKind { .. }));
        assert_eq!(
            err.to_string(),
            "block 1: SetTransform is not allowed in a Root dataset"
        );
    }
}
