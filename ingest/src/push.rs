//! What a push (`weir ingest`) records about the bytes it pushed, and the last push of a source.
//!
//! A push's `AddData` records, in its extra attributes under [`RecordedPush::KEY`], the push source it fed
//! and the size and SHA3-256 of the bytes pushed (a file's or standard input's). [`last_push`] finds a
//! source's last push in a chain, so that a push of exactly the same bytes to the same source is known for
//! the repeat it is: a rerun of a push whose process died after its commit, before it could report, would
//! otherwise append the same records a second time.
//!
//! ```
//! use weir_ingest::push::RecordedPush;
//! let pushed = RecordedPush::of("default", b"id\n1\n");
//! let extra = pushed.to_extra(None).unwrap();
//! assert_eq!(RecordedPush::from_extra(&extra), Some(pushed));
//! ```

use chrono::{DateTime, Utc};
use weir_odf::{ExtraAttributes, MetadataBlock, MetadataEvent, Multihash};

use crate::source_file::RecordedFile;

/// What a push records about the bytes it pushed, in its `AddData`'s extra attributes under
/// [`RecordedPush::KEY`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedPush {
    /// The push source fed (`AddPushSource.sourceName`).
    pub source_name: String,
    /// Size of the bytes pushed.
    pub size: u64,
    /// The SHA3-256 multihash of the bytes pushed (`f1620...`).
    #[serde(rename = "sha3-256")]
    pub sha3_256: String,
}

impl RecordedPush {
    /// The extra attribute key (ODF's `<domain>/<path>` form).
    pub const KEY: &'static str = "weir.dev/push";

    /// The record of pushing `bytes` to `source_name`.
    pub fn of(source_name: &str, bytes: &[u8]) -> Self {
        Self::new(source_name, bytes.len() as u64, &Multihash::sha3_256(bytes))
    }

    /// The record of pushing `size` bytes whose SHA3-256 is `sha3` to `source_name`.
    pub fn new(source_name: &str, size: u64, sha3: &Multihash) -> Self {
        Self {
            source_name: source_name.to_string(),
            size,
            sha3_256: sha3.to_string(),
        }
    }

    /// The extra attributes of a push's `AddData`: this record, and the file it read when it read one
    /// (under [`RecordedFile::KEY`]).
    pub fn to_extra(&self, file: Option<&RecordedFile>) -> Option<ExtraAttributes> {
        let mut map = serde_json::Map::new();
        map.insert(Self::KEY.to_string(), serde_json::to_value(self).ok()?);
        if let Some(file) = file {
            map.insert(
                RecordedFile::KEY.to_string(),
                serde_json::to_value(file).ok()?,
            );
        }
        ExtraAttributes::from_map(&map).ok()
    }

    /// The push an `AddData`'s extra attributes record, if any (anything else there is ignored).
    pub fn from_extra(extra: &ExtraAttributes) -> Option<Self> {
        let value = extra.get(Self::KEY).ok()??;
        serde_json::from_value(value).ok()
    }
}

/// A source's last push, as its block records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastPush {
    /// The block's hash.
    pub block: Multihash,
    /// The block's sequence number.
    pub sequence_number: u64,
    /// When the block was written.
    pub system_time: DateTime<Utc>,
    /// The records it added.
    pub records: u64,
    /// What it pushed.
    pub pushed: RecordedPush,
}

