//! `s3://` data for Ballista jobs: a job's object-store endpoint and credentials travel with the job.
//!
//! The reference engine reads `s3://` URLs in requests with a store configured from its environment,
//! which the coordinator sets per operation (credentials scoped to that transaction's objects). A
//! Ballista job is planned by the scheduler and scanned by the executors, each of which resolves
//! object stores itself; so the engine puts the same settings in the job's session as Ballista's
//! `S3Options` extension (`s3.endpoint`, `s3.region`, `s3.allow_http`, `s3.access_key_id`,
//! `s3.secret_access_key`, `s3.session_token`), and the scheduler and executors build each job's S3
//! stores from its session ([`scheduler_session`], [`executor_runtime`]). No executor holds credentials
//! of its own, and a job can read only what its transaction's credentials allow.
//!
//! The settings are read in the job's session config, which Ballista sends to the scheduler and the
//! executors over their gRPC connections: run the cluster on a private network (docs/scaling.md).

use std::path::Path;
use std::sync::Arc;

use ballista_core::object_store::{CustomObjectStoreRegistry, S3Options};
use weir_reference_engine::datafusion::error::DataFusionError;
use weir_reference_engine::datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use weir_reference_engine::datafusion::execution::session_state::SessionState;
use weir_reference_engine::datafusion::prelude::SessionConfig;

/// The environment variables a job's S3 settings come from, and their `S3Options` keys. The first
/// variable set wins for a key.
const FROM_ENVIRONMENT: &[(&str, &[&str])] = &[
    (
        "endpoint",
        &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"],
    ),
    ("region", &["AWS_REGION", "AWS_DEFAULT_REGION"]),
    ("allow_http", &["AWS_ALLOW_HTTP"]),
    ("access_key_id", &["AWS_ACCESS_KEY_ID"]),
    ("secret_access_key", &["AWS_SECRET_ACCESS_KEY"]),
    ("session_token", &["AWS_SESSION_TOKEN"]),
];

/// Adds the `S3Options` a job's scheduler and executors build its S3 stores from, with the settings
/// of this process's environment (none set: the extension is there, empty, and stores use the
/// cluster's own environment).
pub(crate) fn with_job_store_settings(config: &mut SessionConfig) -> Result<(), DataFusionError> {
    let options = config.options_mut();
    if options.extensions.get::<S3Options>().is_none() {
        options.extensions.insert(S3Options::default());
    }
    for (key, variables) in FROM_ENVIRONMENT {
        let value = variables
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|value| !value.is_empty()));
        if let Some(value) = value {
            let value = if *key == "allow_http" {
                // object_store spells it `true`/`false`; S3Options parses a bool.
                (value.eq_ignore_ascii_case("true") || value == "1").to_string()
            } else {
                value
            };
            options.set(&format!("s3.{key}"), &value)?;
        }
    }
    Ok(())
}

/// The session config the scheduler and executors start each job's session from: one that knows
/// the `S3Options` extension, so that a job's `s3.*` settings are read, not refused.
pub(crate) fn job_session_config() -> SessionConfig {
    ballista_core::object_store::session_config_with_s3_support()
}

/// The scheduler's session for a job: S3 stores built from the job's `S3Options`.
pub(crate) fn scheduler_session(config: SessionConfig) -> Result<SessionState, DataFusionError> {
    ballista_core::object_store::session_state_with_s3_support(config)
}

/// An executor's runtime for a job: S3 stores built from the job's `S3Options`, spill files in the
/// executor's work folder.
pub(crate) fn executor_runtime(
    config: &SessionConfig,
    work_dir: &Path,
) -> Result<Arc<RuntimeEnv>, DataFusionError> {
    let options = config
        .options()
        .extensions
        .get::<S3Options>()
        .cloned()
        .unwrap_or_default();
    RuntimeEnvBuilder::new()
        .with_object_store_registry(Arc::new(CustomObjectStoreRegistry::new(options)))
        .with_temp_file_path(work_dir)
        .build()
        .map(Arc::new)
}
