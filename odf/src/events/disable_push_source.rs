//! `DisablePushSource`: turns a push source off.

use flatbuffers::WIPOffset;

use crate::Error;
use crate::codec::{Builder, required};
use crate::generated as fb;

/// Disables a push source defined before.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DisablePushSource {
    /// The source to disable.
    pub source_name: String,
}

impl DisablePushSource {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::DisablePushSource<'b>> {
        let source_name = fbb.create_string(&self.source_name);
        let mut b = fb::DisablePushSourceBuilder::new(fbb);
        b.add_source_name(source_name);
        b.finish()
    }

    pub(crate) fn decode(t: fb::DisablePushSource<'_>) -> Result<Self, Error> {
        Ok(Self {
            source_name: required(t.source_name(), "DisablePushSource.source_name")?.to_owned(),
        })
    }
}
