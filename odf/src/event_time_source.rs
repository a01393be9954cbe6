//! Event time sources: where a fetch step takes the event time of what it fetched.

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::codec::{Builder, encode_opt_str};
use crate::generated as fb;

/// Where the event time of fetched data comes from, when the data itself has none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum EventTimeSource {
    /// The source's metadata (e.g. `Last-Modified`).
    #[cfg_attr(
        feature = "serde",
        serde(alias = "fromMetadata", alias = "frommetadata")
    )]
    FromMetadata,
    /// A timestamp in the file's path.
    #[cfg_attr(feature = "serde", serde(alias = "fromPath", alias = "frompath"))]
    FromPath(EventTimeSourceFromPath),
    /// The system time of ingest.
    #[cfg_attr(
        feature = "serde",
        serde(alias = "fromSystemTime", alias = "fromsystemtime")
    )]
    FromSystemTime,
}

/// [`EventTimeSource::FromPath`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct EventTimeSourceFromPath {
    /// A regular expression whose first group holds the timestamp.
    pub pattern: String,
    /// The timestamp's format (`java.text.SimpleDateFormat`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub timestamp_format: Option<String>,
}

impl EventTimeSource {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::EventTimeSource, WIPOffset<UnionWIPOffset>) {
        match self {
            EventTimeSource::FromMetadata => (
                fb::EventTimeSource::EventTimeSourceFromMetadata,
                fb::EventTimeSourceFromMetadataBuilder::new(fbb)
                    .finish()
                    .as_union_value(),
            ),
            EventTimeSource::FromPath(x) => {
                let pattern = fbb.create_string(&x.pattern);
                let timestamp_format = encode_opt_str(fbb, x.timestamp_format.as_ref());
                let mut b = fb::EventTimeSourceFromPathBuilder::new(fbb);
                b.add_pattern(pattern);
                if let Some(f) = timestamp_format {
                    b.add_timestamp_format(f);
                }
                (
                    fb::EventTimeSource::EventTimeSourceFromPath,
                    b.finish().as_union_value(),
                )
            }
            EventTimeSource::FromSystemTime => (
                fb::EventTimeSource::EventTimeSourceFromSystemTime,
                fb::EventTimeSourceFromSystemTimeBuilder::new(fbb)
                    .finish()
                    .as_union_value(),
            ),
        }
    }
}

/// Decodes the optional `event_time` union of a fetch step table (`FetchStepUrl`, `FetchStepFilesGlob`).
macro_rules! decode_event_time_source {
    ($t:expr, $field:literal) => {{
        let t = $t;
        let field: &'static str = $field;
        match t.event_time() {
            None => Ok(None),
            Some(_) => match t.event_time_type() {
                $crate::generated::EventTimeSource::EventTimeSourceFromMetadata => {
                    Ok(Some($crate::EventTimeSource::FromMetadata))
                }
                $crate::generated::EventTimeSource::EventTimeSourceFromPath => {
                    let p = $crate::codec::required(
                        t.event_time_as_event_time_source_from_path(),
                        field,
                    )?;
                    Ok(Some($crate::EventTimeSource::FromPath(
                        $crate::EventTimeSourceFromPath {
                            pattern: $crate::codec::required(
                                p.pattern(),
                                "EventTimeSourceFromPath.pattern",
                            )?
                            .to_owned(),
                            timestamp_format: p.timestamp_format().map(str::to_owned),
                        },
                    )))
                }
                $crate::generated::EventTimeSource::EventTimeSourceFromSystemTime => {
                    Ok(Some($crate::EventTimeSource::FromSystemTime))
                }
                other => Err($crate::Error::UnknownUnionType {
                    field,
                    tag: other.0,
                }),
            },
        }
    }};
}
pub(crate) use decode_event_time_source;
