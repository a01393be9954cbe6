//! What only the Weir before the ODF port wrote into a block, for `weir upgrade`: the engine record that
//! block's `ExecuteTransform` kept in a table slot ODF does not have (slot 6, `extra`), and the marks that
//! tell such a block apart.
//!
//! `odf` decodes those blocks (it ignores the slot), so everything else in them is read through `odf`; this
//! module reads that one slot, from the block file's bytes, with a small bounds-checked walk of the
//! FlatBuffers tables on the way to it (manifest → content → `MetadataBlock.event` → `ExecuteTransform`
//! slot 6 → its string). Every offset is checked against the buffer, so corrupt bytes are an error, never a
//! panic. Nothing here is used to read current chains.
//!
//! ```
//! // Not a FlatBuffers buffer at all: an error, not a panic.
//! assert!(weir_dataset::chain::legacy::engine_record(b"\x01\x02").is_err());
//! ```

use weir_odf::{ManifestVersion, MetadataBlock, MetadataEvent, Multicodec};

use crate::identity::EngineIdentity;

/// The key of the engine record in the old `ExecuteTransform.extra` JSON object.
pub const ENGINE_EXTRA_KEY: &str = "weir.dev/engine";

/// Why an old block's engine record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LegacyError {
    /// An offset or a length points outside the block file.
    #[error("offset {at} is outside the {len}-byte block file")]
    OutOfBounds {
        /// The position read.
        at: usize,
        /// The file's length.
        len: usize,
    },
    /// A string is not UTF-8.
    #[error("the engine record is not UTF-8 text")]
    NotUtf8,
    /// The engine record is not the JSON the old Weir wrote.
    #[error("the engine record {text:?} is not a JSON object with `{ENGINE_EXTRA_KEY}`: {message}")]
    BadRecord {
        /// The record's text.
        text: String,
        /// What is wrong.
        message: String,
    },
}

/// What marks a block as written by the Weir before the ODF port, if anything (the first mark found).
///
/// `bytes` is the block file and `block` what `odf` decoded from it. A block whose bytes are not `odf`'s
/// encoding of it (only manifest version 2 is compared: `odf` writes no other), a slice whose logical hash
/// is Weir's old one (multicodec 0x16, not ODF's 0x300016), and transform inputs named by dataset name
/// instead of id are the marks.
pub fn old_format_mark(
    bytes: &[u8],
    block: &MetadataBlock,
    version: ManifestVersion,
) -> Option<&'static str> {
    if let Some(d) = block.event.new_data()
        && d.logical_hash.codec() != Multicodec::Arrow0_Sha3_256
    {
        return Some("a logical hash that is not ODF's (multicodec 0x300016)");
    }
    if let MetadataEvent::SetTransform(t) = &block.event
        && t.inputs.iter().any(|i| i.dataset_id().is_none())
    {
        return Some("transform inputs named by dataset name, not by dataset id");
    }
    if let MetadataEvent::ExecuteTransform(e) = &block.event
        && e.query_inputs.iter().any(repeats_its_position)
    {
        return Some(
            "a transform input with nothing new written with its previous block and offset repeated as new ones (kamu writes none and refuses that form)",
        );
    }
    if version == ManifestVersion::V2 && block.encode() != bytes {
        return Some("bytes that are not ODF's encoding of the block");
    }
    None
}

/// The engine record of an old `ExecuteTransform` block, `None` when the block has none (or is not an
/// `ExecuteTransform`).
pub fn engine_record(bytes: &[u8]) -> Result<Option<EngineIdentity>, LegacyError> {
    let manifest = Table::root(bytes, 0)?;
    let Some(content) = manifest.bytes(2)? else {
        return Ok(None);
    };
    let block = Table::root(bytes, content)?;
    // MetadataEvent union: the tag in slot 3, the table in slot 4; ExecuteTransform is tag 2.
    if block.u8(3)? != Some(2) {
        return Ok(None);
    }
    let Some(event) = block.table(4)? else {
        return Ok(None);
    };
    let Some(extra) = event.table(6)? else {
        return Ok(None);
    };
    let Some(text) = extra.string(0)? else {
        return Ok(None);
    };
    let bad = |message: String| LegacyError::BadRecord {
        text: text.to_owned(),
        message,
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    match value.get(ENGINE_EXTRA_KEY) {
        None => Ok(None),
        Some(engine) => serde_json::from_value(engine.clone())
            .map(Some)
            .map_err(|e| bad(e.to_string())),
    }
}

/// A table of a FlatBuffers buffer held inside the block file (`base` is where that buffer starts: 0 for
/// the manifest, the content vector's data for the block).
#[derive(Debug, Clone, Copy)]
struct Table<'a> {
    file: &'a [u8],
    pos: usize,
    vtable: usize,
    vtable_len: usize,
}

fn out_of_bounds(file: &[u8], at: usize) -> LegacyError {
    LegacyError::OutOfBounds {
        at,
        len: file.len(),
    }
}

fn read<const N: usize>(file: &[u8], at: usize) -> Result<[u8; N], LegacyError> {
    at.checked_add(N)
        .and_then(|end| file.get(at..end))
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| out_of_bounds(file, at))
}

fn read_u32(file: &[u8], at: usize) -> Result<usize, LegacyError> {
    let v = u32::from_le_bytes(read::<4>(file, at)?);
    usize::try_from(v).map_err(|_| out_of_bounds(file, at))
}

/// The position an unsigned offset stored at `at` points to.
fn follow(file: &[u8], at: usize) -> Result<usize, LegacyError> {
    at.checked_add(read_u32(file, at)?)
        .filter(|p| *p < file.len())
        .ok_or_else(|| out_of_bounds(file, at))
}

