//! The metadata events Weir writes into a dataset's chain: the ODF subset of `../shared/odf/WIRE.md` §6.
//!
//! The same types are what dataset manifests (`kind: DatasetSnapshot`) declare, in ODF's YAML spelling
//! (camelCase fields, a `kind` tag on every union).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::hash::Multihash;

/// A closed interval of offsets `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetInterval {
    /// First offset.
    pub start: u64,
    /// Last offset, inclusive.
    pub end: u64,
}

impl OffsetInterval {
    /// Number of records in the interval.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Always false: an interval holds at least one record.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A slice of data written by a transaction: a Parquet file named by its physical hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataSlice {
    /// Hash of the records, independent of the file encoding.
    pub logical_hash: Multihash,
    /// SHA3-256 of the file bytes; also the file's name.
    pub physical_hash: Multihash,
    /// Offsets of the records in the slice.
    pub offset_interval: OffsetInterval,
    /// File size in bytes.
    pub size: u64,
}

/// An engine checkpoint: one file named by its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// SHA3-256 of the file bytes; also the file's name.
    pub physical_hash: Multihash,
    /// File size in bytes.
    pub size: u64,
}

/// Where a polling source resumes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceState {
    /// Which source the state belongs to (`default`).
    pub source_name: String,
    /// `odf/etag` (hash of a fetched file) or `weir/last-file` (name of the last file of a glob ingested).
    pub kind: String,
    /// The state's value.
    pub value: String,
}

/// Data ingested into a root dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddData {
    /// Previous checkpoint (unused by Weir's ingest; kept for ODF).
    pub prev_checkpoint: Option<Multihash>,
    /// Last offset before this slice.
    pub prev_offset: Option<u64>,
    /// The new records, if any.
    pub new_data: Option<DataSlice>,
    /// The new checkpoint, if any.
    pub new_checkpoint: Option<Checkpoint>,
    /// Highest event time seen so far.
    pub new_watermark: Option<DateTime<Utc>>,
    /// Where the source resumes next time.
    pub new_source_state: Option<SourceState>,
}

/// One input of a transform step: the blocks and records consumed, as half-open intervals `(prev, new]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteTransformInput {
    /// The input dataset.
    pub dataset_id: DatasetId,
    /// Input head consumed by the previous step.
    pub prev_block_hash: Option<Multihash>,
    /// Input head consumed by this step.
    pub new_block_hash: Option<Multihash>,
    /// Last input offset consumed by the previous step.
    pub prev_offset: Option<u64>,
    /// Last input offset consumed by this step.
    pub new_offset: Option<u64>,
}

/// Which engine produced a transform step: recorded in every `ExecuteTransform` (Weir's addition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineIdentity {
    /// The engine name the transform asked for (`datafusion`).
    pub name: String,
    /// How it ran: `embedded`, `process`, `docker`, `podman`.
    pub runtime: String,
    /// The pinned identity: the image digest (`repo@sha256:...`), or `reference-engine@<version>` for the
    /// embedded engine, or the SHA3-256 of a process engine's binary.
    pub reference: String,
}

/// A derivative dataset's transform step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteTransform {
    /// One entry per input, in `SetTransform` order.
    pub query_inputs: Vec<ExecuteTransformInput>,
    /// The checkpoint the engine started from.
    pub prev_checkpoint: Option<Multihash>,
    /// Last output offset before this step.
    pub prev_offset: Option<u64>,
    /// The new records, if any.
    pub new_data: Option<DataSlice>,
    /// The engine's new checkpoint, if any.
    pub new_checkpoint: Option<Checkpoint>,
    /// Output watermark.
    pub new_watermark: Option<DateTime<Utc>>,
    /// The engine that ran the step (stored in the appended `extra` field, key `weir.dev/engine`).
    pub engine: Option<EngineIdentity>,
}

/// The kind of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DatasetKind {
    /// Ingests external data.
    Root,
    /// Transforms other datasets.
    Derivative,
}

/// A dataset's identity: the multicodec-tagged 32-byte key (`ED 01` + 32 bytes).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DatasetId(pub [u8; 32]);

