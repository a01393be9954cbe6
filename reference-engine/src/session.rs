//! The DataFusion sessions operations run in: this process's own, or one made by a
//! [`SessionUpgrade`] for the work that may run elsewhere.

use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::execution::session_state::SessionState;

use crate::error::EngineError;

/// A fresh session: identifiers are case-sensitive (no normalisation), as in the reference engines;
/// strings are read as `Utf8`; the JSON functions kamu's DataFusion sessions offer are registered
/// (`json_get_str`, `json_get_int`, `json_get_float`, `json_get_bool`, `json_get_json`,
/// `json_get_array`, `json_as_text`, `json_contains`, `json_length`, `json_object_keys`, and the
/// `->` / `->>` operators).
pub(crate) fn new_session() -> SessionContext {
    let mut config = SessionConfig::new()
        .with_information_schema(false)
        .with_create_default_catalog_and_schema(true);
    config.options_mut().sql_parser.enable_ident_normalization = false;
    // Strings read as Utf8 (not Utf8View), so outputs carry the classic types every reader knows.
    config
        .options_mut()
        .execution
        .parquet
        .schema_force_view_types = false;
    let mut ctx = SessionContext::new_with_config(config);
    // Hopping windows' start (Flink's `HOP`, RisingWave's `hop`), cumulating and session windows'
    // bounds (`CUMULATE`, `SESSION`), rewritten onto them by `window::syntax`.
    ctx.register_udf(crate::window::hop::HopWindowStart::udf());
    for udf in crate::window::functions::WindowBound::udfs() {
        ctx.register_udf(udf);
    }
    if let Err(error) = datafusion_functions_json::register_all(&mut ctx) {
        // Registering into a fresh session cannot conflict; should it fail, the functions are missing
        // and a query using them gets DataFusion's "invalid function" message.
        tracing::error!(%error, "cannot register the JSON functions");
    }
    ctx
}

/// Turns the engine's own session state into the one stateless work is planned and run in.
///
/// The upgraded state keeps the engine's settings, tables and functions; what it usually changes is
/// the query planner, which decides where a physical plan runs. `distributed-engine` passes one that
/// installs Ballista's planner, so that map/filter transforms and raw queries become Ballista jobs.
pub type SessionUpgrade =
    Arc<dyn Fn(SessionState) -> Result<SessionState, DataFusionError> + Send + Sync>;

/// Where an operation's sessions come from.
///
/// `Copy`, as [`crate::ReferenceEngine`] is (the coordinator's embedded engine copies it into the
/// tasks it spawns): the upgrade is kept for the rest of the process, which is what an engine made
/// once per process needs.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sessions {
    /// Makes the sessions of stateless work; `None` runs everything in this process.
    upgrade: Option<&'static SessionUpgrade>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("upgraded", &self.upgrade.is_some())
            .finish()
    }
}

impl Sessions {
    pub(crate) fn upgraded(upgrade: SessionUpgrade) -> Self {
        Self {
            upgrade: Some(Box::leak(Box::new(upgrade))),
        }
    }

    /// Whether stateless work runs in an upgraded session.
    pub(crate) fn is_upgraded(&self) -> bool {
        self.upgrade.is_some()
    }

    /// The session of stateless work (a map/filter transform, a raw query): the upgraded one when
    /// there is an upgrade, else a fresh local one.
    pub(crate) fn stateless(&self) -> Result<SessionContext, EngineError> {
        let ctx = new_session();
        match self.upgrade {
            None => Ok(ctx),
            Some(upgrade) => {
                let state = upgrade(ctx.state()).map_err(|source| EngineError::SessionSetup {
                    reason: source.to_string(),
                })?;
                Ok(SessionContext::new_with_state(state))
            }
        }
    }
}
