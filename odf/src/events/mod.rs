//! Metadata events: what a block records (ODF's `MetadataEvent` union), one module per event.

mod add_data;
mod add_push_source;
mod disable_polling_source;
mod disable_push_source;
mod execute_transform;
mod seed;
mod set_attachments;
mod set_data_schema;
mod set_info;
mod set_license;
mod set_polling_source;
mod set_transform;
mod set_vocab;

use chrono::{DateTime, Utc};
use flatbuffers::{UnionWIPOffset, WIPOffset};

pub use add_data::AddData;
pub use add_push_source::AddPushSource;
pub use disable_polling_source::DisablePollingSource;
pub use disable_push_source::DisablePushSource;
pub use execute_transform::{ExecuteTransform, ExecuteTransformInput};
pub use seed::Seed;
pub use set_attachments::SetAttachments;
pub use set_data_schema::SetDataSchema;
pub use set_info::SetInfo;
pub use set_license::SetLicense;
pub use set_polling_source::SetPollingSource;
pub use set_transform::{SetTransform, TransformInput};
pub use set_vocab::SetVocab;

use crate::codec::{Builder, required};
use crate::generated as fb;
use crate::{Checkpoint, DataSlice, Error};

/// A metadata event: what one block of the chain records.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum MetadataEvent {
    /// Data ingested into a root dataset.
    #[cfg_attr(feature = "serde", serde(alias = "addData"))]
    AddData(AddData),
    /// A transform step of a derivative dataset.
    #[cfg_attr(feature = "serde", serde(alias = "executeTransform"))]
    ExecuteTransform(ExecuteTransform),
    /// The chain's first event.
    #[cfg_attr(feature = "serde", serde(alias = "seed"))]
    Seed(Seed),
    /// A root dataset's polling source.
    #[cfg_attr(feature = "serde", serde(alias = "setPollingSource"))]
    SetPollingSource(SetPollingSource),
    /// A derivative dataset's transform.
    #[cfg_attr(feature = "serde", serde(alias = "setTransform"))]
    SetTransform(SetTransform),
    /// System column names.
    #[cfg_attr(feature = "serde", serde(alias = "setVocab"))]
    SetVocab(SetVocab),
    /// Attachments.
    #[cfg_attr(feature = "serde", serde(alias = "setAttachments"))]
    SetAttachments(SetAttachments),
    /// Description and keywords.
    #[cfg_attr(feature = "serde", serde(alias = "setInfo"))]
    SetInfo(SetInfo),
    /// Licence.
    #[cfg_attr(feature = "serde", serde(alias = "setLicense"))]
    SetLicense(SetLicense),
    /// The schema of the data that follows.
    #[cfg_attr(feature = "serde", serde(alias = "setDataSchema"))]
    SetDataSchema(SetDataSchema),
    /// A push source.
    #[cfg_attr(feature = "serde", serde(alias = "addPushSource"))]
    AddPushSource(AddPushSource),
    /// A push source turned off.
    #[cfg_attr(feature = "serde", serde(alias = "disablePushSource"))]
    DisablePushSource(DisablePushSource),
    /// The polling source turned off.
    #[cfg_attr(feature = "serde", serde(alias = "disablePollingSource"))]
    DisablePollingSource(DisablePollingSource),
}

