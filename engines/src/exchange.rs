//! Object-store exchange (`engines.<name>.exchange: object-store` in `weir.yaml`): the engine reads its
//! inputs and checkpoint where the storage keeps them and writes its output and new checkpoint to the
//! store itself, so the coordinator stages nothing.
//!
//! Per transaction the engine is given:
//! - `s3://<bucket>/<key>` URLs of the input slices, the inputs' schema slices and the previous
//!   checkpoint, in the storage itself (nothing is copied);
//! - URLs under `<storage>/.exchange/<operation>/` for its output and new checkpoint;
//! - with `assume_role`, temporary credentials from STS AssumeRole whose session policy grants reading
//!   exactly those input objects and writing under that one prefix ([`AccessGrant`]), in its
//!   environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`).
//!
//! The coordinator then reads the output once, as it reads any engine's output: it downloads it for
//! the contract's checks and hashing, then stores it under its hash by a copy inside the store (S3
//! CopyObject: the bytes are not uploaded again), and removes the exchange prefix.
//! What the engine reads is not hashed on its way to the engine (the coordinator does not see those
//! bytes): each input object's size is checked against the chain before the engine is started, and
//! `weir verify` checks every byte.

use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use weir_engine_runtime::{AccessGrant, EngineEnvironment, RuntimeError, StsConfig};

use tokio::io::AsyncWriteExt;

use super::EngineFailure;

pub use weir_manifest::workspace::DataExchange;

/// An engine's object-store exchange settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectExchange {
    /// The role assumed per transaction; `None` gives the engine the coordinator's own environment.
    pub assume_role: Option<String>,
}

/// One input's objects.
#[derive(Debug, Clone)]
pub struct InputObjects {
    /// The slices the engine reads.
    pub data: Vec<ObjectPath>,
    /// The slice whose schema is the input's.
    pub schema: ObjectPath,
    /// The input dataset's data folder (a coarser grant when per-object grants are too long).
    pub data_prefix: ObjectPath,
}

/// A transform's objects: what the engine reads and where it writes.
#[derive(Debug, Clone)]
pub struct JobObjects {
    /// The storage's store.
    pub store: Arc<dyn ObjectStore>,
    /// Its bucket.
    pub bucket: String,
    /// Per job input, in the job's order.
    pub inputs: Vec<InputObjects>,
    /// The previous checkpoint, when there is one.
    pub prev_checkpoint: Option<ObjectPath>,
    /// The dataset's checkpoint folder (a coarser grant for the previous checkpoint).
    pub checkpoint_prefix: ObjectPath,
    /// The operation's own prefix, where the engine writes.
    pub out_prefix: ObjectPath,
}

impl JobObjects {
    /// The URL of an object.
    pub fn url(&self, key: &ObjectPath) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    /// Where the engine writes its output.
    pub fn new_data(&self) -> ObjectPath {
        self.out_prefix.clone().join("data")
    }

    /// Where the engine writes its new checkpoint.
    pub fn new_checkpoint(&self) -> ObjectPath {
        self.out_prefix.clone().join("checkpoint")
    }

    /// Reading every input object and the previous checkpoint, writing under the operation's prefix.
    pub fn grant(&self) -> AccessGrant {
        let mut grant = AccessGrant::new(self.bucket.clone());
        for input in &self.inputs {
            for key in input.data.iter().chain(std::iter::once(&input.schema)) {
                grant = grant.read(key.to_string());
            }
        }
        if let Some(prev) = &self.prev_checkpoint {
            grant = grant.read(prev.to_string());
        }
        grant.write_under(self.out_prefix.to_string())
    }

    /// The same, reading whole folders (each input dataset's data, the dataset's checkpoints), for a
    /// transaction with more objects than a session policy can name.
    pub fn coarse_grant(&self) -> AccessGrant {
        let mut grant = AccessGrant::new(self.bucket.clone());
        for input in &self.inputs {
            grant = grant.read(format!("{}/*", input.data_prefix));
        }
        if self.prev_checkpoint.is_some() {
            grant = grant.read(format!("{}/*", self.checkpoint_prefix));
        }
        grant.write_under(self.out_prefix.to_string())
    }

