//! Dataset snapshots: how a dataset is declared (the YAML manifests of a workspace).

use crate::{DatasetKind, MetadataEvent};

/// A dataset as declared by hand: its name, kind, and the events that populate its chain (sources,
/// transform, vocabulary, licence, ...). With feature `serde` it reads ODF's YAML spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct DatasetSnapshot {
    /// The dataset's alias.
    pub name: String,
    /// Root or derivative.
    pub kind: DatasetKind,
    /// The events, in order.
    #[cfg_attr(feature = "serde", serde(default))]
    pub metadata: Vec<MetadataEvent>,
}
