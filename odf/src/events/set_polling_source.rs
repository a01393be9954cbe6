//! `SetPollingSource`: a root dataset's polling source.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_each, encode_each};
use crate::generated as fb;
use crate::merge_strategy::decode_merge_strategy;
use crate::read_step::decode_read_step;
use crate::{Error, FetchStep, MergeStrategy, PrepStep, ReadStep, Transform};

/// Defines a root dataset's polling source: fetch, prepare, read, preprocess, merge.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SetPollingSource {
    /// Where data comes from.
    pub fetch: FetchStep,
    /// How raw data is prepared before reading.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub prepare: Option<Vec<PrepStep>>,
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

impl SetPollingSource {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SetPollingSource<'b>> {
        let (fetch_tag, fetch) = self.fetch.encode(fbb);
        let prepare = self
            .prepare
            .as_ref()
            .map(|p| encode_each(fbb, p, PrepStep::encode_wrapped));
        let (read_tag, read) = self.read.encode(fbb);
        let preprocess = self.preprocess.as_ref().map(|t| t.encode(fbb));
        let (merge_tag, merge) = self.merge.encode(fbb);
        let mut b = fb::SetPollingSourceBuilder::new(fbb);
        b.add_fetch_type(fetch_tag);
        b.add_fetch(fetch);
        if let Some(p) = prepare {
            b.add_prepare(p);
        }
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

    pub(crate) fn decode(t: fb::SetPollingSource<'_>) -> Result<Self, Error> {
        Ok(Self {
            fetch: FetchStep::decode(t)?,
            prepare: t
                .prepare()
                .map(|p| decode_each(p, PrepStep::decode_wrapped))
                .transpose()?,
            read: decode_read_step!(t, "SetPollingSource.read")?,
            preprocess: t
                .preprocess()
                .map(|_| {
                    Transform::decode(
                        t.preprocess_type(),
                        t.preprocess_as_transform_sql(),
                        "SetPollingSource.preprocess",
                    )
                })
                .transpose()?,
            merge: decode_merge_strategy!(t, "SetPollingSource.merge")?,
        })
    }
}
