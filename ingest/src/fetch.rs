//! Fetching a `Url` source: its content when it changed since it was last ingested.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::StreamExt as _;

use weir_dataset::progress::{Phase, Progress, Report};
use weir_odf::{FetchStepUrl, Sha3Hasher, SourceState};

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

/// A `Url` source's content, or `None` when it has not changed since it was last ingested (the state
/// holds its hash, or its HTTP validators). The content is copied into `scratch` (streamed, hashed as it is
/// copied), so what is ingested is exactly what the recorded state describes. A `FilesGlob`'s files are
/// read where they are (see [`crate::files_glob`]).
pub async fn fetch_url(
    root: &Path,
    url_step: &FetchStepUrl,
    state: Option<&SourceState>,
    scratch: &Path,
    progress: &Progress,
) -> Result<Option<Fetched>, FetchError> {
    if super::http::is_http(&url_step.url) {
        return super::http::fetch(url_step, state, scratch, progress).await;
    }
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

use object_store::ObjectStoreExt as _;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_url_is_fetched_again_only_when_its_content_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.csv"), "1").unwrap();
        let fetch = FetchStepUrl {
            url: "s.csv".into(),
            event_time: None,
            cache: None,
            headers: None,
        };
        let first = fetch_url(dir.path(), &fetch, None, dir.path(), &Progress::none())
            .await
            .unwrap()
            .unwrap();
        assert!(
            fetch_url(
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
            fetch_url(
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
