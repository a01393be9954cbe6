//! Who owns the files an engine writes: the engine runs as a non-root user, and the coordinator's
//! user must be able to read and remove everything afterwards.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::RuntimeError;

/// The coordinator's effective uid and gid.
pub(crate) fn coordinator_ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid take no arguments, cannot fail and touch no memory of ours.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Makes `dir` writable by `engine_user` before the engine starts. Only root can give a folder
/// away; any other coordinator runs its engines as itself, so nothing needs changing.
pub(crate) fn lend_folder(dir: &Path, engine_user: (u32, u32)) -> Result<(), RuntimeError> {
    if coordinator_ids().0 != 0 || engine_user == coordinator_ids() {
        return Ok(());
    }
    std::os::unix::fs::chown(dir, Some(engine_user.0), Some(engine_user.1)).map_err(|source| {
        RuntimeError::Io {
            action: "hand the folder to the engine's user",
            path: dir.to_path_buf(),
            source,
        }
    })
}

/// Gives `dir` and everything in it back to the coordinator's user after the engine stopped
/// (root coordinators only; see [`lend_folder`]). Symbolic links are changed, never followed.
pub(crate) fn reclaim_folder(dir: &Path) -> Result<(), RuntimeError> {
    let me = coordinator_ids();
    if me.0 != 0 {
        return Ok(());
    }
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let io = |action, source| RuntimeError::Io {
            action,
            path: path.clone(),
            source,
        };
        let meta = std::fs::symlink_metadata(&path).map_err(|e| io("inspect an output file", e))?;
        if meta.uid() != me.0 || meta.gid() != me.1 {
            std::os::unix::fs::lchown(&path, Some(me.0), Some(me.1))
                .map_err(|e| io("give an output file back to the coordinator", e))?;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(|e| io("list an output folder", e))? {
                stack.push(entry.map_err(|e| io("list an output folder", e))?.path());
            }
        }
    }
    Ok(())
}

/// Checks that `engine_user` can read `input` (a file, or a folder it must also enter), so that a
/// permission problem is reported before the engine starts, naming the path.
pub(crate) fn check_readable(input: &Path, engine_user: (u32, u32)) -> Result<(), RuntimeError> {
    let meta = std::fs::metadata(input).map_err(|source| RuntimeError::Io {
        action: "inspect an input",
        path: input.to_path_buf(),
        source,
    })?;
    let mode = meta.permissions().mode();
    let needed = if meta.is_dir() { 0o5 } else { 0o4 };
    let granted = if meta.uid() == engine_user.0 {
        (mode >> 6) & 0o7
    } else if meta.gid() == engine_user.1 {
        (mode >> 3) & 0o7
    } else {
        mode & 0o7
    };
    if granted & needed == needed {
        Ok(())
    } else {
        Err(RuntimeError::InputNotReadable {
            path: input.to_path_buf(),
            uid: engine_user.0,
        })
    }
}
