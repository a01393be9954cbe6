//! Source state: where a polling or push source resumes from.

use flatbuffers::WIPOffset;

use crate::Error;
use crate::codec::{Builder, required};
use crate::generated as fb;

/// The state of the source data was added from, so that ingest can resume quickly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SourceState {
    /// The source the state belongs to ([`SourceState::DEFAULT_SOURCE_NAME`] for a polling source).
    pub source_name: String,
    /// The type of state: [`SourceState::KIND_ETAG`], [`SourceState::KIND_LAST_MODIFIED`], or an extension's
    /// own `<domain>/<name>`.
    pub kind: String,
    /// The state's opaque value.
    pub value: String,
}

impl SourceState {
    /// The name of a dataset's polling source.
    pub const DEFAULT_SOURCE_NAME: &'static str = "default";
    /// An HTTP entity tag.
    pub const KIND_ETAG: &'static str = "odf/etag";
    /// An HTTP `Last-Modified` time.
    pub const KIND_LAST_MODIFIED: &'static str = "odf/last-modified";

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SourceState<'b>> {
        let source_name = fbb.create_string(&self.source_name);
        let kind = fbb.create_string(&self.kind);
        let value = fbb.create_string(&self.value);
        let mut b = fb::SourceStateBuilder::new(fbb);
        b.add_source_name(source_name);
        b.add_kind(kind);
        b.add_value(value);
        b.finish()
    }

    pub(crate) fn decode(t: fb::SourceState<'_>) -> Result<Self, Error> {
        Ok(Self {
            source_name: required(t.source_name(), "SourceState.source_name")?.to_owned(),
            kind: required(t.kind(), "SourceState.kind")?.to_owned(),
            value: required(t.value(), "SourceState.value")?.to_owned(),
        })
    }
}
