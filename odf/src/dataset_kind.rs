//! Dataset kinds: root (ingests) or derivative (transforms).

use crate::Error;
use crate::generated as fb;

/// The kind of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum DatasetKind {
    /// Ingests data from outside.
    #[cfg_attr(feature = "serde", serde(alias = "root"))]
    Root,
    /// Transforms other datasets.
    #[cfg_attr(feature = "serde", serde(alias = "derivative"))]
    Derivative,
}

impl DatasetKind {
    pub(crate) fn encode(self) -> fb::DatasetKind {
        match self {
            DatasetKind::Root => fb::DatasetKind::Root,
            DatasetKind::Derivative => fb::DatasetKind::Derivative,
        }
    }

    pub(crate) fn decode(kind: fb::DatasetKind, field: &'static str) -> Result<Self, Error> {
        match kind {
            fb::DatasetKind::Root => Ok(DatasetKind::Root),
            fb::DatasetKind::Derivative => Ok(DatasetKind::Derivative),
            other => Err(Error::UnknownEnumValue {
                field,
                value: other.0.into(),
            }),
        }
    }
}
