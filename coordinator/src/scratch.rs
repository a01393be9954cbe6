//! Scratch space that never outlives its process.
//!
//! Every `weir` process makes one folder, `weir-proc-<pid>-<random>` in the system temporary folder
//! (`TMPDIR`), holds an exclusive `flock` on its `lock` file for as long as it runs, and points `TMPDIR`
//! at it, so that every scratch folder made afterwards (a transaction's staging folder, an engine's run
//! folder, a process engine's own temporary files) is made inside it. The folder is removed when the
//! process ends normally or on SIGINT / SIGTERM ([`ScratchRoot`]'s drop); a process killed outright
//! leaves it behind, and the next `weir` to start removes it: a `weir-proc-*` folder whose pid no longer
//! runs and whose lock nobody holds is stale.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The name prefix of per-process scratch folders.
pub const PREFIX: &str = "weir-proc-";

/// This process's scratch folder; dropping it removes the folder and everything in it.
#[derive(Debug)]
pub struct ScratchRoot {
    path: PathBuf,
    _lock: File,
}

impl ScratchRoot {
    /// Removes the stale scratch folders of dead processes from `base`, then makes this process's
    /// folder in it and takes its lock.
    pub fn create_in(base: &Path) -> io::Result<Self> {
        let removed = sweep_stale(base);
        if removed > 0 {
            tracing::info!(removed, base = %base.display(), "removed scratch folders of weir processes that are gone");
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .tempdir_in(base)?
            .keep();
        // Sandboxed engines may run as another user (`nobody` when weir runs as root): they must be able
        // to pass through to the folders mounted for them, though not to list this one.
        if let Err(e) = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("lock"))
            .and_then(|f| f.try_lock().map_err(io::Error::from).map(|()| f));
        match lock {
            Ok(lock) => Ok(Self {
                path: dir,
                _lock: lock,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchRoot {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.path)
            && error.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(folder = %self.path.display(), %error, "could not remove the scratch folder");
        }
    }
}

/// Removes the `weir-proc-*` folders in `base` whose process is gone (pid not running, lock not held);
/// returns how many.
pub fn sweep_stale(base: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        // A live pid may be a process making its folder (its lock not taken yet): leave it.
        if pid_alive(pid) {
            continue;
        }
        let lock = File::open(dir.join("lock"));
        if let Ok(f) = &lock
            && f.try_lock().is_err()
        {
            continue;
        }
        if std::fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether a process with this pid runs (or exists but belongs to someone else).
fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks that the pid exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_a_dead_process_is_swept_and_a_live_one_is_kept() {
        let base = tempfile::tempdir().unwrap();
        let mine = ScratchRoot::create_in(base.path()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = base.path().join(format!("{PREFIX}{dead}-abc"));
        std::fs::create_dir_all(stale.join("weir-readings-x")).unwrap();
        std::fs::write(stale.join("lock"), b"").unwrap();
        assert_eq!(sweep_stale(base.path()), 1);
        assert!(!stale.exists());
        assert!(mine.path().is_dir());
        let path = mine.path().to_path_buf();
        drop(mine);
        assert!(!path.exists());
    }
}
