//! `SetAttachments`: documents attached to the dataset.

use flatbuffers::WIPOffset;

use crate::codec::Builder;
use crate::generated as fb;
use crate::{Attachments, Error};

/// Replaces the dataset's attachments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SetAttachments {
    /// The attachments.
    pub attachments: Attachments,
}

impl SetAttachments {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SetAttachments<'b>> {
        let (tag, attachments) = self.attachments.encode(fbb);
        let mut b = fb::SetAttachmentsBuilder::new(fbb);
        b.add_attachments_type(tag);
        b.add_attachments(attachments);
        b.finish()
    }

    pub(crate) fn decode(t: fb::SetAttachments<'_>) -> Result<Self, Error> {
        Ok(Self {
            attachments: Attachments::decode(t)?,
        })
    }
}
