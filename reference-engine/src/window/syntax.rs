//! Window syntax as streaming pipelines are written (Flink, RisingWave), rewritten before planning onto
//! the engine's tumbling window, `date_bin`:
//!
//! - Flink's group window functions: `GROUP BY TUMBLE(ts, size)` becomes `GROUP BY date_bin(size, ts)`;
//!   `TUMBLE_START(ts, size)` is `date_bin(size, ts)`, `TUMBLE_END(ts, size)` is `date_bin(size, ts) + size`,
//!   `TUMBLE_ROWTIME(ts, size)` the end minus one millisecond.
//! - Flink's window table function `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))` and RisingWave's
//!   `tumble(t, ts, size)` in FROM become a subquery over `t` adding `window_start` and `window_end`
//!   (and Flink's `window_time`) to its columns, named `t` unless an alias follows.
//! - RisingWave's `EMIT ON WINDOW CLOSE` is dropped: the window operator always emits a window once,
//!   when the watermark closes it.
//!
//! Hopping windows (`HOP(ts, slide, size)`, `TABLE(HOP(TABLE t, DESCRIPTOR(ts), slide, size))`,
//! RisingWave's `hop(t, ts, slide, size)`) start at `hop_window_start(slide, size, ts)`
//! ([`super::hop`]). Cumulating and session windows, and window offsets, are refused with an
//! explanation.
//!
//! The rewrite works on sqlparser's tokens (words inside strings, quoted names and comments never match)
//! and renders them back, so everything else of the query is left as written.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Word};

/// `sql` with its window syntax rewritten onto `date_bin`; `Err` explains a form that is not supported.
/// SQL that does not tokenise is returned unchanged (the planner reports it).
pub(crate) fn rewrite(sql: &str) -> Result<String, String> {
    let dialect = GenericDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql)
        .with_unescape(false)
        .tokenize()
    else {
        return Ok(sql.to_owned());
    };
    if !tokens
        .iter()
        .any(|t| is_window_word(t) || is_word(t, "EMIT"))
    {
        return Ok(sql.to_owned());
    }
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        // `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size)) [alias]`
        if is_keyword(&tokens[i], Keyword::TABLE)
            && let Some(open) = next_solid(&tokens, i + 1).filter(|&j| tokens[j] == Token::LParen)
            && let Some(name) =
                next_solid(&tokens, open + 1).filter(|&j| is_window_word(&tokens[j]))
        {
            let kind = window_kind(&tokens[name]);
            let close = matching(&tokens, open).ok_or("unbalanced parentheses")?;
            let inner_open = next_solid(&tokens, name + 1)
                .filter(|&j| tokens[j] == Token::LParen)
                .ok_or_else(|| format!("{kind} must be called: TABLE({kind}(TABLE t, DESCRIPTOR(ts), INTERVAL ...))"))?;
            let inner_close = matching(&tokens, inner_open).ok_or("unbalanced parentheses")?;
            if next_solid(&tokens, inner_close + 1) != Some(close) {
                return Err(format!(
                    "TABLE(...) must hold only the window function: TABLE({kind}(TABLE t, DESCRIPTOR(ts), INTERVAL ...))"
                ));
            }
            let args = arguments(&tokens[inner_open + 1..inner_close]);
            let window = flink_table_function(&kind, &args)?;
            let alias = has_alias(&tokens, close + 1);
            out.extend(window.subquery(true, alias));
            i = close + 1;
            continue;
        }
        if is_window_word(&tokens[i])
            && let Some(open) = next_solid(&tokens, i + 1).filter(|&j| tokens[j] == Token::LParen)
        {
            let kind = window_kind(&tokens[i]);
            let close = matching(&tokens, open).ok_or("unbalanced parentheses")?;
            let args = arguments(&tokens[open + 1..close]);
            let in_from = last_solid(&out).is_some_and(|t| {
                is_keyword(t, Keyword::FROM)
                    || is_keyword(t, Keyword::JOIN)
                    || *t == Token::Comma && from_list(&out)
            });
            if in_from {
                let window = risingwave_table_function(&kind, &args)?;
                let alias = has_alias(&tokens, close + 1);
                out.extend(window.subquery(false, alias));
            } else {
                out.extend(group_window_function(&kind, &args)?);
            }
            i = close + 1;
            continue;
        }
        // RisingWave's `EMIT ON WINDOW CLOSE`.
        if is_word(&tokens[i], "EMIT") {
            let mut j = i;
            let mut matched = true;
            for word in ["ON", "WINDOW", "CLOSE"] {
                match next_solid(&tokens, j + 1) {
                    Some(k) if is_word(&tokens[k], word) => j = k,
                    _ => {
                        matched = false;
                        break;
                    }
                }
            }
            if matched {
                i = j + 1;
                continue;
            }
            return Err(
                "EMIT is supported only as `EMIT ON WINDOW CLOSE` (windows are always emitted when they close)"
                    .to_owned(),
            );
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    Ok(out.iter().map(ToString::to_string).collect())
}

