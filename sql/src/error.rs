//! What can go wrong between a SQL text and its rows.

use std::net::SocketAddr;

use datafusion::error::DataFusionError;

/// Why a session could not be opened, a query could not run, or the server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The text is not SQL DataFusion can parse.
    #[error("the SQL does not parse: {source}")]
    Parse {
        /// DataFusion's parser error.
        #[source]
        source: DataFusionError,
    },
    /// The statement nests its expressions deeper than Weir plans (the reference engine's bound): refused
    /// before it is parsed, since planning it could exhaust the stack and abort the process.
    #[error("{source}")]
    TooDeep {
        /// Where and how deep.
        #[source]
        source: weir_query_depth::QueryTooDeep,
    },
    /// The SQL parses but cannot be planned: an unknown table or column, a type error, an unknown function.
    #[error("{source}")]
    Plan {
        /// DataFusion's planning error.
        #[source]
        source: DataFusionError,
    },
    /// The statement would change something (DDL, DML, `COPY`, `SET`, a transaction): SQL over datasets is
    /// read-only, their data changes only through `weir pull`.
    #[error(
        "SQL over datasets is read-only: {statement} is not allowed (only queries: SELECT, WITH, VALUES, EXPLAIN, DESCRIBE, SHOW)"
    )]
    ReadOnly {
        /// What the statement is, e.g. `CREATE TABLE AS SELECT`, `INSERT INTO`.
        statement: String,
    },
    /// The query names a dataset that has no data (and no schema) yet, so there is no table to read.
    #[error("dataset `{dataset}` has no data yet, so it has no table (pull it first)")]
    NoData {
        /// The dataset.
        dataset: String,
    },
    /// The text holds more or fewer than one statement where exactly one is expected.
    #[error("expected exactly one SQL statement, found {count}")]
    StatementCount {
        /// How many statements the text holds.
        count: usize,
    },
    /// DataFusion does not support this SQL.
    #[error("not supported: {source}")]
    Unsupported {
        /// DataFusion's error.
        #[source]
        source: DataFusionError,
    },
    /// Running the query failed: reading a Parquet file, a computation (e.g. a cast) on the data.
    #[error("the query failed while running: {source}")]
    Execution {
        /// DataFusion's error.
        #[source]
        source: DataFusionError,
    },
    /// A table could not be opened: a file is missing or is not Parquet, or the files' schemas differ.
    #[error("table `{table}` cannot be opened: {source}")]
    OpenTable {
        /// The table (dataset) name.
        table: String,
        /// Why.
        #[source]
        source: DataFusionError,
    },
    /// Two tables were given the same name.
    #[error("table `{table}` is given twice")]
    DuplicateTable {
        /// The name.
        table: String,
    },
    /// Formatting results (text table, JSON, CSV) failed.
    #[error("formatting the results as {format}: {source}")]
    Format {
        /// The output format.
        format: &'static str,
        /// Arrow's error.
        #[source]
        source: datafusion::arrow::error::ArrowError,
    },
    /// The statement's parameters do not fit it: none bound where it has placeholders, too few or too many,
    /// a value of a type its placeholder cannot take, `?` mixed with `$n`.
    #[error("parameters: {message}")]
    Parameters {
        /// What does not fit.
        message: String,
    },
    /// The caller's [`TableSource`](crate::TableSource) could not say what the datasets are now (a head or a
    /// chain could not be read).
    #[error("reading the datasets' current state: {source}")]
    Source {
        /// The source's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The Flight SQL server was asked to listen on an address other than loopback without authentication.
    #[error(
        "the Flight SQL server listens on {addr}, which is not a loopback address, only with authentication: configure users or bearer tokens (anonymous access alone is not authentication), or listen on 127.0.0.1"
    )]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The server's authentication or TLS configuration is unusable.
    #[error("Flight SQL server configuration: {message}")]
    Config {
        /// What is wrong, naming the file or setting.
        message: String,
    },
    /// Binding, accepting or serving failed.
    #[error("Flight SQL server: {message}")]
    Serve {
        /// What failed.
        message: String,
    },
}

impl SqlError {
    /// Whether the error is the query's fault (bad SQL, an unknown or empty table, a refused statement), as
    /// opposed to the data's or the machine's: what a CLI maps to its "invalid query" exit code and a Flight
    /// SQL server to `InvalidArgument`.
    pub fn is_query_error(&self) -> bool {
        matches!(
            self,
            SqlError::Parse { .. }
                | SqlError::TooDeep { .. }
                | SqlError::Plan { .. }
                | SqlError::ReadOnly { .. }
                | SqlError::NoData { .. }
                | SqlError::StatementCount { .. }
                | SqlError::Unsupported { .. }
                | SqlError::Parameters { .. }
        )
    }

    /// Sorts a DataFusion error from parsing, planning or running a query by whose fault it is.
    pub(crate) fn from_datafusion(error: DataFusionError) -> Self {
        match error.find_root() {
            DataFusionError::SQL(..) => SqlError::Parse { source: error },
            DataFusionError::Plan(_) | DataFusionError::SchemaError(..) => {
                SqlError::Plan { source: error }
            }
            DataFusionError::NotImplemented(_) => SqlError::Unsupported { source: error },
            _ => SqlError::Execution { source: error },
        }
    }
}
