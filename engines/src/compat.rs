//! Engine compatibility records written by `weir engine deprecate`: engine A's recorded runs were replayed
//! by engine B with identical results, so B may serve in A's place (e.g. in `verify`).

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use weir_dataset::chain::store::{Storage, StoreError};
use weir_dataset::identity::EngineIdentity;

/// Where the records live in the workspace storage.
pub const COMPAT_PATH: &str = "engines/compatibility.json";

/// One deprecation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compatibility {
    /// The engine that was replaced (as recorded in blocks).
    pub deprecated: EngineIdentity,
    /// The engine that replaced it.
    pub replacement: EngineIdentity,
    /// When the replay finished.
    pub verified_at: DateTime<Utc>,
    /// Transform steps replayed with identical output.
    pub steps_verified: u64,
    /// Datasets replayed.
    pub datasets: Vec<String>,
}

/// Reads all records.
pub async fn load(storage: &Storage) -> Result<Vec<Compatibility>, StoreError> {
    let path = storage.path(COMPAT_PATH);
    match storage.get_opt(&path).await? {
        None => Ok(Vec::new()),
        Some(b) => serde_json::from_slice(&b).map_err(|e| StoreError::Open {
            url: format!("{}/{COMPAT_PATH}", storage.url()),
            message: e.to_string(),
        }),
    }
}

/// Adds a record.
pub async fn record(storage: &Storage, entry: Compatibility) -> Result<(), StoreError> {
    let mut all = load(storage).await?;
    all.retain(|c| !(c.deprecated == entry.deprecated && c.replacement == entry.replacement));
    all.push(entry);
    let json = serde_json::to_vec_pretty(&all).unwrap_or_default();
    storage
        .put(&storage.path(COMPAT_PATH), Bytes::from(json))
        .await
}

/// The replacement recorded for `deprecated`, following chains of deprecations.
pub fn replacement_for<'a>(
    all: &'a [Compatibility],
    deprecated: &EngineIdentity,
) -> Option<&'a EngineIdentity> {
    let mut current = all.iter().find(|c| &c.deprecated == deprecated)?;
    for _ in 0..all.len() {
        match all.iter().find(|c| c.deprecated == current.replacement) {
            Some(next) => current = next,
            None => break,
        }
    }
    Some(&current.replacement)
}
