//! The workspace lock: one `weir` process writes a workspace at a time.
//!
//! Every command that writes (`pull`, `engine deprecate`) takes an advisory lock (`flock`, exclusive) on
//! `weir.lock` in the storage root before it reads anything it might write, and holds it until it exits;
//! the kernel releases it when the process ends, however it ends. A second writer fails at once
//! ([`LockError::Locked`], exit 9) or, with `--wait-lock`, waits for the first to finish. Readers (`list`,
//! `log`, `tail`, `verify`, `validate`, `provenance`, `lineage`) never take it: the head moves atomically,
//! so they always see a committed state.
//!
//! The file holds the pid of the holder, for the message. For storage on an object store the lock file is
//! `.weir.lock` in the workspace folder, which keeps out the writers of this machine only.
//!
//! ```
//! use weir_dataset::workspace_lock::{LockError, WorkspaceLock};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("weir.lock");
//! let held = WorkspaceLock::try_acquire(&path).unwrap();
//! let second = WorkspaceLock::try_acquire(&path);
//! assert!(matches!(second, Err(LockError::Locked { holder: Some(pid), .. }) if pid == std::process::id()));
//! drop(held);
//! WorkspaceLock::try_acquire(&path).unwrap();
//! ```

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::chain::store::Storage;

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error(
        "workspace is locked by another weir process{} that is writing it (lock file {path})",
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The lock file.
        path: String,
        /// The pid it records, when it records one.
        holder: Option<u32>,
    },
    /// The lock file cannot be opened or locked.
    #[error("cannot take the workspace lock {path}: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct WorkspaceLock {
    _file: File,
    path: PathBuf,
}

impl WorkspaceLock {
    /// The lock file of a workspace: `weir.lock` in the storage root when it is local, `.weir.lock` in the
    /// workspace folder otherwise.
    pub fn path_for(storage: &Storage, workspace_root: &Path) -> PathBuf {
        match storage.local_root() {
            Some(root) => root.join("weir.lock"),
            None => workspace_root.join(".weir.lock"),
        }
    }

    /// Takes the lock, or fails at once when another process holds it.
    pub fn try_acquire(path: &Path) -> Result<Self, LockError> {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => Self::held(file, path),
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Locked {
                path: path.display().to_string(),
                holder: holder(path),
            }),
            Err(std::fs::TryLockError::Error(source)) => Err(io_err(path, source)),
        }
    }

    /// Takes the lock, waiting for the process that holds it to finish (`--wait-lock`).
    pub async fn acquire_waiting(path: &Path) -> Result<Self, LockError> {
        match Self::try_acquire(path) {
            Err(LockError::Locked { holder, .. }) => {
                tracing::warn!(
                    lock = %path.display(),
                    holder = holder.map_or_else(|| "unknown".to_string(), |p| p.to_string()),
                    "waiting for the workspace lock held by another weir process"
                );
            }
            other => return other,
        }
        let owned = path.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let file = open(&owned)?;
            file.lock().map_err(|e| io_err(&owned, e))?;
            Self::held(file, &owned)
        })
        .await
        .map_err(|e| io_err(path, io::Error::other(e.to_string())))?
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn held(mut file: File, path: &Path) -> Result<Self, LockError> {
        file.set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(|e| io_err(path, e))?;
        Ok(Self {
            _file: file,
            path: path.to_path_buf(),
        })
    }
}

fn open(path: &Path) -> Result<File, LockError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io_err(path, e))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io_err(path, e))
}

/// The pid the lock file records (the holder writes it right after taking the lock).
fn holder(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn io_err(path: &Path, source: io::Error) -> LockError {
    LockError::Io {
        path: path.display().to_string(),
        source,
    }
}
