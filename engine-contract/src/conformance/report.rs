//! [`ConformanceReport`]: each check's verdict with its reason.

use std::fmt;

use serde::Serialize;

/// A check of the engine contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Request bytes that do not decode are answered InvalidQuery (not a
    /// crash or a transport error).
    MalformedRequestAnsweredInvalidQuery,
    /// Weir's operations are either served by the contract or answered
    /// UNIMPLEMENTED.
    UnimplementedOperationsReported,
    /// A transform and a raw query each end with exactly one terminal
    /// message after zero or more Progress messages.
    TerminalMessageRules,
    /// SQL that does not parse is answered InvalidQuery, by ExecuteTransform
    /// and by ExecuteRawQuery, with real input files.
    InvalidQueryForBadSql,
    /// Output offsets run from `next_offset`, `system_time` is the
    /// request's, `event_time` is kept, `op` defaults to Append.
    OffsetsAndSystemColumns,
    /// Only input records inside `offset_interval` are read, even when the
    /// data file holds more.
    InputOffsetIntervalRespected,
    /// Retractions and corrections pass through in order, a CorrectTo right
    /// after its CorrectFrom, when the query selects `op`.
    RetractionAndCorrectionPropagation,
    /// A map/filter query that does not select `op` still gives each output
    /// record its input record's `op` (ODF's changelog rule: a retraction of
    /// `A` becomes a retraction of `f(A)`, never a new Append).
    OperationTypeCarriedWhenNotSelected,
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
    /// A raw query writes the types ODF engines write: `offset` Int64, `op`
    /// Int32, strings, and every timestamp as Timestamp(ms, "UTC"), also
    /// one the query computes; `num_records` counts the rows written.
    RawQueryOutputTypes,
}

impl Check {
    /// Checks that need no data files.
    pub const DATA_FREE: [Check; 2] = [
        Check::MalformedRequestAnsweredInvalidQuery,
        Check::UnimplementedOperationsReported,
    ];

    /// Checks that write input files and read the output
    /// (need [`DataFixtures`](super::DataFixtures)). Every request they send
    /// is one a coordinator would send: real input files, a writable output
    /// folder.
    pub const DATA: [Check; 12] = [
        Check::TerminalMessageRules,
        Check::InvalidQueryForBadSql,
        Check::OffsetsAndSystemColumns,
        Check::InputOffsetIntervalRespected,
        Check::RetractionAndCorrectionPropagation,
        Check::OperationTypeCarriedWhenNotSelected,
        Check::WatermarkRule,
        Check::EmptyInput,
        Check::ZeroRowOutputWritesFile,
        Check::Idempotency,
        Check::SystemColumnInQueryIsInvalid,
        Check::RawQueryOutputTypes,
    ];

    /// The check's name in reports (snake case).
    pub const fn name(self) -> &'static str {
        match self {
            Self::MalformedRequestAnsweredInvalidQuery => {
                "malformed_request_answered_invalid_query"
            }
            Self::UnimplementedOperationsReported => "unimplemented_operations_reported",
            Self::TerminalMessageRules => "terminal_message_rules",
            Self::InvalidQueryForBadSql => "invalid_query_for_bad_sql",
            Self::OffsetsAndSystemColumns => "offsets_and_system_columns",
            Self::InputOffsetIntervalRespected => "input_offset_interval_respected",
            Self::RetractionAndCorrectionPropagation => "retraction_and_correction_propagation",
            Self::OperationTypeCarriedWhenNotSelected => "operation_type_carried_when_not_selected",
            Self::WatermarkRule => "watermark_rule",
            Self::EmptyInput => "empty_input",
            Self::ZeroRowOutputWritesFile => "zero_row_output_writes_file",
            Self::Idempotency => "idempotency",
            Self::SystemColumnInQueryIsInvalid => "system_column_in_query_is_invalid",
            Self::RawQueryOutputTypes => "raw_query_output_types",
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
    /// The check did not run (e.g. no data fixtures were given), so nothing
    /// is known: a run with checks not run has not passed.
    NotRun,
}

/// The verdict of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every check ran and passed.
    Passed,
    /// At least one check failed.
    Failed,
    /// None failed, but some did not run: the engine is not known to conform.
    Incomplete,
}

