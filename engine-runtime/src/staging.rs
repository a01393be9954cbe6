//! Data staging with `object_store`: engines only ever see local folders, so remote inputs are
//! downloaded into the folder that gets mounted and outputs are uploaded afterwards. Local data is
//! used in place (bind-mounted), never copied.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::RuntimeError;

/// Files at least this large are uploaded in parts.
pub const MULTIPART_THRESHOLD: u64 = 8 << 20;
/// The part size of multipart uploads (S3's minimum is 5 MiB).
const PART_SIZE: usize = 5 << 20;

/// Where an input or output lives.
///
/// ```
/// use std::sync::Arc;
/// use weir_engine_runtime::DataLocation;
/// use object_store::memory::InMemory;
///
/// let local = DataLocation::local("/data/slices/1.parquet");
/// let memory = DataLocation::store(Arc::new(InMemory::new()), "slices/1.parquet");
/// assert!(local.is_local());
/// assert!(!memory.is_local());
/// assert_eq!(memory.to_string(), "InMemory/slices/1.parquet");
/// ```
#[derive(Clone)]
pub enum DataLocation {
    /// A file or folder on this machine.
    Local(PathBuf),
    /// An object, or every object under a prefix, in an object store (S3-compatible, in-memory...).
    Store {
        /// The store.
        store: Arc<dyn ObjectStore>,
        /// The object's path, or the prefix of a "folder" of objects.
        path: ObjectPath,
    },
}

impl DataLocation {
    /// A local file or folder.
    pub fn local(path: impl Into<PathBuf>) -> Self {
        Self::Local(path.into())
    }

    /// An object or prefix in `store`.
    pub fn store(store: Arc<dyn ObjectStore>, path: impl Into<ObjectPath>) -> Self {
        Self::Store {
            store,
            path: path.into(),
        }
    }

    /// Whether the data is on this machine already.
    pub fn is_local(&self) -> bool {
        matches!(self, Self::Local(_))
    }
}

impl fmt::Display for DataLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local(path) => write!(f, "{}", path.display()),
            Self::Store { store, path } => write!(f, "{store}/{path}"),
        }
    }
}

impl fmt::Debug for DataLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DataLocation({self})")
    }
}

/// Connection settings for an S3-compatible store.
///
/// ```
/// use weir_engine_runtime::S3Config;
///
/// let config = S3Config::new("my-bucket", "http://127.0.0.1:9000").with_credentials("key", "secret");
/// let store = config.build().unwrap();
/// assert!(store.to_string().contains("my-bucket"));
/// ```
#[derive(Clone)]
pub struct S3Config {
    bucket: String,
    endpoint: String,
    region: String,
    credentials: Option<(String, String)>,
    session_token: Option<String>,
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("credentials", &self.credentials.as_ref().map(|_| "<set>"))
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<set>"),
            )
            .finish()
    }
}

impl S3Config {
    /// A bucket at an endpoint (`http://` endpoints are allowed), region `us-east-1`, credentials
    /// from the environment (`AWS_ACCESS_KEY_ID`, ...) unless given.
    pub fn new(bucket: impl Into<String>, endpoint: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            endpoint: endpoint.into(),
            region: "us-east-1".to_owned(),
            credentials: None,
            session_token: None,
        }
    }

    /// Uses this region.
    #[must_use]
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }

    /// Uses these static credentials.
    #[must_use]
    pub fn with_credentials(
        mut self,
        key_id: impl Into<String>,
        secret: impl Into<String>,
    ) -> Self {
        self.credentials = Some((key_id.into(), secret.into()));
        self
    }

    /// Sends this session token with the credentials, as temporary credentials need (e.g. a
    /// [`TemporaryCredentials`](crate::TemporaryCredentials)'s `session_token`).
    #[must_use]
    pub fn with_session_token(mut self, token: impl Into<String>) -> Self {
        self.session_token = Some(token.into());
        self
    }

    /// The store (path-style requests, plain HTTP allowed for local S3 servers).
    pub fn build(&self) -> Result<Arc<dyn ObjectStore>, RuntimeError> {
        let mut builder = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(&self.bucket)
            .with_endpoint(&self.endpoint)
            .with_region(&self.region)
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false);
        if let Some((key, secret)) = &self.credentials {
            builder = builder
                .with_access_key_id(key)
                .with_secret_access_key(secret);
        }
        if let Some(token) = &self.session_token {
            builder = builder.with_token(token);
        }
        builder
            .build()
            .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
            .map_err(|source| RuntimeError::Staging {
                location: format!("s3://{}", self.bucket),
                source,
            })
    }
}

/// One object written by [`StagingArea::publish_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedObject {
    /// Where it went.
    pub path: ObjectPath,
    /// Its size in bytes.
    pub size: u64,
}

