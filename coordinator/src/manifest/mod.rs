//! Dataset manifests.
pub mod yaml;
