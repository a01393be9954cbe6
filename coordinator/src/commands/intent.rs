//! Intent records: `rename`, `delete` and `reset` change several files (a dataset's storage folder, manifests,
//! heads), so each first writes what it is about to do, durably, under the workspace lock, then does it, then
//! removes the record. A command killed at any instruction leaves the record behind, and the next command
//! (any command: a writer under its lock, a reader after taking the lock for the moment it needs) carries the
//! operation out to its end before it reads anything else. Every step is idempotent, so a recovery that is
//! itself killed is simply run again.
//!
//! The record is `weir.intent` beside the workspace lock (in the storage folder, or `.weir.intent` in the
//! workspace folder when the storage is an object store): JSON with a `version`, so that a later Weir can
//! read what an earlier one left.
//!
//! ```
//! use weir_cli::commands::intent::Intent;
//! let rename = Intent::Rename {
//!     old: "a".into(),
//!     new: "b".into(),
//!     manifests: vec![],
//!     remove: None,
//! };
//! assert_eq!(rename.describe(), "`weir rename a b`");
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::CommandError;
use weir_dataset::chain::store::{Storage, StoreError};
use weir_dataset::{durable, fault};
use weir_odf::Multihash;
use weir_transaction::TxError;

/// The format of the record this Weir writes.
const VERSION: u32 = 1;

/// A manifest file an operation writes, with its whole new text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestText {
    /// The file, relative to the workspace folder.
    pub file: PathBuf,
    /// Its text once written.
    pub text: String,
}

/// One dataset's head moved back by `reset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadChange {
    /// The dataset.
    pub dataset: String,
    /// Its head before.
    pub from: Multihash,
    /// Its head after.
    pub to: Multihash,
}

/// What an operation does, step by step, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "camelCase")]
pub enum Intent {
    /// `weir rename OLD NEW`: move the storage folder, write the manifests, remove the old manifest file.
    #[serde(rename_all = "camelCase")]
    Rename {
        /// The old name.
        old: String,
        /// The new name.
        new: String,
        /// The dataset's own manifest and every manifest that reads it, as they will be.
        manifests: Vec<ManifestText>,
        /// The old manifest file, when the dataset's manifest moves to a new file name.
        remove: Option<PathBuf>,
    },
    /// `weir delete`: per dataset, downstream first, its manifest file and then its storage.
    #[serde(rename_all = "camelCase")]
    Delete {
        /// The datasets, downstream first, each with its manifest file.
        datasets: Vec<(String, PathBuf)>,
    },
    /// `weir reset`: heads moved back, downstream first.
    #[serde(rename_all = "camelCase")]
    Reset {
        /// The head moves.
        moves: Vec<HeadChange>,
    },
}

