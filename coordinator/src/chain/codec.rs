//! FlatBuffers encoding of metadata blocks, in the table layout of `coordinator/schema/metadata.fbs`.
//!
//! A block on disk is a `Manifest { kind = 0x400000, version = 2, content = MetadataBlock bytes }`; the block
//! hash is the SHA3-256 multihash of those manifest bytes.

use flatbuffers::{FlatBufferBuilder, TableFinishedWIPOffset, WIPOffset};

use super::event::*;
use super::fb::{self, FbError, FbTimestamp, Table, slot};
use crate::hash::Multihash;

/// The multicodec code of an ODF metadata block manifest.
pub const MANIFEST_KIND_METADATA_BLOCK: i64 = 0x400000;
/// The manifest version Weir writes.
pub const MANIFEST_VERSION: i32 = 2;
/// The key under which `ExecuteTransform.extra` records the engine identity.
pub const ENGINE_EXTRA_KEY: &str = "weir.dev/engine";

/// Why bytes do not decode into a metadata block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The FlatBuffers structure is broken.
    #[error(transparent)]
    Fb(#[from] FbError),
    /// The manifest is not a metadata block.
    #[error(
        "manifest kind 0x{kind:x} version {version} is not a metadata block (expected kind 0x400000)"
    )]
    NotAMetadataBlock {
        /// The manifest kind.
        kind: i64,
        /// The manifest version.
        version: i32,
    },
    /// A hash field does not hold a SHA3-256 multihash.
    #[error("field `{field}` is not a sha3-256 multihash")]
    BadHash {
        /// The field.
        field: &'static str,
    },
    /// A dataset id is not `ED 01` + 32 bytes.
    #[error("field `{field}` is not an ed25519 dataset id")]
    BadDatasetId {
        /// The field.
        field: &'static str,
    },
    /// `extra` is not a JSON object or its engine entry is malformed.
    #[error("`extra` of ExecuteTransform is malformed: {message}")]
    BadExtra {
        /// What is wrong.
        message: String,
    },
    /// An enum value is unknown.
    #[error("unknown value {value} of `{field}`")]
    UnknownEnumValue {
        /// The field.
        field: &'static str,
        /// The value.
        value: i32,
    },
}

type Fin = WIPOffset<TableFinishedWIPOffset>;

/// Encodes a block into its manifest bytes.
pub fn encode_block(block: &MetadataBlock) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let (tag, event) = encode_event(&mut fbb, &block.event);
    let prev = block
        .prev_block_hash
        .map(|h| fb::bytes(&mut fbb, &h.to_bytes()));
    let start = fbb.start_table();
    fbb.push_slot_always(slot(0), FbTimestamp::new(block.system_time));
    if let Some(p) = prev {
        fbb.push_slot_always(slot(1), p);
    }
    fbb.push_slot_always(slot(2), block.sequence_number);
    fbb.push_slot_always(slot(3), tag);
    fbb.push_slot_always(slot(4), event);
    let root = fbb.end_table(start);
    fbb.finish_minimal(root);
    let content = fbb.finished_data().to_vec();

    let mut m = FlatBufferBuilder::new();
    let content = fb::bytes(&mut m, &content);
    let start = m.start_table();
    m.push_slot_always(slot(0), MANIFEST_KIND_METADATA_BLOCK);
    m.push_slot_always(slot(1), MANIFEST_VERSION);
    m.push_slot_always(slot(2), content);
    let root = m.end_table(start);
    m.finish_minimal(root);
    m.finished_data().to_vec()
}

/// The hash of a block's manifest bytes.
pub fn block_hash(manifest_bytes: &[u8]) -> Multihash {
    Multihash::of(manifest_bytes)
}

fn opt_hash<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    h: &Option<Multihash>,
) -> Option<WIPOffset<flatbuffers::Vector<'b, u8>>> {
    h.map(|h| fb::bytes(fbb, &h.to_bytes()))
}

