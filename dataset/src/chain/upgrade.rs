//! Converting a chain written by the Weir before the ODF port into the chain the current Weir would have
//! written for the same history: the sans-IO core of `weir upgrade`.
//!
//! The old chain's transactions (its runs of blocks sharing a system time, each ending at its data block)
//! are written again through the transaction's own helpers, in the order the current writer puts events:
//!
//! - every event is re-encoded by `odf` (the old encoder wrote default scalars and empty vectors that
//!   `odf`, like kamu, leaves out: an empty DDL schema is no schema);
//! - a `SetDataSchema` with the schema of the slice's Parquet file comes before the first data (and again
//!   where a slice's schema changes), in the data's transaction and with its system time;
//! - a slice's logical hash is ODF's, recomputed from its file by the caller ([`SliceFacts`]);
//! - `SetTransform` inputs are the input datasets' ids, each with its alias (the old alias, or the input's
//!   name), and the engine the old `ExecuteTransform` recorded in a slot ODF does not have moves into the
//!   `TransformSql.version` of the `SetTransform` in force ([`crate::identity`]): the pending
//!   `SetTransform` of the step's transaction records it, or a copy with the new version is added before the
//!   step when the engine changed;
//! - `ExecuteTransform` inputs name the input's blocks by their new hashes (inputs are upgraded first), and
//!   an input with nothing new in a step has no new block or offset (the previous ones carry the position),
//!   as kamu writes it and requires, where the Weir before wrote the previous ones again;
//! - sequence numbers and `prev_block_hash` links follow from the new blocks.
//!
//! Data and checkpoint files are not touched: their names (physical hashes), sizes and offsets stay. Blocks
//! already in the current format are kept as they are (only relinked, and their inputs' block hashes
//! renamed). The result passes the chain validator, or the conversion fails naming the old block.

use std::collections::HashMap;

use arrow::datatypes::SchemaRef;
use chrono::{DateTime, Utc};
use weir_odf::{
    DataSchema, DatasetId, MetadataBlock, MetadataEvent, Multihash, ReadStep, SetTransform,
    Transform, TransformInput,
};

use super::append::{link_blocks, record_engine, schema_event, set_version};
use super::validate::{ChainValidator, ChainViolation, check_input_against_chain};
use crate::identity::{self, EngineIdentity};

/// Why a chain cannot be upgraded. Nothing is written when one is found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    /// An old block holds something the current format cannot carry, or refers to what is not there.
    #[error("dataset `{dataset}` block #{sequence_number} ({block}) cannot be upgraded: {message}")]
    Unconvertible {
        /// The dataset.
        dataset: String,
        /// The old block's sequence number.
        sequence_number: u64,
        /// The old block's hash.
        block: Multihash,
        /// What is wrong.
        message: String,
    },
    /// The upgraded chain would break a chain rule: the old chain was not valid to begin with.
    #[error(
        "dataset `{dataset}` block #{sequence_number} ({block}) cannot be upgraded: the upgraded chain would break a chain rule: {source}"
    )]
    Invalid {
        /// The dataset.
        dataset: String,
        /// The old block's sequence number.
        sequence_number: u64,
        /// The old block's hash.
        block: Multihash,
        /// The rule.
        #[source]
        source: Box<ChainViolation>,
    },
}

/// One block of a stored chain, as read for the upgrade.
#[derive(Debug, Clone)]
pub struct StoredBlock {
    /// Its hash (its file's name).
    pub hash: Multihash,
    /// What `odf` decodes from it.
    pub block: MetadataBlock,
    /// Why it is in the old format (`None`: it is in the current format, and kept).
    pub old: Option<&'static str>,
    /// The engine record of an old `ExecuteTransform` (from the slot ODF does not have).
    pub engine: Option<EngineIdentity>,
}

/// What the upgrade needs of an old-format data slice, read from its file by the caller.
#[derive(Debug, Clone)]
pub struct SliceFacts {
    /// The Arrow schema in the file's Parquet footer.
    pub schema: SchemaRef,
    /// ODF's logical hash of its records.
    pub logical_hash: Multihash,
}

