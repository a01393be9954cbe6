//! A polling source's `prepare` steps: what is done to a fetched file before it is read.
//!
//! - **`Decompress`** `Gzip` (one gzip stream, or several concatenated) or `Zip` (the one file of the archive,
//!   or the one whose path inside it matches `subPath`, a glob).
//! - **`Pipe`** runs `command` (the program and its arguments, no shell) with the file on its standard input;
//!   what it writes on its standard output is what is read. It runs in a folder of its own in the pull's
//!   scratch space (its working directory, `HOME` and `TMPDIR`), with an environment of `PATH` and
//!   `LC_ALL=C.UTF-8` only (no credentials or other variables of the calling shell reach it), its standard
//!   error captured (the end of it is quoted when it fails), and it is killed when the pull is interrupted.
//!   A program named by a relative path with a `/` (`./strip.sh`) is the workspace's. It runs with Weir's
//!   own permissions and network: a `Pipe` is code, so pull only manifests you trust, as with kamu.
//!
//! Each step writes a new file in the scratch space; nothing is changed in place, and a failing step
//! ingests nothing. A file that is gzip or zip compressed but read without a `Decompress` step is refused
//! with the step to add, rather than read as text.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncReadExt as _;
use weir_odf::{CompressionFormat, PrepStep, ReadStep};

use super::fetch::Fetched;

/// A prepare step failed; nothing was ingested.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PrepareError {
    /// The file is not in the format the step expects.
    #[error("{file}: {message}")]
    Decompress {
        /// The fetched file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The command of a `Pipe` could not run or failed.
    #[error("{file}: the prepare command `{command}` {message}")]
    Pipe {
        /// The fetched file.
        file: String,
        /// The command, as written.
        command: String,
        /// What happened (its exit status and the end of its standard error).
        message: String,
    },
    /// A compressed file is read without a `Decompress` step.
    #[error(
        "{file} is {format}-compressed, but the source has no step to decompress it: add `prepare: [{{kind: Decompress, format: {format}}}]` to its SetPollingSource"
    )]
    Compressed {
        /// The fetched file.
        file: String,
        /// `Gzip` or `Zip`.
        format: &'static str,
    },
    /// Scratch space could not be written.
    #[error("{file}: preparing it in the scratch folder: {message}")]
    Io {
        /// The fetched file.
        file: String,
        /// The I/O error.
        message: String,
    },
}

/// Runs `steps` on `fetched` in order, each writing a new file under `scratch`; returns the file to read.
/// With no steps, checks that a text format is not read from a compressed file.
pub async fn prepare(
    steps: &[PrepStep],
    read: &ReadStep,
    fetched: Fetched,
    workspace: &Path,
    scratch: &Path,
) -> Result<Fetched, PrepareError> {
    let mut current = fetched;
    for (i, step) in steps.iter().enumerate() {
        let out = scratch.join(format!("prepared-{i}"));
        match step {
            PrepStep::Decompress(d) => {
                let (input, name) = (current.path.clone(), current.name.clone());
                let (format, sub_path) = (d.format, d.sub_path.clone());
                let target = out.clone();
                tokio::task::spawn_blocking(move || {
                    decompress(format, sub_path.as_deref(), &input, &target, &name)
                })
                .await
                .map_err(|e| PrepareError::Io {
                    file: current.name.clone(),
                    message: e.to_string(),
                })??;
            }
            PrepStep::Pipe(p) => {
                let dir = scratch.join(format!("prepare-{i}"));
                pipe(&p.command, &current, &out, &dir, workspace).await?;
            }
        }
        current.size = std::fs::metadata(&out)
            .map_err(|e| PrepareError::Io {
                file: current.name.clone(),
                message: e.to_string(),
            })?
            .len();
        current.path = out;
    }
    if !steps.iter().any(|s| matches!(s, PrepStep::Decompress(_)))
        && matches!(read, ReadStep::Csv(_) | ReadStep::NdJson(_))
        && let Some(format) = compressed(&current.path)
    {
        return Err(PrepareError::Compressed {
            file: current.name,
            format,
        });
    }
    Ok(current)
}

/// `Gzip` or `Zip` when the file starts with that format's magic bytes.
fn compressed(path: &Path) -> Option<&'static str> {
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    match &head[..n] {
        [0x1f, 0x8b, ..] => Some("Gzip"),
        [b'P', b'K', 3, 4] => Some("Zip"),
        _ => None,
    }
}