/// A private folder for one operation's staged inputs and outputs, deleted when dropped.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use weir_engine_runtime::{DataLocation, StagingArea};
/// use object_store::{ObjectStoreExt, memory::InMemory, path::Path};
///
/// let store = Arc::new(InMemory::new());
/// store.put(&Path::from("in/slice.parquet"), "rows".into()).await.unwrap();
///
/// let area = StagingArea::new().unwrap();
/// // A remote input is downloaded; a local one would be returned as it is.
/// let input = area.stage_input(&DataLocation::store(store.clone(), "in/slice.parquet")).await.unwrap();
/// assert_eq!(std::fs::read(&input).unwrap(), b"rows");
///
/// // The engine writes into the output folder; publishing uploads what it wrote.
/// let destination = DataLocation::store(store.clone(), "out");
/// let out = area.output_dir(&destination).unwrap();
/// std::fs::write(out.join("data.parquet"), b"result").unwrap();
/// let published = area.publish_output(&destination).await.unwrap();
/// assert_eq!(published[0].path, Path::from("out/data.parquet"));
/// # });
/// ```
#[derive(Debug)]
pub struct StagingArea {
    root: tempfile::TempDir,
}

impl StagingArea {
    /// A staging folder under the system's temporary folder.
    pub fn new() -> Result<Self, RuntimeError> {
        Self::new_in(std::env::temp_dir())
    }

    /// A staging folder under `parent` (which the container daemon must be able to bind-mount).
    pub fn new_in(parent: impl AsRef<Path>) -> Result<Self, RuntimeError> {
        let parent = parent.as_ref();
        let root = tempfile::Builder::new()
            .prefix("weir-staging-")
            .tempdir_in(parent)
            .map_err(|source| RuntimeError::Io {
                action: "create a staging folder",
                path: parent.to_path_buf(),
                source,
            })?;
        // Sandboxed engines run as another user: they must be able to enter and read.
        set_mode(root.path(), 0o755)?;
        Ok(Self { root })
    }