/// Names of the window functions, upper case.
const WINDOW_WORDS: &[&str] = &[
    "TUMBLE",
    "TUMBLE_START",
    "TUMBLE_END",
    "TUMBLE_ROWTIME",
    "HOP",
    "HOP_START",
    "HOP_END",
    "HOP_ROWTIME",
    "SESSION",
    "SESSION_START",
    "SESSION_END",
    "SESSION_ROWTIME",
    "CUMULATE",
];

fn is_window_word(token: &Token) -> bool {
    matches!(token, Token::Word(Word { value, quote_style: None, .. })
        if WINDOW_WORDS.iter().any(|w| w.eq_ignore_ascii_case(value)))
}

fn window_kind(token: &Token) -> String {
    match token {
        Token::Word(word) => word.value.to_ascii_uppercase(),
        other => other.to_string(),
    }
}

fn is_keyword(token: &Token, keyword: Keyword) -> bool {
    matches!(token, Token::Word(Word { keyword: k, quote_style: None, .. }) if *k == keyword)
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(Word { value, quote_style: None, .. }) if value.eq_ignore_ascii_case(word))
}

fn is_space(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_))
}

/// The first token at or after `at` that is not whitespace.
fn next_solid(tokens: &[Token], at: usize) -> Option<usize> {
    (at..tokens.len()).find(|&i| !is_space(&tokens[i]))
}

fn last_solid(tokens: &[Token]) -> Option<&Token> {
    tokens.iter().rev().find(|t| !is_space(t))
}

/// Whether the end of `out` is inside a FROM list (a comma after FROM at the same bracket level).
fn from_list(out: &[Token]) -> bool {
    let mut level = 0usize;
    for token in out.iter().rev() {
        match token {
            Token::RParen => level += 1,
            Token::LParen if level == 0 => return false,
            Token::LParen => level -= 1,
            t if level == 0 && is_keyword(t, Keyword::FROM) => return true,
            t if level == 0
                && (is_keyword(t, Keyword::SELECT)
                    || is_keyword(t, Keyword::WHERE)
                    || is_keyword(t, Keyword::GROUP)) =>
            {
                return false;
            }
            _ => {}
        }
    }
    false
}

