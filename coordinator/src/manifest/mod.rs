//! Dataset manifests (`kind: DatasetSnapshot`) and the workspace that holds them.
pub mod edit;
pub mod read_schema;
pub mod snapshot;
pub mod support;
pub mod workspace;
pub mod yaml;
