//! `FOR SYSTEM_TIME AS OF`: the temporal join clause ODF users write (Flink's), which DataFusion's SQL
//! parser does not accept in its default dialect. Each step's SQL is rewritten before planning: every
//! `<table> FOR SYSTEM_TIME AS OF <column>` loses its clause, and what it said (which table, under which
//! alias, as of which column) is kept for the planner to find the join again in the plan.
//!
//! The rewrite works on sqlparser's tokens (so the words inside strings, quoted identifiers or comments
//! never match) and cuts the original text at their positions: everything else of the query is left
//! exactly as written.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer, Word};

/// One `<table> FOR SYSTEM_TIME AS OF <column> [AS alias]` of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemporalReference {
    /// The table's name as written (identifiers unquoted, parts joined by `.`).
    pub table: String,
    /// The alias after the clause, if any.
    pub alias: Option<String>,
    /// The as-of column: `[qualifier.]column`, unquoted.
    pub as_of: Vec<String>,
}

impl TemporalReference {
    /// The name the table goes by in the query: its alias, or its own name.
    pub(crate) fn relation_name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.table)
    }
}

/// A query with its temporal clauses taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rewritten {
    /// The SQL DataFusion plans.
    pub sql: String,
    /// The clauses taken out, in text order.
    pub references: Vec<TemporalReference>,
}

const USAGE: &str = "write it after the joined table's name and give the stream's event time column: \
    `JOIN <table> FOR SYSTEM_TIME AS OF <stream>.event_time AS <alias> ON ...`";

/// Takes every `FOR SYSTEM_TIME AS OF <column>` out of `sql`; `Err` explains a clause that is not of
/// that form. SQL that does not tokenise is returned unchanged (the planner reports it).
pub(crate) fn rewrite(sql: &str) -> Result<Rewritten, String> {
    let dialect = GenericDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql)
        .with_unescape(false)
        .tokenize_with_location()
    else {
        return Ok(Rewritten {
            sql: sql.to_owned(),
            references: Vec::new(),
        });
    };
    let lines = LineStarts::new(sql);
    let mut references = Vec::new();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if !is_keyword(&tokens[i].token, Keyword::FOR) {
            i += 1;
            continue;
        }
        let Some(after_of) = keywords_after(
            &tokens,
            i,
            &[Keyword::SYSTEM_TIME, Keyword::AS, Keyword::OF],
        ) else {
            i += 1;
            continue;
        };
        let (table, after_table) = name_before(&tokens, i).ok_or_else(|| {
            format!("FOR SYSTEM_TIME AS OF does not follow a table name: {USAGE}")
        })?;
        let (as_of, end) = name_after(&tokens, after_of).ok_or_else(|| {
            format!("FOR SYSTEM_TIME AS OF must name a column (processing time is not supported): {USAGE}")
        })?;
        let alias = alias_after(&tokens, end);
        // From right after the table's name to right after the column: `tickers AS t` stays.
        let start = lines.offset(tokens[after_table].span.start);
        let stop = match tokens.get(end) {
            Some(next) => lines.offset(next.span.start),
            None => sql.len(),
        };
        cuts.push((start, stop));
        references.push(TemporalReference {
            table: table.join("."),
            alias,
            as_of,
        });
        i = end;
    }
    let mut out = String::with_capacity(sql.len());
    let mut from = 0;
    for (start, stop) in cuts {
        out.push_str(sql.get(from..start).unwrap_or_default());
        from = stop;
    }
    out.push_str(sql.get(from..).unwrap_or_default());
    Ok(Rewritten {
        sql: out,
        references,
    })
}

fn is_keyword(token: &Token, keyword: Keyword) -> bool {
    matches!(token, Token::Word(Word { keyword: k, quote_style: None, .. }) if *k == keyword)
}

fn is_space(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_))
}

/// The index after `keywords` following position `at` (whitespace between them), if they follow.
fn keywords_after(tokens: &[TokenWithSpan], at: usize, keywords: &[Keyword]) -> Option<usize> {
    let mut i = at + 1;
    for keyword in keywords {
        while tokens.get(i).is_some_and(|t| is_space(&t.token)) {
            i += 1;
        }
        if !tokens
            .get(i)
            .is_some_and(|t| is_keyword(&t.token, *keyword))
        {
            return None;
        }
        i += 1;
    }
    Some(i)
}

/// The dotted name ending right before position `at` (whitespace skipped), and the index of the
/// token right after it.
fn name_before(tokens: &[TokenWithSpan], at: usize) -> Option<(Vec<String>, usize)> {
    let mut i = at;
    while i > 0 && is_space(&tokens[i - 1].token) {
        i -= 1;
    }
    let after = i;
    let mut parts = Vec::new();
    loop {
        let word = match tokens.get(i.checked_sub(1)?).map(|t| &t.token) {
            Some(Token::Word(word)) => word.value.clone(),
            _ => return None,
        };
        parts.push(word);
        i -= 1;
        if i > 0 && tokens[i - 1].token == Token::Period {
            i -= 1;
        } else {
            break;
        }
    }
    parts.reverse();
    Some((parts, after))
}

