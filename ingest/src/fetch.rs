//! Fetching: which source file comes next, given where the source left off.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::StreamExt as _;

use odf::{FetchStep, Sha3Hasher, SourceState};
use weir_dataset::progress::{Phase, Progress, Report};

/// Source state kind of a glob: the name of the last file ingested.
pub const STATE_LAST_FILE: &str = "weir/last-file";
/// Source state kind of a URL: the hash of the content ingested.
pub const STATE_ETAG: &str = "odf/etag";

/// A source file to ingest: a local file, read in place or as copied to scratch space.
///
/// Nothing is held in memory: the readers open [`Fetched::path`] and read it a batch at a time.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Its name, for messages.
    pub name: String,
    /// Where its bytes are: the workspace's own file for a glob, a copy in the scratch folder for a URL (so
    /// what is ingested is exactly what the recorded etag hashes, even if the source changes meanwhile).
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The source state once it is ingested.
    pub state: SourceState,
}

/// The source cannot be fetched.
#[derive(Debug, Clone, thiserror::Error)]
#[error("fetching {what}: {message}")]
pub struct FetchError {
    /// The glob, path or URL.
    pub what: String,
    /// Why.
    pub message: String,
}

/// The next file to ingest, or `None` when the source has nothing new. A URL's content is copied into
/// `scratch` (streamed, hashed as it is copied); a glob's files are read where they are.
pub async fn next_pending(
    root: &Path,
    fetch: &FetchStep,
    state: Option<&SourceState>,
    scratch: &Path,
    progress: &Progress,
) -> Result<Option<Fetched>, FetchError> {
    match fetch {
        FetchStep::FilesGlob(glob_step) => {
            let path = &glob_step.path;
            let err = |message: String| FetchError {
                what: path.clone(),
                message,
            };
            // glob drops a leading `./` from what it yields, so a relative root (`--workspace .`)
            // would never prefix the matches: work from the absolute form.
            let root = &std::path::absolute(root).map_err(|e| err(e.to_string()))?;
            let pattern = root.join(path);
            let mut names: Vec<String> = glob::glob(&pattern.to_string_lossy())
                .map_err(|e| err(e.to_string()))?
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .filter_map(|p| {
                    p.strip_prefix(root)
                        .ok()
                        .map(|r| r.to_string_lossy().into_owned())
                })
                .collect();
            names.sort();
            let last = state
                .filter(|s| s.kind == STATE_LAST_FILE)
                .map(|s| s.value.as_str());
            let Some(next) = names
                .into_iter()
                .find(|n| last.is_none_or(|l| n.as_str() > l))
            else {
                return Ok(None);
            };
            let path = root.join(&next);
            let size = tokio::fs::metadata(&path)
                .await
                .map_err(|e| err(format!("{next}: {e}")))?
                .len();
            Ok(Some(Fetched {
                name: next.clone(),
                path,
                size,
                state: SourceState {
                    source_name: "default".into(),
                    kind: STATE_LAST_FILE.into(),
                    value: next,
                },
            }))
        }
        FetchStep::Url(url_step) if super::http::is_http(&url_step.url) => {
            super::http::fetch(url_step, state, scratch, progress).await
        }
        FetchStep::Url(url_step) => {
            let url = &url_step.url;
            let err = |message: String| FetchError {
                what: url.clone(),
                message,
            };
            let copy = scratch.join("source");
            let mut out = std::fs::File::create(&copy).map_err(|e| err(e.to_string()))?;
            let mut hasher = Sha3Hasher::new();
            let mut size = 0u64;
            let mut write = |chunk: &[u8], total: Option<u64>| -> Result<(), FetchError> {
                hasher.update(chunk);
                out.write_all(chunk).map_err(|e| err(e.to_string()))?;
                size += chunk.len() as u64;
                progress.report(Report::new(Phase::Fetch).bytes(size).total_bytes(total));
                Ok(())
            };
            progress.phase(Phase::Fetch);
            // The source's modification time, kept by the copy (`eventTime: FromMetadata`).
            let modified: Option<std::time::SystemTime>;
            if url.contains("://") && !url.starts_with("file://") {
                let parsed = url::Url::parse(url).map_err(|e| err(e.to_string()))?;
                let opts: Vec<(String, String)> = std::env::vars()
                    .filter(|(k, _)| k.starts_with("AWS_"))
                    .map(|(k, v)| (k.to_ascii_lowercase(), v))
                    .collect();
                let (store, path) =
                    object_store::parse_url_opts(&parsed, opts).map_err(|e| err(e.to_string()))?;
                let r = store.get(&path).await.map_err(|e| err(e.to_string()))?;
                let total = Some(r.meta.size);
                modified = Some(r.meta.last_modified.into());
                let mut stream = r.into_stream();
                while let Some(chunk) = stream.next().await {
                    write(&chunk.map_err(|e| err(e.to_string()))?, total)?;
                }
            } else {
                let p = url.strip_prefix("file://").unwrap_or(url);
                let mut file = tokio::fs::File::open(root.join(p))
                    .await
                    .map_err(|e| err(e.to_string()))?;
                let meta = file.metadata().await.ok();
                let total = meta.as_ref().map(std::fs::Metadata::len);
                modified = meta.and_then(|m| m.modified().ok());
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    use tokio::io::AsyncReadExt as _;
                    let n = file.read(&mut buf).await.map_err(|e| err(e.to_string()))?;
                    if n == 0 {
                        break;
                    }
                    write(&buf[..n], total)?;
                }
            }
            if let Some(t) = modified {
                out.set_modified(t).map_err(|e| err(e.to_string()))?;
            }
            out.sync_all().map_err(|e| err(e.to_string()))?;
            progress.finish(
                Report::new(Phase::Fetch)
                    .bytes(size)
                    .total_bytes(Some(size)),
            );
            let etag = hasher.finish().to_string();
            if state.is_some_and(|s| s.kind == STATE_ETAG && s.value == etag) {
                return Ok(None);
            }
            Ok(Some(Fetched {
                name: url.clone(),
                path: copy,
                size,
                state: SourceState {
                    source_name: "default".into(),
                    kind: STATE_ETAG.into(),
                    value: etag,
                },
            }))
        }
        other => Err(FetchError {
            what: other.kind_name().to_owned(),
            message: "this fetch step is not supported by Weir".into(),
        }),
    }
}

