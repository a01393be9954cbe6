//! The rules every metadata chain keeps, as a sans-IO state machine fed one block at a time, oldest first.

use chrono::{DateTime, Utc};

use super::event::{
    DatasetId, DatasetKind, MetadataBlock, MetadataEvent, SetPollingSource, SetTransform, SetVocab,
};
use crate::hash::Multihash;

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
        "block {sequence_number}: prev_block_hash {found:?} does not link to the previous block {expected:?}"
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
    /// An event that does not belong to the dataset's kind.
    #[error("block {sequence_number}: {event} is not allowed in a {kind:?} dataset")]
    WrongKind {
        /// The block.
        sequence_number: u64,
        /// Its event.
        event: &'static str,
        /// The dataset kind.
        kind: DatasetKind,
    },
    /// A data block came before its source / transform was set.
    #[error("block {sequence_number}: {event} before any {needs}")]
    MissingDefinition {
        /// The block.
        sequence_number: u64,
        /// Its event.
        event: &'static str,
        /// What must come first.
        needs: &'static str,
    },
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
    /// The transform in force.
    pub transform: Option<SetTransform>,
    /// The vocabulary in force.
    pub vocab: Option<SetVocab>,
}

/// Checks blocks one at a time, oldest first.
///
/// ```
/// use coordinator::chain::validate::ChainValidator;
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
        let kind = s.kind.unwrap_or(DatasetKind::Root);
        match &block.event {
            MetadataEvent::Seed(seed) => {
                s.dataset_id = Some(seed.dataset_id.clone());
                s.kind = Some(seed.dataset_kind);
            }
            MetadataEvent::SetPollingSource(p) => {
                if kind != DatasetKind::Root {
                    return Err(ChainViolation::WrongKind {
                        sequence_number: seq,
                        event: "SetPollingSource",
                        kind,
                    });
                }
                s.polling_source = Some(p.clone());
            }
            MetadataEvent::SetTransform(t) => {
                if kind != DatasetKind::Derivative {
                    return Err(ChainViolation::WrongKind {
                        sequence_number: seq,
                        event: "SetTransform",
                        kind,
                    });
                }
                s.transform = Some(t.clone());
            }
            MetadataEvent::SetVocab(v) => s.vocab = Some(v.clone()),
            MetadataEvent::AddData(_) | MetadataEvent::ExecuteTransform(_) => {
                let (allowed, needs, defined) = match &block.event {
                    MetadataEvent::AddData(_) => (
                        kind == DatasetKind::Root,
                        "SetPollingSource",
                        s.polling_source.is_some(),
                    ),
                    _ => (
                        kind == DatasetKind::Derivative,
                        "SetTransform",
                        s.transform.is_some(),
                    ),
                };
                if !allowed {
                    return Err(ChainViolation::WrongKind {
                        sequence_number: seq,
                        event: block.event.name(),
                        kind,
                    });
                }
                if !defined {
                    return Err(ChainViolation::MissingDefinition {
                        sequence_number: seq,
                        event: block.event.name(),
                        needs,
                    });
                }
                let prev_offset = block.event.prev_offset().flatten();
                if prev_offset != s.last_offset {
                    return Err(ChainViolation::OffsetGap {
                        sequence_number: seq,
                        message: format!(
                            "prev_offset is {prev_offset:?} but the last offset is {:?}",
                            s.last_offset
                        ),
                    });
                }
                if let Some(slice) = block.event.new_data() {
                    let start = s.last_offset.map_or(0, |o| o + 1);
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
                    s.num_records += slice.offset_interval.len();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::event::*;

    fn block(seq: u64, prev: Option<Multihash>, event: MetadataEvent) -> MetadataBlock {
        MetadataBlock {
            system_time: Utc::now(),
            prev_block_hash: prev,
            sequence_number: seq,
            event,
        }
    }

    fn seed(kind: DatasetKind) -> MetadataEvent {
        MetadataEvent::Seed(Seed {
            dataset_id: DatasetId([1; 32]),
            dataset_kind: kind,
        })
    }

    fn source() -> MetadataEvent {
        MetadataEvent::SetPollingSource(SetPollingSource {
            fetch: FetchStep::FilesGlob {
                path: "*.csv".into(),
            },
            read: ReadStep::Csv {
                schema: vec![],
                separator: None,
                header: Some(true),
            },
            preprocess: None,
            merge: MergeStrategy::Append,
        })
    }

    fn add(prev: Option<u64>, start: u64, end: u64) -> MetadataEvent {
        MetadataEvent::AddData(AddData {
            prev_checkpoint: None,
            prev_offset: prev,
            new_data: Some(DataSlice {
                logical_hash: Multihash::of(b"l"),
                physical_hash: Multihash::of(b"p"),
                offset_interval: OffsetInterval { start, end },
                size: 1,
            }),
            new_checkpoint: None,
            new_watermark: None,
            new_source_state: None,
        })
    }

    fn run(events: Vec<MetadataEvent>) -> Result<ChainSummary, ChainViolation> {
        let mut v = ChainValidator::default();
        let mut prev = None;
        for (i, e) in events.into_iter().enumerate() {
            let h = Multihash::of(&i.to_le_bytes());
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
            add(None, 0, 9),
            add(Some(9), 11, 14),
        ])
        .unwrap_err();
        assert!(matches!(
            err,
            ChainViolation::OffsetGap {
                sequence_number: 3,
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
    fn a_chain_without_seed_or_with_a_broken_link_is_rejected() {
        assert!(matches!(
            run(vec![source()]).unwrap_err(),
            ChainViolation::SeedMisplaced { .. }
        ));
        let mut v = ChainValidator::default();
        v.push(
            Multihash::of(b"a"),
            &block(0, None, seed(DatasetKind::Root)),
        )
        .unwrap();
        let err = v
            .push(
                Multihash::of(b"b"),
                &block(1, Some(Multihash::of(b"x")), source()),
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
        let t = MetadataEvent::SetTransform(SetTransform {
            inputs: vec![],
            transform: Transform::Sql(TransformSql {
                engine: "x".into(),
                version: None,
                query: None,
                queries: vec![],
            }),
        });
        assert!(matches!(
            run(vec![seed(DatasetKind::Root), t]).unwrap_err(),
            ChainViolation::WrongKind { .. }
        ));
    }
}
