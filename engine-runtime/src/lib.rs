//! Runs ODF engines and stages their data (work in progress: the engine runtimes land once
//! `engine-contract`'s client and server do).
//!
//! Available so far: the container sandbox policy, daemon connection and orphan cleanup, image
//! resolution, operation folders and path mapping, and data staging with `object_store`.

// Parts used only by the runtimes that land with engine-contract's client.
#[allow(dead_code)]
mod container {
    pub(crate) mod daemon;
    pub(crate) mod image;
    pub(crate) mod labels;
    pub(crate) mod sandbox;
}
mod endpoint;
#[allow(dead_code)]
mod engine_log;
mod error;
mod operation;
#[allow(dead_code)]
mod ownership;
#[allow(dead_code)]
mod paths;
mod staging;

pub use container::daemon::{DaemonSocket, DockerDaemon};
pub use container::image::{ImageDigest, PullPolicy};
pub use container::sandbox::{ContainerUser, SandboxPolicy};
pub use endpoint::EngineEndpoint;
pub use error::RuntimeError;
pub use operation::{OperationFolders, OperationId};
pub use paths::{CONTAINER_INPUT_DIR, CONTAINER_OUTPUT_DIR};
pub use staging::{DataLocation, MULTIPART_THRESHOLD, PublishedObject, S3Config, StagingArea};
