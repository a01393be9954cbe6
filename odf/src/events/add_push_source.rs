//! `AddPushSource`: a root dataset's push source.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, required};
use crate::generated as fb;
use crate::merge_strategy::decode_merge_strategy;
use crate::read_step::decode_read_step;
use crate::{Error, MergeStrategy, ReadStep, Transform};

/// Defines a source that data is pushed into (rather than polled).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct AddPushSource {
    /// The source's name within the dataset.
    pub source_name: String,
    /// How data is read into records.
    pub read: ReadStep,
    /// A query shaping the records read.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub preprocess: Option<Transform>,
    /// How new records merge with the dataset's history.
    pub merge: MergeStrategy,
}

impl AddPushSource {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::AddPushSource<'b>> {
        let source_name = fbb.create_string(&self.source_name);
        let (read_tag, read) = self.read.encode(fbb);
        let preprocess = self.preprocess.as_ref().map(|t| t.encode(fbb));
        let (merge_tag, merge) = self.merge.encode(fbb);
        let mut b = fb::AddPushSourceBuilder::new(fbb);
        b.add_source_name(source_name);
        b.add_read_type(read_tag);
        b.add_read(read);
        if let Some((tag, value)) = preprocess {
            b.add_preprocess_type(tag);
            b.add_preprocess(value);
        }
        b.add_merge_type(merge_tag);
        b.add_merge(merge);
        b.finish()
    }

    pub(crate) fn decode(t: fb::AddPushSource<'_>) -> Result<Self, Error> {
        Ok(Self {
            source_name: required(t.source_name(), "AddPushSource.source_name")?.to_owned(),
            read: decode_read_step!(t, "AddPushSource.read")?,
            preprocess: t
                .preprocess()
                .map(|_| {
                    Transform::decode(
                        t.preprocess_type(),
                        t.preprocess_as_transform_sql(),
                        "AddPushSource.preprocess",
                    )
                })
                .transpose()?,
            merge: decode_merge_strategy!(t, "AddPushSource.merge")?,
        })
    }
}
