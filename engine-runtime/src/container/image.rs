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

/// Inspects `reference`; `name@sha256:<hex>` also finds the image whose id is `sha256:<hex>`.
///
/// An image built on this machine has no registry digest, so the digest that pins it is its id
/// (what `docker image inspect` reports as `Id`). Docker looks `name@sha256:<hex>` up among registry
/// digests only; when that finds nothing, the image with that exact id is taken. Both are SHA-256
/// content addresses (of the manifest, or of the configuration that pins every layer), so either
/// pins the same bytes; the name is then only informative.
async fn inspect(docker: &Docker, reference: &str) -> Result<Option<ImageDigest>, RuntimeError> {
    if let Some(found) = inspect_exact(docker, reference).await? {
        return Ok(Some(found));
    }
    let Some(id) = pinned_digest(reference) else {
        return Ok(None);
    };
    Ok(inspect_exact(docker, id)
        .await?
        .filter(|found| found.id == id)
        .map(|found| ImageDigest {
            reference: reference.to_owned(),
            ..found
        }))
}

/// The `sha256:<hex>` of a reference pinned by digest (`name@sha256:<64 lowercase hex digits>`).
fn pinned_digest(reference: &str) -> Option<&str> {
    let (name, digest) = reference.rsplit_once('@')?;
    let hex = digest.strip_prefix("sha256:")?;
    let is_hex = hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (!name.is_empty() && hex.len() == 64 && is_hex).then_some(digest)
}

async fn inspect_exact(
    docker: &Docker,
    reference: &str,
) -> Result<Option<ImageDigest>, RuntimeError> {
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

#[cfg(test)]
mod tests {
    use super::pinned_digest;

    #[test]
    fn a_reference_pinned_by_digest_gives_its_digest() {
        let hex = "0123456789abcdef".repeat(4);
        let digest = format!("sha256:{hex}");
        assert_eq!(
            pinned_digest(&format!("weir/reference-engine@{digest}")),
            Some(digest.as_str())
        );
        assert_eq!(
            pinned_digest(&format!("localhost:5000/engine:1.0@{digest}")),
            Some(digest.as_str())
        );
    }

    #[test]
    fn tags_short_uppercase_or_nameless_digests_are_not_pins() {
        let hex = "0123456789abcdef".repeat(4);
        assert_eq!(pinned_digest("weir/reference-engine:dev"), None);
        assert_eq!(pinned_digest("weir/reference-engine@sha256:0123"), None);
        assert_eq!(
            pinned_digest(&format!(
                "weir/reference-engine@sha256:{}",
                hex.to_uppercase()
            )),
            None
        );
        assert_eq!(pinned_digest(&format!("@sha256:{hex}")), None);
        assert_eq!(pinned_digest(&format!("weir/engine@sha512:{hex}")), None);
    }
}
