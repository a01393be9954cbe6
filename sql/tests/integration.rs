//! weir-sql's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

mod common;

mod flight_sql;
mod format;
mod live;
mod session;