/// The last push to `source_name` in `blocks` (a chain, oldest first) followed by `pending` (the events a
/// transaction records before its own push).
///
/// `None` when the source has no push since it was last declared (an `AddPushSource` or `DisablePushSource`
/// of that name, in the chain or pending: a push under another declaration is not this source's), or when an
/// `AddData` after the source's last push records no push at all (one whose source cannot be told, as in a
/// chain written before pushes were recorded): only a push known to be the source's last counts.
pub fn last_push(
    blocks: &[(Multihash, MetadataBlock)],
    pending: &[MetadataEvent],
    source_name: &str,
) -> Option<LastPush> {
    let declares = |e: &MetadataEvent| match e {
        MetadataEvent::AddPushSource(p) => p.source_name == source_name,
        MetadataEvent::DisablePushSource(p) => p.source_name == source_name,
        _ => false,
    };
    if pending.iter().any(declares) {
        return None;
    }
    for (hash, block) in blocks.iter().rev() {
        match &block.event {
            e if declares(e) => return None,
            MetadataEvent::AddData(add) => {
                let pushed = add.extra.as_ref().and_then(RecordedPush::from_extra)?;
                if pushed.source_name != source_name {
                    continue;
                }
                return Some(LastPush {
                    block: *hash,
                    sequence_number: block.sequence_number,
                    system_time: block.system_time,
                    records: add
                        .new_data
                        .as_ref()
                        .map_or(0, |d| d.offset_interval.end - d.offset_interval.start + 1),
                    pushed,
                });
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_odf::{
        AddData, AddPushSource, DataSlice, DisablePushSource, MergeStrategy, OffsetInterval,
        ReadStep, ReadStepCsv,
    };

    fn push_source(name: &str) -> MetadataEvent {
        MetadataEvent::AddPushSource(AddPushSource {
            source_name: name.to_string(),
            read: ReadStep::Csv(ReadStepCsv::default()),
            preprocess: None,
            merge: MergeStrategy::Append,
        })
    }

    fn add(pushed: Option<&RecordedPush>, rows: u64) -> MetadataEvent {
        MetadataEvent::AddData(AddData {
            prev_checkpoint: None,
            prev_offset: None,
            new_data: (rows > 0).then(|| DataSlice {
                logical_hash: Multihash::sha3_256(b"l"),
                physical_hash: Multihash::sha3_256(b"p"),
                offset_interval: OffsetInterval {
                    start: 10,
                    end: 10 + rows - 1,
                },
                size: 1,
            }),
            new_checkpoint: None,
            new_watermark: None,
            new_source_state: None,
            extra: pushed.and_then(|p| p.to_extra(None)),
        })
    }

    fn chain(events: Vec<MetadataEvent>) -> Vec<(Multihash, MetadataBlock)> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| {
                (
                    Multihash::sha3_256(&[i as u8]),
                    MetadataBlock {
                        system_time: DateTime::UNIX_EPOCH,
                        prev_block_hash: None,
                        sequence_number: i as u64,
                        event,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn the_last_push_of_a_source_is_found_past_other_sources_pushes() {
        let a1 = RecordedPush::of("a", b"1");
        let a2 = RecordedPush::of("a", b"2");
        let b = RecordedPush::of("b", b"1");
        let blocks = chain(vec![
            push_source("a"),
            push_source("b"),
            add(Some(&a1), 2),
            add(Some(&a2), 3),
            add(Some(&b), 1),
        ]);
        let last = last_push(&blocks, &[], "a").unwrap();
        assert_eq!(last.pushed, a2);
        assert_eq!(last.sequence_number, 3);
        assert_eq!(last.block, blocks[3].0);
        assert_eq!(last.records, 3);
        assert_eq!(last.pushed, RecordedPush::of("a", b"2"));
        assert_ne!(last.pushed, RecordedPush::of("b", b"2"));
        assert_eq!(last_push(&blocks, &[], "b").unwrap().pushed, b);
        assert_eq!(last_push(&blocks, &[], "c"), None);
    }

    #[test]
    fn a_source_declared_again_has_no_last_push() {
        let a = RecordedPush::of("a", b"1");
        let disabled = MetadataEvent::DisablePushSource(DisablePushSource {
            source_name: "a".into(),
        });
        let blocks = chain(vec![
            push_source("a"),
            add(Some(&a), 1),
            disabled.clone(),
            push_source("a"),
        ]);
        assert_eq!(last_push(&blocks, &[], "a"), None);
        // Declared again by the pushing transaction itself.
        let blocks = chain(vec![push_source("a"), add(Some(&a), 1)]);
        assert!(last_push(&blocks, &[], "a").is_some());
        assert_eq!(last_push(&blocks, &[disabled, push_source("a")], "a"), None);
    }

    #[test]
    fn an_add_data_recording_no_push_hides_what_came_before() {
        let a = RecordedPush::of("a", b"1");
        let blocks = chain(vec![push_source("a"), add(Some(&a), 1), add(None, 1)]);
        assert_eq!(last_push(&blocks, &[], "a"), None);
    }

    #[test]
    fn a_push_of_a_file_records_the_file_too() {
        let pushed = RecordedPush::of("default", b"id\n1\n");
        let file = RecordedFile {
            path: "a.csv".into(),
            size: 5,
            modified: "2026-01-02T03:04:05.000000006Z".into(),
            sha3_256: pushed.sha3_256.clone(),
        };
        let extra = pushed.to_extra(Some(&file)).unwrap();
        assert_eq!(RecordedPush::from_extra(&extra), Some(pushed));
        assert_eq!(RecordedFile::from_extra(&extra), Some(file));
        assert!(
            extra
                .as_json()
                .starts_with("{\"weir.dev/push\":{\"sha3-256\":\"f1620"),
            "{}",
            extra.as_json()
        );
    }
}