    /// Downloads what the engine wrote to the local files the contract layer checks (an object the
    /// engine did not write stays absent). The objects stay: the store takes them by a copy inside the
    /// store ([`weir_dataset::chain::store::DatasetStore::put_file_copied`]); whoever holds the run removes
    /// the prefix afterwards ([`Self::remove_outputs`]).
    pub async fn fetch_outputs(&self, data: &Path, checkpoint: &Path) -> Result<(), String> {
        download_if_present(self.store.as_ref(), &self.new_data(), data).await?;
        download_if_present(self.store.as_ref(), &self.new_checkpoint(), checkpoint).await
    }

    /// Removes the operation's prefix: what the engine wrote and the schema files (best effort: a
    /// leftover is logged, and only ever under `.exchange/`).
    pub async fn remove_outputs(&self) {
        let listed: Vec<_> = self.store.list(Some(&self.out_prefix)).collect().await;
        for object in listed {
            let key = match object {
                Ok(meta) => meta.location,
                Err(e) => {
                    tracing::warn!(prefix = %self.url(&self.out_prefix), error = %e, "could not list an engine's exchange objects");
                    continue;
                }
            };
            match self.store.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    tracing::warn!(object = %self.url(&key), error = %e, "could not remove an engine's exchange object")
                }
            }
        }
    }

    /// Checks that every input object is there with the size the chain records, before an engine is
    /// started on it.
    pub async fn check_inputs(&self, sizes: &[(ObjectPath, u64)]) -> Result<(), String> {
        for (key, size) in sizes {
            let meta = self
                .store
                .head(key)
                .await
                .map_err(|e| format!("{}: {e}", self.url(key)))?;
            if meta.size != *size {
                return Err(format!(
                    "{} is {} bytes long, the chain records {size}",
                    self.url(key),
                    meta.size
                ));
            }
        }
        Ok(())
    }
}

async fn download_if_present(
    store: &dyn ObjectStore,
    key: &ObjectPath,
    to: &Path,
) -> Result<(), String> {
    let mut stream = match store.get(key).await {
        Ok(result) => result.into_stream(),
        Err(object_store::Error::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(format!("cannot read {key}: {e}")),
    };
    if let Some(parent) = to.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let mut file = tokio::fs::File::create(to)
        .await
        .map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("cannot read {key}: {e}"))?;
        file.write_all(&chunk)
            .await
            .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    file.flush()
        .await
        .map_err(|e| format!("cannot write {}: {e}", to.display()))
}

impl ObjectExchange {
    /// The environment the engine runs this job with: temporary credentials scoped to the job's objects
    /// when a role is configured, nothing of its own otherwise (a process engine then inherits the
    /// coordinator's `AWS_*` variables, a warning says so once per operation).
    pub async fn environment(
        &self,
        engine: &str,
        objects: &JobObjects,
        operation: &str,
    ) -> Result<EngineEnvironment, EngineFailure> {
        let Some(role) = &self.assume_role else {
            tracing::warn!(
                engine,
                "`exchange: object-store` without `assume_role`: the engine runs with the coordinator's own store credentials, not ones scoped to this transaction"
            );
            return Ok(EngineEnvironment::default());
        };
        let failed = |e: RuntimeError| EngineFailure::Internal {
            engine: engine.to_owned(),
            message: format!("cannot get credentials scoped to the transaction: {e}"),
        };
        let sts = sts_config(role);
        let session = session_name(operation);
        let credentials = match sts.assume_role(&session, &objects.grant()).await {
            Err(RuntimeError::SessionPolicyTooLarge { .. }) => {
                tracing::debug!(
                    engine,
                    "the transaction's objects do not fit a session policy: granting their folders"
                );
                sts.assume_role(&session, &objects.coarse_grant())
                    .await
                    .map_err(failed)?
            }
            other => other.map_err(failed)?,
        };
        tracing::debug!(engine, role = %role, session = %session, expires = %credentials.expiration, "assumed a role scoped to the transaction");
        Ok(credentials.environment().into_iter().collect())
    }
}

