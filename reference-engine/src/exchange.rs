//! Object-store exchange: a request may name `s3://bucket/key` URLs where it usually names local
//! paths, for its inputs, its checkpoints and its outputs.
//!
//! - **Inputs** (data files, schema files) are read where they are: DataFusion scans the objects
//!   through an S3 store registered for their bucket ([`register_store`]); nothing is downloaded first.
//! - **The previous checkpoint** is downloaded to the operation's private folder: state is read once,
//!   whole, before any record.
//! - **The output and the new checkpoint** are written to that folder and uploaded to their URLs only
//!   once the operation has succeeded ([`Exchange::publish`]), so a failed operation leaves nothing
//!   at its output URLs.
//!
//! The store's endpoint and credentials come from the engine's environment, read per operation
//! (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`: object_store's `AmazonS3Builder::from_env`). A coordinator that starts an
//! engine per operation sets them to credentials scoped to that operation's objects.
//!
//! Local paths are used as they are: a request without URLs runs exactly as before.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::execution::context::SessionContext;
use datafusion::execution::object_store::ObjectStoreUrl;
use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use crate::error::EngineError;
use crate::request::{MigrateQueryRequest, RawQueryRequest, TransformRequest};

/// The URL scheme of objects in an S3-compatible store.
const S3_SCHEME: &str = "s3://";

/// An object named by a request: its bucket and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectUrl {
    /// The whole URL as the request spelled it.
    pub url: String,
    /// The bucket.
    pub bucket: String,
    /// The key inside the bucket.
    pub key: ObjectPath,
}

/// Reads `location` as an object URL: `Ok(None)` for a local path, an error for a URL of a scheme the
/// engine cannot read or an `s3://` URL without a bucket or key.
pub(crate) fn object_url(location: &str) -> Result<Option<ObjectUrl>, EngineError> {
    let Some(rest) = location.strip_prefix(S3_SCHEME) else {
        if let Some((scheme, _)) = location.split_once("://")
            && !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            return Err(EngineError::MalformedRequest {
                reason: format!(
                    "{location}: the engine reads local paths and `s3://` URLs, not `{scheme}://`"
                ),
            });
        }
        return Ok(None);
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() || key.is_empty() {
        return Err(EngineError::MalformedRequest {
            reason: format!("{location}: an object URL is s3://<bucket>/<key>"),
        });
    }
    let key = ObjectPath::parse(key).map_err(|e| EngineError::MalformedRequest {
        reason: format!("{location}: not an object key: {e}"),
    })?;
    Ok(Some(ObjectUrl {
        url: location.to_owned(),
        bucket: bucket.to_owned(),
        key,
    }))
}

/// The store of `bucket`, configured from the environment.
fn store(bucket: &str) -> Result<Arc<dyn ObjectStore>, EngineError> {
    AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()
        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        .map_err(|e| EngineError::ObjectStore {
            url: format!("{S3_SCHEME}{bucket}"),
            action: "configure the store of",
            reason: e.to_string(),
        })
}

/// Makes `object`'s bucket readable by `ctx` (once per bucket and session).
pub(crate) fn register_store(ctx: &SessionContext, object: &ObjectUrl) -> Result<(), EngineError> {
    let bucket_url =
        ObjectStoreUrl::parse(format!("{S3_SCHEME}{}", object.bucket)).map_err(|e| {
            EngineError::MalformedRequest {
                reason: format!("{}: {e}", object.url),
            }
        })?;
    if ctx.runtime_env().object_store(&bucket_url).is_err() {
        ctx.register_object_store(bucket_url.as_ref(), store(&object.bucket)?);
    }
    Ok(())
}

