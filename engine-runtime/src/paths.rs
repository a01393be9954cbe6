//! Where an engine sees the operation's files: the host paths themselves (processes, in-process
//! engines) or the folders mounted into a container. Pure: no file system access.

use std::path::{Component, Path, PathBuf};

use crate::error::RuntimeError;
use crate::operation::OperationFolders;

/// Where a container sees the operation's inputs: `/opt/engine/in/<file name>` (the layout ODF
/// coordinators use).
pub const CONTAINER_INPUT_DIR: &str = "/opt/engine/in";
/// Where a container sees the operation's output folder.
pub const CONTAINER_OUTPUT_DIR: &str = "/opt/engine/out";

/// One bind mount: a host path and where the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub(crate) host: PathBuf,
    pub(crate) engine: PathBuf,
    pub(crate) writable: bool,
}

/// Translates host paths into the paths an engine sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathMapping {
    /// The engine sees the host's file system (local process, in-process engine).
    Identity,
    /// The engine sees only these mounts (container).
    Mounts(Vec<Mount>),
}

impl PathMapping {
    /// The container layout for `folders`: inputs read-only under [`CONTAINER_INPUT_DIR`] by file
    /// name, the output folder writable at [`CONTAINER_OUTPUT_DIR`].
    pub(crate) fn container(folders: &OperationFolders) -> Result<Self, RuntimeError> {
        let mut mounts = Vec::with_capacity(folders.inputs().len() + 1);
        for input in folders.inputs() {
            let host = absolute(input)?;
            let name = host
                .file_name()
                .ok_or_else(|| RuntimeError::PathNotMountable { path: host.clone() })?;
            let engine = Path::new(CONTAINER_INPUT_DIR).join(name);
            if mounts.iter().any(|m: &Mount| m.engine == engine) {
                return Err(RuntimeError::InputNameClash {
                    name: name.to_string_lossy().into_owned(),
                });
            }
            mounts.push(Mount {
                host,
                engine,
                writable: false,
            });
        }
        mounts.push(Mount {
            host: absolute(folders.output())?,
            engine: PathBuf::from(CONTAINER_OUTPUT_DIR),
            writable: true,
        });
        Ok(Self::Mounts(mounts))
    }

    /// The mounts a container needs (none for [`PathMapping::Identity`]).
    pub(crate) fn mounts(&self) -> &[Mount] {
        match self {
            Self::Identity => &[],
            Self::Mounts(mounts) => mounts,
        }
    }

    /// The path the engine sees for `host`, which must lie inside one of the mounts.
    pub(crate) fn engine_path(&self, host: &Path) -> Result<PathBuf, RuntimeError> {
        match self {
            Self::Identity => Ok(host.to_path_buf()),
            Self::Mounts(mounts) => {
                let host = absolute(host)?;
                mounts
                    .iter()
                    .find_map(|m| {
                        host.strip_prefix(&m.host).ok().map(|rest| {
                            if rest.as_os_str().is_empty() {
                                m.engine.clone()
                            } else {
                                m.engine.join(rest)
                            }
                        })
                    })
                    .ok_or(RuntimeError::PathNotMounted { path: host })
            }
        }
    }
}

/// `path` made absolute and lexically normalised (`.` and `..` removed) without touching the file
/// system, so that a mount cannot be escaped with `..`.
fn absolute(path: &Path) -> Result<PathBuf, RuntimeError> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| RuntimeError::Io {
                action: "read the current directory",
                path: path.to_path_buf(),
                source,
            })?
            .join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folders() -> OperationFolders {
        OperationFolders::new("/host/out")
            .with_input("/host/in/a.parquet")
            .with_input("/host/ckpt/")
    }

    #[test]
    fn container_layout_mounts_inputs_read_only_by_name_and_output_writable() {
        let mapping = PathMapping::container(&folders()).unwrap();
        let mounts = mapping.mounts();
        assert_eq!(mounts.len(), 3);
        assert_eq!(mounts[0].engine, Path::new("/opt/engine/in/a.parquet"));
        assert!(!mounts[0].writable);
        assert_eq!(mounts[1].engine, Path::new("/opt/engine/in/ckpt"));
        assert!(!mounts[1].writable);
        assert_eq!(mounts[2].host, Path::new("/host/out"));
        assert_eq!(mounts[2].engine, Path::new("/opt/engine/out"));
        assert!(mounts[2].writable);
    }

    #[test]
    fn host_paths_inside_mounts_translate_to_container_paths() {
        let mapping = PathMapping::container(&folders()).unwrap();
        assert_eq!(
            mapping
                .engine_path(Path::new("/host/out/data.parquet"))
                .unwrap(),
            Path::new("/opt/engine/out/data.parquet")
        );
        assert_eq!(
            mapping
                .engine_path(Path::new("/host/in/a.parquet"))
                .unwrap(),
            Path::new("/opt/engine/in/a.parquet")
        );
        assert_eq!(
            mapping.engine_path(Path::new("/host/ckpt/x/y")).unwrap(),
            Path::new("/opt/engine/in/ckpt/x/y")
        );
    }

    #[test]
    fn paths_outside_every_mount_are_refused_even_through_dot_dot() {
        let mapping = PathMapping::container(&folders()).unwrap();
        assert!(matches!(
            mapping.engine_path(Path::new("/etc/passwd")),
            Err(RuntimeError::PathNotMounted { .. })
        ));
        assert!(matches!(
            mapping.engine_path(Path::new("/host/out/../secret")),
            Err(RuntimeError::PathNotMounted { .. })
        ));
    }

    #[test]
    fn two_inputs_with_the_same_file_name_clash() {
        let folders = OperationFolders::new("/o")
            .with_input("/a/x.parquet")
            .with_input("/b/x.parquet");
        assert!(matches!(
            PathMapping::container(&folders),
            Err(RuntimeError::InputNameClash { name }) if name == "x.parquet"
        ));
    }

    #[test]
    fn identity_mapping_keeps_host_paths() {
        assert_eq!(
            PathMapping::Identity
                .engine_path(Path::new("/anything"))
                .unwrap(),
            Path::new("/anything")
        );
    }
}
