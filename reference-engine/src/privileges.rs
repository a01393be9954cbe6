//! `--run-as-owner-of PATH`: an engine started as root switches, before it serves, to the user and
//! group that own `PATH`.
//!
//! kamu runs an engine image as `docker run -p 2884 -v <host dirs>` with no `--user`, so the engine
//! starts as root and writes into output folders the coordinator created as its own user. The image
//! passes `--run-as-owner-of /opt/engine/out` (kamu's output mount): the engine then runs as the
//! folder's owner, so it can write there, its files belong to that owner (what kamu's `chown` after
//! each operation achieves with engines that have a shell), and it never serves as root unless the
//! folder is root's. Not started as root (Weir's runtime always passes `--user`), it changes nothing.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `nobody`: the user when `PATH` does not exist.
const NOBODY: u32 = 65534;

/// Who the engine runs as after [`run_as_owner_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunAs {
    /// Not started as root: unchanged.
    Unchanged { uid: u32, gid: u32 },
    /// Started as root and the folder is root's: stays root.
    Root,
    /// Switched from root to this user and group.
    Switched { uid: u32, gid: u32 },
}

/// Why the engine could not switch users.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrivilegeError {
    #[error("cannot read the owner of {path}: {source}")]
    Owner {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot switch to uid {uid} gid {gid} ({call} failed): {source}")]
    Switch {
        uid: u32,
        gid: u32,
        call: &'static str,
        source: std::io::Error,
    },
}

/// Call before any thread starts (the switch applies to the calling thread's process).
pub(crate) fn run_as_owner_of(path: &Path) -> Result<RunAs, PrivilegeError> {
    // SAFETY: geteuid/getegid have no preconditions.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if euid != 0 {
        return Ok(RunAs::Unchanged {
            uid: euid,
            gid: egid,
        });
    }
    let (uid, gid) = match std::fs::metadata(path) {
        Ok(metadata) => (metadata.uid(), metadata.gid()),
        // Nothing mounted there: no folder to own, so no reason to stay root.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => (NOBODY, NOBODY),
        Err(source) => {
            return Err(PrivilegeError::Owner {
                path: path.display().to_string(),
                source,
            });
        }
    };
    if uid == 0 {
        return Ok(RunAs::Root);
    }
    let check = |call, result: libc::c_int| {
        if result == 0 {
            Ok(())
        } else {
            Err(PrivilegeError::Switch {
                uid,
                gid,
                call,
                source: std::io::Error::last_os_error(),
            })
        }
    };
    // Supplementary groups first (root's would stay otherwise), then the group, then the user
    // (after which the others can no longer be changed).
    // SAFETY: setgroups with a count of 0 reads no memory; setgid/setuid take plain integers.
    check("setgroups", unsafe { libc::setgroups(0, std::ptr::null()) })?;
    check("setgid", unsafe { libc::setgid(gid) })?;
    check("setuid", unsafe { libc::setuid(uid) })?;
    Ok(RunAs::Switched { uid, gid })
}
