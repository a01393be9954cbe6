#![doc = include_str!("../README.md")]

mod auth;
mod error;
mod flight;
mod format;
mod live;
mod parameters;
mod serve;
mod session;
mod statements;
mod tables;

pub use auth::{ANONYMOUS, Auth, Credential, Principal};
pub use error::SqlError;
pub use flight::{FlightSqlServer, status_of};
pub use format::{OutputFormat, format_results, write_results};
pub use live::{LiveSession, SourceError, TableSource, TablesFuture};
pub use serve::{ServeOptions, Tls, bind, bind_loopback, serve_flight_sql};
pub use session::{CATALOG, PreparedQuery, QueryResult, RecordBatchStream, SCHEMA, SqlSession};
pub use statements::{StatementSplitter, split_statements};
pub use tables::{Table, Tables};

/// The Arrow crate the session's batches and schemas are from.
pub use datafusion::arrow;
