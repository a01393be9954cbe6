//! Appending to a chain: new blocks linked after a head, the events a step records, and the commit that
//! writes the blocks and then moves the head.

use chrono::{DateTime, Utc};
use weir_odf::{
    DataSchema, MetadataBlock, MetadataEvent, Multihash, SetDataSchema, SetTransform, Transform,
};

use super::store::{Chain, DatasetStore, StoreError};
use super::validate::ChainSummary;
use crate::data::DataError;
use crate::fault;
use crate::identity::EngineIdentity;

/// A transaction's blocks with their hashes, linked after the head of the chain `summary` sums up, numbered
/// on from its last block and sharing the transaction's system time (as kamu commits a SetDataSchema with its
/// data).
///
/// ```
/// use weir_dataset::chain::{append::link_blocks, validate::ChainSummary};
/// use weir_odf::{DatasetKind, MetadataEvent, Seed};
///
/// let seed = MetadataEvent::Seed(Seed {
///     dataset_id: weir_dataset::chain::new_dataset_id("trips", chrono::Utc::now()),
///     dataset_kind: DatasetKind::Root,
/// });
/// let blocks = link_blocks(&ChainSummary::default(), vec![seed], chrono::Utc::now());
/// assert_eq!(blocks[0].1.sequence_number, 0);
/// assert_eq!(blocks[0].1.prev_block_hash, None);
/// ```
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

/// A `SetDataSchema` for records of Arrow schema `schema` about to be written, when the schema in force
/// (`in_force`, the chain's last `SetDataSchema`) is not theirs: always before the first data.
///
/// # Errors
///
/// [`DataError::Column`] when a column's Arrow type has no ODF type.
pub fn schema_event(
    in_force: Option<&DataSchema>,
    schema: &arrow::datatypes::Schema,
) -> Result<Option<MetadataEvent>, DataError> {
    let schema =
        weir_odf::arrow_schema::data_schema_from_arrow(schema).map_err(|e| DataError::Column {
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
pub fn record_engine(
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
pub fn set_version(t: &mut SetTransform, version: Option<String>) {
    let Transform::Sql(sql) = &mut t.transform;
    sql.version = version;
}

impl DatasetStore {
    /// Appends `events` after the head of `chain` (this dataset's chain as read): writes their blocks, then
    /// moves the head from `chain`'s to the last of them, the commit point. Returns the new head.
    ///
    /// The caller holds the workspace lock and has written every file the events name. A first append marks
    /// the dataset new before writing any block, so blocks left by one that did not commit are never taken
    /// for a chain whose head was lost.
    ///
    /// # Errors
    ///
    /// [`StoreError::HeadMoved`] when the head is no longer `chain`'s; any storage error. On every error the
    /// head is the one it was.
    pub async fn append(
        &self,
        chain: &Chain,
        events: Vec<MetadataEvent>,
        now: DateTime<Utc>,
    ) -> Result<Multihash, StoreError> {
        if chain.summary.head.is_none() {
            self.mark_new().await?;
        }
        let mut head = None;
        for (_, block) in link_blocks(&chain.summary, events, now) {
            head = Some(self.put_block(&block).await?);
        }
        fault::point("after-blocks", self.name());
        let Some(head) = head else {
            return Err(StoreError::NothingToAppend {
                dataset: self.name().to_owned(),
            });
        };
        self.set_head(chain.summary.head, head).await?;
        fault::point("after-head", self.name());
        Ok(head)
    }
}