fn decompress(
    format: CompressionFormat,
    sub_path: Option<&str>,
    input: &Path,
    out: &Path,
    name: &str,
) -> Result<(), PrepareError> {
    let bad = |message: String| PrepareError::Decompress {
        file: name.to_string(),
        message,
    };
    let io = |e: std::io::Error| PrepareError::Io {
        file: name.to_string(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(input).map_err(io)?;
    let mut target = std::fs::File::create(out).map_err(io)?;
    match format {
        CompressionFormat::Gzip => {
            if compressed(input) != Some("Gzip") {
                return Err(bad(
                    "is not a gzip file (`Decompress` with `format: Gzip`)".into()
                ));
            }
            let mut decoder = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file));
            std::io::copy(&mut decoder, &mut target)
                .map_err(|e| bad(format!("gzip data is corrupt: {e}")))?;
        }
        CompressionFormat::Zip => {
            let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file))
                .map_err(|e| bad(format!("is not a readable zip archive: {e}")))?;
            let files: Vec<String> = archive
                .file_names()
                .filter(|n| !n.ends_with('/'))
                .map(str::to_string)
                .collect();
            let chosen: Vec<&String> = match sub_path {
                Some(p) => {
                    let pattern = glob::Pattern::new(p)
                        .map_err(|e| bad(format!("subPath `{p}` is not a glob: {e}")))?;
                    files.iter().filter(|f| pattern.matches(f)).collect()
                }
                None => files.iter().collect(),
            };
            let entry = match chosen.as_slice() {
                [one] => (*one).clone(),
                [] => {
                    return Err(bad(format!(
                        "no file of the archive matches {}: it holds {}",
                        sub_path.map_or("(any)".to_string(), |p| format!("subPath `{p}`")),
                        listed(&files)
                    )));
                }
                many => {
                    return Err(bad(format!(
                        "{} files of the archive match{}: {}; name one with `subPath`",
                        many.len(),
                        sub_path.map_or(String::new(), |p| format!(" subPath `{p}`")),
                        listed(&many.iter().map(|s| (*s).clone()).collect::<Vec<_>>())
                    )));
                }
            };
            let mut reader = archive
                .by_name(&entry)
                .map_err(|e| bad(format!("reading `{entry}` from the archive: {e}")))?;
            std::io::copy(&mut reader, &mut target)
                .map_err(|e| bad(format!("`{entry}` in the archive is corrupt: {e}")))?;
        }
    }
    target.sync_all().map_err(io)?;
    Ok(())
}

fn listed(files: &[String]) -> String {
    const MAX: usize = 10;
    let mut shown: Vec<String> = files.iter().take(MAX).map(|f| format!("`{f}`")).collect();
    if files.len() > MAX {
        shown.push(format!("and {} more", files.len() - MAX));
    }
    if shown.is_empty() {
        "no files".into()
    } else {
        shown.join(", ")
    }
}

/// Bytes of a failing command's standard error quoted in its error.
const STDERR_TAIL: usize = 2000;