fn encode_interval(fbb: &mut FlatBufferBuilder<'_>, i: &OffsetInterval) -> Fin {
    let s = fbb.start_table();
    fbb.push_slot_always(slot(0), i.start);
    fbb.push_slot_always(slot(1), i.end);
    fbb.end_table(s)
}

fn encode_slice(fbb: &mut FlatBufferBuilder<'_>, d: &DataSlice) -> Fin {
    let lh = fb::bytes(fbb, &d.logical_hash.to_bytes());
    let ph = fb::bytes(fbb, &d.physical_hash.to_bytes());
    let iv = encode_interval(fbb, &d.offset_interval);
    let s = fbb.start_table();
    fbb.push_slot_always(slot(0), lh);
    fbb.push_slot_always(slot(1), ph);
    fbb.push_slot_always(slot(2), iv);
    fbb.push_slot_always(slot(3), d.size);
    fbb.end_table(s)
}

fn encode_checkpoint(fbb: &mut FlatBufferBuilder<'_>, c: &Checkpoint) -> Fin {
    let ph = fb::bytes(fbb, &c.physical_hash.to_bytes());
    let s = fbb.start_table();
    fbb.push_slot_always(slot(0), ph);
    fbb.push_slot_always(slot(1), c.size);
    fbb.end_table(s)
}

fn encode_opt_string(
    fbb: &mut FlatBufferBuilder<'_>,
    s: &Option<String>,
) -> Option<WIPOffset<&'static str>> {
    // The builder hands out offsets that are not tied to the string's lifetime.
    s.as_deref().map(|s| {
        let o = fbb.create_string(s);
        WIPOffset::new(o.value())
    })
}

fn encode_sql(fbb: &mut FlatBufferBuilder<'_>, t: &TransformSql) -> Fin {
    let t = t.normalized();
    let engine = fbb.create_string(&t.engine);
    let version = encode_opt_string(fbb, &t.version);
    let steps: Vec<Fin> = t
        .queries
        .iter()
        .map(|q| {
            let alias = encode_opt_string(fbb, &q.alias);
            let query = fbb.create_string(&q.query);
            let s = fbb.start_table();
            if let Some(a) = alias {
                fbb.push_slot_always(slot(0), a);
            }
            fbb.push_slot_always(slot(1), query);
            fbb.end_table(s)
        })
        .collect();
    let queries = fbb.create_vector(&steps);
    let s = fbb.start_table();
    fbb.push_slot_always(slot(0), engine);
    if let Some(v) = version {
        fbb.push_slot_always(slot(1), v);
    }
    fbb.push_slot_always(slot(3), queries);
    fbb.end_table(s)
}

