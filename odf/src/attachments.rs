//! Attachments: documents attached to a dataset (README, licence text, ...).

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::Error;
use crate::codec::{Builder, decode_each, encode_each, required};
use crate::generated as fb;

/// A source of attachments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum Attachments {
    /// Attachments embedded in the block.
    #[cfg_attr(feature = "serde", serde(alias = "embedded"))]
    Embedded(AttachmentsEmbedded),
}

/// [`Attachments::Embedded`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct AttachmentsEmbedded {
    /// The items.
    pub items: Vec<AttachmentEmbedded>,
}

/// One embedded attachment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct AttachmentEmbedded {
    /// The path it is materialised at.
    pub path: String,
    /// Its content.
    pub content: String,
}

impl Attachments {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::Attachments, WIPOffset<UnionWIPOffset>) {
        match self {
            Attachments::Embedded(x) => {
                let items = encode_each(fbb, &x.items, |item, fbb| {
                    let path = fbb.create_string(&item.path);
                    let content = fbb.create_string(&item.content);
                    let mut b = fb::AttachmentEmbeddedBuilder::new(fbb);
                    b.add_path(path);
                    b.add_content(content);
                    b.finish()
                });
                let mut b = fb::AttachmentsEmbeddedBuilder::new(fbb);
                b.add_items(items);
                (
                    fb::Attachments::AttachmentsEmbedded,
                    b.finish().as_union_value(),
                )
            }
        }
    }

    pub(crate) fn decode(t: fb::SetAttachments<'_>) -> Result<Self, Error> {
        const FIELD: &str = "SetAttachments.attachments";
        match t.attachments_type() {
            fb::Attachments::AttachmentsEmbedded => {
                let x = required(t.attachments_as_attachments_embedded(), FIELD)?;
                Ok(Attachments::Embedded(AttachmentsEmbedded {
                    items: decode_each(
                        required(x.items(), "AttachmentsEmbedded.items")?,
                        |item| {
                            Ok(AttachmentEmbedded {
                                path: required(item.path(), "AttachmentEmbedded.path")?.to_owned(),
                                content: required(item.content(), "AttachmentEmbedded.content")?
                                    .to_owned(),
                            })
                        },
                    )?,
                }))
            }
            other => Err(Error::UnknownUnionType {
                field: FIELD,
                tag: other.0,
            }),
        }
    }
}
