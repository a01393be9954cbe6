//! Metadata blocks: one link of a dataset's metadata chain.

use chrono::{DateTime, Utc};
use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_opt_multihash, decode_timestamp, encode_bytes, required};
use crate::generated as fb;
use crate::manifest::{self, ManifestVersion};
use crate::timestamp::to_flatbuffers;
use crate::{Error, MetadataEvent, Multihash};

/// One block of a dataset's metadata chain. On disk it is a [`Manifest`](crate::manifest) of kind
/// `odf-metadata-block` whose content is the FlatBuffers `MetadataBlock`; its hash is the SHA3-256
/// multihash of those bytes ([`MetadataBlock::hash`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct MetadataBlock {
    /// When the block was written.
    pub system_time: DateTime<Utc>,
    /// The previous block's hash; absent for the Seed.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub prev_block_hash: Option<Multihash>,
    /// 0 for the Seed, then +1 per block.
    pub sequence_number: u64,
    /// What the block records.
    pub event: MetadataEvent,
}

impl MetadataBlock {
    /// The block file's bytes: a version-2 manifest around the block's FlatBuffers, byte for byte as kamu
    /// writes it.
    pub fn encode(&self) -> Vec<u8> {
        manifest::write(&self.encode_content())
    }

    /// Decodes a block file (manifest version 2 or 3), through the FlatBuffers verifier.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        Self::decode_versioned(bytes).map(|(block, _)| block)
    }

    /// Decodes a block file and says which manifest version it was.
    pub fn decode_versioned(bytes: &[u8]) -> Result<(Self, ManifestVersion), Error> {
        let manifest = manifest::read(bytes)?;
        Ok((Self::decode_content(manifest.content)?, manifest.version))
    }

    /// The block hash of a block file's bytes: their SHA3-256 multihash.
    pub fn hash(bytes: &[u8]) -> Multihash {
        Multihash::sha3_256(bytes)
    }

    /// The inner buffer alone: a complete FlatBuffers buffer whose root is `MetadataBlock`, finished without
    /// a file identifier.
    pub fn encode_content(&self) -> Vec<u8> {
        let mut fbb = Builder::new();
        let root = self.encode_table(&mut fbb);
        fbb.finish(root, None);
        fbb.finished_data().to_vec()
    }

    /// Decodes the inner buffer alone, through the verifier.
    pub fn decode_content(content: &[u8]) -> Result<Self, Error> {
        let t = flatbuffers::root_with_opts::<fb::MetadataBlock<'_>>(
            &manifest::verifier_options(),
            content,
        )
        .map_err(|source| Error::InvalidFlatbuffer {
            buffer: "metadata block",
            source,
        })?;
        Self::decode_table(t)
    }

    fn encode_table<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::MetadataBlock<'b>> {
        let prev_block_hash = self
            .prev_block_hash
            .map(|h| encode_bytes(fbb, &h.to_bytes()));
        let (event_tag, event) = self.event.encode(fbb);
        let mut b = fb::MetadataBlockBuilder::new(fbb);
        b.add_system_time(&to_flatbuffers(&self.system_time));
        if let Some(h) = prev_block_hash {
            b.add_prev_block_hash(h);
        }
        b.add_sequence_number(self.sequence_number);
        b.add_event_type(event_tag);
        b.add_event(event);
        b.finish()
    }

    fn decode_table(t: fb::MetadataBlock<'_>) -> Result<Self, Error> {
        Ok(Self {
            system_time: decode_timestamp(
                required(t.system_time(), "MetadataBlock.system_time")?,
                "MetadataBlock.system_time",
            )?,
            prev_block_hash: decode_opt_multihash(
                t.prev_block_hash(),
                "MetadataBlock.prev_block_hash",
            )?,
            sequence_number: t.sequence_number(),
            event: MetadataEvent::decode(t)?,
        })
    }
}
