//! The DataFusion session every operation runs in.

use datafusion::execution::context::{SessionConfig, SessionContext};

/// A fresh session: identifiers are case-sensitive (no normalisation), as in the reference engines;
/// strings are read as `Utf8`.
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
    SessionContext::new_with_config(config)
}