/// An input dataset as it will be once upgraded: what an upgraded derivative refers to.
#[derive(Debug, Clone)]
pub struct UpgradedInput {
    /// Its name in the workspace.
    pub name: String,
    /// Its id (the Seed's, which the upgrade keeps).
    pub id: DatasetId,
    /// Its chain as it will be, oldest block first.
    pub blocks: Vec<(Multihash, MetadataBlock)>,
    /// The new hash of each block of its old chain (empty when it was current already).
    pub renamed: HashMap<Multihash, Multihash>,
}

impl UpgradedInput {
    /// The hash an old chain's reference to block `old` of this input becomes.
    fn new_hash(&self, old: &Multihash) -> Option<Multihash> {
        self.renamed
            .get(old)
            .copied()
            .or_else(|| self.blocks.iter().any(|(h, _)| h == old).then_some(*old))
    }
}

/// An upgraded chain.
#[derive(Debug, Clone, Default)]
pub struct Upgraded {
    /// The new chain, oldest block first.
    pub blocks: Vec<(Multihash, MetadataBlock)>,
    /// The new hash of each old block (the last old block of a transaction: the transaction's new head).
    pub renamed: HashMap<Multihash, Multihash>,
    /// Stored blocks whose bytes change (every old-format block, and the blocks linked after one).
    pub rewritten: usize,
    /// Blocks that have no stored counterpart (`SetDataSchema`, `SetTransform` recording an engine).
    pub added: usize,
    /// Slices whose logical hash was recomputed.
    pub rehashed: usize,
}

impl Upgraded {
    /// The new head.
    pub fn head(&self) -> Option<Multihash> {
        self.blocks.last().map(|(h, _)| *h)
    }
}

/// Upgrades the chain `old` (oldest block first) of `dataset`. `slices` has the facts of every old-format
/// data slice by physical hash; `inputs` every dataset the chain's transforms read, already upgraded.
pub fn upgrade_chain(
    dataset: &str,
    old: &[StoredBlock],
    slices: &HashMap<Multihash, SliceFacts>,
    inputs: &[UpgradedInput],
) -> Result<Upgraded, UpgradeError> {
    let mut prev = None;
    for (i, b) in old.iter().enumerate() {
        if b.block.sequence_number != i as u64 || b.block.prev_block_hash != prev {
            return Err(UpgradeError::Unconvertible {
                dataset: dataset.to_owned(),
                sequence_number: b.block.sequence_number,
                block: b.hash,
                message: format!(
                    "the old chain is broken there: as block {i} from the Seed it should have sequence number {i} and link to {}, it links to {}",
                    show(prev),
                    show(b.block.prev_block_hash)
                ),
            });
        }
        prev = Some(b.hash);
    }
    let mut out = Upgraded::default();
    let mut v = ChainValidator::default();
    let mut start = 0;
    while start < old.len() {
        let end = transaction_end(old, start);
        let tx = Transaction {
            dataset,
            start,
            blocks: &old[start..end],
            slices,
            inputs,
        };
        let (events, from) = tx.events(&v, &mut out.rehashed)?;
        let system_time = old[start].block.system_time;
        let linked = link_blocks(v.summary(), events, system_time);
        for ((hash, block), from) in linked.into_iter().zip(from) {
            let blame = &old[from.unwrap_or(end - 1)];
            v.push(hash, &block)
                .map_err(|source| tx.invalid(blame, source))?;
            if let MetadataEvent::ExecuteTransform(e) = &block.event {
                for (index, q) in e.query_inputs.iter().enumerate() {
                    if let Some(input) = inputs.iter().find(|i| i.id == q.dataset_id) {
                        check_input_against_chain(block.sequence_number, index, q, &input.blocks)
                            .map_err(|source| tx.invalid(blame, source))?;
                    }
                }
            }
            match from {
                Some(k) if old[k].hash == hash => {}
                Some(k) => {
                    out.rewritten += 1;
                    out.renamed.insert(old[k].hash, hash);
                }
                None => out.added += 1,
            }
            out.blocks.push((hash, block));
        }
        if let Some((head, _)) = out.blocks.last() {
            out.renamed.insert(old[end - 1].hash, *head);
        }
        start = end;
    }
    out.renamed.retain(|old, new| old != new);
    Ok(out)
}

