//! The SHA-256 of an engine binary, computed once per process and file.
//!
//! A process engine is pinned by the SHA-256 of its binary, which every operation needs (it is what the
//! coordinator records). An unstripped debug build of an engine is hundreds of megabytes, so the hash is kept
//! for the life of the process, keyed by what identifies the file's content short of reading it (device,
//! inode, size, modification and change times): an operation on an unchanged binary costs one `stat`, and a
//! binary rebuilt or replaced in place is hashed again. Callers asking for the same file at the same time
//! wait for one hashing instead of each reading the file.
//!
//! Hashing reads the file a megabyte at a time and stops at once, with [`HashError::Interrupted`], when the
//! process is shutting down ([`crate::shutdown`]), so SIGTERM during a hash does not wait for it. On a
//! multi-threaded tokio runtime the hashing thread is handed over to blocking work
//! (`tokio::task::block_in_place`), so timers, sockets and signals keep being served meanwhile.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// What identifies a file's content short of reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FileIdentity {
    device: u64,
    inode: u64,
    size: u64,
    modified: SystemTime,
    changed: (i64, i64),
}

impl FileIdentity {
    fn of(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(Self {
            device: m.dev(),
            inode: m.ino(),
            size: m.len(),
            modified: m.modified()?,
            changed: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// Why a binary's hash could not be had.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    /// The binary cannot be read.
    #[error("engine binary {path}: {source}")]
    Io {
        /// The binary.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The process is shutting down.
    #[error("hashing engine binary {path} was interrupted: the process is shutting down")]
    Interrupted {
        /// The binary.
        path: PathBuf,
    },
}

/// One hash per file identity; each behind its own lock, so that callers wait for one hashing of a file.
type Hashes = HashMap<(PathBuf, FileIdentity), Arc<Mutex<Option<String>>>>;

static HASHES: LazyLock<Mutex<Hashes>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// How many times this process hashed a binary (not counting answers from the cache).
static HASHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many binaries this process has hashed so far (answers from the cache are not hashings).
pub fn hashings() -> u64 {
    HASHED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The SHA-256 of the file at `path`, lowercase hex: from this process's cache when the file's identity is
/// unchanged since it was hashed, otherwise read and hashed now (see the module documentation).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("engine");
/// std::fs::write(&path, b"abc").unwrap();
/// let hash = weir_engine_runtime::binary_sha256(&path).unwrap();
/// assert_eq!(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
/// let before = weir_engine_runtime::binary_hashings();
/// assert_eq!(weir_engine_runtime::binary_sha256(&path).unwrap(), hash);
/// assert_eq!(weir_engine_runtime::binary_hashings(), before, "the second answer came from the cache");
/// ```
pub fn binary_sha256(path: &Path) -> Result<String, HashError> {
    let io = |source| HashError::Io {
        path: path.to_path_buf(),
        source,
    };
    let identity = FileIdentity::of(path).map_err(io)?;
    let slot = HASHES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry((path.to_path_buf(), identity))
        .or_default()
        .clone();
    blocking(|| {
        let mut hash = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = hash.as_ref() {
            return Ok(h.clone());
        }
        let computed = hash_file(path)?;
        // The file changed while it was read: what was hashed is not the file of that identity.
        if FileIdentity::of(path).map_err(io)? != identity {
            return hash_file(path);
        }
        *hash = Some(computed.clone());
        Ok(computed)
    })
}

fn hash_file(path: &Path) -> Result<String, HashError> {
    let io = |source| HashError::Io {
        path: path.to_path_buf(),
        source,
    };
    tracing::info!(binary = %path.display(), "hashing engine binary");
    HASHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        if crate::shutdown::is_shutting_down() {
            return Err(HashError::Interrupted {
                path: path.to_path_buf(),
            });
        }
        let read = file.read(&mut buffer).map_err(io)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Runs `f`, which blocks, without holding up the tokio runtime's other tasks when on one of its worker
/// threads.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_replaced_under_its_name_is_hashed_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine");
        std::fs::write(&path, b"one").unwrap();
        let first = binary_sha256(&path).unwrap();
        let other = dir.path().join("new");
        std::fs::write(&other, b"two").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let second = binary_sha256(&path).unwrap();
        assert_ne!(first, second);
        assert_eq!(second, hash_file(&path).unwrap());
    }

    #[test]
    fn a_missing_binary_is_an_io_error_naming_it() {
        let err = binary_sha256(Path::new("/nonexistent/engine")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/engine"), "{err}");
    }
}