fn encode_event(fbb: &mut FlatBufferBuilder<'_>, event: &MetadataEvent) -> (u8, Fin) {
    let t = match event {
        MetadataEvent::AddData(e) => {
            let prev_cp = opt_hash(fbb, &e.prev_checkpoint);
            let data = e.new_data.as_ref().map(|d| encode_slice(fbb, d));
            let cp = e.new_checkpoint.as_ref().map(|c| encode_checkpoint(fbb, c));
            let state = e.new_source_state.as_ref().map(|st| {
                let a = fbb.create_string(&st.source_name);
                let b = fbb.create_string(&st.kind);
                let c = fbb.create_string(&st.value);
                let s = fbb.start_table();
                fbb.push_slot_always(slot(0), a);
                fbb.push_slot_always(slot(1), b);
                fbb.push_slot_always(slot(2), c);
                fbb.end_table(s)
            });
            let s = fbb.start_table();
            if let Some(x) = prev_cp {
                fbb.push_slot_always(slot(0), x);
            }
            if let Some(x) = e.prev_offset {
                fbb.push_slot_always(slot(1), x);
            }
            if let Some(x) = data {
                fbb.push_slot_always(slot(2), x);
            }
            if let Some(x) = cp {
                fbb.push_slot_always(slot(3), x);
            }
            if let Some(w) = e.new_watermark {
                fbb.push_slot_always(slot(4), FbTimestamp::new(w));
            }
            if let Some(x) = state {
                fbb.push_slot_always(slot(5), x);
            }
            fbb.end_table(s)
        }
        MetadataEvent::ExecuteTransform(e) => {
            let inputs: Vec<Fin> = e
                .query_inputs
                .iter()
                .map(|i| {
                    let id = fb::bytes(fbb, &i.dataset_id.to_bytes());
                    let prev = opt_hash(fbb, &i.prev_block_hash);
                    let new = opt_hash(fbb, &i.new_block_hash);
                    let s = fbb.start_table();
                    fbb.push_slot_always(slot(0), id);
                    if let Some(x) = prev {
                        fbb.push_slot_always(slot(1), x);
                    }
                    if let Some(x) = new {
                        fbb.push_slot_always(slot(2), x);
                    }
                    if let Some(x) = i.prev_offset {
                        fbb.push_slot_always(slot(3), x);
                    }
                    if let Some(x) = i.new_offset {
                        fbb.push_slot_always(slot(4), x);
                    }
                    fbb.end_table(s)
                })
                .collect();
            let inputs = fbb.create_vector(&inputs);
            let prev_cp = opt_hash(fbb, &e.prev_checkpoint);
            let data = e.new_data.as_ref().map(|d| encode_slice(fbb, d));
            let cp = e.new_checkpoint.as_ref().map(|c| encode_checkpoint(fbb, c));
            let extra = e.engine.as_ref().map(|engine| {
                let json = serde_json::json!({ ENGINE_EXTRA_KEY: engine }).to_string();
                let entries = fbb.create_string(&json);
                let s = fbb.start_table();
                fbb.push_slot_always(slot(0), entries);
                fbb.end_table(s)
            });
            let s = fbb.start_table();
            fbb.push_slot_always(slot(0), inputs);
            if let Some(x) = prev_cp {
                fbb.push_slot_always(slot(1), x);
            }
            if let Some(x) = e.prev_offset {
                fbb.push_slot_always(slot(2), x);
            }
            if let Some(x) = data {
                fbb.push_slot_always(slot(3), x);
            }
            if let Some(x) = cp {
                fbb.push_slot_always(slot(4), x);
            }
            if let Some(w) = e.new_watermark {
                fbb.push_slot_always(slot(5), FbTimestamp::new(w));
            }
            if let Some(x) = extra {
                fbb.push_slot_always(slot(6), x);
            }
            fbb.end_table(s)
        }
        MetadataEvent::Seed(e) => {
            let id = fb::bytes(fbb, &e.dataset_id.to_bytes());
            let s = fbb.start_table();
            fbb.push_slot_always(slot(0), id);
            let kind: i32 = match e.dataset_kind {
                DatasetKind::Root => 0,
                DatasetKind::Derivative => 1,
            };
            fbb.push_slot_always(slot(1), kind);
            fbb.end_table(s)
        }
        MetadataEvent::SetPollingSource(e) => {
            let (fetch_tag, fetch) = match &e.fetch {
                FetchStep::Url { url } => (1u8, url),
                FetchStep::FilesGlob { path } => (2u8, path),
            };
            let fetch_s = fbb.create_string(fetch);
            let fs = fbb.start_table();
            fbb.push_slot_always(slot(0), fetch_s);
            let fetch = fbb.end_table(fs);
            let (read_tag, read) = match &e.read {
                ReadStep::Csv {
                    schema,
                    separator,
                    header,
                } => {
                    let sc = fb::strings(fbb, schema);
                    let sep = encode_opt_string(fbb, separator);
                    let s = fbb.start_table();
                    fbb.push_slot_always(slot(0), sc);
                    if let Some(x) = sep {
                        fbb.push_slot_always(slot(1), x);
                    }
                    if let Some(h) = header {
                        fbb.push_slot_always(slot(5), *h);
                    }
                    (1u8, fbb.end_table(s))
                }
                ReadStep::Parquet { schema } | ReadStep::NdJson { schema } => {
                    let tag = if matches!(e.read, ReadStep::Parquet { .. }) {
                        4u8
                    } else {
                        6u8
                    };
                    let sc = fb::strings(fbb, schema);
                    let s = fbb.start_table();
                    fbb.push_slot_always(slot(0), sc);
                    (tag, fbb.end_table(s))
                }
            };
            let pre = e.preprocess.as_ref().map(|t| encode_sql(fbb, t.sql()));
            let (merge_tag, merge) = match &e.merge {
                MergeStrategy::Append => {
                    let s = fbb.start_table();
                    (1u8, fbb.end_table(s))
                }
                MergeStrategy::Ledger { primary_key } => {
                    let pk = fb::strings(fbb, primary_key);
                    let s = fbb.start_table();
                    fbb.push_slot_always(slot(0), pk);
                    (2u8, fbb.end_table(s))
                }
                MergeStrategy::Snapshot {
                    primary_key,
                    compare_columns,
                } => {
                    let pk = fb::strings(fbb, primary_key);
                    let cc = compare_columns.as_ref().map(|c| fb::strings(fbb, c));
                    let s = fbb.start_table();
                    fbb.push_slot_always(slot(0), pk);
                    if let Some(x) = cc {
                        fbb.push_slot_always(slot(1), x);
                    }
                    (3u8, fbb.end_table(s))
                }
            };
            let s = fbb.start_table();
            fbb.push_slot_always(slot(0), fetch_tag);
            fbb.push_slot_always(slot(1), fetch);
            fbb.push_slot_always(slot(3), read_tag);
            fbb.push_slot_always(slot(4), read);
            if let Some(p) = pre {
                fbb.push_slot_always(slot(5), 1u8);
                fbb.push_slot_always(slot(6), p);
            }
            fbb.push_slot_always(slot(7), merge_tag);
            fbb.push_slot_always(slot(8), merge);
            fbb.end_table(s)
        }
        MetadataEvent::SetTransform(e) => {
            let inputs: Vec<Fin> = e
                .inputs
                .iter()
                .map(|i| {
                    let r = fbb.create_string(&i.dataset_ref);
                    let a = encode_opt_string(fbb, &i.alias);
                    let s = fbb.start_table();
                    fbb.push_slot_always(slot(0), r);
                    if let Some(a) = a {
                        fbb.push_slot_always(slot(1), a);
                    }
                    fbb.end_table(s)
                })
                .collect();
            let inputs = fbb.create_vector(&inputs);
            let t = encode_sql(fbb, e.transform.sql());
            let s = fbb.start_table();
            fbb.push_slot_always(slot(0), inputs);
            fbb.push_slot_always(slot(1), 1u8);
            fbb.push_slot_always(slot(2), t);
            fbb.end_table(s)
        }
        MetadataEvent::SetVocab(e) => {
            let cols: Vec<_> = [
                &e.offset_column,
                &e.operation_type_column,
                &e.system_time_column,
                &e.event_time_column,
            ]
            .into_iter()
            .map(|c| encode_opt_string(fbb, c))
            .collect();
            let s = fbb.start_table();
            for (i, c) in cols.into_iter().enumerate() {
                if let Some(c) = c {
                    fbb.push_slot_always(slot(i as u16), c);
                }
            }
            fbb.end_table(s)
        }
    };
    (event.tag(), t)
}

