//! Durable writes on a local disk: a file is written to a temporary name in its folder, fsynced, renamed
//! over its final name, and the folder is fsynced, so once [`write()`] returns the file survives a power
//! loss with either its old or its new content, never a torn one. Folders created on the way are fsynced
//! into their parents too.
//!
//! The local store writes every file this way, so by the time a transaction replaces `refs/head` (itself
//! written this way), its data slice, checkpoint and blocks are on disk. Object stores give their own
//! durability guarantee for a completed PUT; this module is for local folders only.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `target` durably, creating its folder (durably) under `root` if needed.
pub fn write(root: &Path, target: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::other("a file path without a folder"))?;
    create_dir_all(root, dir)?;
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::other("a file path without a name"))?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, target)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Copies `src` into `dir` (created durably under `root` if needed) under a temporary name, passing every
/// byte through `tee` on the way (a hasher, say), and fsyncs the copy. Returns the temporary file and the
/// bytes copied; [`rename_into_place`] gives it its final name. On error nothing is left behind.
pub fn copy_to_temp(
    root: &Path,
    dir: &Path,
    src: &Path,
    tee: &mut impl Write,
) -> io::Result<(PathBuf, u64)> {
    create_dir_all(root, dir)?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".incoming.{}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut from = File::open(src)?;
        let mut to = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut copied = 0u64;
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            tee.write_all(&buf[..n])?;
            to.write_all(&buf[..n])?;
            copied += n as u64;
        }
        to.sync_all()?;
        Ok(copied)
    })();
    match result {
        Ok(copied) => Ok((tmp, copied)),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Whether `name` is one of this module's temporary names (`.<name>.<pid>-<n>.tmp`, `.incoming.<pid>-<n>.tmp`).
fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Removes the temporary files a killed writer left in the folders of every dataset under `root`
/// (`datasets/<name>/<folder>/`): a copy into the store or a write that never reached its rename. Only
/// for a writer that holds the workspace lock, so that no temporary file still belongs to a live
/// process. Returns how many were removed.
pub fn remove_stale_temporaries(root: &Path) -> io::Result<usize> {
    let datasets = root.join("datasets");
    let mut removed = 0;
    let entries = match fs::read_dir(&datasets) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    for dataset in entries {
        let dataset = dataset?.path();
        if !dataset.is_dir() {
            continue;
        }
        for folder in fs::read_dir(&dataset)? {
            let folder = folder?.path();
            if !folder.is_dir() {
                continue;
            }
            for file in fs::read_dir(&folder)? {
                let file = file?;
                if file.file_type()?.is_file()
                    && file.file_name().to_str().is_some_and(is_temporary)
                {
                    fs::remove_file(file.path())?;
                    removed += 1;
                }
            }
        }
    }
    Ok(removed)
}

/// Renames a file written by [`copy_to_temp`] to `target` (in the same folder) and fsyncs the folder.
pub fn rename_into_place(tmp: &Path, target: &Path) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::other("a file path without a folder"))?;
    let result = fs::rename(tmp, target).and_then(|()| sync_dir(dir));
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

/// Creates `dir` and its missing ancestors below `root`, fsyncing each new folder's parent so that the
/// new entry itself is durable.
pub fn create_dir_all(root: &Path, dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut cur = dir;
    while !cur.is_dir() {
        missing.push(cur.to_path_buf());
        match cur.parent() {
            Some(p) if p.starts_with(root) || root.starts_with(p) => cur = p,
            _ => break,
        }
    }
    for d in missing.iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => {}
            // Another writer (or a concurrent transaction of this process) made it first.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        if let Some(parent) = d.parent() {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Fsyncs a folder, making the entries created, renamed or removed in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temporaries_are_removed_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("datasets/x/data");
        let src = root.path().join("src");
        fs::write(&src, b"slice").unwrap();
        let (tmp, _) = copy_to_temp(root.path(), &data, &src, &mut io::sink()).unwrap();
        fs::write(data.join("f1620abc"), b"a slice").unwrap();
        fs::create_dir_all(root.path().join("datasets/x/refs")).unwrap();
        fs::write(root.path().join("datasets/x/refs/.head.123-0.tmp"), b"").unwrap();
        fs::write(root.path().join("datasets/x/refs/head"), b"f1620abc").unwrap();
        assert_eq!(remove_stale_temporaries(root.path()).unwrap(), 2);
        assert!(!tmp.exists());
        assert!(data.join("f1620abc").exists());
        assert!(root.path().join("datasets/x/refs/head").exists());
        assert_eq!(remove_stale_temporaries(root.path()).unwrap(), 0);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(remove_stale_temporaries(empty.path()).unwrap(), 0);
    }

    #[test]
    fn write_creates_the_folders_and_replaces_the_file_leaving_no_temporary() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("datasets/x/refs/head");
        write(root.path(), &target, b"one").unwrap();
        write(root.path(), &target, b"two").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        let entries: Vec<_> = fs::read_dir(target.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, vec![std::ffi::OsString::from("head")]);
    }
}
