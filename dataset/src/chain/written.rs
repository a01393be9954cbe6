//! Files this process stored on a local disk, each with the SHA3-256 it took of the bytes as it wrote them
//! and the file's identity right after it was moved into place: device, inode, size, modification and
//! change times.
//!
//! A derivative reads back the slice its input wrote moments earlier in the same pull. Hashing that file
//! again would read the very pages this process just wrote (they are still in the page cache), so it proves
//! nothing the write did not; what it would catch is the file being replaced or changed in between, and
//! that changes its identity: a replacement has another inode, a write in place moves the modification
//! and change times, and the change time cannot be set back from user space. So a file whose identity is
//! unchanged is handed out as checked without being read again; any other file (from another process, an
//! earlier pull, another machine) is hashed as it is read, as before.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use weir_odf::Multihash;

/// What identifies a file's content on this machine, short of reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    #[cfg(unix)]
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        m.file_type().is_file().then(|| Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.size(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Without inode numbers and change times nothing is remembered: every file is hashed when read.
    #[cfg(not(unix))]
    fn of(_path: &Path) -> Option<Self> {
        None
    }
}

/// The files this process wrote (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct Written {
    files: Mutex<HashMap<PathBuf, (Multihash, Stamp)>>,
}

impl Written {
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (Multihash, Stamp)>> {
        // Nothing panics while the lock is held; a poisoned map is still a consistent one.
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers the file at `path`, just moved into place, whose bytes hashed to `hash` as this process
    /// wrote them.
    pub(crate) fn remember(&self, path: &Path, hash: Multihash) {
        match Stamp::of(path) {
            Some(stamp) => {
                self.files().insert(path.to_path_buf(), (hash, stamp));
            }
            None => {
                self.files().remove(path);
            }
        }
    }

    /// The size of the file at `path` when it is one this process wrote with `hash` and it has not been
    /// replaced or changed since; `None` otherwise (it must be hashed).
    pub(crate) fn unchanged(&self, path: &Path, hash: &Multihash) -> Option<u64> {
        let (written, stamp) = *self.files().get(path)?;
        (written == *hash && Stamp::of(path) == Some(stamp)).then_some(stamp.len)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn written_file(dir: &Path, bytes: &[u8]) -> (PathBuf, Multihash, Written) {
        let path = dir.join("slice");
        std::fs::write(&path, bytes).unwrap();
        let hash = Multihash::sha3_256(bytes);
        let written = Written::default();
        written.remember(&path, hash);
        (path, hash, written)
    }

    #[test]
    fn a_file_written_here_and_untouched_is_known_with_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let (path, hash, written) = written_file(dir.path(), b"records");
        assert_eq!(written.unchanged(&path, &hash), Some(7));
        // Another hash for the same path is not this file.
        assert_eq!(
            written.unchanged(&path, &Multihash::sha3_256(b"other")),
            None
        );
        // Nor is a path it never wrote.
        assert_eq!(
            written.unchanged(&dir.path().join("elsewhere"), &hash),
            None
        );
    }

    #[test]
    fn a_file_written_in_place_afterwards_must_be_hashed_again() {
        let dir = tempfile::tempdir().unwrap();
        let (path, hash, written) = written_file(dir.path(), b"records");
        // The same length, other bytes, written in place: the change time moves.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"RECORDS").unwrap();
        assert_eq!(written.unchanged(&path, &hash), None);
    }

    #[test]
    fn a_file_replaced_by_another_must_be_hashed_again() {
        let dir = tempfile::tempdir().unwrap();
        let (path, hash, written) = written_file(dir.path(), b"records");
        let other = dir.path().join("other");
        std::fs::write(&other, b"records").unwrap();
        // Even with the same bytes: a replacement is another inode.
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(written.unchanged(&path, &hash), None);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(written.unchanged(&path, &hash), None);
    }

    #[test]
    fn metadata_changes_count_as_changes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (path, hash, written) = written_file(dir.path(), b"records");
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(written.unchanged(&path, &hash), None);
    }
}