impl DatasetId {
    /// The wire bytes: `ED 01` + the 32 key bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0xed, 0x01];
        v.extend_from_slice(&self.0);
        v
    }

    /// Parses the wire bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        match bytes {
            [0xed, 0x01, key @ ..] if key.len() == 32 => key.try_into().ok().map(Self),
            _ => None,
        }
    }

    /// Weir derives the 32 bytes from the dataset name and its creation time (SHA3-256): ids are unique per
    /// creation but are not ed25519 keys, since Weir does not sign blocks.
    pub fn derive(name: &str, created: DateTime<Utc>) -> Self {
        let h = Multihash::of(format!("weir dataset {name} {}", created.to_rfc3339()).as_bytes());
        Self(*h.digest())
    }
}

impl std::fmt::Display for DatasetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "did:odf:f{}", crate::hash::encode_hex(&self.to_bytes()))
    }
}

impl std::fmt::Debug for DatasetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DatasetId({self})")
    }
}

impl Serialize for DatasetId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The first block of every chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Seed {
    /// The dataset's id.
    pub dataset_id: DatasetId,
    /// Root or derivative.
    pub dataset_kind: DatasetKind,
}

/// Where a polling source fetches from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum FetchStep {
    /// One file by URL: `file://...`, a path relative to the workspace, or an object-store URL.
    Url {
        /// The URL or path.
        url: String,
    },
    /// Files matching a glob, ingested one per transaction in name order.
    FilesGlob {
        /// The glob, relative to the workspace.
        path: String,
    },
}

/// How fetched bytes are read into records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum ReadStep {
    /// Comma-separated values.
    Csv {
        /// DDL columns (`"name TYPE"`); inferred when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        schema: Vec<String>,
        /// Field separator (default `,`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        separator: Option<String>,
        /// Whether the first line holds column names (default false, as in ODF).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header: Option<bool>,
    },
    /// Newline-delimited JSON objects.
    NdJson {
        /// DDL columns; inferred when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        schema: Vec<String>,
    },
    /// Apache Parquet.
    Parquet {
        /// DDL columns; the file's own schema when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        schema: Vec<String>,
    },
}

/// How new records combine with what the dataset holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum MergeStrategy {
    /// Every record is appended.
    Append,
    /// Records whose primary key was already seen are dropped.
    Ledger {
        /// Columns identifying a record.
        #[serde(rename = "primaryKey")]
        primary_key: Vec<String>,
    },
    /// The source is a full snapshot of state: emit appends, retractions and corrections against it.
    Snapshot {
        /// Columns identifying a record.
        #[serde(rename = "primaryKey")]
        primary_key: Vec<String>,
        /// Columns compared to detect a change (default: all but the key).
        #[serde(
            rename = "compareColumns",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        compare_columns: Option<Vec<String>>,
    },
}

/// One step of a multi-step SQL transform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlQueryStep {
    /// Name of the temporary view; the step without alias is the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The SQL.
    pub query: String,
}

/// A SQL transform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformSql {
    /// Engine name (`datafusion`).
    pub engine: String,
    /// Engine version, if pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// One query (a manifest convenience; stored as `queries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The queries, output last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queries: Vec<SqlQueryStep>,
}

impl TransformSql {
    /// The ODF-normal form: `query` moved into `queries`.
    pub fn normalized(&self) -> Self {
        let mut queries = self.queries.clone();
        if let Some(q) = &self.query {
            queries.push(SqlQueryStep {
                alias: None,
                query: q.clone(),
            });
        }
        Self {
            engine: self.engine.clone(),
            version: self.version.clone(),
            query: None,
            queries,
        }
    }
}

/// A transform (ODF's union has one member: SQL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Transform {
    /// SQL on a named engine.
    Sql(TransformSql),
}

impl Transform {
    /// The SQL transform.
    pub fn sql(&self) -> &TransformSql {
        match self {
            Transform::Sql(s) => s,
        }
    }
}

/// A root dataset's source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetPollingSource {
    /// Where to fetch from.
    pub fetch: FetchStep,
    /// How to read what was fetched.
    pub read: ReadStep,
    /// Optional SQL run as a Raw query (the input table is named `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess: Option<Transform>,
    /// How to merge with existing records.
    pub merge: MergeStrategy,
}

/// One input of a derivative dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformInput {
    /// The input dataset's name.
    pub dataset_ref: String,
    /// The table name in SQL (defaults to the dataset name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

impl TransformInput {
    /// The SQL table name.
    pub fn query_alias(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.dataset_ref)
    }
}

