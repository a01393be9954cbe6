//! `SetInfo`: a dataset's description and keywords.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_strings, encode_opt_str, encode_strings};
use crate::generated as fb;

/// Sets a dataset's summary and keywords.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SetInfo {
    /// A one-sentence summary.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub description: Option<String>,
    /// Search keywords.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub keywords: Option<Vec<String>>,
}

impl SetInfo {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SetInfo<'b>> {
        let description = encode_opt_str(fbb, self.description.as_ref());
        let keywords = self.keywords.as_ref().map(|k| encode_strings(fbb, k));
        let mut b = fb::SetInfoBuilder::new(fbb);
        if let Some(x) = description {
            b.add_description(x);
        }
        if let Some(x) = keywords {
            b.add_keywords(x);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::SetInfo<'_>) -> Self {
        Self {
            description: t.description().map(str::to_owned),
            keywords: t.keywords().map(decode_strings),
        }
    }
}