/// The index of the bracket closing the one at `open`.
fn matching(tokens: &[Token], open: usize) -> Option<usize> {
    let mut level = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::LParen => level += 1,
            Token::RParen => {
                level = level.checked_sub(1)?;
                if level == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The top-level comma-separated arguments between two brackets, trimmed of whitespace.
fn arguments(tokens: &[Token]) -> Vec<Vec<Token>> {
    let mut args = vec![Vec::new()];
    let mut level = 0usize;
    for token in tokens {
        match token {
            Token::Comma if level == 0 => {
                args.push(Vec::new());
                continue;
            }
            Token::LParen => level += 1,
            Token::RParen => level = level.saturating_sub(1),
            _ => {}
        }
        if let Some(last) = args.last_mut() {
            last.push(token.clone());
        }
    }
    args.into_iter()
        .map(|arg| {
            let start = arg.iter().position(|t| !is_space(t)).unwrap_or(arg.len());
            let end = arg
                .iter()
                .rposition(|t| !is_space(t))
                .map_or(start, |e| e + 1);
            arg[start..end.max(start)].to_vec()
        })
        .filter(|arg| !arg.is_empty())
        .collect()
}

/// Whether an alias follows position `at`: `AS name` or a bare name that is no keyword.
fn has_alias(tokens: &[Token], at: usize) -> bool {
    match next_solid(tokens, at).map(|i| &tokens[i]) {
        Some(t) if is_keyword(t, Keyword::AS) => true,
        Some(Token::Word(word)) => word.quote_style.is_some() || word.keyword == Keyword::NoKeyword,
        _ => false,
    }
}

/// A tumbling or hopping window over a table, as a table function of either syntax.
struct TableWindow {
    table: Vec<Token>,
    time: Vec<Token>,
    size: Vec<Token>,
    /// A hopping window's slide.
    slide: Option<Vec<Token>>,
}

impl TableWindow {
    /// `(SELECT *, <start> AS window_start, <end> AS window_end[, <end - 1 ms> AS window_time] FROM t) [AS t]`.
    fn subquery(&self, window_time: bool, aliased: bool) -> Vec<Token> {
        let start = window_start(self.slide.as_deref(), &self.size, &self.time);
        let size = render(&self.size);
        let mut sql = format!("(SELECT *, {start} AS window_start, {start} + {size} AS window_end");
        if window_time {
            sql.push_str(&format!(
                ", {start} + {size} - INTERVAL '1' MILLISECOND AS window_time"
            ));
        }
        sql.push_str(&format!(" FROM {})", render(&self.table)));
        if !aliased && let [name @ Token::Word(_)] = self.table.as_slice() {
            sql.push_str(&format!(" AS {name}"));
        }
        reparse(&sql)
    }
}

fn unsupported_kind(kind: &str) -> String {
    let base = kind.split('_').next().unwrap_or(kind);
    match base {
        "SESSION" => {
            "session windows (SESSION) are not supported: use a tumbling (TUMBLE) or hopping (HOP) window"
                .to_owned()
        }
        "CUMULATE" => {
            "cumulating windows (CUMULATE) are not supported: use a tumbling (TUMBLE) or hopping (HOP) window"
                .to_owned()
        }
        _ => format!("{kind} is not supported"),
    }
}

/// `TUMBLE(TABLE t, DESCRIPTOR(ts), size)` or `HOP(TABLE t, DESCRIPTOR(ts), slide, size)` (Flink's
/// window table functions).
fn flink_table_function(kind: &str, args: &[Vec<Token>]) -> Result<TableWindow, String> {
    const FORM: &str = "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL ...)) or \
        TABLE(HOP(TABLE t, DESCRIPTOR(ts), <slide>, <size>))";
    let expected = match kind {
        "TUMBLE" => 3,
        "HOP" => 4,
        _ => return Err(unsupported_kind(kind)),
    };
    if args.iter().flatten().any(|t| *t == Token::RArrow) {
        return Err(format!(
            "named arguments (=>) are not supported: write {FORM}"
        ));
    }
    if args.len() != expected {
        return Err(if args.len() > expected {
            format!("window offsets are not supported: write {FORM}")
        } else {
            format!("{kind} takes a table, a time column and its sizes: {FORM}")
        });
    }
    let table = match args[0].split_first() {
        Some((first, rest)) if is_keyword(first, Keyword::TABLE) => rest
            .iter()
            .filter(|t| !is_space(t))
            .cloned()
            .collect::<Vec<_>>(),
        _ => {
            return Err(format!(
                "the first argument of {kind} must be `TABLE <name>`: {FORM}"
            ));
        }
    };
    let time = match args[1].as_slice() {
        [word, rest @ ..] if is_word(word, "DESCRIPTOR") => {
            let inner: Vec<Token> = rest.iter().filter(|t| !is_space(t)).cloned().collect();
            match inner.as_slice() {
                [Token::LParen, column @ .., Token::RParen] if !column.is_empty() => {
                    column.to_vec()
                }
                _ => return Err(format!("DESCRIPTOR must name one time column: {FORM}")),
            }
        }
        _ => {
            return Err(format!(
                "the second argument of {kind} must be `DESCRIPTOR(<time column>)`: {FORM}"
            ));
        }
    };
    let (slide, size) = if kind == "HOP" {
        (Some(args[2].clone()), args[3].clone())
    } else {
        (None, args[2].clone())
    };
    Ok(TableWindow {
        table,
        time,
        size,
        slide,
    })
}

/// `tumble(t, ts, size)` or `hop(t, ts, slide, size)` (RisingWave's window table functions).
fn risingwave_table_function(kind: &str, args: &[Vec<Token>]) -> Result<TableWindow, String> {
    const FORM: &str = "tumble(<table>, <time column>, INTERVAL ...) or hop(<table>, <time column>, <slide>, <size>)";
    match (kind, args) {
        ("TUMBLE", [table, time, size]) => Ok(TableWindow {
            table: table.clone(),
            time: time.clone(),
            size: size.clone(),
            slide: None,
        }),
        ("HOP", [table, time, slide, size]) => Ok(TableWindow {
            table: table.clone(),
            time: time.clone(),
            size: size.clone(),
            slide: Some(slide.clone()),
        }),
        ("TUMBLE", _) if args.len() > 3 => {
            Err(format!("window offsets are not supported: write {FORM}"))
        }
        ("HOP", _) if args.len() > 4 => {
            Err(format!("window offsets are not supported: write {FORM}"))
        }
        ("TUMBLE" | "HOP", _) => Err(format!(
            "{} in FROM takes a table, a time column and its sizes: {FORM}",
            kind.to_ascii_lowercase()
        )),
        _ => Err(unsupported_kind(kind)),
    }
}

/// `TUMBLE(ts, size)` / `HOP(ts, slide, size)` and their `_START`, `_END`, `_ROWTIME` (Flink's group
/// window functions).
fn group_window_function(kind: &str, args: &[Vec<Token>]) -> Result<Vec<Token>, String> {
    const FORM: &str = "GROUP BY TUMBLE(<time column>, INTERVAL ...) with TUMBLE_START / TUMBLE_END in \
        SELECT, or HOP(<time column>, <slide>, <size>) with HOP_START / HOP_END";
    let (base, hop) = if kind.starts_with("TUMBLE") {
        ("TUMBLE", false)
    } else if kind.starts_with("HOP") {
        ("HOP", true)
    } else {
        return Err(unsupported_kind(kind));
    };
    let expected = if hop { 3 } else { 2 };
    if args.len() != expected {
        return Err(if args.len() > expected {
            format!("window offsets are not supported: write {FORM}")
        } else {
            format!("{kind} takes a time column and its sizes: {FORM}")
        });
    }
    let time = &args[0];
    let (slide, size) = if hop {
        (Some(args[1].as_slice()), &args[2])
    } else {
        (None, &args[1])
    };
    let start = window_start(slide, size, time);
    let size = render(size);
    let sql = match kind.strip_prefix(base) {
        Some("" | "_START") => start,
        Some("_END") => format!("({start} + {size})"),
        Some("_ROWTIME") => format!("({start} + {size} - INTERVAL '1' MILLISECOND)"),
        _ => return Err(format!("{kind} is not supported: {FORM}")),
    };
    Ok(reparse(&sql))
}

/// A window's start: `date_bin(size, time)`, or a hopping window's latest start holding `time`.
fn window_start(slide: Option<&[Token]>, size: &[Token], time: &[Token]) -> String {
    match slide {
        Some(slide) => format!(
            "{}({}, {}, {})",
            super::hop::HOP_FUNCTION,
            render(slide),
            render(size),
            render(time)
        ),
        None => date_bin(size, time),
    }
}

fn date_bin(size: &[Token], time: &[Token]) -> String {
    format!("date_bin({}, {})", render(size), render(time))
}

fn render(tokens: &[Token]) -> String {
    tokens.iter().map(ToString::to_string).collect()
}

/// Tokens of SQL this module wrote itself (so it always tokenises; anything else is kept as text).
fn reparse(sql: &str) -> Vec<Token> {
    let dialect = GenericDialect {};
    Tokenizer::new(&dialect, sql)
        .with_unescape(false)
        .tokenize()
        .unwrap_or_else(|_| {
            vec![Token::Word(Word {
                value: sql.to_owned(),
                quote_style: None,
                keyword: Keyword::NoKeyword,
            })]
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squash(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn flink_group_windows_become_date_bin() {
        let sql = rewrite(
            "SELECT TUMBLE_START(order_time, INTERVAL '1' DAY) as order_time, TUMBLE_END(order_time, INTERVAL '1' DAY) AS e, \
             count(*) FROM s GROUP BY TUMBLE(order_time, INTERVAL '1' DAY), order_id",
        )
        .unwrap();
        assert_eq!(
            squash(&sql),
            "SELECT date_bin(INTERVAL '1' DAY, order_time) as order_time, \
             (date_bin(INTERVAL '1' DAY, order_time) + INTERVAL '1' DAY) AS e, count(*) FROM s \
             GROUP BY date_bin(INTERVAL '1' DAY, order_time), order_id"
        );
    }

    #[test]
    fn flink_window_table_functions_become_subqueries() {
        let sql = rewrite(
            "SELECT window_start, count(*) AS n FROM TABLE(TUMBLE(TABLE input, DESCRIPTOR(event_time), INTERVAL '1' HOUR)) \
             GROUP BY window_start, window_end",
        )
        .unwrap();
        assert_eq!(
            squash(&sql),
            "SELECT window_start, count(*) AS n FROM (SELECT *, date_bin(INTERVAL '1' HOUR, event_time) AS window_start, \
             date_bin(INTERVAL '1' HOUR, event_time) + INTERVAL '1' HOUR AS window_end, \
             date_bin(INTERVAL '1' HOUR, event_time) + INTERVAL '1' HOUR - INTERVAL '1' MILLISECOND AS window_time \
             FROM input) AS input GROUP BY window_start, window_end"
        );
        let aliased = rewrite(
            "SELECT * FROM TABLE(TUMBLE(TABLE input, DESCRIPTOR(event_time), INTERVAL '1' HOUR)) AS w",
        )
        .unwrap();
        assert!(squash(&aliased).ends_with("FROM input) AS w"), "{aliased}");
    }

    #[test]
    fn risingwave_tumble_and_emit_on_window_close() {
        let sql = rewrite(
            "select window_end - interval '1' second as reported_date, province, count(1) as total_daily \
             from tumble(\"covid19.canada.case-details\", reported_date, interval '1' day) group by 1, 2 \
             emit on window close",
        )
        .unwrap();
        assert_eq!(
            squash(&sql),
            "select window_end - interval '1' second as reported_date, province, count(1) as total_daily from \
             (SELECT *, date_bin(interval '1' day, reported_date) AS window_start, \
             date_bin(interval '1' day, reported_date) + interval '1' day AS window_end \
             FROM \"covid19.canada.case-details\") AS \"covid19.canada.case-details\" group by 1, 2"
        );
    }

    #[test]
    fn strings_names_and_comments_are_left_alone() {
        for sql in [
            "SELECT 'TUMBLE(a, b)' AS x FROM t",
            "SELECT \"tumble\" FROM t -- TUMBLE(a, b)",
            "SELECT tumble_count FROM t",
        ] {
            assert_eq!(rewrite(sql).unwrap(), sql);
        }
    }

    #[test]
    fn other_windows_and_offsets_are_refused_with_the_form_to_write() {
        let hop = rewrite(
            "SELECT count(*) FROM t GROUP BY HOP(ts, INTERVAL '1' HOUR, INTERVAL '2' HOUR)",
        );
        assert!(
            hop.unwrap()
                .contains("hop_window_start(INTERVAL '1' HOUR, INTERVAL '2' HOUR, ts)")
        );
        let session = rewrite("SELECT count(*) FROM t GROUP BY SESSION(ts, INTERVAL '1' HOUR)");
        assert!(session.unwrap_err().contains("session windows"));
        let offset = rewrite(
            "SELECT count(*) FROM t GROUP BY TUMBLE(ts, INTERVAL '1' HOUR, INTERVAL '5' MINUTE)",
        );
        assert!(offset.unwrap_err().contains("offsets"));
        let cumulate = rewrite(
            "SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '1' DAY))",
        );
        assert!(cumulate.unwrap_err().contains("cumulating"));
        let emit = rewrite("SELECT * FROM t EMIT CHANGES");
        assert!(emit.unwrap_err().contains("EMIT ON WINDOW CLOSE"));
    }
}