/// Checks an input object's Parquet magic bytes and footer length before any reader sees it (as
/// `inputs::check_parquet_footer` does for local files), with two small reads.
pub(crate) async fn check_parquet_footer(object: &ObjectUrl) -> Result<(), String> {
    let store = store(&object.bucket).map_err(|e| e.to_string())?;
    let meta = store
        .head(&object.key)
        .await
        .map_err(|e| format!("cannot read {}: {e}", object.url))?;
    let length = meta.size;
    if length < 12 {
        return Err(format!(
            "the object is {length} bytes long, too short for Parquet"
        ));
    }
    let head = store
        .get_range(&object.key, 0..4)
        .await
        .map_err(|e| format!("cannot read {}: {e}", object.url))?;
    let tail = store
        .get_range(&object.key, length - 8..length)
        .await
        .map_err(|e| format!("cannot read {}: {e}", object.url))?;
    if head.as_ref() != b"PAR1" || tail.len() != 8 || &tail[4..] != b"PAR1" {
        return Err("the object does not start and end with the Parquet magic bytes".to_owned());
    }
    let metadata_length = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if metadata_length + 12 > length {
        return Err(format!(
            "the footer claims {metadata_length} bytes of metadata in an object of {length} bytes"
        ));
    }
    Ok(())
}

/// What one operation moves between its private folder and object URLs.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    /// The private folder, made on first need.
    dir: Option<tempfile::TempDir>,
    /// Files to upload after success: `(local file, its URL)`.
    uploads: Vec<(PathBuf, ObjectUrl)>,
    /// What the folder is for, in errors.
    operation: &'static str,
}

impl Exchange {
    fn new(operation: &'static str) -> Self {
        Self {
            operation,
            ..Self::default()
        }
    }

    fn dir(&mut self) -> Result<&Path, EngineError> {
        let dir = match &mut self.dir {
            Some(dir) => dir,
            slot @ None => {
                let dir = tempfile::Builder::new()
                    .prefix("weir-engine-exchange-")
                    .tempdir()
                    .map_err(|e| EngineError::ObjectStore {
                        url: String::new(),
                        action: "create a private folder for",
                        reason: format!("{}: {e}", self.operation),
                    })?;
                slot.insert(dir)
            }
        };
        Ok(dir.path())
    }

    /// A local path for an output `location`: itself when local, else a file of the private folder
    /// that [`Self::publish`] uploads.
    fn output(&mut self, location: &str, name: &str) -> Result<String, EngineError> {
        let Some(object) = object_url(location)? else {
            return Ok(location.to_owned());
        };
        let local = self.dir()?.join(name);
        let spelled = local.display().to_string();
        self.uploads.push((local, object));
        Ok(spelled)
    }