impl<'a> Table<'a> {
    /// The root table of the buffer starting at `base`.
    fn root(file: &'a [u8], base: usize) -> Result<Self, LegacyError> {
        Self::at(file, follow(file, base)?)
    }

    fn at(file: &'a [u8], pos: usize) -> Result<Self, LegacyError> {
        let soffset = i64::from(i32::from_le_bytes(read::<4>(file, pos)?));
        let vtable = i64::try_from(pos)
            .ok()
            .and_then(|p| p.checked_sub(soffset))
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| out_of_bounds(file, pos))?;
        let vtable_len = usize::from(u16::from_le_bytes(read::<2>(file, vtable)?));
        if vtable_len < 4
            || vtable
                .checked_add(vtable_len)
                .is_none_or(|e| e > file.len())
        {
            return Err(out_of_bounds(file, vtable));
        }
        Ok(Self {
            file,
            pos,
            vtable,
            vtable_len,
        })
    }

    /// The position of field `slot`, if the table has it.
    fn field(&self, slot: usize) -> Result<Option<usize>, LegacyError> {
        let entry = 4 + 2 * slot;
        if entry + 2 > self.vtable_len {
            return Ok(None);
        }
        let offset = usize::from(u16::from_le_bytes(read::<2>(
            self.file,
            self.vtable + entry,
        )?));
        if offset == 0 {
            return Ok(None);
        }
        self.pos
            .checked_add(offset)
            .map(Some)
            .ok_or_else(|| out_of_bounds(self.file, self.pos))
    }

    fn u8(&self, slot: usize) -> Result<Option<u8>, LegacyError> {
        self.field(slot)?
            .map(|at| read::<1>(self.file, at).map(|b| b[0]))
            .transpose()
    }

    /// A vector field's data: its start and length in the file.
    fn vector(&self, slot: usize) -> Result<Option<(usize, usize)>, LegacyError> {
        let Some(at) = self.field(slot)? else {
            return Ok(None);
        };
        let start = follow(self.file, at)?;
        let len = read_u32(self.file, start)?;
        let data = start + 4;
        if data
            .checked_add(len)
            .is_none_or(|end| end > self.file.len())
        {
            return Err(out_of_bounds(self.file, data));
        }
        Ok(Some((data, len)))
    }

    /// A `[ubyte]` field: where its bytes start (they hold a nested buffer here).
    fn bytes(&self, slot: usize) -> Result<Option<usize>, LegacyError> {
        Ok(self.vector(slot)?.map(|(data, _)| data))
    }

    fn string(&self, slot: usize) -> Result<Option<&'a str>, LegacyError> {
        let Some((data, len)) = self.vector(slot)? else {
            return Ok(None);
        };
        let bytes = self
            .file
            .get(data..data + len)
            .ok_or_else(|| out_of_bounds(self.file, data))?;
        std::str::from_utf8(bytes)
            .map(Some)
            .map_err(|_| LegacyError::NotUtf8)
    }

    fn table(&self, slot: usize) -> Result<Option<Table<'a>>, LegacyError> {
        let Some(at) = self.field(slot)? else {
            return Ok(None);
        };
        Table::at(self.file, follow(self.file, at)?).map(Some)
    }
}

/// An input written the way Weir wrote one with nothing new before it followed kamu's rule: its new block
/// (and new offset) repeat the previous ones instead of being left out.
pub fn repeats_its_position(q: &weir_odf::ExecuteTransformInput) -> bool {
    q.new_block_hash.is_some()
        && q.new_block_hash == q.prev_block_hash
        && q.new_offset == q.prev_offset
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pre-odf");

    /// Every block file of one fixture dataset, decoded.
    fn fixture_blocks(dataset: &str) -> Vec<(Vec<u8>, MetadataBlock, ManifestVersion)> {
        std::fs::read_dir(format!("{FIXTURE}/{dataset}/blocks"))
            .unwrap()
            .map(|e| {
                let bytes = std::fs::read(e.unwrap().path()).unwrap();
                let (block, version) = MetadataBlock::decode_versioned(&bytes).unwrap();
                (bytes, block, version)
            })
            .collect()
    }

    #[test]
    fn the_old_engine_record_is_read_from_every_old_execute_transform() {
        let mut steps = 0;
        for (bytes, block, _) in fixture_blocks("readings.hot-days") {
            let record = engine_record(&bytes).unwrap();
            if matches!(block.event, MetadataEvent::ExecuteTransform(_)) {
                let record = record.unwrap();
                assert_eq!(record.name, "datafusion");
                assert_eq!(record.runtime, "embedded");
                assert!(record.reference.starts_with("reference-engine@"));
                steps += 1;
            } else {
                assert_eq!(record, None);
            }
        }
        assert!(steps > 0);
    }

    #[test]
    fn every_old_block_is_marked_and_blocks_odf_writes_are_not() {
        for dataset in ["readings", "readings.hot-days"] {
            for (bytes, block, version) in fixture_blocks(dataset) {
                assert!(old_format_mark(&bytes, &block, version).is_some());
                let current = block.encode();
                if block.event.new_data().is_none()
                    && !matches!(block.event, MetadataEvent::SetTransform(_))
                {
                    assert_eq!(old_format_mark(&current, &block, ManifestVersion::V2), None);
                }
            }
        }
    }

    #[test]
    fn a_truncated_or_flipped_block_is_an_error_or_no_record_never_a_panic() {
        for (bytes, _, _) in fixture_blocks("readings.hot-days") {
            for cut in 0..bytes.len() {
                let _ = engine_record(&bytes[..cut]);
            }
            let mut flipped = bytes.clone();
            for i in 0..flipped.len() {
                flipped[i] ^= 0xff;
                let _ = engine_record(&flipped);
                flipped[i] ^= 0xff;
            }
        }
    }
}