impl Intent {
    /// The command, for messages.
    pub fn describe(&self) -> String {
        match self {
            Intent::Rename { old, new, .. } => format!("`weir rename {old} {new}`"),
            Intent::Delete { datasets } => format!(
                "`weir delete` of {}",
                datasets
                    .iter()
                    .map(|(d, _)| format!("`{d}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Intent::Reset { moves } => format!(
                "`weir reset` of {}",
                moves
                    .iter()
                    .map(|m| format!("`{}`", m.dataset))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    version: u32,
    #[serde(flatten)]
    intent: Intent,
}

/// Why a record cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    /// The record file cannot be read, written or removed.
    #[error("intent record {path}: {source}")]
    Io {
        /// The record.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The record is not one this Weir reads.
    #[error("intent record {path} cannot be read: {message}")]
    Unreadable {
        /// The record.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Carrying the operation out failed; the record stays, and the next command tries again.
    #[error("completing the interrupted {operation}: {message}")]
    Step {
        /// The operation.
        operation: String,
        /// What failed.
        message: String,
    },
}

/// A workspace's intent record.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
    root: PathBuf,
}

impl Journal {
    /// The record of the workspace at `root` whose storage is `storage`, beside its lock.
    pub fn for_workspace(storage: &Storage, root: &Path) -> Self {
        let lock = weir_dataset::workspace_lock::WorkspaceLock::path_for(storage, root);
        let name = match lock.file_name().and_then(|n| n.to_str()) {
            Some(n) if n.starts_with('.') => ".weir.intent",
            _ => "weir.intent",
        };
        Self {
            path: lock.with_file_name(name),
            root: root.to_path_buf(),
        }
    }

    /// The record's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The operation a killed command left, if any.
    pub fn pending(&self) -> Result<Option<Intent>, IntentError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(IntentError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let record: Record = serde_json::from_str(&text).map_err(|e| IntentError::Unreadable {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        if record.version != VERSION {
            return Err(IntentError::Unreadable {
                path: self.path.clone(),
                message: format!(
                    "it is of version {}; this Weir reads version {VERSION}",
                    record.version
                ),
            });
        }
        Ok(Some(record.intent))
    }

    /// Writes `intent` durably (a fsynced file renamed into place, its folder fsynced): from here on the
    /// operation completes, by this process or the next.
    fn record(&self, intent: &Intent) -> Result<(), IntentError> {
        let text = serde_json::to_vec_pretty(&Record {
            version: VERSION,
            intent: intent.clone(),
        })
        .map_err(|e| IntentError::Unreadable {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        durable::write(dir, &self.path, &text).map_err(|source| self.io(source))?;
        fault::point("intent-recorded", "");
        Ok(())
    }

    /// Removes the record once the operation is complete.
    fn clear(&self) -> Result<(), IntentError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(self.io(source)),
        }
        if let Some(dir) = self.path.parent() {
            durable::sync_dir(dir).map_err(|source| self.io(source))?;
        }
        Ok(())
    }

    fn io(&self, source: std::io::Error) -> IntentError {
        IntentError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Records `intent`, carries it out and removes the record. The caller holds the workspace lock.
    pub async fn run(&self, storage: &Storage, intent: &Intent) -> Result<(), CommandError> {
        self.record(intent)?;
        carry_out(&self.root, storage, intent).await?;
        self.clear()?;
        Ok(())
    }

    /// Completes the operation a killed command left, if any; returns it. The caller holds the workspace
    /// lock.
    pub async fn recover(&self, storage: &Storage) -> Result<Option<Intent>, CommandError> {
        let Some(intent) = self.pending()? else {
            return Ok(None);
        };
        tracing::warn!(operation = %intent.describe(), record = %self.path.display(), "completing an interrupted operation");
        carry_out(&self.root, storage, &intent).await?;
        self.clear()?;
        Ok(Some(intent))
    }
}

/// Marks the end of step `n` of an operation, for the crash tests (`WEIR_FAULT_AT=intent-step-N`).
fn step_done(n: &mut usize) {
    *n += 1;
    fault::point(&format!("intent-step-{n}"), "");
}

/// Carries `intent` out from wherever it stopped: every step checks what is there and does only what is
/// missing.
async fn carry_out(root: &Path, storage: &Storage, intent: &Intent) -> Result<(), CommandError> {
    let step_err = |message: String| IntentError::Step {
        operation: intent.describe(),
        message,
    };
    let mut n = 0;
    match intent {
        Intent::Rename {
            old,
            new,
            manifests,
            remove,
        } => {
            storage.resume_rename_dataset(old, new).await?;
            step_done(&mut n);
            for m in manifests {
                let file = root.join(&m.file);
                durable::write(root, &file, m.text.as_bytes())
                    .map_err(|e| step_err(format!("writing {}: {e}", m.file.display())))?;
                step_done(&mut n);
            }
            if let Some(file) = remove {
                remove_file(root, file).map_err(step_err)?;
                step_done(&mut n);
            }
        }
        Intent::Delete { datasets } => {
            for (name, file) in datasets {
                // The manifest first: a dataset without one is not in the workspace any more.
                remove_file(root, file).map_err(step_err)?;
                step_done(&mut n);
                storage.delete_dataset(name).await?;
                step_done(&mut n);
            }
        }
        Intent::Reset { moves } => {
            for m in moves {
                let store = storage.dataset(&m.dataset);
                match store.head().await? {
                    Some(h) if h == m.to => {}
                    Some(h) if h == m.from => store.set_head(Some(m.from), m.to).await?,
                    found => {
                        return Err(TxError::Store(StoreError::HeadMoved {
                            dataset: m.dataset.clone(),
                            expected: Some(m.from),
                            found,
                        })
                        .into());
                    }
                }
                step_done(&mut n);
            }
        }
    }
    Ok(())
}

fn remove_file(root: &Path, file: &Path) -> Result<(), String> {
    let path = root.join(file);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("removing {}: {e}", file.display())),
    }
    let dir = path.parent().unwrap_or(root);
    durable::sync_dir(dir).map_err(|e| format!("syncing {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(&dir.path().join(".weir").to_string_lossy()).unwrap();
        let journal = Journal::for_workspace(&storage, dir.path());
        assert_eq!(journal.pending().unwrap(), None);
        let intent = Intent::Delete {
            datasets: vec![("a".into(), PathBuf::from("datasets/a.yaml"))],
        };
        journal.record(&intent).unwrap();
        assert_eq!(journal.pending().unwrap(), Some(intent));
        assert!(journal.path().ends_with(".weir/weir.intent"));
        journal.clear().unwrap();
        assert_eq!(journal.pending().unwrap(), None);
    }

    #[test]
    fn a_record_of_another_version_is_refused_not_guessed() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(&dir.path().join(".weir").to_string_lossy()).unwrap();
        let journal = Journal::for_workspace(&storage, dir.path());
        std::fs::write(
            journal.path(),
            r#"{"version": 2, "operation": "delete", "datasets": []}"#,
        )
        .unwrap();
        let err = journal.pending().unwrap_err().to_string();
        assert!(err.contains("version 2"), "{err}");
    }
}