/// Decodes manifest bytes into a block.
pub fn decode_block(manifest_bytes: &[u8]) -> Result<MetadataBlock, DecodeError> {
    let m = Table::root(manifest_bytes)?;
    let kind = m.i64(0)?.unwrap_or(0);
    let version = m.i32(1)?.unwrap_or(0);
    if kind != MANIFEST_KIND_METADATA_BLOCK {
        return Err(DecodeError::NotAMetadataBlock { kind, version });
    }
    let content = m.bytes(2)?.ok_or(FbError::MissingField {
        table: "Manifest",
        field: "content",
    })?;
    let b = Table::root(content)?;
    let system_time = b.timestamp(0)?.ok_or(FbError::MissingField {
        table: "MetadataBlock",
        field: "system_time",
    })?;
    let prev_block_hash = hash_opt(&b, 1, "prev_block_hash")?;
    let sequence_number = b.u64(2)?.unwrap_or(0);
    let (tag, ev) = b.union(3)?.ok_or(FbError::MissingField {
        table: "MetadataBlock",
        field: "event",
    })?;
    let event = decode_event(tag, ev)?;
    Ok(MetadataBlock {
        system_time,
        prev_block_hash,
        sequence_number,
        event,
    })
}

fn hash_opt(
    t: &Table<'_>,
    slot: usize,
    field: &'static str,
) -> Result<Option<Multihash>, DecodeError> {
    t.bytes(slot)?
        .map(|b| Multihash::from_bytes(b).map_err(|_| DecodeError::BadHash { field }))
        .transpose()
}

