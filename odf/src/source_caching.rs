//! Source caching: whether a fetched source is fetched again.

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::codec::Builder;
use crate::generated as fb;

/// The caching settings of a source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum SourceCaching {
    /// Fetch once, never again (the source never changes).
    #[cfg_attr(feature = "serde", serde(alias = "forever"))]
    Forever,
}

impl SourceCaching {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::SourceCaching, WIPOffset<UnionWIPOffset>) {
        match self {
            SourceCaching::Forever => (
                fb::SourceCaching::SourceCachingForever,
                fb::SourceCachingForeverBuilder::new(fbb)
                    .finish()
                    .as_union_value(),
            ),
        }
    }
}

/// Decodes the optional `cache` union of a fetch step table (`FetchStepUrl`, `FetchStepFilesGlob`).
macro_rules! decode_source_caching {
    ($t:expr, $field:literal) => {{
        let t = $t;
        match t.cache() {
            None => Ok(None),
            Some(_) => match t.cache_type() {
                $crate::generated::SourceCaching::SourceCachingForever => {
                    Ok(Some($crate::SourceCaching::Forever))
                }
                other => Err($crate::Error::UnknownUnionType {
                    field: $field,
                    tag: other.0,
                }),
            },
        }
    }};
}
pub(crate) use decode_source_caching;
