//! What the test engine does, chosen by the SQL text of the request's last query step.

use engine_contract::model::Transform;

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
}

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
        let mut words = sql.split_whitespace();
        match (words.next(), words.next()) {
            (Some("sandbox-report"), _) => Self::SandboxReport,
            (Some("hang"), _) => Self::Hang,
            (Some("crash"), _) => Self::Crash,
            (Some("invalid"), _) => Self::Invalid,
            (Some("progress"), Some(n)) => n.parse().map_or(Self::Copy, Self::Progress),
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
}