/// A derivative dataset's transform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetTransform {
    /// Inputs, in order.
    pub inputs: Vec<TransformInput>,
    /// The transform.
    pub transform: Transform,
}

/// Names of the system columns.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetVocab {
    /// Offset column (default `offset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_column: Option<String>,
    /// Operation type column (default `op`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_type_column: Option<String>,
    /// System time column (default `system_time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_time_column: Option<String>,
    /// Event time column (default `event_time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time_column: Option<String>,
}

/// The vocabulary with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    /// Offset column.
    pub offset: String,
    /// Operation type column.
    pub op: String,
    /// System time column.
    pub system_time: String,
    /// Event time column.
    pub event_time: String,
}

impl From<&SetVocab> for Vocab {
    fn from(v: &SetVocab) -> Self {
        Self {
            offset: v.offset_column.clone().unwrap_or_else(|| "offset".into()),
            op: v
                .operation_type_column
                .clone()
                .unwrap_or_else(|| "op".into()),
            system_time: v
                .system_time_column
                .clone()
                .unwrap_or_else(|| "system_time".into()),
            event_time: v
                .event_time_column
                .clone()
                .unwrap_or_else(|| "event_time".into()),
        }
    }
}

impl Default for Vocab {
    fn default() -> Self {
        Self::from(&SetVocab::default())
    }
}

/// A metadata event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind")]
pub enum MetadataEvent {
    /// Data ingested (tag 1).
    AddData(AddData),
    /// A transform step (tag 2).
    ExecuteTransform(ExecuteTransform),
    /// The chain's first block (tag 3).
    Seed(Seed),
    /// A root's source (tag 4).
    SetPollingSource(SetPollingSource),
    /// A derivative's transform (tag 5).
    SetTransform(SetTransform),
    /// System column names (tag 6).
    SetVocab(SetVocab),
}

impl MetadataEvent {
    /// The ODF union tag.
    pub fn tag(&self) -> u8 {
        match self {
            MetadataEvent::AddData(_) => 1,
            MetadataEvent::ExecuteTransform(_) => 2,
            MetadataEvent::Seed(_) => 3,
            MetadataEvent::SetPollingSource(_) => 4,
            MetadataEvent::SetTransform(_) => 5,
            MetadataEvent::SetVocab(_) => 6,
        }
    }

    /// The event's name.
    pub fn name(&self) -> &'static str {
        match self {
            MetadataEvent::AddData(_) => "AddData",
            MetadataEvent::ExecuteTransform(_) => "ExecuteTransform",
            MetadataEvent::Seed(_) => "Seed",
            MetadataEvent::SetPollingSource(_) => "SetPollingSource",
            MetadataEvent::SetTransform(_) => "SetTransform",
            MetadataEvent::SetVocab(_) => "SetVocab",
        }
    }

    /// The data slice a data event added.
    pub fn new_data(&self) -> Option<&DataSlice> {
        match self {
            MetadataEvent::AddData(e) => e.new_data.as_ref(),
            MetadataEvent::ExecuteTransform(e) => e.new_data.as_ref(),
            _ => None,
        }
    }

    /// The watermark a data event set.
    pub fn new_watermark(&self) -> Option<DateTime<Utc>> {
        match self {
            MetadataEvent::AddData(e) => e.new_watermark,
            MetadataEvent::ExecuteTransform(e) => e.new_watermark,
            _ => None,
        }
    }

    /// `Some(prev_offset)` for data events.
    pub fn prev_offset(&self) -> Option<Option<u64>> {
        match self {
            MetadataEvent::AddData(e) => Some(e.prev_offset),
            MetadataEvent::ExecuteTransform(e) => Some(e.prev_offset),
            _ => None,
        }
    }
}

/// A block of the metadata chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataBlock {
    /// When the block was written.
    pub system_time: DateTime<Utc>,
    /// The previous block, absent for the first.
    pub prev_block_hash: Option<Multihash>,
    /// 0 for the first block, then +1.
    pub sequence_number: u64,
    /// The event.
    pub event: MetadataEvent,
}

impl EngineIdentity {
    /// The `--to` form of this engine (`embedded`, `process:PATH`, `docker:IMAGE`, `podman:IMAGE`).
    pub fn reference_for_cli(&self) -> String {
        match self.runtime.as_str() {
            "embedded" => "embedded".into(),
            runtime => format!("{runtime}:{}", self.reference),
        }
    }
}
