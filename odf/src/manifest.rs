//! Manifests: the envelope of every ODF resource on disk, `Manifest { kind, version, content }`.
//!
//! A block file is a manifest of kind `odf-metadata-block` (0x400000). Version 2 lays `Timestamp` structs out
//! with alignment 1 (kamu up to 0.264); version 3 (kamu 0.265) aligns them to 4. This crate writes version 2
//! and reads both: the FlatBuffers verifier and accessors read a struct wherever it is placed.

use crate::codec::Builder;
use crate::generated as fb;
use crate::{Error, Multicodec};

/// A metadata block manifest version this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ManifestVersion {
    /// Sequence numbers in blocks, `Timestamp` aligned to 1. What this crate writes.
    V2,
    /// `Timestamp` aligned to 4 (kamu 0.265 and later). Read only.
    V3,
}

impl ManifestVersion {
    /// The version this crate writes.
    pub const WRITTEN: ManifestVersion = ManifestVersion::V2;

    /// The `version` field's value.
    pub const fn number(self) -> i32 {
        match self {
            ManifestVersion::V2 => 2,
            ManifestVersion::V3 => 3,
        }
    }

    /// The version of a `version` field's value, if this crate reads it.
    pub fn from_number(version: i32) -> Option<Self> {
        match version {
            2 => Some(ManifestVersion::V2),
            3 => Some(ManifestVersion::V3),
            _ => None,
        }
    }
}

/// A verified metadata block manifest: its version and its content (the inner FlatBuffers buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Manifest<'a> {
    /// The manifest version.
    pub version: ManifestVersion,
    /// The content: a complete FlatBuffers buffer whose root is `MetadataBlock`.
    pub content: &'a [u8],
}

/// The verifier limits for blocks (the FlatBuffers defaults: 64 levels of nesting, a million tables).
pub(crate) fn verifier_options() -> flatbuffers::VerifierOptions {
    flatbuffers::VerifierOptions::default()
}

/// Reads a block file's manifest: verifies it, checks kind `odf-metadata-block` and a version this crate
/// reads, and returns the content. The content itself is not decoded.
pub fn read(bytes: &[u8]) -> Result<Manifest<'_>, Error> {
    let m = flatbuffers::root_with_opts::<fb::Manifest<'_>>(&verifier_options(), bytes).map_err(
        |source| Error::InvalidFlatbuffer {
            buffer: "manifest",
            source,
        },
    )?;
    let kind = m.kind();
    if u64::try_from(kind).ok() != Some(Multicodec::OdfMetadataBlock.code()) {
        return Err(Error::NotAMetadataBlock { kind });
    }
    let version =
        ManifestVersion::from_number(m.version()).ok_or(Error::UnsupportedManifestVersion {
            version: m.version(),
        })?;
    let content = m.content().ok_or(Error::MissingField {
        field: "Manifest.content",
    })?;
    Ok(Manifest {
        version,
        content: content.bytes(),
    })
}

/// Wraps a `MetadataBlock` buffer into a version-2 manifest, as kamu does: the content vector first, then
/// the table with `kind`, `version`, `content`.
pub fn write(content: &[u8]) -> Vec<u8> {
    let mut fbb = Builder::with_capacity(content.len() + 1024);
    let content = fbb.create_vector(content);
    let mut b = fb::ManifestBuilder::new(&mut fbb);
    // 0x400000 fits in an i64.
    b.add_kind(Multicodec::OdfMetadataBlock.code() as i64);
    b.add_version(ManifestVersion::WRITTEN.number());
    b.add_content(content);
    let root = b.finish();
    fbb.finish(root, None);
    fbb.finished_data().to_vec()
}
