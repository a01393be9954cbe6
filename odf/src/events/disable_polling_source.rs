//! `DisablePollingSource`: turns the polling source off.

use flatbuffers::WIPOffset;

use crate::codec::Builder;
use crate::generated as fb;

/// Disables the polling source defined before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct DisablePollingSource {}

impl DisablePollingSource {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> WIPOffset<fb::DisablePollingSource<'b>> {
        fb::DisablePollingSourceBuilder::new(fbb).finish()
    }
}
