//! A source file read from a checked snapshot: what identifies its content (size, modification and change
//! times, device and inode) and its SHA3-256 are taken before it is read and again after, and a file that
//! changed in between is refused, never ingested.
//!
//! Ingest reads a source file in place, a batch at a time, so a writer that appends to, truncates or
//! rewrites the file while it is read would otherwise leave a slice that matches neither its content before
//! nor after. [`FileSnapshot::take`] stamps and hashes the file before the read (and refuses a file that
//! changes while it is hashed); [`FileSnapshot::check_unchanged`] stamps it again after the read and, when
//! the stamp is the same, hashes it again. The change time (`ctime`) moves with every write and cannot be
//! set back from user space, so a write that restores the size and the modification time still shows.
//!
//! ```
//! use weir_ingest::source_file::FileSnapshot;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("a.csv");
//! std::fs::write(&path, "id\n1\n").unwrap();
//! let before = FileSnapshot::take(&path, "a.csv").unwrap();
//! assert_eq!(before.stamp.size, 5);
//! before.check_unchanged().unwrap();
//! std::fs::write(&path, "id\n1\n2\n").unwrap();
//! assert!(before.check_unchanged().is_err());
//! ```

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, SecondsFormat, Utc};
use weir_dataset::progress::{Phase, Progress, Report};
use weir_odf::{Multihash, Sha3Hasher};

/// What identifies a file's content short of reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Last modification time.
    pub modified: SystemTime,
    /// Last change of the content or the metadata (`ctime`), which every write moves.
    pub changed: SystemTime,
    /// Device.
    pub device: u64,
    /// Inode (another inode: the file was replaced).
    pub inode: u64,
}

impl FileStamp {
    /// The stamp of the file at `path` now.
    pub fn of(path: &Path) -> std::io::Result<Self> {
        let m = std::fs::metadata(path)?;
        Ok(Self::from_metadata(&m))
    }

    #[cfg(unix)]
    fn from_metadata(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let changed = u64::try_from(m.ctime())
            .ok()
            .map(|s| {
                SystemTime::UNIX_EPOCH
                    + Duration::new(s, m.ctime_nsec().clamp(0, 999_999_999) as u32)
            })
            .unwrap_or(SystemTime::UNIX_EPOCH);
        Self {
            size: m.len(),
            modified: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            changed,
            device: m.dev(),
            inode: m.ino(),
        }
    }

    #[cfg(not(unix))]
    fn from_metadata(m: &std::fs::Metadata) -> Self {
        let modified = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        Self {
            size: m.len(),
            modified,
            changed: modified,
            device: 0,
            inode: 0,
        }
    }

    /// The last time the file was written or its metadata changed: the later of its modification and change
    /// times (a file copied with its old modification time still has a new change time).
    pub fn last_change(&self) -> SystemTime {
        self.modified.max(self.changed)
    }

    /// How long ago the file last changed, at `now` (zero for a time in the future).
    pub fn quiet_for(&self, now: SystemTime) -> Duration {
        now.duration_since(self.last_change())
            .unwrap_or(Duration::ZERO)
    }

    /// What differs from `other`, in words, or `None` when nothing does.
    fn difference(&self, other: &FileStamp) -> Option<String> {
        if self.device != other.device || self.inode != other.inode {
            Some("it was replaced by another file".into())
        } else if self.size != other.size {
            Some(format!(
                "its size went from {} to {} bytes",
                self.size, other.size
            ))
        } else if self.modified != other.modified || self.changed != other.changed {
            Some("it was written to".into())
        } else {
            None
        }
    }
}

/// A source file as it was before it was read: its stamp and the SHA3-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSnapshot {
    /// Where it is.
    pub path: PathBuf,
    /// Its name, for messages.
    pub name: String,
    /// Its stamp.
    pub stamp: FileStamp,
    /// The SHA3-256 multihash of its content.
    pub sha3: Multihash,
}

/// A source file changed while it was read: nothing of it may be ingested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file} changed while it was read ({what}); nothing of it was ingested: let its writer finish, and the next pull reads it again"
)]
pub struct ChangedWhileRead {
    /// The file.
    pub file: String,
    /// What changed.
    pub what: String,
}