/// The dotted name starting at `at` (whitespace skipped before it) and the index after it.
fn name_after(tokens: &[TokenWithSpan], at: usize) -> Option<(Vec<String>, usize)> {
    let mut i = at;
    while tokens.get(i).is_some_and(|t| is_space(&t.token)) {
        i += 1;
    }
    let mut parts = Vec::new();
    loop {
        match tokens.get(i).map(|t| &t.token) {
            Some(Token::Word(word)) => parts.push(word.value.clone()),
            _ => return None,
        }
        i += 1;
        if tokens.get(i).is_some_and(|t| t.token == Token::Period) {
            i += 1;
        } else {
            break;
        }
    }
    // A function call (`PROCTIME()`) is not a column.
    let mut j = i;
    while tokens.get(j).is_some_and(|t| is_space(&t.token)) {
        j += 1;
    }
    if tokens.get(j).is_some_and(|t| t.token == Token::LParen) {
        return None;
    }
    Some((parts, i))
}

/// The alias following position `at`: `AS name` or a bare name that is no keyword.
fn alias_after(tokens: &[TokenWithSpan], at: usize) -> Option<String> {
    let mut i = at;
    while tokens.get(i).is_some_and(|t| is_space(&t.token)) {
        i += 1;
    }
    if tokens
        .get(i)
        .is_some_and(|t| is_keyword(&t.token, Keyword::AS))
    {
        i += 1;
        while tokens.get(i).is_some_and(|t| is_space(&t.token)) {
            i += 1;
        }
        return match tokens.get(i).map(|t| &t.token) {
            Some(Token::Word(word)) => Some(word.value.clone()),
            _ => None,
        };
    }
    match tokens.get(i).map(|t| &t.token) {
        Some(Token::Word(word))
            if word.quote_style.is_some() || word.keyword == Keyword::NoKeyword =>
        {
            Some(word.value.clone())
        }
        _ => None,
    }
}

/// Byte offsets of line starts, to turn the tokenizer's (line, column in characters) into offsets.
struct LineStarts<'a> {
    sql: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineStarts<'a> {
    fn new(sql: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
        Self { sql, starts }
    }

    fn offset(&self, location: Location) -> usize {
        let line = usize::try_from(location.line.saturating_sub(1)).unwrap_or(usize::MAX);
        let Some(&start) = self.starts.get(line) else {
            return self.sql.len();
        };
        let column = usize::try_from(location.column.saturating_sub(1)).unwrap_or(usize::MAX);
        self.sql
            .get(start..)
            .and_then(|rest| rest.char_indices().nth(column).map(|(i, _)| start + i))
            .unwrap_or(self.sql.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clause_is_taken_out_and_remembered() {
        let sql = "SELECT s.event_time, t.price FROM trades AS s\n  JOIN tickers FOR SYSTEM_TIME AS OF s.event_time AS t ON s.sym = t.sym";
        let out = rewrite(sql).unwrap();
        assert_eq!(
            out.sql,
            "SELECT s.event_time, t.price FROM trades AS s\n  JOIN tickers AS t ON s.sym = t.sym"
        );
        assert_eq!(
            out.references,
            [TemporalReference {
                table: "tickers".into(),
                alias: Some("t".into()),
                as_of: vec!["s".into(), "event_time".into()],
            }]
        );
    }

    #[test]
    fn quoted_names_bare_aliases_and_no_alias() {
        let sql = r#"SELECT 1 FROM "a.b" s LEFT JOIN "com.tickers" for system_time as of "s"."t" x ON true JOIN y FOR SYSTEM_TIME AS OF t ON true"#;
        let out = rewrite(sql).unwrap();
        assert_eq!(
            out.sql,
            r#"SELECT 1 FROM "a.b" s LEFT JOIN "com.tickers" x ON true JOIN y ON true"#
        );
        assert_eq!(out.references[0].table, "com.tickers");
        assert_eq!(out.references[0].alias.as_deref(), Some("x"));
        assert_eq!(out.references[0].as_of, ["s", "t"]);
        assert_eq!(out.references[1].relation_name(), "y");
        assert_eq!(out.references[1].as_of, ["t"]);
    }

    #[test]
    fn words_in_strings_and_comments_do_not_match() {
        let sql = "SELECT 'FOR SYSTEM_TIME AS OF x' AS \"for\" FROM a -- FOR SYSTEM_TIME AS OF y\n";
        let out = rewrite(sql).unwrap();
        assert_eq!(out.sql, sql);
        assert!(out.references.is_empty());
    }

    #[test]
    fn processing_time_and_a_missing_table_are_explained() {
        let error =
            rewrite("SELECT 1 FROM a JOIN b FOR SYSTEM_TIME AS OF PROCTIME() ON true").unwrap_err();
        assert!(error.contains("processing time"), "{error}");
        let error = rewrite("FOR SYSTEM_TIME AS OF x").unwrap_err();
        assert!(error.contains("does not follow a table name"), "{error}");
    }

    #[test]
    fn multi_byte_text_before_the_clause_is_cut_at_the_right_place() {
        let sql = "SELECT 'é€' AS x FROM s JOIN t FOR SYSTEM_TIME AS OF s.event_time ON true";
        let out = rewrite(sql).unwrap();
        assert_eq!(out.sql, "SELECT 'é€' AS x FROM s JOIN t ON true");
    }
}