/// STS as the environment configures it for the storage: `AWS_ENDPOINT_URL_STS`, else the storage's
/// own endpoint (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT`: S3-compatible servers serve STS there), else AWS's
/// regional STS; region `AWS_REGION` (or `AWS_DEFAULT_REGION`, else `us-east-1`); the coordinator's
/// own credentials from the environment sign the call.
fn sts_config(role: &str) -> StsConfig {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let region = var("AWS_REGION")
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".to_owned());
    let endpoint = var("AWS_ENDPOINT_URL_STS")
        .or_else(|| var("AWS_ENDPOINT_URL"))
        .or_else(|| var("AWS_ENDPOINT"))
        .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
    StsConfig::new(endpoint, role).with_region(region)
}

/// An STS session name from an operation id (`[\w+=,.@-]{2,64}`).
fn session_name(operation: &str) -> String {
    let cleaned: String = operation
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "+=,.@-_".contains(*c))
        .take(58)
        .collect();
    format!("weir-{cleaned}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn objects() -> JobObjects {
        JobObjects {
            store: Arc::new(InMemory::new()),
            bucket: "lake".into(),
            inputs: vec![InputObjects {
                data: vec![
                    ObjectPath::from("ws/a/data/f1"),
                    ObjectPath::from("ws/a/data/f2"),
                ],
                schema: ObjectPath::from("ws/a/data/f1"),
                data_prefix: ObjectPath::from("ws/a/data"),
            }],
            prev_checkpoint: Some(ObjectPath::from("ws/b/checkpoints/c1")),
            checkpoint_prefix: ObjectPath::from("ws/b/checkpoints"),
            out_prefix: ObjectPath::from("ws/.exchange/op1"),
        }
    }

    #[test]
    fn urls_name_the_bucket_and_key() {
        let o = objects();
        assert_eq!(o.url(&o.new_data()), "s3://lake/ws/.exchange/op1/data");
        assert_eq!(
            o.url(&o.new_checkpoint()),
            "s3://lake/ws/.exchange/op1/checkpoint"
        );
    }

    #[test]
    fn the_grant_names_every_object_read_and_the_one_prefix_written() {
        let policy: serde_json::Value =
            serde_json::from_str(&objects().grant().session_policy().unwrap()).unwrap();
        let text = policy.to_string();
        for resource in [
            "arn:aws:s3:::lake/ws/a/data/f1",
            "arn:aws:s3:::lake/ws/a/data/f2",
            "arn:aws:s3:::lake/ws/b/checkpoints/c1",
            "arn:aws:s3:::lake/ws/.exchange/op1/*",
        ] {
            assert!(text.contains(resource), "{resource} missing from {text}");
        }
        assert!(!text.contains("lake/ws/a/data/*"), "{text}");
        let coarse = objects().coarse_grant().session_policy().unwrap();
        assert!(coarse.contains("arn:aws:s3:::lake/ws/a/data/*"), "{coarse}");
    }

    #[tokio::test]
    async fn outputs_are_fetched_and_kept_until_removed_and_absent_ones_stay_absent() {
        let o = objects();
        o.store.put(&o.new_data(), "rows".into()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (data, checkpoint) = (
            dir.path().join("out/data"),
            dir.path().join("out/checkpoint"),
        );
        o.fetch_outputs(&data, &checkpoint).await.unwrap();
        assert_eq!(std::fs::read(&data).unwrap(), b"rows");
        assert!(!checkpoint.exists());
        assert!(
            o.store.head(&o.new_data()).await.is_ok(),
            "kept for the store's copy"
        );
        o.remove_outputs().await;
        assert!(matches!(
            o.store.head(&o.new_data()).await,
            Err(object_store::Error::NotFound { .. })
        ));
    }

    #[tokio::test]
    async fn an_input_of_another_size_than_the_chain_records_is_refused() {
        let o = objects();
        let key = ObjectPath::from("ws/a/data/f1");
        o.store.put(&key, "four".into()).await.unwrap();
        assert!(o.check_inputs(&[(key.clone(), 4)]).await.is_ok());
        let error = o.check_inputs(&[(key, 5)]).await.unwrap_err();
        assert!(
            error.contains("4 bytes long, the chain records 5"),
            "{error}"
        );
    }

    #[test]
    fn session_names_keep_to_the_characters_sts_allows() {
        assert_eq!(session_name("op:1/2"), "weir-op12");
        assert!(session_name(&"x".repeat(100)).len() <= 64);
    }
}
