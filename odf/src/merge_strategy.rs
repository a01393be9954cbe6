//! Merge strategies: how newly ingested data combines with a dataset's history.

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::codec::{Builder, encode_strings};
use crate::generated as fb;

/// How newly ingested records are merged with what the dataset holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum MergeStrategy {
    /// Every record is appended.
    #[cfg_attr(feature = "serde", serde(alias = "append"))]
    Append,
    /// Records whose primary key was seen before are dropped.
    #[cfg_attr(feature = "serde", serde(alias = "ledger"))]
    Ledger(MergeStrategyLedger),
    /// The source is a snapshot of state: emit appends, retractions and corrections against it.
    #[cfg_attr(feature = "serde", serde(alias = "snapshot"))]
    Snapshot(MergeStrategySnapshot),
    /// The source is already a changelog stream (`op` column included).
    #[cfg_attr(
        feature = "serde",
        serde(alias = "changelogStream", alias = "changelogstream")
    )]
    ChangelogStream(MergeStrategyChangelogStream),
    /// The source is an upsert stream.
    #[cfg_attr(
        feature = "serde",
        serde(alias = "upsertStream", alias = "upsertstream")
    )]
    UpsertStream(MergeStrategyUpsertStream),
}

/// [`MergeStrategy::Ledger`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct MergeStrategyLedger {
    /// Columns that identify a record throughout its lifetime.
    pub primary_key: Vec<String>,
}

/// [`MergeStrategy::Snapshot`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct MergeStrategySnapshot {
    /// Columns that identify a record throughout its lifetime.
    pub primary_key: Vec<String>,
    /// Columns compared to tell whether a record changed (all but the key when absent).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub compare_columns: Option<Vec<String>>,
}

/// [`MergeStrategy::ChangelogStream`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct MergeStrategyChangelogStream {
    /// Columns that identify a record throughout its lifetime.
    pub primary_key: Vec<String>,
}

/// [`MergeStrategy::UpsertStream`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct MergeStrategyUpsertStream {
    /// Columns that identify a record throughout its lifetime.
    pub primary_key: Vec<String>,
}

impl MergeStrategy {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::MergeStrategy, WIPOffset<UnionWIPOffset>) {
        match self {
            MergeStrategy::Append => (
                fb::MergeStrategy::MergeStrategyAppend,
                fb::MergeStrategyAppendBuilder::new(fbb)
                    .finish()
                    .as_union_value(),
            ),
            MergeStrategy::Ledger(x) => {
                let pk = encode_strings(fbb, &x.primary_key);
                let mut b = fb::MergeStrategyLedgerBuilder::new(fbb);
                b.add_primary_key(pk);
                (
                    fb::MergeStrategy::MergeStrategyLedger,
                    b.finish().as_union_value(),
                )
            }
            MergeStrategy::Snapshot(x) => {
                let pk = encode_strings(fbb, &x.primary_key);
                let compare = x.compare_columns.as_ref().map(|c| encode_strings(fbb, c));
                let mut b = fb::MergeStrategySnapshotBuilder::new(fbb);
                b.add_primary_key(pk);
                if let Some(c) = compare {
                    b.add_compare_columns(c);
                }
                (
                    fb::MergeStrategy::MergeStrategySnapshot,
                    b.finish().as_union_value(),
                )
            }
            MergeStrategy::ChangelogStream(x) => {
                let pk = encode_strings(fbb, &x.primary_key);
                let mut b = fb::MergeStrategyChangelogStreamBuilder::new(fbb);
                b.add_primary_key(pk);
                (
                    fb::MergeStrategy::MergeStrategyChangelogStream,
                    b.finish().as_union_value(),
                )
            }
            MergeStrategy::UpsertStream(x) => {
                let pk = encode_strings(fbb, &x.primary_key);
                let mut b = fb::MergeStrategyUpsertStreamBuilder::new(fbb);
                b.add_primary_key(pk);
                (
                    fb::MergeStrategy::MergeStrategyUpsertStream,
                    b.finish().as_union_value(),
                )
            }
        }
    }
}

/// Decodes the required `merge` union of a source table (`SetPollingSource`, `AddPushSource`).
macro_rules! decode_merge_strategy {
    ($t:expr, $field:literal) => {{
        use $crate::codec::{decode_strings, required};
        use $crate::generated::MergeStrategy as Tag;
        let t = $t;
        let field: &'static str = $field;
        match t.merge_type() {
            Tag::MergeStrategyAppend => {
                required(t.merge_as_merge_strategy_append(), field)?;
                Ok($crate::MergeStrategy::Append)
            }
            Tag::MergeStrategyLedger => {
                let x = required(t.merge_as_merge_strategy_ledger(), field)?;
                Ok($crate::MergeStrategy::Ledger($crate::MergeStrategyLedger {
                    primary_key: decode_strings(required(
                        x.primary_key(),
                        "MergeStrategyLedger.primary_key",
                    )?),
                }))
            }
            Tag::MergeStrategySnapshot => {
                let x = required(t.merge_as_merge_strategy_snapshot(), field)?;
                Ok($crate::MergeStrategy::Snapshot(
                    $crate::MergeStrategySnapshot {
                        primary_key: decode_strings(required(
                            x.primary_key(),
                            "MergeStrategySnapshot.primary_key",
                        )?),
                        compare_columns: x.compare_columns().map(decode_strings),
                    },
                ))
            }
            Tag::MergeStrategyChangelogStream => {
                let x = required(t.merge_as_merge_strategy_changelog_stream(), field)?;
                Ok($crate::MergeStrategy::ChangelogStream(
                    $crate::MergeStrategyChangelogStream {
                        primary_key: decode_strings(required(
                            x.primary_key(),
                            "MergeStrategyChangelogStream.primary_key",
                        )?),
                    },
                ))
            }
            Tag::MergeStrategyUpsertStream => {
                let x = required(t.merge_as_merge_strategy_upsert_stream(), field)?;
                Ok($crate::MergeStrategy::UpsertStream(
                    $crate::MergeStrategyUpsertStream {
                        primary_key: decode_strings(required(
                            x.primary_key(),
                            "MergeStrategyUpsertStream.primary_key",
                        )?),
                    },
                ))
            }
            other => Err($crate::Error::UnknownUnionType {
                field,
                tag: other.0,
            }),
        }
    }};
}
pub(crate) use decode_merge_strategy;

impl MergeStrategy {
    /// The `kind` this merge strategy is written with in a manifest (`Append`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            MergeStrategy::Append => "Append",
            MergeStrategy::Ledger(_) => "Ledger",
            MergeStrategy::Snapshot(_) => "Snapshot",
            MergeStrategy::ChangelogStream(_) => "ChangelogStream",
            MergeStrategy::UpsertStream(_) => "UpsertStream",
        }
    }
}
