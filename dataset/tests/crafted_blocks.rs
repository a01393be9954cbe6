//! Crafted blocks: a valid root and derivative chain, one field of one block changed so that it breaks an ODF
//! chain rule, every block after it re-linked and re-hashed (as an attacker storing blocks under their
//! correct hashes would): the validator refuses every such chain, at the changed block or later, and
//! accepts the chain as written.
#![allow(clippy::unwrap_used)]

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use weir_dataset::chain::validate::{ChainValidator, ChainViolation};
use weir_odf::{
    AddData, DataSchema, DataSlice, DatasetId, DatasetKind, ExecuteTransform,
    ExecuteTransformInput, MetadataBlock, MetadataEvent, Multihash, OffsetInterval, Seed,
    SetDataSchema, SetTransform, Transform, TransformInput, TransformSql,
};

const ROOT: DatasetId = DatasetId::from_key([1; 32]);
const DERIV: DatasetId = DatasetId::from_key([2; 32]);

fn at(s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).unwrap() + Duration::seconds(s)
}

fn slice(start: u64, end: u64) -> DataSlice {
    DataSlice {
        logical_hash: Multihash::sha3_256(format!("l{start}").as_bytes()),
        physical_hash: Multihash::sha3_256(format!("p{start}").as_bytes()),
        offset_interval: OffsetInterval { start, end },
        size: 100,
    }
}

fn schema() -> MetadataEvent {
    MetadataEvent::SetDataSchema(SetDataSchema::new(DataSchema::new(Vec::new())))
}

/// A derivative's events: Seed, SetTransform, SetDataSchema, then one step per entry of `steps` (records
/// read from the root, records written), each reading the root's blocks `root_heads[k]`.
fn derivative(steps: &[(u64, u64)], root_heads: &[Multihash]) -> Vec<MetadataEvent> {
    let mut events = vec![
        MetadataEvent::Seed(Seed {
            dataset_id: DERIV,
            dataset_kind: DatasetKind::Derivative,
        }),
        MetadataEvent::SetTransform(SetTransform {
            inputs: vec![TransformInput {
                dataset_ref: ROOT.to_string(),
                alias: Some("root".into()),
            }],
            transform: Transform::Sql(TransformSql {
                engine: "datafusion".into(),
                version: None,
                query: Some("select * from root".into()),
                queries: None,
                temporal_tables: None,
            }),
        }),
        schema(),
    ];
    let (mut read, mut written) = (None::<u64>, None::<u64>);
    let mut prev_block = None;
    for (k, (r, w)) in steps.iter().enumerate() {
        let new_read = read.map_or(r - 1, |x| x + r);
        let new_written = written.map_or(w - 1, |x| x + w);
        let first = written.map_or(0, |x| x + 1);
        events.push(MetadataEvent::ExecuteTransform(ExecuteTransform {
            query_inputs: vec![ExecuteTransformInput::advanced(
                ROOT,
                prev_block,
                read,
                Some(root_heads[k]),
                Some(new_read),
            )],
            prev_offset: written,
            new_data: Some(slice(first, new_written)),
            new_watermark: Some(at(k as i64 * 10)),
            ..Default::default()
        }));
        prev_block = Some(root_heads[k]);
        read = Some(new_read);
        written = Some(new_written);
    }
    events
}

/// A root's events: Seed, SetPollingSource-free push source, SetDataSchema, `adds` AddData of n records.
fn root(adds: &[u64]) -> Vec<MetadataEvent> {
    let mut events = vec![
        MetadataEvent::Seed(Seed {
            dataset_id: ROOT,
            dataset_kind: DatasetKind::Root,
        }),
        MetadataEvent::AddPushSource(weir_odf::AddPushSource {
            source_name: "default".into(),
            read: weir_odf::ReadStep::NdJson(Default::default()),
            preprocess: None,
            merge: weir_odf::MergeStrategy::Append,
        }),
        schema(),
    ];
    let mut last = None::<u64>;
    for (k, n) in adds.iter().enumerate() {
        let first = last.map_or(0, |x| x + 1);
        let end = first + n - 1;
        events.push(MetadataEvent::AddData(AddData {
            prev_offset: last,
            new_data: Some(slice(first, end)),
            new_watermark: Some(at(k as i64 * 10)),
            ..Default::default()
        }));
        last = Some(end);
    }
    events
}

