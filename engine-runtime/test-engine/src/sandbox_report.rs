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