use object_store::ObjectStoreExt as _;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_glob_yields_files_in_name_order_after_the_last_ingested() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("in")).unwrap();
        for n in ["b.csv", "a.csv", "c.txt"] {
            std::fs::write(dir.path().join("in").join(n), n).unwrap();
        }
        let fetch = FetchStep::FilesGlob(odf::FetchStepFilesGlob {
            path: "in/*.csv".into(),
            event_time: None,
            cache: None,
            order: None,
        });
        let first = next_pending(dir.path(), &fetch, None, dir.path(), &Progress::none())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.name, "in/a.csv");
        let second = next_pending(
            dir.path(),
            &fetch,
            Some(&first.state),
            dir.path(),
            &Progress::none(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(second.name, "in/b.csv");
        assert!(
            next_pending(
                dir.path(),
                &fetch,
                Some(&second.state),
                dir.path(),
                &Progress::none()
            )
            .await
            .unwrap()
            .is_none()
        );
    }

    #[tokio::test]
    async fn a_glob_under_a_relative_root_starting_with_dot_finds_its_files() {
        // Tests run in the crate's folder: a temporary workspace inside it, named `./.tmpXXXX`.
        let dir = tempfile::tempdir_in(".").unwrap();
        let root = Path::new(".").join(dir.path().file_name().unwrap());
        std::fs::create_dir(root.join("in")).unwrap();
        std::fs::write(root.join("in").join("a.csv"), "a").unwrap();
        let fetch = FetchStep::FilesGlob(odf::FetchStepFilesGlob {
            path: "in/*.csv".into(),
            event_time: None,
            cache: None,
            order: None,
        });
        let first = next_pending(&root, &fetch, None, &root, &Progress::none())
            .await
            .unwrap();
        assert_eq!(first.map(|f| f.name).as_deref(), Some("in/a.csv"));
    }

    #[tokio::test]
    async fn a_url_is_fetched_again_only_when_its_content_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.csv"), "1").unwrap();
        let fetch = FetchStep::Url(odf::FetchStepUrl {
            url: "s.csv".into(),
            event_time: None,
            cache: None,
            headers: None,
        });
        let first = next_pending(dir.path(), &fetch, None, dir.path(), &Progress::none())
            .await
            .unwrap()
            .unwrap();
        assert!(
            next_pending(
                dir.path(),
                &fetch,
                Some(&first.state),
                dir.path(),
                &Progress::none()
            )
            .await
            .unwrap()
            .is_none()
        );
        std::fs::write(dir.path().join("s.csv"), "2").unwrap();
        assert!(
            next_pending(
                dir.path(),
                &fetch,
                Some(&first.state),
                dir.path(),
                &Progress::none()
            )
            .await
            .unwrap()
            .is_some()
        );
    }
}
