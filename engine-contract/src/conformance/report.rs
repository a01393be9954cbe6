//! [`ConformanceReport`]: each check's verdict with its reason.

use std::fmt;

use serde::Serialize;

/// A check of the engine contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Every call ends with exactly one terminal message after zero or more
    /// Progress messages.
    TerminalMessageRules,
    /// SQL that does not parse is answered InvalidQuery.
    InvalidQueryForBadSql,
    /// Request bytes that do not decode are answered InvalidQuery (not a
    /// crash or a transport error).
    MalformedRequestAnsweredInvalidQuery,
    /// Weir's operations are either served by the contract or answered
    /// UNIMPLEMENTED.
    UnimplementedOperationsReported,
    /// Output offsets run from `next_offset`, `system_time` is the
    /// request's, `event_time` is kept, `op` defaults to Append.
    OffsetsAndSystemColumns,
    /// Only input records inside `offset_interval` are read, even when the
    /// data file holds more.
    InputOffsetIntervalRespected,
    /// Retractions and corrections pass through in order, a CorrectTo right
    /// after its CorrectFrom.
    RetractionAndCorrectionPropagation,
    /// `new_watermark` is the minimum over inputs of their latest explicit
    /// watermark; inputs without one are skipped.
    WatermarkRule,
    /// An input without new data gives a Success with no offsets.
    EmptyInput,
    /// A query with no output rows still writes the output file with its
    /// schema.
    ZeroRowOutputWritesFile,
    /// The same request twice gives the same result and output.
    Idempotency,
    /// A query that outputs `offset` or `system_time` itself is
    /// InvalidQuery.
    SystemColumnInQueryIsInvalid,
}

impl Check {
    /// Checks that need no data files.
    pub const DATA_FREE: [Check; 4] = [
        Check::TerminalMessageRules,
        Check::InvalidQueryForBadSql,
        Check::MalformedRequestAnsweredInvalidQuery,
        Check::UnimplementedOperationsReported,
    ];

    /// Checks that write input files and read the output
    /// (need [`DataFixtures`](super::DataFixtures)).
    pub const DATA: [Check; 8] = [
        Check::OffsetsAndSystemColumns,
        Check::InputOffsetIntervalRespected,
        Check::RetractionAndCorrectionPropagation,
        Check::WatermarkRule,
        Check::EmptyInput,
        Check::ZeroRowOutputWritesFile,
        Check::Idempotency,
        Check::SystemColumnInQueryIsInvalid,
    ];

    /// The check's name in reports (snake case).
    pub const fn name(self) -> &'static str {
        match self {
            Self::TerminalMessageRules => "terminal_message_rules",
            Self::InvalidQueryForBadSql => "invalid_query_for_bad_sql",
            Self::MalformedRequestAnsweredInvalidQuery => {
                "malformed_request_answered_invalid_query"
            }
            Self::UnimplementedOperationsReported => "unimplemented_operations_reported",
            Self::OffsetsAndSystemColumns => "offsets_and_system_columns",
            Self::InputOffsetIntervalRespected => "input_offset_interval_respected",
            Self::RetractionAndCorrectionPropagation => "retraction_and_correction_propagation",
            Self::WatermarkRule => "watermark_rule",
            Self::EmptyInput => "empty_input",
            Self::ZeroRowOutputWritesFile => "zero_row_output_writes_file",
            Self::Idempotency => "idempotency",
            Self::SystemColumnInQueryIsInvalid => "system_column_in_query_is_invalid",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// The engine behaves as the contract says.
    Passed,
    /// It does not; the reason says how.
    Failed,
    /// Not run (e.g. no data fixtures were given).
    Skipped,
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Which check.
    pub check: Check,
    /// Its verdict.
    pub status: CheckStatus,
    /// Why (what was observed).
    pub reason: String,
}

/// The outcome of a conformance run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConformanceReport {
    /// The engine checked.
    pub address: String,
    /// Every check, in the order run.
    pub checks: Vec<CheckReport>,
}

impl ConformanceReport {
    /// Whether no check failed.
    pub fn is_conformant(&self) -> bool {
        self.count(CheckStatus::Failed) == 0
    }

    /// How many checks have `status`.
    pub fn count(&self, status: CheckStatus) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// The report of one check.
    pub fn get(&self, check: Check) -> Option<&CheckReport> {
        self.checks.iter().find(|c| c.check == check)
    }
}

impl fmt::Display for ConformanceReport {
    /// One line per check, then `N passed, N failed, N skipped`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "engine conformance of {}", self.address)?;
        for check in &self.checks {
            let status = match check.status {
                CheckStatus::Passed => "PASS",
                CheckStatus::Failed => "FAIL",
                CheckStatus::Skipped => "SKIP",
            };
            writeln!(f, "{status} {}: {}", check.check, check.reason)?;
        }
        write!(
            f,
            "conformance: {} passed, {} failed, {} skipped",
            self.count(CheckStatus::Passed),
            self.count(CheckStatus::Failed),
            self.count(CheckStatus::Skipped)
        )
    }
}
