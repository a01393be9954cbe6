//! Which engine ran a transform step, and where the chain records it.
//!
//! ODF's `ExecuteTransform` has no field for the engine, so Weir records it in a field kamu reads and
//! ignores: the `version` of the `TransformSql` in the `SetTransform` in force, as
//! `<runtime>:<reference>` (`embedded:reference-engine@0.1.0`, `docker:weir/engine@sha256:...`,
//! `process:sha256:...`). A step that runs with another engine than the one recorded is preceded by a new
//! `SetTransform` with the same inputs and queries and the new `version`.

use serde::{Deserialize, Serialize};
use weir_odf::TransformSql;

/// The engine that ran (or will run) a transform step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineIdentity {
    /// The engine name the transform asked for (`datafusion`).
    pub name: String,
    /// How it ran: `embedded`, `process`, `docker`, `podman`.
    pub runtime: String,
    /// The pinned identity: the image digest (`repo@sha256:...`), or `reference-engine@<version>` for the
    /// embedded engine, or the SHA-256 of a process engine's binary.
    pub reference: String,
}

impl EngineIdentity {
    /// The `--to` form of this engine (`embedded`, `process:PATH`, `docker:IMAGE`, `podman:IMAGE`).
    pub fn reference_for_cli(&self) -> String {
        match self.runtime.as_str() {
            "embedded" => "embedded".into(),
            runtime => format!("{runtime}:{}", self.reference),
        }
    }

    /// The text recorded in `TransformSql.version`: `<runtime>:<reference>`.
    pub fn to_version(&self) -> String {
        format!("{}:{}", self.runtime, self.reference)
    }

    /// The engine a transform records in its `version`, if it records one Weir wrote.
    ///
    /// ```
    /// use weir_dataset::identity::EngineIdentity;
    /// let e = EngineIdentity { name: "datafusion".into(), runtime: "docker".into(), reference: "e@sha256:ab".into() };
    /// let sql = weir_odf::TransformSql { engine: "datafusion".into(), version: Some(e.to_version()), query: None,
    ///     queries: None, temporal_tables: None };
    /// assert_eq!(EngineIdentity::recorded_in(&sql), Some(e));
    /// ```
    pub fn recorded_in(sql: &TransformSql) -> Option<Self> {
        let (runtime, reference) = sql.version.as_deref()?.split_once(':')?;
        if runtime.is_empty() || reference.is_empty() {
            return None;
        }
        Some(Self {
            name: sql.engine.clone(),
            runtime: runtime.to_owned(),
            reference: reference.to_owned(),
        })
    }
}

/// `sql` with the engine identity recorded in its `version`.
pub fn with_engine(sql: &TransformSql, engine: &EngineIdentity) -> TransformSql {
    TransformSql {
        version: Some(engine.to_version()),
        ..sql.clone()
    }
}

/// `sql` without a recorded engine: what a manifest's transform is compared with.
pub fn without_engine(sql: &TransformSql) -> TransformSql {
    TransformSql {
        version: None,
        ..sql.clone()
    }
}

/// The engine recorded by the `SetTransform` in force at the end of `blocks` (a chain prefix, oldest first).
pub fn in_force(
    blocks: &[(weir_odf::Multihash, weir_odf::MetadataBlock)],
) -> Option<EngineIdentity> {
    blocks.iter().rev().find_map(|(_, b)| match &b.event {
        weir_odf::MetadataEvent::SetTransform(t) => {
            Some(EngineIdentity::recorded_in(t.transform.sql()))
        }
        _ => None,
    })?
}
