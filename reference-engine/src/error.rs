//! [`EngineError`]: everything an operation can fail with, and whether the query or the engine is to blame.

use std::path::PathBuf;

use datafusion::error::DataFusionError;

/// Which terminal message an error becomes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The query (or the request that carries it) is wrong: `InvalidQuery`.
    InvalidQuery,
    /// The engine or its environment failed: `InternalError`.
    Internal,
}

/// Why an engine operation failed.
///
/// [`EngineError::kind`] says which terminal message it becomes; the `Display` text is the message.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// SQL that does not parse or plan; `message` is the planner's own.
    #[error("{}{message}", step_prefix(step.as_deref()))]
    Sql {
        /// Alias of the query step, when it has one.
        step: Option<String>,
        /// DataFusion's message.
        message: String,
    },
    /// A query step nests its expressions deeper than the engine plans ([`crate::check_query_depth`]).
    #[error("{}{source}", step_prefix(step.as_deref()))]
    QueryTooDeep {
        /// Alias of the query step, when it has one.
        step: Option<String>,
        /// Where and how deep.
        #[source]
        source: weir_query_depth::QueryTooDeep,
    },
    /// The transform has no query at all.
    #[error("the transform has no query")]
    NoQuery,
    /// A temporal join (`temporal_tables`, `FOR SYSTEM_TIME AS OF`) not in the supported form.
    #[error("unsupported temporal join: {reason}")]
    UnsupportedTemporalJoin {
        /// What is not supported, and what to write instead.
        reason: String,
    },
    /// A stream-to-stream join not in the supported interval join form.
    #[error("unsupported interval join: {reason}")]
    UnsupportedIntervalJoin {
        /// What is not supported, and what to write instead.
        reason: String,
    },
    /// A window function (`OVER`) not in the supported top-N form.
    #[error("unsupported window function: {reason}")]
    UnsupportedTopN {
        /// What is not supported, and what to write instead.
        reason: String,
    },
    /// Query steps chaining stateful operators in a form that is not supported.
    #[error("unsupported chain of query steps: {reason}")]
    UnsupportedChain {
        /// What is not supported, and what to write instead.
        reason: String,
    },
    /// MigrateQuery cannot carry this state over to the next query.
    #[error(
        "MigrateQuery cannot change this query: {reason}; recompute the dataset from its inputs instead (`weir pull --recompute`)"
    )]
    MigrationUnsupported {
        /// Why not.
        reason: String,
    },
    /// Two inputs or steps use the same name.
    #[error("the name `{alias}` is used by more than one input or query step")]
    DuplicateAlias {
        /// The name used twice.
        alias: String,
    },
    /// The query outputs a column the engine writes itself (`offset` or `system_time`).
    #[error(
        "the query outputs the system column `{column}`: the engine writes it itself, remove it from the SELECT list"
    )]
    SystemColumnInOutput {
        /// The column name.
        column: String,
    },
    /// The query outputs a column whose name the engine reserves.
    #[error("the output column `{column}` uses the prefix `__weir_`, which the engine reserves")]
    ReservedColumnInOutput {
        /// The column name.
        column: String,
    },
    /// The output has no event time column.
    #[error("the query output has no `{column}` column: every output record needs an event time")]
    MissingEventTime {
        /// The vocabulary's event time column name.
        column: String,
    },
    /// The output's event time is not a UTC timestamp (or a date).
    #[error("`{column}` must be a UTC timestamp or a date, but the query outputs {found}")]
    EventTimeNotUtc {
        /// The vocabulary's event time column name.
        column: String,
        /// The type the query produced.
        found: String,
    },
    /// The query's `op` column is not an integer.
    #[error("`{column}` must be an integer operation type, but the query outputs {found}")]
    OperationTypeColumnType {
        /// The vocabulary's operation type column name.
        column: String,
        /// The type the query produced.
        found: String,
    },
    /// The query produced an `op` value that is no operation type.
    #[error(
        "the query produced {value} in `{column}`, which is not an operation type (0 Append, 1 Retract, 2 CorrectFrom, 3 CorrectTo)"
    )]
    InvalidOperationType {
        /// The vocabulary's operation type column name.
        column: String,
        /// The rejected value (`null` for a missing one).
        value: String,
    },
    /// The query cannot keep changelog semantics (retractions and corrections).
    #[error("the query cannot preserve changelog semantics: {explanation}")]
    ChangelogUnsafe {
        /// What in the query is the problem, and what to do instead.
        explanation: String,
    },
    /// An aggregation looks like a window aggregation but is not in the supported form.
    #[error("unsupported window aggregation: {reason}")]
    UnsupportedWindowAggregation {
        /// What is not supported.
        reason: String,
    },
    /// The previous checkpoint was written for another query.
    #[error(
        "the checkpoint {path} was written by a different query ({reason}); change queries with MigrateQuery"
    )]
    CheckpointMismatch {
        /// The checkpoint file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// The request itself is inconsistent.
    #[error("malformed request: {reason}")]
    MalformedRequest {
        /// What is wrong.
        reason: String,
    },
    /// Provenance is only derivable for some queries.
    #[error("provenance cannot be derived: {reason}")]
    ProvenanceUnsupported {
        /// Why not.
        reason: String,
    },
    /// A requested output offset was not produced by the transform step.
    #[error("output offset {offset} was not produced by this transform step ({produced})")]
    OutputOffsetNotProduced {
        /// The requested offset.
        offset: u64,
        /// What the step produced, in words.
        produced: String,
    },
    /// An input data file (or schema file) does not exist.
    #[error("input `{alias}`: file {path} does not exist")]
    InputFileMissing {
        /// Query alias of the input.
        alias: String,
        /// The missing file.
        path: PathBuf,
    },
    /// An input's files do not have the system columns its vocabulary names.
    #[error("input `{alias}` cannot be used: {reason}")]
    InputSchema {
        /// Query alias of the input.
        alias: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// An input file could not be read as Parquet.
    #[error("input `{alias}`: cannot read {path} as Parquet: {source}")]
    InputRead {
        /// Query alias of the input.
        alias: String,
        /// The file (or the first of the files).
        path: PathBuf,
        /// What DataFusion reported.
        #[source]
        source: Box<DataFusionError>,
    },
    /// Running the query failed (reading data, computing).
    #[error("executing the query failed: {source}")]
    Execution {
        /// What DataFusion reported.
        #[source]
        source: Box<DataFusionError>,
    },
    /// The output file could not be written.
    #[error("cannot write output file {path}: {reason}")]
    OutputWrite {
        /// The output file.
        path: PathBuf,
        /// The underlying error.
        reason: String,
    },
    /// The previous checkpoint could not be read.
    #[error("cannot read checkpoint {path}: {reason}")]
    CheckpointRead {
        /// The checkpoint file.
        path: PathBuf,
        /// The underlying error.
        reason: String,
    },
    /// The new checkpoint could not be written.
    #[error("cannot write checkpoint {path}: {reason}")]
    CheckpointWrite {
        /// The checkpoint file.
        path: PathBuf,
        /// The underlying error.
        reason: String,
    },
    /// The session that stateless work runs in could not be made (a [`crate::SessionUpgrade`] failed,
    /// e.g. a distributed engine's scheduler address is invalid).
    #[error("cannot set up the query session: {reason}")]
    SessionSetup {
        /// What the upgrade reported.
        reason: String,
    },
    /// An object store named by the request could not be reached or configured.
    #[error("cannot {action} {url}: {reason}")]
    ObjectStore {
        /// The object or bucket URL.
        url: String,
        /// What the engine tried to do.
        action: &'static str,
        /// What the store reported.
        reason: String,
    },
    /// Arithmetic on the data left the representable range.
    #[error("{what} overflows")]
    Overflow {
        /// What overflowed.
        what: String,
    },
    /// An Arrow kernel failed on data the engine built itself.
    #[error("internal Arrow error: {0}")]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
}

fn step_prefix(step: Option<&str>) -> String {
    step.map(|alias| format!("in query step `{alias}`: "))
        .unwrap_or_default()
}

impl EngineError {
    /// Which terminal message this error becomes.
    ///
    /// ```
    /// use weir_reference_engine::{EngineError, ErrorKind};
    ///
    /// let error = EngineError::SystemColumnInOutput { column: "offset".into() };
    /// assert_eq!(error.kind(), ErrorKind::InvalidQuery);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Sql { .. }
            | Self::QueryTooDeep { .. }
            | Self::NoQuery
            | Self::UnsupportedTemporalJoin { .. }
            | Self::UnsupportedIntervalJoin { .. }
            | Self::UnsupportedTopN { .. }
            | Self::UnsupportedChain { .. }
            | Self::MigrationUnsupported { .. }
            | Self::DuplicateAlias { .. }
            | Self::SystemColumnInOutput { .. }
            | Self::ReservedColumnInOutput { .. }
            | Self::MissingEventTime { .. }
            | Self::EventTimeNotUtc { .. }
            | Self::OperationTypeColumnType { .. }
            | Self::InvalidOperationType { .. }
            | Self::ChangelogUnsafe { .. }
            | Self::UnsupportedWindowAggregation { .. }
            | Self::CheckpointMismatch { .. }
            | Self::MalformedRequest { .. }
            | Self::ProvenanceUnsupported { .. }
            | Self::OutputOffsetNotProduced { .. } => ErrorKind::InvalidQuery,
            Self::InputFileMissing { .. }
            | Self::InputSchema { .. }
            | Self::InputRead { .. }
            | Self::Execution { .. }
            | Self::OutputWrite { .. }
            | Self::CheckpointRead { .. }
            | Self::CheckpointWrite { .. }
            | Self::SessionSetup { .. }
            | Self::ObjectStore { .. }
            | Self::Overflow { .. }
            | Self::Arrow(_) => ErrorKind::Internal,
        }
    }

    /// Alias of the query step the error is in, when known.
    pub fn query_step(&self) -> Option<&str> {
        match self {
            Self::Sql { step, .. } | Self::QueryTooDeep { step, .. } => step.as_deref(),
            _ => None,
        }
    }

    /// A planning error of query step `step`.
    pub(crate) fn sql(step: Option<&str>, error: DataFusionError) -> Self {
        Self::Sql {
            step: step.map(str::to_owned),
            message: error.strip_backtrace(),
        }
    }

    /// An execution error.
    pub(crate) fn execution(error: DataFusionError) -> Self {
        Self::Execution {
            source: Box::new(error),
        }
    }
}
