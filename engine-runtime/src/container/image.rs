//! Image references resolved to immutable ids before use.

use bollard::Docker;
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures::TryStreamExt;

use crate::error::RuntimeError;

/// Whether the runtime may pull an image that is not present locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PullPolicy {
    /// Never pull: an absent image is [`RuntimeError::ImageNotFound`]. The default, because a pull
    /// of a name without a registry host goes to a public registry.
    #[default]
    Never,
    /// Pull from the image's registry when it is absent locally.
    IfAbsent,
}

/// The immutable identity of the image an engine ran from, for the coordinator to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageDigest {
    /// The reference it was resolved from, e.g. `weir/reference-engine:dev`.
    pub reference: String,
    /// The image id, `sha256:<hex>` (the digest of the image configuration, which pins every
    /// layer). Containers are created from this id, never from the tag.
    pub id: String,
    /// Registry digests (`name@sha256:<hex>` of the manifest) when the image came from or went to a
    /// registry; empty for images built locally.
    pub repo_digests: Vec<String>,
}

/// Resolves `reference` to its id and registry digests, pulling first if allowed and needed.
pub(crate) async fn resolve(
    docker: &Docker,
    reference: &str,
    pull: PullPolicy,
) -> Result<ImageDigest, RuntimeError> {
    match inspect(docker, reference).await? {
        Some(found) => Ok(found),
        None if pull == PullPolicy::IfAbsent => {
            tracing::info!(image = reference, "pulling an absent engine image");
            let options = CreateImageOptionsBuilder::default()
                .from_image(reference)
                .build();
            docker
                .create_image(Some(options), None, None)
                .try_for_each(|_| async { Ok(()) })
                .await
                .map_err(|source| RuntimeError::ImagePullFailed {
                    image: reference.to_owned(),
                    source,
                })?;
            inspect(docker, reference)
                .await?
                .ok_or_else(|| RuntimeError::ImageNotFound {
                    image: reference.to_owned(),
                })
        }
        None => Err(RuntimeError::ImageNotFound {
            image: reference.to_owned(),
        }),
    }
}

async fn inspect(docker: &Docker, reference: &str) -> Result<Option<ImageDigest>, RuntimeError> {
    match docker.inspect_image(reference).await {
        Ok(image) => {
            let id = image.id.ok_or_else(|| RuntimeError::ImageWithoutId {
                image: reference.to_owned(),
            })?;
            Ok(Some(ImageDigest {
                reference: reference.to_owned(),
                id,
                repo_digests: image.repo_digests.unwrap_or_default(),
            }))
        }
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(source) => Err(RuntimeError::Daemon {
            action: "inspect an image",
            source,
        }),
    }
}