fn show(hash: Option<Multihash>) -> String {
    hash.map_or_else(|| "nothing".to_owned(), |h| h.to_string())
}

/// Where the transaction starting at `start` ends: its blocks share a system time, and its data block (an
/// `AddData` or `ExecuteTransform`) is its last.
fn transaction_end(old: &[StoredBlock], start: usize) -> usize {
    let time: DateTime<Utc> = old[start].block.system_time;
    let mut end = start;
    while end < old.len() && old[end].block.system_time == time {
        end += 1;
        if is_data_event(&old[end - 1].block.event) {
            break;
        }
    }
    end
}

fn is_data_event(e: &MetadataEvent) -> bool {
    matches!(
        e,
        MetadataEvent::AddData(_) | MetadataEvent::ExecuteTransform(_)
    )
}

/// One old transaction being written again.
struct Transaction<'a> {
    dataset: &'a str,
    /// Where its blocks start in the old chain.
    start: usize,
    blocks: &'a [StoredBlock],
    slices: &'a HashMap<Multihash, SliceFacts>,
    inputs: &'a [UpgradedInput],
}

impl Transaction<'_> {
    fn unconvertible(&self, b: &StoredBlock, message: String) -> UpgradeError {
        UpgradeError::Unconvertible {
            dataset: self.dataset.to_owned(),
            sequence_number: b.block.sequence_number,
            block: b.hash,
            message,
        }
    }

    fn invalid(&self, b: &StoredBlock, source: ChainViolation) -> UpgradeError {
        UpgradeError::Invalid {
            dataset: self.dataset.to_owned(),
            sequence_number: b.block.sequence_number,
            block: b.hash,
            source: Box::new(source),
        }
    }

    /// The transaction's events as the current writer orders them, each with the index (into the whole old
    /// chain) of the old block it comes from (`None` for an added block).
    fn events(
        &self,
        v: &ChainValidator,
        rehashed: &mut usize,
    ) -> Result<(Vec<MetadataEvent>, Vec<Option<usize>>), UpgradeError> {
        let summary = v.summary();
        let base = self.start;
        let mut events = Vec::new();
        let mut from = Vec::new();
        let mut old_transform = None;
        let mut version = summary
            .transform
            .as_ref()
            .and_then(|t| t.transform.sql().version.clone());
        let mut schema_in_force = summary.schema.clone();
        let mut data = None;
        for (k, b) in self.blocks.iter().enumerate() {
            let at = base + k;
            match &b.block.event {
                MetadataEvent::AddData(_) | MetadataEvent::ExecuteTransform(_) => data = Some(k),
                MetadataEvent::SetTransform(t) if b.old.is_some() => {
                    let mut t = self.set_transform(b, t)?;
                    set_version(&mut t, version.clone());
                    old_transform = Some(events.len());
                    events.push(MetadataEvent::SetTransform(t));
                    from.push(Some(at));
                }
                e => {
                    match e {
                        MetadataEvent::SetTransform(t) => {
                            version = t.transform.sql().version.clone();
                        }
                        MetadataEvent::SetDataSchema(s) => {
                            schema_in_force =
                                s.schema.clone().or(Some(DataSchema::new(Vec::new())));
                        }
                        _ => {}
                    }
                    events.push(if b.old.is_some() {
                        normalize(e.clone())
                    } else {
                        e.clone()
                    });
                    from.push(Some(at));
                }
            }
        }
        // The current writer puts a transaction's new SetTransform right after its Seed (or first).
        if let Some(pos) = old_transform {
            let others = events.len() - 1;
            let target = others.min(1);
            let t = events.remove(pos);
            let f = from.remove(pos);
            events.insert(target, t);
            from.insert(target, f);
        }
        let Some(k) = data else {
            return Ok((events, from));
        };
        let b = &self.blocks[k];
        if let Some(engine) = &b.engine {
            let pending = events.iter().rev().find_map(|e| match e {
                MetadataEvent::SetTransform(t) => Some(t),
                _ => None,
            });
            let asks = pending
                .or(summary.transform.as_ref())
                .map(|t| t.transform.sql().engine.clone());
            if asks.as_deref() != Some(engine.name.as_str()) {
                return Err(self.unconvertible(
                    b,
                    format!(
                        "its engine record names engine `{}` but the transform in force asks for {}",
                        engine.name,
                        asks.map_or_else(|| "none".to_owned(), |e| format!("`{e}`"))
                    ),
                ));
            }
            let before = events.len();
            record_engine(summary, &mut events, engine);
            from.extend(std::iter::repeat_n(None, events.len() - before));
        }
        let mut event = b.block.event.clone();
        if b.old.is_some()
            && let Some(slice) = new_data_mut(&mut event)
        {
            let facts = self.slices.get(&slice.physical_hash).ok_or_else(|| {
                self.unconvertible(
                    b,
                    format!(
                        "the facts of data slice {} were not read",
                        slice.physical_hash
                    ),
                )
            })?;
            let schema = schema_event(schema_in_force.as_ref(), &facts.schema).map_err(|e| {
                self.unconvertible(
                    b,
                    format!(
                        "the schema of data slice {} has no ODF form: {e}",
                        slice.physical_hash
                    ),
                )
            })?;
            if let Some(s) = schema {
                events.push(s);
                from.push(None);
            }
            if slice.logical_hash != facts.logical_hash {
                slice.logical_hash = facts.logical_hash;
                *rehashed += 1;
            }
        }
        if let MetadataEvent::ExecuteTransform(e) = &mut event {
            for (index, q) in e.query_inputs.iter_mut().enumerate() {
                let input = self
                    .inputs
                    .iter()
                    .find(|i| i.id == q.dataset_id)
                    .ok_or_else(|| {
                        self.unconvertible(
                            b,
                            format!(
                                "its input {index} is dataset {}, which is not a dataset of this workspace",
                                q.dataset_id
                            ),
                        )
                    })?;
                for h in [&mut q.prev_block_hash, &mut q.new_block_hash]
                    .into_iter()
                    .flatten()
                {
                    *h = input.new_hash(h).ok_or_else(|| {
                        self.unconvertible(
                            b,
                            format!(
                                "its input {index} names block {h} of `{}`, which is not in that dataset's chain",
                                input.name
                            ),
                        )
                    })?;
                }
                // An input with nothing new, as kamu writes it: no new block or offset.
                *q = weir_odf::ExecuteTransformInput::advanced(
                    q.dataset_id,
                    q.prev_block_hash,
                    q.prev_offset,
                    q.last_block_hash().copied(),
                    q.last_offset(),
                );
            }
        }
        events.push(event);
        from.push(Some(base + k));
        Ok((events, from))
    }

    /// An old `SetTransform` as the current writer records it (its engine is set by the caller): inputs by
    /// id with an alias, queries normalised.
    fn set_transform(
        &self,
        b: &StoredBlock,
        t: &SetTransform,
    ) -> Result<SetTransform, UpgradeError> {
        let sql = t.transform.sql();
        if let Some(v) = &sql.version {
            return Err(self.unconvertible(
                b,
                format!(
                    "its transform pins engine version `{v}`, which the current format has no place for (TransformSql.version records the engine that ran each step; engines are pinned in weir.yaml)"
                ),
            ));
        }
        let mut inputs = Vec::with_capacity(t.inputs.len());
        for (index, i) in t.inputs.iter().enumerate() {
            let input = match i.dataset_id() {
                Some(id) => self.inputs.iter().find(|x| x.id == id),
                None => self.inputs.iter().find(|x| x.name == i.dataset_ref),
            };
            let Some(input) = input else {
                return Err(self.unconvertible(
                    b,
                    format!(
                        "its transform input {index} `{}` is not a dataset of this workspace with a stored chain",
                        i.dataset_ref
                    ),
                ));
            };
            let alias = match (&i.alias, i.dataset_id()) {
                (Some(a), _) => a.clone(),
                (None, Some(_)) => input.name.clone(),
                (None, None) => i.dataset_ref.clone(),
            };
            inputs.push(TransformInput {
                dataset_ref: input.id.to_string(),
                alias: Some(alias),
            });
        }
        Ok(SetTransform {
            inputs,
            transform: Transform::Sql(identity::without_engine(&sql.clone().normalize())),
        })
    }
}

