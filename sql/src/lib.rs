#![doc = include_str!("../README.md")]

mod error;
mod flight;
mod format;
mod session;
mod statements;
mod tables;

pub use error::SqlError;
pub use flight::{FlightSqlServer, bind_loopback, serve_flight_sql, status_of};
pub use format::{OutputFormat, format_results, write_results};
pub use session::{CATALOG, PreparedQuery, QueryResult, RecordBatchStream, SCHEMA, SqlSession};
pub use statements::{StatementSplitter, split_statements};
pub use tables::{Table, Tables};

/// The Arrow crate the session's batches and schemas are from.
pub use datafusion::arrow;