async fn pipe(
    command: &[String],
    input: &Fetched,
    out: &Path,
    dir: &Path,
    workspace: &Path,
) -> Result<(), PrepareError> {
    let shown = command.join(" ");
    let fail = |message: String| PrepareError::Pipe {
        file: input.name.clone(),
        command: shown.clone(),
        message,
    };
    let io = |e: std::io::Error| PrepareError::Io {
        file: input.name.clone(),
        message: e.to_string(),
    };
    let Some((program, args)) = command.split_first() else {
        return Err(fail("is empty".into()));
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let program: PathBuf = if program.contains('/') && Path::new(program).is_relative() {
        workspace.join(program)
    } else {
        PathBuf::from(program)
    };
    let stdin = std::fs::File::open(&input.path).map_err(io)?;
    let stdout = std::fs::File::create(out).map_err(io)?;
    let mut child = tokio::process::Command::new(&program)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LC_ALL", "C.UTF-8")
        .env("HOME", dir)
        .env("TMPDIR", dir)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("could not start: {e}")))?;
    let mut stderr = Vec::new();
    if let Some(mut err) = child.stderr.take() {
        // Read to the end (so the command never blocks on a full pipe), keeping the tail.
        let mut buf = [0u8; 8192];
        loop {
            let n = err.read(&mut buf).await.map_err(io)?;
            if n == 0 {
                break;
            }
            stderr.extend_from_slice(&buf[..n]);
            if stderr.len() > 2 * STDERR_TAIL {
                stderr.drain(..stderr.len() - STDERR_TAIL);
            }
        }
    }
    let status = child.wait().await.map_err(io)?;
    if !status.success() {
        let tail = String::from_utf8_lossy(&stderr[stderr.len().saturating_sub(STDERR_TAIL)..])
            .trim()
            .to_string();
        return Err(fail(format!(
            "failed ({status}){}",
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn fetched(dir: &Path, name: &str, bytes: &[u8]) -> Fetched {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        Fetched {
            name: name.into(),
            path,
            size: bytes.len() as u64,
            state: weir_odf::SourceState {
                source_name: "default".into(),
                kind: "odf/etag".into(),
                value: "x".into(),
            },
        }
    }

    fn csv() -> ReadStep {
        ReadStep::Csv(weir_odf::ReadStepCsv::default())
    }

    #[tokio::test]
    async fn gzip_is_decompressed_and_a_gzip_read_as_text_is_refused_with_the_step_to_add() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"a,b\n1,2\n").unwrap();
        let gz = gz.finish().unwrap();
        let f = fetched(dir.path(), "s.csv.gz", &gz);
        let step = PrepStep::Decompress(weir_odf::PrepStepDecompress {
            format: CompressionFormat::Gzip,
            sub_path: None,
        });
        let out = prepare(&[step], &csv(), f.clone(), dir.path(), dir.path())
            .await
            .unwrap();
        assert_eq!(std::fs::read(&out.path).unwrap(), b"a,b\n1,2\n");
        assert_eq!(out.size, 8);
        let err = prepare(&[], &csv(), f, dir.path(), dir.path())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("kind: Decompress, format: Gzip"), "{err}");
    }

    #[tokio::test]
    async fn zip_takes_the_file_sub_path_names_and_lists_the_archive_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default();
        for (name, body) in [("data/a.csv", "x\n1\n"), ("readme.txt", "hi")] {
            w.start_file(name, opts).unwrap();
            w.write_all(body.as_bytes()).unwrap();
        }
        let bytes = w.finish().unwrap().into_inner();
        let f = fetched(dir.path(), "s.zip", &bytes);
        let step = |sub: Option<&str>| {
            PrepStep::Decompress(weir_odf::PrepStepDecompress {
                format: CompressionFormat::Zip,
                sub_path: sub.map(str::to_string),
            })
        };
        let out = prepare(
            &[step(Some("data/*.csv"))],
            &csv(),
            f.clone(),
            dir.path(),
            dir.path(),
        )
        .await
        .unwrap();
        assert_eq!(std::fs::read_to_string(&out.path).unwrap(), "x\n1\n");
        let err = prepare(&[step(None)], &csv(), f, dir.path(), dir.path())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 files of the archive match"), "{err}");
        assert!(err.contains("`readme.txt`"), "{err}");
    }

    #[tokio::test]
    async fn a_pipe_runs_in_its_own_folder_with_a_minimal_environment() {
        let dir = tempfile::tempdir().unwrap();
        let f = fetched(dir.path(), "s.csv", b"preamble\nOBSERVATIONS\na,b\n1,2\n");
        let sed = PrepStep::Pipe(weir_odf::PrepStepPipe {
            command: vec!["sed".into(), "-e".into(), "1,/OBSERVATIONS/d".into()],
        });
        let out = prepare(&[sed], &csv(), f.clone(), dir.path(), dir.path())
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(&out.path).unwrap(), "a,b\n1,2\n");
        // The command sees PATH, LC_ALL, HOME and TMPDIR, none of the calling environment.
        let env = PrepStep::Pipe(weir_odf::PrepStepPipe {
            command: vec![
                "sh".into(),
                "-c".into(),
                "env | cut -d= -f1 | sort; pwd".into(),
            ],
        });
        let out = prepare(&[env], &csv(), f.clone(), dir.path(), dir.path())
            .await
            .unwrap();
        let text = std::fs::read_to_string(&out.path).unwrap();
        for var in ["HOME", "LC_ALL", "PATH", "TMPDIR"] {
            assert!(text.contains(var), "{text}");
        }
        assert!(!text.contains("CARGO"), "{text}");
        assert!(text.trim_end().ends_with("prepare-0"), "{text}");
        let failing = PrepStep::Pipe(weir_odf::PrepStepPipe {
            command: vec!["sh".into(), "-c".into(), "echo broken >&2; exit 3".into()],
        });
        let err = prepare(&[failing], &csv(), f, dir.path(), dir.path())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("exit status: 3") && err.contains("broken"),
            "{err}"
        );
    }
}