impl MetadataEvent {
    /// The event's ODF name (`AddData`, `Seed`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            MetadataEvent::AddData(_) => "AddData",
            MetadataEvent::ExecuteTransform(_) => "ExecuteTransform",
            MetadataEvent::Seed(_) => "Seed",
            MetadataEvent::SetPollingSource(_) => "SetPollingSource",
            MetadataEvent::SetTransform(_) => "SetTransform",
            MetadataEvent::SetVocab(_) => "SetVocab",
            MetadataEvent::SetAttachments(_) => "SetAttachments",
            MetadataEvent::SetInfo(_) => "SetInfo",
            MetadataEvent::SetLicense(_) => "SetLicense",
            MetadataEvent::SetDataSchema(_) => "SetDataSchema",
            MetadataEvent::AddPushSource(_) => "AddPushSource",
            MetadataEvent::DisablePushSource(_) => "DisablePushSource",
            MetadataEvent::DisablePollingSource(_) => "DisablePollingSource",
        }
    }

    /// The data slice of a data event (`AddData`, `ExecuteTransform`), if it wrote one.
    pub fn new_data(&self) -> Option<&DataSlice> {
        match self {
            MetadataEvent::AddData(e) => e.new_data.as_ref(),
            MetadataEvent::ExecuteTransform(e) => e.new_data.as_ref(),
            _ => None,
        }
    }

    /// The checkpoint of a data event (`AddData`, `ExecuteTransform`), if it wrote one.
    pub fn new_checkpoint(&self) -> Option<&Checkpoint> {
        match self {
            MetadataEvent::AddData(e) => e.new_checkpoint.as_ref(),
            MetadataEvent::ExecuteTransform(e) => e.new_checkpoint.as_ref(),
            _ => None,
        }
    }

    /// The watermark of a data event, if it set one.
    pub fn new_watermark(&self) -> Option<DateTime<Utc>> {
        match self {
            MetadataEvent::AddData(e) => e.new_watermark,
            MetadataEvent::ExecuteTransform(e) => e.new_watermark,
            _ => None,
        }
    }

    /// `Some(prev_offset)` for a data event, `None` for the others.
    pub fn prev_offset(&self) -> Option<Option<u64>> {
        match self {
            MetadataEvent::AddData(e) => Some(e.prev_offset),
            MetadataEvent::ExecuteTransform(e) => Some(e.prev_offset),
            _ => None,
        }
    }

    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::MetadataEvent, WIPOffset<UnionWIPOffset>) {
        use fb::MetadataEvent as Tag;
        match self {
            MetadataEvent::AddData(e) => (Tag::AddData, e.encode(fbb).as_union_value()),
            MetadataEvent::ExecuteTransform(e) => {
                (Tag::ExecuteTransform, e.encode(fbb).as_union_value())
            }
            MetadataEvent::Seed(e) => (Tag::Seed, e.encode(fbb).as_union_value()),
            MetadataEvent::SetPollingSource(e) => {
                (Tag::SetPollingSource, e.encode(fbb).as_union_value())
            }
            MetadataEvent::SetTransform(e) => (Tag::SetTransform, e.encode(fbb).as_union_value()),
            MetadataEvent::SetVocab(e) => (Tag::SetVocab, e.encode(fbb).as_union_value()),
            MetadataEvent::SetAttachments(e) => {
                (Tag::SetAttachments, e.encode(fbb).as_union_value())
            }
            MetadataEvent::SetInfo(e) => (Tag::SetInfo, e.encode(fbb).as_union_value()),
            MetadataEvent::SetLicense(e) => (Tag::SetLicense, e.encode(fbb).as_union_value()),
            MetadataEvent::SetDataSchema(e) => (Tag::SetDataSchema, e.encode(fbb).as_union_value()),
            MetadataEvent::AddPushSource(e) => (Tag::AddPushSource, e.encode(fbb).as_union_value()),
            MetadataEvent::DisablePushSource(e) => {
                (Tag::DisablePushSource, e.encode(fbb).as_union_value())
            }
            MetadataEvent::DisablePollingSource(e) => {
                (Tag::DisablePollingSource, e.encode(fbb).as_union_value())
            }
        }
    }

    /// Decodes a block's `event` union.
    pub(crate) fn decode(t: fb::MetadataBlock<'_>) -> Result<Self, Error> {
        use fb::MetadataEvent as Tag;
        const FIELD: &str = "MetadataBlock.event";
        Ok(match t.event_type() {
            Tag::AddData => {
                MetadataEvent::AddData(AddData::decode(required(t.event_as_add_data(), FIELD)?)?)
            }
            Tag::ExecuteTransform => MetadataEvent::ExecuteTransform(ExecuteTransform::decode(
                required(t.event_as_execute_transform(), FIELD)?,
            )?),
            Tag::Seed => MetadataEvent::Seed(Seed::decode(required(t.event_as_seed(), FIELD)?)?),
            Tag::SetPollingSource => MetadataEvent::SetPollingSource(SetPollingSource::decode(
                required(t.event_as_set_polling_source(), FIELD)?,
            )?),
            Tag::SetTransform => MetadataEvent::SetTransform(SetTransform::decode(required(
                t.event_as_set_transform(),
                FIELD,
            )?)?),
            Tag::SetVocab => {
                MetadataEvent::SetVocab(SetVocab::decode(required(t.event_as_set_vocab(), FIELD)?))
            }
            Tag::SetAttachments => MetadataEvent::SetAttachments(SetAttachments::decode(
                required(t.event_as_set_attachments(), FIELD)?,
            )?),
            Tag::SetInfo => {
                MetadataEvent::SetInfo(SetInfo::decode(required(t.event_as_set_info(), FIELD)?))
            }
            Tag::SetLicense => MetadataEvent::SetLicense(SetLicense::decode(required(
                t.event_as_set_license(),
                FIELD,
            )?)?),
            Tag::SetDataSchema => MetadataEvent::SetDataSchema(SetDataSchema::decode(required(
                t.event_as_set_data_schema(),
                FIELD,
            )?)?),
            Tag::AddPushSource => MetadataEvent::AddPushSource(AddPushSource::decode(required(
                t.event_as_add_push_source(),
                FIELD,
            )?)?),
            Tag::DisablePushSource => MetadataEvent::DisablePushSource(DisablePushSource::decode(
                required(t.event_as_disable_push_source(), FIELD)?,
            )?),
            Tag::DisablePollingSource => {
                required(t.event_as_disable_polling_source(), FIELD)?;
                MetadataEvent::DisablePollingSource(DisablePollingSource {})
            }
            other => {
                return Err(Error::UnknownUnionType {
                    field: FIELD,
                    tag: other.0,
                });
            }
        })
    }
}

macro_rules! from_event {
    ($($event:ident),*) => {$(
        impl From<$event> for MetadataEvent {
            fn from(e: $event) -> Self {
                MetadataEvent::$event(e)
            }
        }
    )*};
}
from_event!(
    AddData,
    ExecuteTransform,
    Seed,
    SetPollingSource,
    SetTransform,
    SetVocab,
    SetAttachments,
    SetInfo,
    SetLicense,
    SetDataSchema,
    AddPushSource,
    DisablePushSource,
    DisablePollingSource
);