    /// The staging folder.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// Makes `input` available as a local path: a local file or folder is returned as it is (the
    /// runtime bind-mounts it, nothing is copied); an object is downloaded to
    /// `<staging>/in/<n>/<its file name>`; a prefix is downloaded as a folder
    /// `<staging>/in/<n>/<last prefix segment>/...` keeping the object paths below the prefix.
    pub async fn stage_input(&self, input: &DataLocation) -> Result<PathBuf, RuntimeError> {
        let (store, path) = match input {
            DataLocation::Local(path) => return Ok(path.clone()),
            DataLocation::Store { store, path } => (store, path),
        };
        let slot = self.fresh_slot("in")?;
        let staging_error = |source| RuntimeError::Staging {
            location: input.to_string(),
            source,
        };
        let leaf = path
            .filename()
            .map(str::to_owned)
            .unwrap_or_else(|| "input".to_owned());
        let target = slot.join(&leaf);
        match store.head(path).await {
            Ok(_) => {
                download(store.as_ref(), path, &target, input).await?;
                tracing::debug!(%input, target = %target.display(), "staged an input object");
                return Ok(target);
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(source) => return Err(staging_error(source)),
        }
        let objects: Vec<_> = store
            .list(Some(path))
            .try_collect()
            .await
            .map_err(staging_error)?;
        if objects.is_empty() {
            return Err(RuntimeError::InputNotFound {
                location: input.to_string(),
            });
        }
        create_dir(&target)?;
        for object in &objects {
            let relative: Vec<_> = object
                .location
                .prefix_match(path)
                .map(|parts| parts.map(|p| p.as_ref().to_owned()).collect())
                .unwrap_or_default();
            let mut file = target.clone();
            file.extend(relative.iter());
            if let Some(parent) = file.parent() {
                create_dir(parent)?;
            }
            download(store.as_ref(), &object.location, &file, input).await?;
        }
        tracing::debug!(%input, objects = objects.len(), target = %target.display(), "staged an input prefix");
        Ok(target)
    }

    /// The folder the engine writes its outputs to for `destination`: a local destination folder
    /// itself (created if missing; nothing will be copied), or `<staging>/out` for a store.
    pub fn output_dir(&self, destination: &DataLocation) -> Result<PathBuf, RuntimeError> {
        let dir = match destination {
            DataLocation::Local(path) => path.clone(),
            DataLocation::Store { .. } => self.root.path().join("out"),
        };
        create_dir(&dir)?;
        Ok(dir)
    }

    /// Uploads every file the engine wrote into [`Self::output_dir`] to `destination`, under the
    /// same relative paths, and returns what was written (nothing for a local destination: the
    /// engine wrote there directly). Objects are created, never overwritten: an existing object is
    /// [`RuntimeError::OutputExists`]. Files of [`MULTIPART_THRESHOLD`] bytes or more go up in parts.
    pub async fn publish_output(
        &self,
        destination: &DataLocation,
    ) -> Result<Vec<PublishedObject>, RuntimeError> {
        let (store, prefix) = match destination {
            DataLocation::Local(_) => return Ok(Vec::new()),
            DataLocation::Store { store, path } => (store, path),
        };
        let out = self.root.path().join("out");
        let mut published = Vec::new();
        for (file, relative) in files_under(&out)? {
            let mut target = prefix.clone();
            for part in &relative {
                target = target.join(part.as_str());
            }
            let size = upload(store.as_ref(), &file, &target, destination).await?;
            published.push(PublishedObject { path: target, size });
        }
        tracing::debug!(%destination, objects = published.len(), "published the outputs");
        Ok(published)
    }

    fn fresh_slot(&self, kind: &str) -> Result<PathBuf, RuntimeError> {
        let base = self.root.path().join(kind);
        create_dir(&base)?;
        let slot = tempfile::Builder::new()
            .prefix("")
            .tempdir_in(&base)
            .map_err(|source| RuntimeError::Io {
                action: "create a staging slot",
                path: base.clone(),
                source,
            })?
            .keep();
        set_mode(&slot, 0o755)?;
        Ok(slot)
    }
}

async fn download(
    store: &dyn ObjectStore,
    path: &ObjectPath,
    target: &Path,
    input: &DataLocation,
) -> Result<(), RuntimeError> {
    let staging_error = |source| RuntimeError::Staging {
        location: input.to_string(),
        source,
    };
    let io_error = |source| RuntimeError::Io {
        action: "write a staged input",
        path: target.to_path_buf(),
        source,
    };
    let mut stream = store.get(path).await.map_err(staging_error)?.into_stream();
    let mut file = tokio::fs::File::create(target).await.map_err(io_error)?;
    while let Some(chunk) = stream.next().await {
        file.write_all(&chunk.map_err(staging_error)?)
            .await
            .map_err(io_error)?;
    }
    file.flush().await.map_err(io_error)?;
    set_mode(target, 0o644)
}

async fn upload(
    store: &dyn ObjectStore,
    file: &Path,
    target: &ObjectPath,
    destination: &DataLocation,
) -> Result<u64, RuntimeError> {
    let io_error = |source| RuntimeError::Io {
        action: "read an output file",
        path: file.to_path_buf(),
        source,
    };
    let staging_error = |source: object_store::Error| match source {
        object_store::Error::AlreadyExists { .. } => RuntimeError::OutputExists {
            location: format!("{destination}/{target}"),
        },
        source => RuntimeError::Staging {
            location: destination.to_string(),
            source,
        },
    };
    let size = tokio::fs::metadata(file).await.map_err(io_error)?.len();
    if size < MULTIPART_THRESHOLD {
        let bytes = tokio::fs::read(file).await.map_err(io_error)?;
        let options = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        store
            .put_opts(target, PutPayload::from(bytes), options)
            .await
            .map_err(staging_error)?;
        return Ok(size);
    }
    // Multipart uploads cannot be conditional: check first, then upload (a racing writer of the
    // same object is reported by the store or overwritten, as the store decides).
    match store.head(target).await {
        Ok(_) => {
            return Err(RuntimeError::OutputExists {
                location: format!("{destination}/{target}"),
            });
        }
        Err(object_store::Error::NotFound { .. }) => {}
        Err(source) => return Err(staging_error(source)),
    }
    let upload = store.put_multipart(target).await.map_err(staging_error)?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    let mut reader = tokio::fs::File::open(file).await.map_err(io_error)?;
    let mut buffer = vec![0u8; PART_SIZE];
    loop {
        let read = reader.read(&mut buffer).await.map_err(io_error)?;
        if read == 0 {
            break;
        }
        if let Err(source) = writer.wait_for_capacity(4).await {
            return Err(staging_error(source));
        }
        writer.write(&buffer[..read]);
    }
    writer.finish().await.map_err(staging_error)?;
    Ok(size)
}

/// Every regular file under `dir` with its path relative to `dir`, in a stable order.
fn files_under(dir: &Path) -> Result<Vec<(PathBuf, Vec<String>)>, RuntimeError> {
    let mut found = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), Vec::<String>::new())];
    while let Some((path, relative)) = stack.pop() {
        let io_error = |source| RuntimeError::Io {
            action: "list the output folder",
            path: path.clone(),
            source,
        };
        let meta = std::fs::symlink_metadata(&path).map_err(io_error)?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(io_error)? {
                let entry = entry.map_err(io_error)?;
                let mut child = relative.clone();
                child.push(entry.file_name().to_string_lossy().into_owned());
                stack.push((entry.path(), child));
            }
        } else if meta.is_file() {
            found.push((path, relative));
        }
    }
    found.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(found)
}

fn create_dir(dir: &Path) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(dir).map_err(|source| RuntimeError::Io {
        action: "create a folder",
        path: dir.to_path_buf(),
        source,
    })
}

fn set_mode(path: &Path, mode: u32) -> Result<(), RuntimeError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        RuntimeError::Io {
            action: "set permissions",
            path: path.to_path_buf(),
            source,
        }
    })
}