impl Verdict {
    /// The exit code a conformance command reports: 0 passed, 1 failed,
    /// 2 incomplete (checks not run).
    pub const fn exit_code(self) -> u8 {
        match self {
            Self::Passed => 0,
            Self::Failed => 1,
            Self::Incomplete => 2,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Passed => "PASSED",
            Self::Failed => "FAILED",
            Self::Incomplete => "NOT PASSED (checks not run)",
        })
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Which check.
    pub check: Check,
    /// Its verdict.
    pub status: CheckStatus,
    /// Why (what was observed, or why it did not run).
    pub reason: String,
}

/// The outcome of a conformance run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConformanceReport {
    /// The engine checked.
    pub address: String,
    /// Every check, in the order run.
    pub checks: Vec<CheckReport>,
    /// The run's verdict (also in the JSON form).
    pub verdict: Verdict,
}

impl ConformanceReport {
    /// A report of `checks` with its verdict.
    pub fn new(address: impl Into<String>, checks: Vec<CheckReport>) -> Self {
        let verdict = verdict_of(&checks);
        Self {
            address: address.into(),
            checks,
            verdict,
        }
    }

    /// Whether every check ran and passed. A run with checks not run is not
    /// conformant, whatever else passed.
    pub fn is_conformant(&self) -> bool {
        self.verdict == Verdict::Passed
    }

    /// The run's verdict.
    pub fn verdict(&self) -> Verdict {
        self.verdict
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

fn verdict_of(checks: &[CheckReport]) -> Verdict {
    if checks.iter().any(|c| c.status == CheckStatus::Failed) {
        Verdict::Failed
    } else if checks.is_empty() || checks.iter().any(|c| c.status == CheckStatus::NotRun) {
        Verdict::Incomplete
    } else {
        Verdict::Passed
    }
}

impl fmt::Display for ConformanceReport {
    /// One line per check (`PASS`, `FAIL` or `NOT RUN`), then
    /// `conformance: N passed, N failed, N not run: <verdict>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "engine conformance of {}", self.address)?;
        for check in &self.checks {
            let status = match check.status {
                CheckStatus::Passed => "PASS",
                CheckStatus::Failed => "FAIL",
                CheckStatus::NotRun => "NOT RUN",
            };
            writeln!(f, "{status} {}: {}", check.check, check.reason)?;
        }
        write!(
            f,
            "conformance: {} passed, {} failed, {} not run: {}",
            self.count(CheckStatus::Passed),
            self.count(CheckStatus::Failed),
            self.count(CheckStatus::NotRun),
            self.verdict
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(check: Check, status: CheckStatus) -> CheckReport {
        CheckReport {
            check,
            status,
            reason: String::new(),
        }
    }

    #[test]
    fn a_run_with_checks_not_run_has_not_passed() {
        let report = ConformanceReport::new(
            "x",
            vec![
                check(Check::TerminalMessageRules, CheckStatus::Passed),
                check(Check::EmptyInput, CheckStatus::NotRun),
            ],
        );
        assert_eq!(report.verdict(), Verdict::Incomplete);
        assert!(!report.is_conformant());
        assert_eq!(report.verdict().exit_code(), 2);
        let text = report.to_string();
        assert!(text.contains("NOT RUN empty_input"), "{text}");
        assert!(
            text.ends_with("1 passed, 0 failed, 1 not run: NOT PASSED (checks not run)"),
            "{text}"
        );
    }

    #[test]
    fn a_failure_outweighs_checks_not_run_and_all_passed_is_passed() {
        let failed = ConformanceReport::new(
            "x",
            vec![
                check(Check::TerminalMessageRules, CheckStatus::Failed),
                check(Check::EmptyInput, CheckStatus::NotRun),
            ],
        );
        assert_eq!(failed.verdict(), Verdict::Failed);
        assert_eq!(failed.verdict().exit_code(), 1);
        let passed =
            ConformanceReport::new("x", vec![check(Check::EmptyInput, CheckStatus::Passed)]);
        assert_eq!(passed.verdict(), Verdict::Passed);
        assert!(passed.is_conformant());
        assert_eq!(
            ConformanceReport::new("x", vec![]).verdict(),
            Verdict::Incomplete
        );
    }
}