/// Blocks for `events`, linked and hashed, a second apart.
fn link(events: Vec<MetadataEvent>) -> Vec<(Multihash, MetadataBlock)> {
    let mut prev = None;
    events
        .into_iter()
        .enumerate()
        .map(|(k, event)| {
            let block = MetadataBlock {
                system_time: at(k as i64),
                prev_block_hash: prev,
                sequence_number: k as u64,
                event,
            };
            let hash = MetadataBlock::hash(&block.encode());
            prev = Some(hash);
            (hash, block)
        })
        .collect()
}

/// Re-links and re-hashes `blocks` from the first: what an attacker stores.
fn relink(blocks: Vec<MetadataBlock>) -> Vec<(Multihash, MetadataBlock)> {
    let mut prev = None;
    blocks
        .into_iter()
        .map(|mut b| {
            b.prev_block_hash = prev;
            let hash = MetadataBlock::hash(&b.encode());
            prev = Some(hash);
            (hash, b)
        })
        .collect()
}

fn validate(blocks: &[(Multihash, MetadataBlock)]) -> Result<(), (u64, ChainViolation)> {
    let mut v = ChainValidator::default();
    for (h, b) in blocks {
        v.push(*h, b).map_err(|e| (b.sequence_number, e))?;
    }
    Ok(())
}

/// Rule-breaking changes to one block.
#[derive(Debug, Clone, Copy)]
enum Mutation {
    /// The offset interval's end beyond i64 (the crafted block of the probe).
    EndBeyondI64,
    /// The interval ends before it starts.
    EndBeforeStart,
    /// The interval starts elsewhere than after the previous one.
    StartShifted(u64),
    /// `prev_offset` is not the last offset.
    PrevOffsetShifted(u64),
    /// The sequence number is another.
    SequenceNumber(u64),
    /// The system time goes back before the previous block's.
    SystemTimeBack,
    /// The watermark goes back before the previous one.
    WatermarkBack,
    /// A second Seed.
    SecondSeed,
    /// The derivative's step repeats the previous input block as a new one.
    InputBlockRepeated,
    /// The derivative's step reads from another block than where the previous one stopped.
    InputPrevBlockShifted,
    /// The derivative's step names another dataset.
    InputDatasetSwapped,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::EndBeyondI64),
        Just(Mutation::EndBeforeStart),
        (1u64..1000).prop_map(Mutation::StartShifted),
        (1u64..1000).prop_map(Mutation::PrevOffsetShifted),
        (1u64..1000).prop_map(Mutation::SequenceNumber),
        Just(Mutation::SystemTimeBack),
        Just(Mutation::WatermarkBack),
        Just(Mutation::SecondSeed),
        Just(Mutation::InputBlockRepeated),
        Just(Mutation::InputPrevBlockShifted),
        Just(Mutation::InputDatasetSwapped),
    ]
}

fn interval(b: &mut MetadataBlock) -> Option<&mut OffsetInterval> {
    match &mut b.event {
        MetadataEvent::AddData(a) => a.new_data.as_mut().map(|d| &mut d.offset_interval),
        MetadataEvent::ExecuteTransform(e) => e.new_data.as_mut().map(|d| &mut d.offset_interval),
        _ => None,
    }
}

