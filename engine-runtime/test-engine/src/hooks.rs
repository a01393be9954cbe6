//! What the test engine does, chosen by the SQL text of the request's last query step.
//!
//! | SQL text | behaviour |
//! |---|---|
//! | anything not below | copy the inputs to the output ([`Hook::Copy`]) |
//! | `sandbox-report` | write a JSON sandbox report to the output path |
//! | `hang` | report progress once, then never answer |
//! | `crash` | report progress once, then abort the process mid-operation |
//! | `progress N` | report N progress messages, then copy |
//! | `invalid` | answer InvalidQuery |
//! | `respond FILE START END` | copy FILE to the output, answer Success claiming offsets `[START, END]` |
//! | `respond-none START END` | write no output, answer Success claiming offsets `[START, END]` |
//! | `two-terminals` | send two Success messages on one response stream |
//! | `no-terminal` | send one Progress message, then end the stream without a terminal message |
//!
//! The last five make the engine break the engine contract on purpose, so that a coordinator's
//! checks can be tested end to end: `respond` and `respond-none` let a test stage any output file
//! (non-contiguous offsets, another schema, ...) and claim any interval (wrong start, wrong count,
//! records without a file); `two-terminals` and `no-terminal` break the response-stream contract,
//! which the server SDK never lets an engine do, so the raw front service in `front.rs` answers
//! them itself.

use std::path::PathBuf;

use weir_engine_contract::model::Transform;

/// A test behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hook {
    /// Copy the inputs to the output (any SQL not listed below).
    Copy,
    /// `sandbox-report`: write a JSON [`SandboxReport`](crate::sandbox_report::SandboxReport) to the
    /// output path.
    SandboxReport,
    /// `hang`: report progress once, then never answer.
    Hang,
    /// `crash`: report progress once, then abort the process mid-operation.
    Crash,
    /// `progress N`: report N progress messages, then copy.
    Progress(u64),
    /// `invalid`: answer InvalidQuery.
    Invalid,
    /// `respond FILE START END`: copy the file at the absolute host path FILE (no whitespace; the
    /// engine must be able to read it, e.g. a process engine) to the output data path and answer
    /// Success claiming the offset interval `[START, END]` (a raw query claims `END - START + 1`
    /// records). The file's content is not looked at.
    Respond {
        /// The file to hand back as the output.
        file: PathBuf,
        /// First offset claimed.
        start: u64,
        /// Last offset claimed.
        end: u64,
    },
    /// `respond-none START END`: write no output file but answer Success claiming `[START, END]`.
    RespondNone {
        /// First offset claimed.
        start: u64,
        /// Last offset claimed.
        end: u64,
    },
    /// `two-terminals`: two Success messages on one stream (answered by the raw front service).
    TwoTerminals,
    /// `no-terminal`: one Progress message, then the stream ends with status OK and no terminal
    /// message (answered by the raw front service).
    NoTerminal,
    /// A hook whose arguments do not parse: answer InvalidQuery with its usage.
    Usage(&'static str),
}

const RESPOND_USAGE: &str = "usage: respond FILE START END (FILE an absolute path)";
const RESPOND_NONE_USAGE: &str = "usage: respond-none START END";

impl Hook {
    /// The hook named by `transform`'s last query step.
    pub fn of(transform: &Transform) -> Self {
        let Transform::Sql(sql) = transform;
        let text = sql
            .steps()
            .last()
            .map(|s| s.query.clone())
            .unwrap_or_default();
        Self::parse(&text)
    }

    /// The hook named by `sql`.
    pub fn parse(sql: &str) -> Self {
        let words: Vec<&str> = sql.split_whitespace().collect();
        match words.as_slice() {
            ["sandbox-report", ..] => Self::SandboxReport,
            ["hang", ..] => Self::Hang,
            ["crash", ..] => Self::Crash,
            ["invalid", ..] => Self::Invalid,
            ["progress", n, ..] => n.parse().map_or(Self::Copy, Self::Progress),
            ["two-terminals", ..] => Self::TwoTerminals,
            ["no-terminal", ..] => Self::NoTerminal,
            ["respond", file, start, end] => {
                match (start.parse(), end.parse(), PathBuf::from(file)) {
                    (Ok(start), Ok(end), file) if file.is_absolute() => {
                        Self::Respond { file, start, end }
                    }
                    _ => Self::Usage(RESPOND_USAGE),
                }
            }
            ["respond", ..] => Self::Usage(RESPOND_USAGE),
            ["respond-none", start, end] => match (start.parse(), end.parse()) {
                (Ok(start), Ok(end)) => Self::RespondNone { start, end },
                _ => Self::Usage(RESPOND_NONE_USAGE),
            },
            ["respond-none", ..] => Self::Usage(RESPOND_NONE_USAGE),
            _ => Self::Copy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_text_selects_the_hook() {
        assert_eq!(Hook::parse("sandbox-report"), Hook::SandboxReport);
        assert_eq!(Hook::parse("  hang "), Hook::Hang);
        assert_eq!(Hook::parse("crash"), Hook::Crash);
        assert_eq!(Hook::parse("progress 12"), Hook::Progress(12));
        assert_eq!(Hook::parse("progress lots"), Hook::Copy);
        assert_eq!(Hook::parse("invalid"), Hook::Invalid);
        assert_eq!(Hook::parse("select * from input"), Hook::Copy);
    }

    #[test]
    fn lying_hooks_take_their_arguments_from_the_sql_text() {
        assert_eq!(
            Hook::parse("respond /tmp/x.parquet 3 5"),
            Hook::Respond {
                file: PathBuf::from("/tmp/x.parquet"),
                start: 3,
                end: 5
            }
        );
        assert_eq!(
            Hook::parse("respond-none 0\n 9"),
            Hook::RespondNone { start: 0, end: 9 }
        );
        assert_eq!(Hook::parse("two-terminals"), Hook::TwoTerminals);
        assert_eq!(Hook::parse(" no-terminal\n"), Hook::NoTerminal);
    }

    #[test]
    fn lying_hooks_with_bad_arguments_answer_their_usage() {
        for sql in [
            "respond",
            "respond x.parquet 1 2",
            "respond /x.parquet one 2",
            "respond /x.parquet 1",
            "respond-none 1",
            "respond-none 1 two",
        ] {
            assert!(matches!(Hook::parse(sql), Hook::Usage(_)), "{sql}");
        }
    }
}