/// A source file cannot be stamped or hashed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// It changed while it was hashed or read.
    #[error(transparent)]
    Changed(#[from] ChangedWhileRead),
    /// It cannot be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl FileSnapshot {
    /// Stamps and hashes the file at `path` (`name` in messages); refused when it changes while it is
    /// hashed.
    pub fn take(path: &Path, name: &str) -> Result<Self, SnapshotError> {
        Self::take_reporting(path, name, &Progress::none())
    }

    /// [`FileSnapshot::take`], reporting the bytes hashed as the `fetch` phase (`snapshot`).
    pub fn take_reporting(
        path: &Path,
        name: &str,
        progress: &Progress,
    ) -> Result<Self, SnapshotError> {
        let io = |source| SnapshotError::Io {
            file: name.to_string(),
            source,
        };
        let stamp = FileStamp::of(path).map_err(io)?;
        let sha3 =
            hash_reporting(path, progress, Phase::Fetch, "snapshot", stamp.size).map_err(io)?;
        let after = FileStamp::of(path).map_err(io)?;
        if let Some(what) = stamp.difference(&after) {
            return Err(ChangedWhileRead {
                file: name.to_string(),
                what,
            }
            .into());
        }
        Ok(Self {
            path: path.to_path_buf(),
            name: name.to_string(),
            stamp,
            sha3,
        })
    }

    /// Checks, after the read, that the file is still what it was before it: the same stamp, and then the
    /// same content hash.
    pub fn check_unchanged(&self) -> Result<(), SnapshotError> {
        self.check_unchanged_reporting(&Progress::none())
    }

    /// [`FileSnapshot::check_unchanged`], reporting the bytes hashed as the `check` phase (`source
    /// unchanged`).
    pub fn check_unchanged_reporting(&self, progress: &Progress) -> Result<(), SnapshotError> {
        let changed = |what: String| {
            SnapshotError::Changed(ChangedWhileRead {
                file: self.name.clone(),
                what,
            })
        };
        let now = match FileStamp::of(&self.path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(changed("it was removed".into()));
            }
            Err(source) => {
                return Err(SnapshotError::Io {
                    file: self.name.clone(),
                    source,
                });
            }
        };
        if let Some(what) = self.stamp.difference(&now) {
            return Err(changed(what));
        }
        let sha3 = hash_reporting(
            &self.path,
            progress,
            Phase::Check,
            "source unchanged",
            now.size,
        )
        .map_err(|source| SnapshotError::Io {
            file: self.name.clone(),
            source,
        })?;
        if sha3 != self.sha3 {
            return Err(changed("its content hash changed".into()));
        }
        Ok(())
    }

    /// The file's record in an ingest's `AddData` (see [`RecordedFile`]).
    pub fn recorded(&self) -> RecordedFile {
        RecordedFile {
            path: self.name.clone(),
            size: self.stamp.size,
            modified: rfc3339(self.stamp.modified),
            sha3_256: self.sha3.to_string(),
        }
    }
}

/// What an ingest records about the source file it read, in its `AddData`'s extra attributes under
/// [`RecordedFile::KEY`]: the file, its size, its modification time and its content hash as they were
/// when it was read. Later pulls compare the file with it to report a file changed after it was ingested.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedFile {
    /// The file, relative to the workspace.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, RFC 3339 with nanoseconds.
    pub modified: String,
    /// The SHA3-256 multihash of the content (`f1620...`).
    #[serde(rename = "sha3-256")]
    pub sha3_256: String,
}

impl RecordedFile {
    /// The extra attribute key (ODF's `<domain>/<path>` form).
    pub const KEY: &'static str = "weir.dev/source-file";

    /// The extra attributes of an `AddData` recording this file.
    pub fn to_extra(&self) -> Option<weir_odf::ExtraAttributes> {
        let mut map = serde_json::Map::new();
        map.insert(Self::KEY.to_string(), serde_json::to_value(self).ok()?);
        weir_odf::ExtraAttributes::from_map(&map).ok()
    }

    /// The file an `AddData`'s extra attributes record, if any (anything else there is ignored).
    pub fn from_extra(extra: &weir_odf::ExtraAttributes) -> Option<Self> {
        let value = extra.get(Self::KEY).ok()??;
        serde_json::from_value(value).ok()
    }

    /// Whether the file, as it is now (`stamp`), may differ from what was ingested: another size or another
    /// modification time. `None` when it looks the same.
    pub fn differs(&self, stamp: &FileStamp) -> bool {
        self.size != stamp.size || self.modified != rfc3339(stamp.modified)
    }
}

/// A time as RFC 3339 in UTC with nanoseconds.
pub fn rfc3339(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// The SHA3-256 multihash of a file's bytes, read a megabyte at a time.
pub fn hash_file(path: &Path) -> std::io::Result<Multihash> {
    hash_reporting(path, &Progress::none(), Phase::Fetch, "", 0)
}

/// [`hash_file`], reporting the bytes hashed of `total` in `phase` with `detail`.
fn hash_reporting(
    path: &Path,
    progress: &Progress,
    phase: Phase,
    detail: &str,
    total: u64,
) -> std::io::Result<Multihash> {
    let report = |bytes: u64| {
        Report::new(phase)
            .detail(detail)
            .bytes(bytes)
            .total_bytes(Some(total))
    };
    progress.phase(phase);
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha3Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
        progress.report(report(bytes));
    }
    progress.finish(report(bytes));
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_file_round_trips_through_extra_attributes() {
        let r = RecordedFile {
            path: "data/a.csv".into(),
            size: 12,
            modified: "2026-01-02T03:04:05.000000006Z".into(),
            sha3_256: Multihash::sha3_256(b"x").to_string(),
        };
        let extra = r.to_extra().unwrap();
        assert!(extra.as_json().starts_with("{\"weir.dev/source-file\":{"));
        assert_eq!(RecordedFile::from_extra(&extra), Some(r));
    }

    #[test]
    fn a_file_replaced_under_its_name_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        std::fs::write(&path, "id\n1\n").unwrap();
        let before = FileSnapshot::take(&path, "a.csv").unwrap();
        let other = dir.path().join("b.csv");
        std::fs::write(&other, "id\n1\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let err = before.check_unchanged().unwrap_err().to_string();
        assert!(err.contains("replaced"), "{err}");
    }

    #[test]
    fn a_removed_file_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        std::fs::write(&path, "id\n1\n").unwrap();
        let before = FileSnapshot::take(&path, "a.csv").unwrap();
        std::fs::remove_file(&path).unwrap();
        let err = before.check_unchanged().unwrap_err().to_string();
        assert!(err.contains("removed"), "{err}");
    }
}
