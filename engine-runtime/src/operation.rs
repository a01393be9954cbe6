//! What one engine operation needs from a runtime: an id and the folders it reads and writes.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

use crate::error::RuntimeError;

/// Identifies one engine operation (one transform, one raw query...).
///
/// It names the container (`weir-<engine>-<operation id>-<suffix>`), labels it, and tags every log
/// line the engine writes. Allowed characters are those of a container name: ASCII letters, digits,
/// `_`, `.` and `-`, starting with a letter or digit, at most 64 characters.
///
/// ```
/// use weir_engine_runtime::OperationId;
///
/// let id = OperationId::new("transform-42").unwrap();
/// assert_eq!(id.as_str(), "transform-42");
/// assert!(OperationId::new("no spaces please").is_err());
/// assert!(OperationId::generate().as_str().starts_with("op-"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperationId(String);

impl OperationId {
    /// The longest operation id accepted.
    pub const MAX_LEN: usize = 64;

    /// Checks `id` and wraps it.
    pub fn new(id: impl Into<String>) -> Result<Self, RuntimeError> {
        let id = id.into();
        let mut chars = id.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if first_ok && rest_ok && id.len() <= Self::MAX_LEN {
            Ok(Self(id))
        } else {
            Err(RuntimeError::InvalidOperationId { id })
        }
    }

    /// A fresh random id, `op-` followed by 16 hex digits.
    pub fn generate() -> Self {
        Self(format!("op-{:016x}", random_u64()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A random 64-bit value from the standard library's per-process random hash keys (no extra
/// dependency; good enough for unique names, not for secrets).
pub(crate) fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}

/// The host folders an operation reads and writes.
///
/// Inputs (files or folders) are read-only to the engine; the output folder is the only place it
/// may write. A container sees each input at `/opt/engine/in/<file name>` and the output folder at
/// `/opt/engine/out`; local processes and in-process engines see the host paths themselves. Ask the
/// [`EngineHandle`](crate::EngineHandle) for the path to put in a request
/// ([`engine_path`](crate::EngineHandle::engine_path)).
///
/// ```
/// use weir_engine_runtime::OperationFolders;
///
/// let folders = OperationFolders::new("/data/out").with_input("/data/in/slice-1.parquet");
/// assert_eq!(folders.inputs().len(), 1);
/// assert_eq!(folders.output(), std::path::Path::new("/data/out"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationFolders {
    inputs: Vec<PathBuf>,
    output: PathBuf,
}

impl OperationFolders {
    /// Folders with `output` as the writable output folder and no inputs yet.
    pub fn new(output: impl Into<PathBuf>) -> Self {
        Self {
            inputs: Vec::new(),
            output: output.into(),
        }
    }

    /// Adds a read-only input (a file or a folder).
    #[must_use]
    pub fn with_input(mut self, input: impl Into<PathBuf>) -> Self {
        self.inputs.push(input.into());
        self
    }

    /// The read-only inputs, in the order they were added.
    pub fn inputs(&self) -> &[PathBuf] {
        &self.inputs
    }

    /// The writable output folder.
    pub fn output(&self) -> &Path {
        &self.output
    }
}
