//! `SetLicense`: the dataset's licence.

use flatbuffers::WIPOffset;

use crate::Error;
use crate::codec::{Builder, encode_opt_str, required};
use crate::generated as fb;

/// Sets the dataset's licence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SetLicense {
    /// Abbreviated name.
    pub short_name: String,
    /// Full name.
    pub name: String,
    /// SPDX identifier.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub spdx_id: Option<String>,
    /// Where the terms are.
    pub website_url: String,
}

impl SetLicense {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SetLicense<'b>> {
        let short_name = fbb.create_string(&self.short_name);
        let name = fbb.create_string(&self.name);
        let spdx_id = encode_opt_str(fbb, self.spdx_id.as_ref());
        let website_url = fbb.create_string(&self.website_url);
        let mut b = fb::SetLicenseBuilder::new(fbb);
        b.add_short_name(short_name);
        b.add_name(name);
        if let Some(x) = spdx_id {
            b.add_spdx_id(x);
        }
        b.add_website_url(website_url);
        b.finish()
    }

    pub(crate) fn decode(t: fb::SetLicense<'_>) -> Result<Self, Error> {
        Ok(Self {
            short_name: required(t.short_name(), "SetLicense.short_name")?.to_owned(),
            name: required(t.name(), "SetLicense.name")?.to_owned(),
            spdx_id: t.spdx_id().map(str::to_owned),
            website_url: required(t.website_url(), "SetLicense.website_url")?.to_owned(),
        })
    }
}