    /// A local path for an input `location` read whole by the engine itself (a checkpoint): itself
    /// when local, else the object downloaded to the private folder.
    async fn download(&mut self, location: &str, name: &str) -> Result<String, EngineError> {
        let Some(object) = object_url(location)? else {
            return Ok(location.to_owned());
        };
        let local = self.dir()?.join(name);
        let failed = |action: &'static str, reason: String| EngineError::CheckpointRead {
            path: PathBuf::from(&object.url),
            reason: format!("cannot {action}: {reason}"),
        };
        let store = store(&object.bucket)?;
        let mut stream = store
            .get(&object.key)
            .await
            .map_err(|e| failed("download it", e.to_string()))?
            .into_stream();
        let mut file = tokio::fs::File::create(&local)
            .await
            .map_err(|e| failed("create its local copy", e.to_string()))?;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| failed("download it", e.to_string()))?;
            file.write_all(&chunk)
                .await
                .map_err(|e| failed("write its local copy", e.to_string()))?;
        }
        file.flush()
            .await
            .map_err(|e| failed("write its local copy", e.to_string()))?;
        tracing::debug!(url = %object.url, local = %local.display(), "downloaded a checkpoint");
        Ok(local.display().to_string())
    }

    /// The transform request with its checkpoints and outputs made local.
    pub(crate) async fn for_transform(
        request: &TransformRequest,
    ) -> Result<(Self, TransformRequest), EngineError> {
        let mut local = request.clone();
        let exchange = Self::stateful(
            "an ExecuteTransform",
            &mut local.prev_checkpoint_path,
            &mut local.new_checkpoint_path,
            &mut local.new_data_path,
        )
        .await?;
        Ok((exchange, local))
    }

    /// The migrate request with its checkpoints and outputs made local.
    pub(crate) async fn for_migrate(
        request: &MigrateQueryRequest,
    ) -> Result<(Self, MigrateQueryRequest), EngineError> {
        let mut local = request.clone();
        let exchange = Self::stateful(
            "a MigrateQuery",
            &mut local.prev_checkpoint_path,
            &mut local.new_checkpoint_path,
            &mut local.new_data_path,
        )
        .await?;
        Ok((exchange, local))
    }

    /// Makes an operation's previous checkpoint, new checkpoint and output local, in place.
    async fn stateful(
        operation: &'static str,
        prev_checkpoint: &mut Option<String>,
        new_checkpoint: &mut String,
        new_data: &mut String,
    ) -> Result<Self, EngineError> {
        let mut exchange = Self::new(operation);
        if let Some(prev) = prev_checkpoint.as_mut() {
            *prev = exchange.download(prev, "prev-checkpoint").await?;
        }
        *new_checkpoint = exchange.output(new_checkpoint, "checkpoint")?;
        *new_data = exchange.output(new_data, "data")?;
        Ok(exchange)
    }

    /// The raw query request with its output made local.
    pub(crate) fn for_raw_query(
        request: &RawQueryRequest,
    ) -> Result<(Self, RawQueryRequest), EngineError> {
        let mut exchange = Self::new("an ExecuteRawQuery");
        let mut local = request.clone();
        local.output_data_path = exchange.output(&request.output_data_path, "data")?;
        Ok((exchange, local))
    }

    /// Uploads every output the operation wrote to its URL (an output it did not write, such as the
    /// data file of a transaction without records, stays absent), then removes the private folder.
    pub(crate) async fn publish(self) -> Result<(), EngineError> {
        for (local, object) in &self.uploads {
            if !local.is_file() {
                continue;
            }
            let failed = |reason: String| EngineError::OutputWrite {
                path: PathBuf::from(&object.url),
                reason: format!("cannot upload it: {reason}"),
            };
            let store = store(&object.bucket)?;
            let mut file = tokio::fs::File::open(local)
                .await
                .map_err(|e| failed(e.to_string()))?;
            // Small files in one PUT, large ones in parts, as object_store's buffered writer decides.
            let mut writer = object_store::buffered::BufWriter::new(store, object.key.clone());
            tokio::io::copy(&mut file, &mut writer)
                .await
                .map_err(|e| failed(e.to_string()))?;
            writer.shutdown().await.map_err(|e| failed(e.to_string()))?;
            tracing::debug!(url = %object.url, "uploaded an output");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_are_not_urls() {
        assert_eq!(object_url("/data/in/slice.parquet").unwrap(), None);
        assert_eq!(object_url("relative/file").unwrap(), None);
    }

    #[test]
    fn s3_urls_name_a_bucket_and_a_key() {
        let object = object_url("s3://lake/datasets/a/data/f1").unwrap().unwrap();
        assert_eq!(object.bucket, "lake");
        assert_eq!(object.key.as_ref(), "datasets/a/data/f1");
    }

    #[test]
    fn other_schemes_and_incomplete_urls_are_rejected_with_the_reason() {
        let other = object_url("gs://lake/key").unwrap_err().to_string();
        assert!(other.contains("not `gs://`"), "{other}");
        let no_key = object_url("s3://lake").unwrap_err().to_string();
        assert!(no_key.contains("s3://<bucket>/<key>"), "{no_key}");
        let no_bucket = object_url("s3:///key").unwrap_err().to_string();
        assert!(no_bucket.contains("s3://<bucket>/<key>"), "{no_bucket}");
    }

    #[tokio::test]
    async fn local_requests_are_left_as_they_are() {
        let request = RawQueryRequest {
            input_data_paths: vec!["/in/a".into()],
            transform: crate::request::Transform::Sql(crate::request::TransformSql::new(
                "datafusion",
                "select 1",
            )),
            output_data_path: "/out/data".into(),
        };
        let (exchange, local) = Exchange::for_raw_query(&request).unwrap();
        assert_eq!(local, request);
        assert!(exchange.uploads.is_empty() && exchange.dir.is_none());
    }
}
