//! `SetTransform`: a derivative dataset's inputs and transform.

use flatbuffers::WIPOffset;

use crate::codec::{Builder, decode_each, encode_each, encode_opt_str, required};
use crate::generated as fb;
use crate::{DatasetId, Error, Transform};

/// Defines a derivative dataset's inputs and the transform over them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct SetTransform {
    /// The input datasets.
    pub inputs: Vec<TransformInput>,
    /// The transform.
    pub transform: Transform,
}

/// One input of a derivative dataset.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct TransformInput {
    /// A dataset reference: in a manifest, a name; in an accepted block, a dataset id (`did:odf:…`) so the
    /// chain stays reproducible when names change. Kept as text, so it prints back as stored.
    pub dataset_ref: String,
    /// The name of the input in queries (the reference, before it is resolved, when absent).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub alias: Option<String>,
}

impl TransformInput {
    /// The name the input has in queries: its alias, or else its reference.
    pub fn query_alias(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.dataset_ref)
    }

    /// The reference as a dataset id, if it is one.
    pub fn dataset_id(&self) -> Option<DatasetId> {
        self.dataset_ref.parse().ok()
    }

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::TransformInput<'b>> {
        let dataset_ref = fbb.create_string(&self.dataset_ref);
        let alias = encode_opt_str(fbb, self.alias.as_ref());
        let mut b = fb::TransformInputBuilder::new(fbb);
        b.add_dataset_ref(dataset_ref);
        if let Some(a) = alias {
            b.add_alias(a);
        }
        b.finish()
    }

    pub(crate) fn decode(t: fb::TransformInput<'_>) -> Result<Self, Error> {
        Ok(Self {
            dataset_ref: required(t.dataset_ref(), "TransformInput.dataset_ref")?.to_owned(),
            alias: t.alias().map(str::to_owned),
        })
    }
}

impl SetTransform {
    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::SetTransform<'b>> {
        let inputs = encode_each(fbb, &self.inputs, TransformInput::encode);
        let (tag, transform) = self.transform.encode(fbb);
        let mut b = fb::SetTransformBuilder::new(fbb);
        b.add_inputs(inputs);
        b.add_transform_type(tag);
        b.add_transform(transform);
        b.finish()
    }

    pub(crate) fn decode(t: fb::SetTransform<'_>) -> Result<Self, Error> {
        Ok(Self {
            inputs: decode_each(
                required(t.inputs(), "SetTransform.inputs")?,
                TransformInput::decode,
            )?,
            transform: Transform::decode(
                t.transform_type(),
                t.transform_as_transform_sql(),
                "SetTransform.transform",
            )?,
        })
    }
}