fn hash_req(
    t: &Table<'_>,
    slot: usize,
    table: &'static str,
    field: &'static str,
) -> Result<Multihash, DecodeError> {
    hash_opt(t, slot, field)?.ok_or(DecodeError::Fb(FbError::MissingField { table, field }))
}

fn req_str(
    t: &Table<'_>,
    slot: usize,
    table: &'static str,
    field: &'static str,
) -> Result<String, DecodeError> {
    Ok(t.str(slot)?
        .ok_or(FbError::MissingField { table, field })?
        .to_string())
}

fn opt_str(t: &Table<'_>, slot: usize) -> Result<Option<String>, DecodeError> {
    Ok(t.str(slot)?.map(str::to_string))
}

fn decode_slice(t: Option<Table<'_>>) -> Result<Option<DataSlice>, DecodeError> {
    let Some(t) = t else { return Ok(None) };
    let iv = t.table(2)?.ok_or(FbError::MissingField {
        table: "DataSlice",
        field: "offset_interval",
    })?;
    Ok(Some(DataSlice {
        logical_hash: hash_req(&t, 0, "DataSlice", "logical_hash")?,
        physical_hash: hash_req(&t, 1, "DataSlice", "physical_hash")?,
        offset_interval: OffsetInterval {
            start: iv.u64(0)?.unwrap_or(0),
            end: iv.u64(1)?.unwrap_or(0),
        },
        size: t.u64(3)?.unwrap_or(0),
    }))
}

fn decode_checkpoint(t: Option<Table<'_>>) -> Result<Option<Checkpoint>, DecodeError> {
    let Some(t) = t else { return Ok(None) };
    Ok(Some(Checkpoint {
        physical_hash: hash_req(&t, 0, "Checkpoint", "physical_hash")?,
        size: t.u64(1)?.unwrap_or(0),
    }))
}

fn decode_sql(t: Table<'_>) -> Result<TransformSql, DecodeError> {
    let queries = t
        .tables(3)?
        .into_iter()
        .map(|q| {
            Ok(SqlQueryStep {
                alias: opt_str(&q, 0)?,
                query: req_str(&q, 1, "SqlQueryStep", "query")?,
            })
        })
        .collect::<Result<Vec<_>, DecodeError>>()?;
    let sql = TransformSql {
        engine: req_str(&t, 0, "TransformSql", "engine")?,
        version: opt_str(&t, 1)?,
        query: opt_str(&t, 2)?,
        queries,
    };
    Ok(sql.normalized())
}