/// Applies `m` to a data block of `blocks` chosen by `pick` (the data blocks from the second one, so that
/// each has a previous data block); `false` when the mutation does not apply to this chain.
fn apply(blocks: &mut [MetadataBlock], m: Mutation, pick: usize) -> bool {
    let data: Vec<usize> = blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.event.new_data().is_some())
        .map(|(k, _)| k)
        .skip(1)
        .collect();
    if data.is_empty() {
        return false;
    }
    let k = data[pick % data.len()];
    match m {
        Mutation::EndBeyondI64 => interval(&mut blocks[k]).unwrap().end = u64::MAX - 4294967286,
        Mutation::EndBeforeStart => {
            let i = interval(&mut blocks[k]).unwrap();
            if i.start == 0 {
                return false;
            }
            i.end = i.start - 1;
        }
        Mutation::StartShifted(d) => interval(&mut blocks[k]).unwrap().start += d,
        Mutation::PrevOffsetShifted(d) => match &mut blocks[k].event {
            MetadataEvent::AddData(a) => a.prev_offset = a.prev_offset.map(|o| o + d),
            MetadataEvent::ExecuteTransform(e) => e.prev_offset = e.prev_offset.map(|o| o + d),
            _ => return false,
        },
        Mutation::SequenceNumber(d) => blocks[k].sequence_number += d,
        Mutation::SystemTimeBack => blocks[k].system_time = at(-100),
        Mutation::WatermarkBack => match &mut blocks[k].event {
            MetadataEvent::AddData(a) => a.new_watermark = Some(at(-100)),
            MetadataEvent::ExecuteTransform(e) => e.new_watermark = Some(at(-100)),
            _ => return false,
        },
        Mutation::SecondSeed => {
            blocks[k].event = MetadataEvent::Seed(Seed {
                dataset_id: ROOT,
                dataset_kind: DatasetKind::Root,
            })
        }
        Mutation::InputBlockRepeated
        | Mutation::InputPrevBlockShifted
        | Mutation::InputDatasetSwapped => {
            let MetadataEvent::ExecuteTransform(e) = &mut blocks[k].event else {
                return false;
            };
            let q = &mut e.query_inputs[0];
            match m {
                Mutation::InputBlockRepeated => q.new_block_hash = q.prev_block_hash,
                Mutation::InputPrevBlockShifted => {
                    q.prev_block_hash = Some(Multihash::sha3_256(b"elsewhere"))
                }
                _ => q.dataset_id = DatasetId::from_key([9; 32]),
            }
        }
    }
    true
}

proptest! {
    #[test]
    fn every_rule_breaking_change_is_refused(
        adds in prop::collection::vec(1u64..50, 2..8),
        reads in prop::collection::vec((1u64..20, 1u64..20), 2..6),
        m in mutation(),
        pick in 0usize..100,
        in_derivative in any::<bool>(),
    ) {
        let root_blocks = link(root(&adds));
        prop_assert!(validate(&root_blocks).is_ok());
        // Each step reads the root up to one of its data blocks (in order, not past the end).
        let heads: Vec<Multihash> = root_blocks
            .iter()
            .filter(|(_, b)| b.event.new_data().is_some())
            .map(|(h, _)| *h)
            .collect();
        let steps: Vec<(u64, u64)> = reads.into_iter().take(heads.len()).collect();
        let deriv_blocks = link(derivative(&steps, &heads));
        prop_assert!(validate(&deriv_blocks).is_ok(), "{:?}", validate(&deriv_blocks));

        let original = if in_derivative { &deriv_blocks } else { &root_blocks };
        let mut blocks: Vec<MetadataBlock> = original.iter().map(|(_, b)| b.clone()).collect();
        prop_assume!(apply(&mut blocks, m, pick));
        let crafted = relink(blocks);
        let changed_at = crafted
            .iter()
            .zip(original.iter())
            .position(|((_, a), (_, b))| a.event != b.event || a.sequence_number != b.sequence_number || a.system_time != b.system_time)
            .unwrap();
        match validate(&crafted) {
            Ok(()) => prop_assert!(false, "{m:?} at block {changed_at} was accepted"),
            Err((seq, _)) => prop_assert!(seq >= changed_at as u64 || matches!(m, Mutation::SequenceNumber(_))),
        }
    }
}

#[test]
fn the_probes_crafted_head_block_is_refused_naming_the_offset() {
    let mut blocks: Vec<MetadataBlock> = link(root(&[4, 4])).into_iter().map(|(_, b)| b).collect();
    let last = blocks.len() - 1;
    if let MetadataEvent::AddData(a) = &mut blocks[last].event {
        a.new_data.as_mut().unwrap().offset_interval.end = 18446744069414584329;
    }
    let (seq, err) = validate(&relink(blocks)).unwrap_err();
    assert_eq!(seq, last as u64);
    assert!(err.to_string().contains("18446744069414584329"), "{err}");
}
