//! What the engine can see and do from inside its sandbox, reported as JSON. Nothing here sends
//! network traffic: interfaces and routes are read from `/proc` and `/sys`.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The report the `sandbox-report` hook writes to the output path.
#[derive(Debug, Serialize)]
pub struct SandboxReport {
    pub uid: u32,
    pub gid: u32,
    /// Network interfaces of the engine's network namespace.
    pub interfaces: Vec<String>,
    /// Whether an IPv4 or IPv6 default route exists.
    pub default_route: bool,
    /// One entry per place the engine tried to write to.
    pub writes: Vec<WriteAttempt>,
    /// Every place in the whole file tree the engine could write to.
    pub walk: WalkReport,
}

/// What a walk of the whole file tree from `/` found writable. Symbolic links are never followed.
#[derive(Debug, Default, Serialize)]
pub struct WalkReport {
    /// Folders the engine could create a file in (the file was removed again).
    pub writable_dirs: Vec<PathBuf>,
    /// Existing regular files the engine could open for writing (nothing was written).
    pub writable_files: Vec<PathBuf>,
    /// Character devices the engine could open for writing (`/dev/null` and the like).
    pub writable_devices: Vec<PathBuf>,
    /// How many folders were probed.
    pub dirs_probed: usize,
    /// How many files and devices were probed.
    pub files_probed: usize,
    /// Folders that could not be listed, with why.
    pub unlisted: Vec<(PathBuf, String)>,
}

/// At most this many entries are probed (a safety net; a container has far fewer).
const WALK_LIMIT: usize = 500_000;

/// Walks the file tree from `/`: tries to create a file in every folder, and to open every regular
/// file and character device for writing. Writes nothing into existing files; removes every file
/// it created.
pub fn walk() -> WalkReport {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut report = WalkReport::default();
    let probe_name = format!(".weir-walk-probe-{}", std::process::id());
    let mut stack = vec![PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        if report.dirs_probed + report.files_probed > WALK_LIMIT {
            break;
        }
        report.dirs_probed += 1;
        let probe = dir.join(&probe_name);
        if std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .is_ok()
        {
            let _ = std::fs::remove_file(&probe);
            report.writable_dirs.push(dir.clone());
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) => {
                report.unlisted.push((dir, error.to_string()));
                continue;
            }
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            // `lstat`, not the folder entry's type: a path the daemon masks has a device mounted
            // over it (`/proc/keys` is `/dev/null`).
            let Ok(kind) = std::fs::symlink_metadata(&path).map(|m| m.file_type()) else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() || kind.is_char_device() {
                // Opening the pseudo-terminal multiplexer would allocate a terminal.
                if path.file_name().is_some_and(|n| n == "ptmx") {
                    continue;
                }
                report.files_probed += 1;
                let opened = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
                    .open(&path)
                    .is_ok();
                if opened {
                    if kind.is_file() {
                        report.writable_files.push(path);
                    } else {
                        report.writable_devices.push(path);
                    }
                }
            }
        }
    }
    report.writable_dirs.sort();
    report.writable_files.sort();
    report.writable_devices.sort();
    report
}

/// The outcome of trying to create a file.
#[derive(Debug, Serialize)]
pub struct WriteAttempt {
    pub path: PathBuf,
    pub succeeded: bool,
    pub error: Option<String>,
}

/// Builds the report. `inputs` are the request's input paths and `output` its output path: the
/// engine tries to write into `/`, `/tmp`, next to and into each input, next to the output folder
/// (outside it), and inside the output folder (which must work).
pub fn report(inputs: &[PathBuf], output: &Path) -> SandboxReport {
    let (uid, gid) = ids();
    let mut targets = vec![
        PathBuf::from("/weir-probe"),
        PathBuf::from("/tmp/weir-probe"),
    ];
    for input in inputs {
        targets.push(input.clone());
        if let Some(dir) = input.parent() {
            targets.push(dir.join("weir-probe"));
        }
    }
    if let Some(out_dir) = output.parent() {
        if let Some(outside) = out_dir.parent() {
            targets.push(outside.join("weir-probe"));
        }
        targets.push(out_dir.join("weir-probe"));
    }
    let writes = targets.into_iter().map(try_write).collect();
    SandboxReport {
        uid,
        gid,
        interfaces: interfaces(),
        default_route: default_route(),
        writes,
        walk: walk(),
    }
}

fn try_write(path: PathBuf) -> WriteAttempt {
    let result = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    match result {
        Ok(_) => {
            // Leave no probe behind in the places that allowed it (the output folder), but never
            // remove an input that happened to be opened.
            if path.file_name().is_some_and(|n| n == "weir-probe") {
                let _ = std::fs::remove_file(&path);
            }
            WriteAttempt {
                path,
                succeeded: true,
                error: None,
            }
        }
        Err(e) => WriteAttempt {
            path,
            succeeded: false,
            error: Some(e.to_string()),
        },
    }
}

fn ids() -> (u32, u32) {
    // SAFETY: getuid/getgid take no arguments and cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}

fn interfaces() -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir("/sys/class/net") {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => std::fs::read_to_string("/proc/net/dev")
            .unwrap_or_default()
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect(),
    };
    names.sort();
    names
}

fn default_route() -> bool {
    let v4 = std::fs::read_to_string("/proc/net/route")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().nth(1) == Some("00000000"));
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            let mut fields = l.split_whitespace();
            let dest = fields.next();
            let prefix = fields.next();
            let device = l.split_whitespace().last();
            dest == Some("00000000000000000000000000000000")
                && prefix == Some("00")
                && device != Some("lo")
        });
    v4 || v6
}