fn new_data_mut(e: &mut MetadataEvent) -> Option<&mut weir_odf::DataSlice> {
    match e {
        MetadataEvent::AddData(a) => a.new_data.as_mut(),
        MetadataEvent::ExecuteTransform(t) => t.new_data.as_mut(),
        _ => None,
    }
}

/// An old metadata event as the current writer records it: what the old encoder wrote for "none" (an
/// empty DDL schema) is none, queries are normalised.
fn normalize(e: MetadataEvent) -> MetadataEvent {
    match e {
        MetadataEvent::SetPollingSource(mut p) => {
            let schema = match &mut p.read {
                ReadStep::Csv(r) => Some(&mut r.schema),
                ReadStep::Parquet(r) => Some(&mut r.schema),
                ReadStep::NdJson(r) => Some(&mut r.schema),
                _ => None,
            };
            if let Some(s) = schema
                && s.as_ref().is_some_and(Vec::is_empty)
            {
                *s = None;
            }
            if let Some(Transform::Sql(sql)) = p.preprocess.take() {
                p.preprocess = Some(Transform::Sql(sql.normalize()));
            }
            MetadataEvent::SetPollingSource(p)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType as Arrow, Field, Schema};
    use weir_odf::{
        AddData, DataSlice, DatasetKind, ExecuteTransform, ExecuteTransformInput, FetchStep,
        FetchStepFilesGlob, MergeStrategy, Multicodec, OffsetInterval, ReadStepCsv, Seed,
        SetPollingSource, SqlQueryStep, TransformSql,
    };

    use super::*;

    const ROOT: DatasetId = DatasetId::from_key([1; 32]);
    const DERIV: DatasetId = DatasetId::from_key([2; 32]);

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    /// An old chain: blocks at the given times, linked, every one marked old (the core never hashes an
    /// old block, so their hashes are made up).
    fn old_chain(
        tag: &str,
        events: Vec<(i64, MetadataEvent, Option<EngineIdentity>)>,
    ) -> Vec<StoredBlock> {
        let mut prev = None;
        events
            .into_iter()
            .enumerate()
            .map(|(i, (time, event, engine))| {
                let hash = Multihash::sha3_256(format!("{tag} {i}").as_bytes());
                let block = MetadataBlock {
                    system_time: at(time),
                    prev_block_hash: prev,
                    sequence_number: i as u64,
                    event,
                };
                prev = Some(hash);
                StoredBlock {
                    hash,
                    block,
                    old: Some("test"),
                    engine,
                }
            })
            .collect()
    }

    fn old_slice(tag: &str, start: u64, end: u64) -> DataSlice {
        DataSlice {
            logical_hash: Multihash::sha3_256(b"Weir's old row hash"),
            physical_hash: Multihash::sha3_256(tag.as_bytes()),
            offset_interval: OffsetInterval { start, end },
            size: 1,
        }
    }

    fn facts(slices: &[&DataSlice]) -> HashMap<Multihash, SliceFacts> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("offset", Arrow::Int64, false),
            Field::new("v", Arrow::Int64, true),
        ]));
        slices
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let logical_hash =
                    Multihash::new(Multicodec::Arrow0_Sha3_256, [i as u8; 32]).unwrap();
                (
                    s.physical_hash,
                    SliceFacts {
                        schema: schema.clone(),
                        logical_hash,
                    },
                )
            })
            .collect()
    }

    fn engine(reference: &str) -> Option<EngineIdentity> {
        Some(EngineIdentity {
            name: "datafusion".into(),
            runtime: "embedded".into(),
            reference: reference.into(),
        })
    }

    fn root() -> Vec<StoredBlock> {
        old_chain(
            "root",
            vec![
                (
                    0,
                    MetadataEvent::Seed(Seed {
                        dataset_id: ROOT,
                        dataset_kind: DatasetKind::Root,
                    }),
                    None,
                ),
                (
                    0,
                    MetadataEvent::SetPollingSource(SetPollingSource {
                        fetch: FetchStep::FilesGlob(FetchStepFilesGlob {
                            path: "*.csv".into(),
                            event_time: None,
                            cache: None,
                            order: None,
                        }),
                        prepare: None,
                        // The old encoder wrote "no DDL schema" as an empty vector.
                        read: ReadStep::Csv(ReadStepCsv {
                            schema: Some(Vec::new()),
                            header: Some(true),
                            ..Default::default()
                        }),
                        preprocess: None,
                        merge: MergeStrategy::Append,
                    }),
                    None,
                ),
                (
                    0,
                    MetadataEvent::AddData(AddData {
                        new_data: Some(old_slice("a", 0, 9)),
                        ..Default::default()
                    }),
                    None,
                ),
                (
                    1,
                    MetadataEvent::AddData(AddData {
                        prev_offset: Some(9),
                        new_data: Some(old_slice("b", 10, 14)),
                        ..Default::default()
                    }),
                    None,
                ),
            ],
        )
    }

    fn root_facts(old: &[StoredBlock]) -> HashMap<Multihash, SliceFacts> {
        let slices: Vec<&DataSlice> = old
            .iter()
            .filter_map(|b| b.block.event.new_data())
            .collect();
        facts(&slices)
    }

    fn upgraded_root() -> (Vec<StoredBlock>, UpgradedInput) {
        let old = root();
        let up = upgrade_chain("root", &old, &root_facts(&old), &[]).unwrap();
        let input = UpgradedInput {
            name: "root".into(),
            id: ROOT,
            blocks: up.blocks,
            renamed: up.renamed,
        };
        (old, input)
    }

    fn set_transform(input: &str, version: Option<&str>) -> MetadataEvent {
        MetadataEvent::SetTransform(SetTransform {
            inputs: vec![TransformInput {
                dataset_ref: input.into(),
                alias: None,
            }],
            transform: Transform::Sql(TransformSql {
                engine: "datafusion".into(),
                version: version.map(str::to_owned),
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
        prev_offset: Option<u64>,
        data: Option<DataSlice>,
    ) -> MetadataEvent {
        MetadataEvent::ExecuteTransform(ExecuteTransform {
            query_inputs: vec![ExecuteTransformInput {
                dataset_id: ROOT,
                prev_block_hash: prev.map(|p| p.0),
                new_block_hash: Some(new.0),
                prev_offset: prev.map(|p| p.1),
                new_offset: Some(new.1),
            }],
            prev_offset,
            new_data: data,
            ..Default::default()
        })
    }

    /// A derivative whose transform was recorded before its input had data, then ran twice, on two engines.
    fn derivative(root: &[StoredBlock]) -> Vec<StoredBlock> {
        let (first, second) = (root[2].hash, root[3].hash);
        old_chain(
            "deriv",
            vec![
                (
                    0,
                    MetadataEvent::Seed(Seed {
                        dataset_id: DERIV,
                        dataset_kind: DatasetKind::Derivative,
                    }),
                    None,
                ),
                (0, set_transform("root", None), None),
                (
                    2,
                    step(None, (first, 9), None, Some(old_slice("c", 0, 4))),
                    engine("reference-engine@0.1.0"),
                ),
                (
                    3,
                    step(Some((first, 9)), (second, 14), Some(4), None),
                    engine("reference-engine@0.2.0"),
                ),
            ],
        )
    }

    fn kinds(blocks: &[(Multihash, MetadataBlock)]) -> Vec<&'static str> {
        blocks.iter().map(|(_, b)| b.event.name()).collect()
    }

    #[test]
    fn a_root_gets_its_schema_before_the_first_data_and_odf_logical_hashes() {
        let old = root();
        let facts = root_facts(&old);
        let up = upgrade_chain("root", &old, &facts, &[]).unwrap();
        assert_eq!(
            kinds(&up.blocks),
            [
                "Seed",
                "SetPollingSource",
                "SetDataSchema",
                "AddData",
                "AddData"
            ]
        );
        let (_, schema) = &up.blocks[2];
        assert_eq!(schema.system_time, old[2].block.system_time);
        let MetadataEvent::SetPollingSource(p) = &up.blocks[1].1.event else {
            unreachable!()
        };
        assert_eq!(
            p.read,
            ReadStep::Csv(ReadStepCsv {
                header: Some(true),
                ..Default::default()
            })
        );
        for ((_, new), old) in up.blocks.iter().skip(3).zip(&old[2..]) {
            let (n, o) = (
                new.event.new_data().unwrap(),
                old.block.event.new_data().unwrap(),
            );
            assert_eq!(n.logical_hash, facts[&o.physical_hash].logical_hash);
            assert_eq!(
                (n.physical_hash, n.offset_interval, n.size),
                (o.physical_hash, o.offset_interval, o.size)
            );
        }
        assert_eq!((up.rewritten, up.added, up.rehashed), (4, 1, 2));
        assert_eq!(up.renamed[&old[3].hash], up.head().unwrap());
        let mut v = ChainValidator::default();
        for (i, (h, b)) in up.blocks.iter().enumerate() {
            assert_eq!(b.sequence_number, i as u64);
            assert_eq!(MetadataBlock::hash(&b.encode()), *h);
            v.push(*h, b).unwrap();
        }
    }

    #[test]
    fn a_derivative_records_inputs_by_id_and_each_steps_engine_in_its_set_transform() {
        let (old_root, root) = upgraded_root();
        let old = derivative(&old_root);
        let f = facts(&[old[2].block.event.new_data().unwrap()]);
        let up = upgrade_chain("deriv", &old, &f, std::slice::from_ref(&root)).unwrap();
        assert_eq!(
            kinds(&up.blocks),
            [
                "Seed",
                "SetTransform",
                "SetTransform",
                "SetDataSchema",
                "ExecuteTransform",
                "SetTransform",
                "ExecuteTransform"
            ]
        );
        let versions: Vec<Option<String>> = up
            .blocks
            .iter()
            .filter_map(|(_, b)| match &b.event {
                MetadataEvent::SetTransform(t) => {
                    assert_eq!(
                        t.inputs,
                        [TransformInput {
                            dataset_ref: ROOT.to_string(),
                            alias: Some("root".into()),
                        }]
                    );
                    Some(t.transform.sql().version.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            versions,
            [
                None,
                Some("embedded:reference-engine@0.1.0".into()),
                Some("embedded:reference-engine@0.2.0".into())
            ]
        );
        // The steps name the input's new blocks.
        let MetadataEvent::ExecuteTransform(last) = &up.blocks[6].1.event else {
            unreachable!()
        };
        let q = &last.query_inputs[0];
        assert_eq!(q.prev_block_hash, Some(root.renamed[&old_root[2].hash]));
        assert_eq!(q.new_block_hash, root.head_hash());
        assert_eq!((up.added, up.rehashed), (3, 1));
    }

    impl UpgradedInput {
        fn head_hash(&self) -> Option<Multihash> {
            self.blocks.last().map(|(h, _)| *h)
        }
    }

    #[test]
    fn a_chain_in_the_current_format_is_kept_as_it_is() {
        let (_, root) = upgraded_root();
        let current: Vec<StoredBlock> = root
            .blocks
            .iter()
            .map(|(hash, block)| StoredBlock {
                hash: *hash,
                block: block.clone(),
                old: None,
                engine: None,
            })
            .collect();
        let up = upgrade_chain("root", &current, &HashMap::new(), &[]).unwrap();
        assert_eq!(up.blocks, root.blocks);
        assert_eq!((up.rewritten, up.added, up.rehashed), (0, 0, 0));
        assert!(up.renamed.is_empty());
    }

    fn unconvertible(result: Result<Upgraded, UpgradeError>) -> (u64, String) {
        match result {
            Err(UpgradeError::Unconvertible {
                sequence_number,
                message,
                ..
            }) => (sequence_number, message),
            other => panic!("expected Unconvertible, got {other:?}"),
        }
    }

    #[test]
    fn what_cannot_be_converted_names_its_block() {
        let (old_root, root) = upgraded_root();
        let inputs = std::slice::from_ref(&root);
        let f = |old: &[StoredBlock]| facts(&[old[2].block.event.new_data().unwrap()]);

        let mut unknown_input = derivative(&old_root);
        unknown_input[1].block.event = set_transform("nowhere", None);
        let (seq, msg) = unconvertible(upgrade_chain(
            "deriv",
            &unknown_input,
            &f(&unknown_input),
            inputs,
        ));
        assert_eq!(seq, 1);
        assert!(msg.contains("`nowhere`"), "{msg}");

        let mut pinned = derivative(&old_root);
        pinned[1].block.event = set_transform("root", Some("1.2"));
        let (seq, msg) = unconvertible(upgrade_chain("deriv", &pinned, &f(&pinned), inputs));
        assert_eq!(seq, 1);
        assert!(msg.contains("`1.2`"), "{msg}");

        let mut other_engine = derivative(&old_root);
        if let Some(e) = &mut other_engine[2].engine {
            e.name = "spark".into();
        }
        let (seq, msg) = unconvertible(upgrade_chain(
            "deriv",
            &other_engine,
            &f(&other_engine),
            inputs,
        ));
        assert_eq!(seq, 2);
        assert!(msg.contains("`spark`"), "{msg}");

        let mut missing_block = derivative(&old_root);
        missing_block[2].block.event = step(
            None,
            (Multihash::sha3_256(b"elsewhere"), 9),
            None,
            old_root[2].block.event.new_data().cloned(),
        );
        let (seq, msg) = unconvertible(upgrade_chain(
            "deriv",
            &missing_block,
            &facts(&[old_root[2].block.event.new_data().unwrap()]),
            inputs,
        ));
        assert_eq!(seq, 2);
        assert!(msg.contains("not in that dataset's chain"), "{msg}");

        let mut broken = self::root();
        broken[2].block.prev_block_hash = None;
        let (seq, msg) = unconvertible(upgrade_chain("root", &broken, &root_facts(&broken), &[]));
        assert_eq!(seq, 2);
        assert!(msg.contains("broken"), "{msg}");
    }

    #[test]
    fn an_old_chain_that_breaks_a_rule_is_not_converted() {
        let mut gap = root();
        if let MetadataEvent::AddData(a) = &mut gap[3].block.event {
            a.new_data = Some(old_slice("b", 11, 14));
        }
        let err = upgrade_chain("root", &gap, &root_facts(&gap), &[]).unwrap_err();
        assert!(
            matches!(
                &err,
                UpgradeError::Invalid {
                    sequence_number: 3,
                    source,
                    ..
                } if matches!(**source, ChainViolation::OffsetGap { .. })
            ),
            "{err}"
        );
    }
}