fn decode_transform(t: Option<(u8, Table<'_>)>) -> Result<Option<Transform>, DecodeError> {
    match t {
        None => Ok(None),
        Some((1, t)) => Ok(Some(Transform::Sql(decode_sql(t)?))),
        Some((tag, _)) => Err(FbError::UnknownUnionTag {
            union: "Transform",
            tag,
        }
        .into()),
    }
}

fn decode_event(tag: u8, t: Table<'_>) -> Result<MetadataEvent, DecodeError> {
    Ok(match tag {
        1 => MetadataEvent::AddData(AddData {
            prev_checkpoint: hash_opt(&t, 0, "prev_checkpoint")?,
            prev_offset: t.u64(1)?,
            new_data: decode_slice(t.table(2)?)?,
            new_checkpoint: decode_checkpoint(t.table(3)?)?,
            new_watermark: t.timestamp(4)?,
            new_source_state: match t.table(5)? {
                None => None,
                Some(s) => Some(SourceState {
                    source_name: req_str(&s, 0, "SourceState", "source_name")?,
                    kind: req_str(&s, 1, "SourceState", "kind")?,
                    value: req_str(&s, 2, "SourceState", "value")?,
                }),
            },
        }),
        2 => {
            let query_inputs = t
                .tables(0)?
                .into_iter()
                .map(|i| {
                    let id = i.bytes(0)?.ok_or(FbError::MissingField {
                        table: "ExecuteTransformInput",
                        field: "dataset_id",
                    })?;
                    Ok(ExecuteTransformInput {
                        dataset_id: DatasetId::from_bytes(id).ok_or(DecodeError::BadDatasetId {
                            field: "ExecuteTransformInput.dataset_id",
                        })?,
                        prev_block_hash: hash_opt(&i, 1, "prev_block_hash")?,
                        new_block_hash: hash_opt(&i, 2, "new_block_hash")?,
                        prev_offset: i.u64(3)?,
                        new_offset: i.u64(4)?,
                    })
                })
                .collect::<Result<Vec<_>, DecodeError>>()?;
            let engine = match t.table(6)? {
                None => None,
                Some(extra) => {
                    let json = extra.str(0)?.unwrap_or("{}");
                    let v: serde_json::Value =
                        serde_json::from_str(json).map_err(|e| DecodeError::BadExtra {
                            message: e.to_string(),
                        })?;
                    match v.get(ENGINE_EXTRA_KEY) {
                        None => None,
                        Some(e) => Some(serde_json::from_value(e.clone()).map_err(|e| {
                            DecodeError::BadExtra {
                                message: e.to_string(),
                            }
                        })?),
                    }
                }
            };
            MetadataEvent::ExecuteTransform(ExecuteTransform {
                query_inputs,
                prev_checkpoint: hash_opt(&t, 1, "prev_checkpoint")?,
                prev_offset: t.u64(2)?,
                new_data: decode_slice(t.table(3)?)?,
                new_checkpoint: decode_checkpoint(t.table(4)?)?,
                new_watermark: t.timestamp(5)?,
                engine,
            })
        }
        3 => {
            let id = t.bytes(0)?.ok_or(FbError::MissingField {
                table: "Seed",
                field: "dataset_id",
            })?;
            let kind = t.i32(1)?.unwrap_or(0);
            MetadataEvent::Seed(Seed {
                dataset_id: DatasetId::from_bytes(id).ok_or(DecodeError::BadDatasetId {
                    field: "Seed.dataset_id",
                })?,
                dataset_kind: match kind {
                    0 => DatasetKind::Root,
                    1 => DatasetKind::Derivative,
                    value => {
                        return Err(DecodeError::UnknownEnumValue {
                            field: "Seed.dataset_kind",
                            value,
                        });
                    }
                },
            })
        }
        4 => {
            let fetch = match t.union(0)? {
                Some((1, f)) => FetchStep::Url {
                    url: req_str(&f, 0, "FetchStepUrl", "url")?,
                },
                Some((2, f)) => FetchStep::FilesGlob {
                    path: req_str(&f, 0, "FetchStepFilesGlob", "path")?,
                },
                Some((tag, _)) => {
                    return Err(FbError::UnknownUnionTag {
                        union: "FetchStep",
                        tag,
                    }
                    .into());
                }
                None => {
                    return Err(FbError::MissingField {
                        table: "SetPollingSource",
                        field: "fetch",
                    }
                    .into());
                }
            };
            let read = match t.union(3)? {
                Some((1, r)) => ReadStep::Csv {
                    schema: r.strings(0)?,
                    separator: opt_str(&r, 1)?,
                    header: r.bool(5)?,
                },
                Some((4, r)) => ReadStep::Parquet {
                    schema: r.strings(0)?,
                },
                Some((6, r)) => ReadStep::NdJson {
                    schema: r.strings(0)?,
                },
                Some((tag, _)) => {
                    return Err(FbError::UnknownUnionTag {
                        union: "ReadStep",
                        tag,
                    }
                    .into());
                }
                None => {
                    return Err(FbError::MissingField {
                        table: "SetPollingSource",
                        field: "read",
                    }
                    .into());
                }
            };
            let preprocess = decode_transform(t.union(5)?)?;
            let merge = match t.union(7)? {
                Some((1, _)) => MergeStrategy::Append,
                Some((2, m)) => MergeStrategy::Ledger {
                    primary_key: m.strings(0)?,
                },
                Some((3, m)) => {
                    let compare = m.strings(1)?;
                    MergeStrategy::Snapshot {
                        primary_key: m.strings(0)?,
                        compare_columns: (!compare.is_empty()).then_some(compare),
                    }
                }
                Some((tag, _)) => {
                    return Err(FbError::UnknownUnionTag {
                        union: "MergeStrategy",
                        tag,
                    }
                    .into());
                }
                None => {
                    return Err(FbError::MissingField {
                        table: "SetPollingSource",
                        field: "merge",
                    }
                    .into());
                }
            };
            MetadataEvent::SetPollingSource(SetPollingSource {
                fetch,
                read,
                preprocess,
                merge,
            })
        }
        5 => {
            let inputs = t
                .tables(0)?
                .into_iter()
                .map(|i| {
                    Ok(TransformInput {
                        dataset_ref: req_str(&i, 0, "TransformInput", "dataset_ref")?,
                        alias: opt_str(&i, 1)?,
                    })
                })
                .collect::<Result<Vec<_>, DecodeError>>()?;
            let transform = decode_transform(t.union(1)?)?.ok_or(FbError::MissingField {
                table: "SetTransform",
                field: "transform",
            })?;
            MetadataEvent::SetTransform(SetTransform { inputs, transform })
        }
        6 => MetadataEvent::SetVocab(SetVocab {
            offset_column: opt_str(&t, 0)?,
            operation_type_column: opt_str(&t, 1)?,
            system_time_column: opt_str(&t, 2)?,
            event_time_column: opt_str(&t, 3)?,
        }),
        tag => {
            return Err(FbError::UnknownUnionTag {
                union: "MetadataEvent",
                tag,
            }
            .into());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn sample_events() -> Vec<MetadataEvent> {
        let id = DatasetId([7; 32]);
        let slice = DataSlice {
            logical_hash: Multihash::of(b"l"),
            physical_hash: Multihash::of(b"p"),
            offset_interval: OffsetInterval { start: 3, end: 9 },
            size: 1234,
        };
        vec![
            MetadataEvent::Seed(Seed {
                dataset_id: id.clone(),
                dataset_kind: DatasetKind::Derivative,
            }),
            MetadataEvent::SetPollingSource(SetPollingSource {
                fetch: FetchStep::FilesGlob {
                    path: "data/*.csv".into(),
                },
                read: ReadStep::Csv {
                    schema: vec!["a BIGINT".into()],
                    separator: Some(";".into()),
                    header: Some(true),
                },
                preprocess: Some(Transform::Sql(TransformSql {
                    engine: "datafusion".into(),
                    version: None,
                    query: None,
                    queries: vec![SqlQueryStep {
                        alias: None,
                        query: "select 1".into(),
                    }],
                })),
                merge: MergeStrategy::Snapshot {
                    primary_key: vec!["id".into()],
                    compare_columns: None,
                },
            }),
            MetadataEvent::SetPollingSource(SetPollingSource {
                fetch: FetchStep::Url {
                    url: "file:///x.parquet".into(),
                },
                read: ReadStep::Parquet { schema: vec![] },
                preprocess: None,
                merge: MergeStrategy::Ledger {
                    primary_key: vec!["a".into(), "b".into()],
                },
            }),
            MetadataEvent::SetTransform(SetTransform {
                inputs: vec![TransformInput {
                    dataset_ref: "trips".into(),
                    alias: Some("t".into()),
                }],
                transform: Transform::Sql(TransformSql {
                    engine: "datafusion".into(),
                    version: Some("1".into()),
                    query: None,
                    queries: vec![
                        SqlQueryStep {
                            alias: Some("v".into()),
                            query: "select * from t".into(),
                        },
                        SqlQueryStep {
                            alias: None,
                            query: "select * from v".into(),
                        },
                    ],
                }),
            }),
            MetadataEvent::SetVocab(SetVocab {
                event_time_column: Some("ts".into()),
                ..Default::default()
            }),
            MetadataEvent::AddData(AddData {
                prev_checkpoint: None,
                prev_offset: Some(2),
                new_data: Some(slice.clone()),
                new_checkpoint: None,
                new_watermark: Some(t("2024-01-02T03:04:05.006Z")),
                new_source_state: Some(SourceState {
                    source_name: "default".into(),
                    kind: "weir/last-file".into(),
                    value: "a.csv".into(),
                }),
            }),
            MetadataEvent::ExecuteTransform(ExecuteTransform {
                query_inputs: vec![ExecuteTransformInput {
                    dataset_id: id,
                    prev_block_hash: None,
                    new_block_hash: Some(Multihash::of(b"b")),
                    prev_offset: None,
                    new_offset: Some(9),
                }],
                prev_checkpoint: Some(Multihash::of(b"c0")),
                prev_offset: None,
                new_data: Some(slice),
                new_checkpoint: Some(Checkpoint {
                    physical_hash: Multihash::of(b"c1"),
                    size: 10,
                }),
                new_watermark: None,
                engine: Some(EngineIdentity {
                    name: "datafusion".into(),
                    runtime: "embedded".into(),
                    reference: "reference-engine@0.1.0".into(),
                }),
            }),
        ]
    }

    #[test]
    fn every_event_round_trips_through_manifest_bytes() {
        for (i, event) in sample_events().into_iter().enumerate() {
            let block = MetadataBlock {
                system_time: t("2024-05-06T07:08:09Z"),
                prev_block_hash: (i > 0).then(|| Multihash::of(b"prev")),
                sequence_number: i as u64,
                event,
            };
            let bytes = encode_block(&block);
            assert_eq!(decode_block(&bytes).unwrap(), block);
        }
    }

    #[test]
    fn the_same_block_always_hashes_the_same() {
        let block = MetadataBlock {
            system_time: t("2024-05-06T07:08:09Z"),
            prev_block_hash: None,
            sequence_number: 0,
            event: sample_events().remove(0),
        };
        assert_eq!(
            block_hash(&encode_block(&block)),
            block_hash(&encode_block(&block))
        );
    }

    #[test]
    fn corrupt_bytes_decode_to_errors() {
        let block = MetadataBlock {
            system_time: t("2024-05-06T07:08:09Z"),
            prev_block_hash: None,
            sequence_number: 0,
            event: sample_events().remove(6),
        };
        let bytes = encode_block(&block);
        for cut in 0..bytes.len() {
            let _ = decode_block(&bytes[..cut]);
        }
        let mut flipped = bytes.clone();
        for i in 0..flipped.len() {
            flipped[i] ^= 0xff;
            let _ = decode_block(&flipped);
            flipped[i] ^= 0xff;
        }
    }
}
