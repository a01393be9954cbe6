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
//! ([`super::hop`]). Flink's cumulating windows (`TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), step,
//! size))`) and session windows (`GROUP BY SESSION(ts, gap)` with `SESSION_START`, `SESSION_END`,
//! `SESSION_ROWTIME`; `TABLE(SESSION(TABLE t [PARTITION BY (k, ...)], DESCRIPTOR(ts), gap))`) are
//! written with the window bound functions of [`super::functions`]. Window offsets, and the forms
//! neither system has (RisingWave's `cumulate`/`session`, Flink's group window `CUMULATE`), are refused
//! with an explanation.
//!
//! The rewrite works on sqlparser's tokens (words inside strings, quoted names and comments never match)
//! and renders them back, so everything else of the query is left as written.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Word};

use super::functions;

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

/// The sizes of a window over a table.
enum Sizes {
    Tumble {
        size: Vec<Token>,
    },
    Hop {
        slide: Vec<Token>,
        size: Vec<Token>,
    },
    Cumulate {
        step: Vec<Token>,
        size: Vec<Token>,
    },
    Session {
        gap: Vec<Token>,
        /// The PARTITION BY columns.
        partition: Vec<Vec<Token>>,
    },
}

/// A window over a table, as a table function of either syntax.
struct TableWindow {
    table: Vec<Token>,
    time: Vec<Token>,
    sizes: Sizes,
}

impl TableWindow {
    /// Its start and end, as SQL over the table's columns.
    fn bounds(&self) -> (String, String) {
        let time = &self.time;
        match &self.sizes {
            Sizes::Tumble { size } => {
                let start = window_start(None, size, time);
                let end = format!("{start} + {}", render(size));
                (start, end)
            }
            Sizes::Hop { slide, size } => {
                let start = window_start(Some(slide), size, time);
                let end = format!("{start} + {}", render(size));
                (start, end)
            }
            Sizes::Cumulate { step, size } => {
                let args = format!("{}, {}, {}", render(step), render(size), render(time));
                (
                    format!("{}({args})", functions::CUMULATE_START),
                    format!("{}({args})", functions::CUMULATE_END),
                )
            }
            Sizes::Session { gap, partition } => {
                let mut start = format!(
                    "{}({}, {}, '{}'",
                    functions::SESSION_START,
                    render(gap),
                    render(time),
                    functions::PARTITION_MARKER
                );
                for column in partition {
                    start.push_str(&format!(", {}", render(column)));
                }
                start.push(')');
                let end = format!("{}({}, {start})", functions::SESSION_END, render(gap));
                (start, end)
            }
        }
    }

    /// `(SELECT *, <start> AS window_start, <end> AS window_end[, <end - 1 ms> AS window_time] FROM t) [AS t]`.
    fn subquery(&self, window_time: bool, aliased: bool) -> Vec<Token> {
        let (start, end) = self.bounds();
        let mut sql = format!("(SELECT *, {start} AS window_start, {end} AS window_end");
        if window_time {
            sql.push_str(&format!(
                ", {end} - INTERVAL '1' MILLISECOND AS window_time"
            ));
        }
        sql.push_str(&format!(" FROM {})", render(&self.table)));
        if !aliased && let [name @ Token::Word(_)] = self.table.as_slice() {
            sql.push_str(&format!(" AS {name}"));
        }
        reparse(&sql)
    }
}

/// Flink's window table functions, as they are written.
const FLINK_FORMS: &str = "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), <size>)), \
    TABLE(HOP(TABLE t, DESCRIPTOR(ts), <slide>, <size>)), \
    TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), <step>, <size>)) or \
    TABLE(SESSION(TABLE t [PARTITION BY (k1, ...)], DESCRIPTOR(ts), <gap>))";

/// `TUMBLE(TABLE t, DESCRIPTOR(ts), size)`, `HOP(TABLE t, DESCRIPTOR(ts), slide, size)`,
/// `CUMULATE(TABLE t, DESCRIPTOR(ts), step, size)` or `SESSION(TABLE t [PARTITION BY k | PARTITION BY
/// (k1, ...)], DESCRIPTOR(ts), gap)` (Flink's window table functions).
fn flink_table_function(kind: &str, args: &[Vec<Token>]) -> Result<TableWindow, String> {
    const FORM: &str = FLINK_FORMS;
    let expected = match kind {
        "TUMBLE" | "SESSION" => 3,
        "HOP" | "CUMULATE" => 4,
        _ => {
            return Err(format!(
                "{kind} is not a window table function: write {FORM}"
            ));
        }
    };
    if args.iter().flatten().any(|t| *t == Token::RArrow) {
        return Err(format!(
            "named arguments (=>) are not supported: write {FORM}"
        ));
    }
    let partitioned = args
        .first()
        .is_some_and(|table| table.iter().any(|t| is_word(t, "PARTITION")));
    if kind == "SESSION" && partitioned && args.len() > expected {
        return Err(format!(
            "several PARTITION BY columns are written in brackets: PARTITION BY (k1, k2); write {FORM}"
        ));
    }
    if args.len() != expected {
        return Err(if args.len() > expected {
            format!("window offsets are not supported: write {FORM}")
        } else {
            format!("{kind} takes a table, a time column and its sizes: {FORM}")
        });
    }
    let (table, partition) = match args[0].split_first() {
        Some((first, rest)) if is_keyword(first, Keyword::TABLE) => {
            let solid: Vec<Token> = rest.iter().filter(|t| !is_space(t)).cloned().collect();
            match solid.iter().position(|t| is_word(t, "PARTITION")) {
                None => (solid, Vec::new()),
                Some(_) if kind != "SESSION" => {
                    return Err(format!(
                        "only SESSION partitions its table (PARTITION BY): write {FORM}"
                    ));
                }
                Some(at) => (solid[..at].to_vec(), partition_columns(&solid[at + 1..])?),
            }
        }
        _ => {
            return Err(format!(
                "the first argument of {kind} must be `TABLE <name>`: {FORM}"
            ));
        }
    };
    if table.is_empty() {
        return Err(format!("{kind} must name its table: {FORM}"));
    }
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
    let sizes = match kind {
        "HOP" => Sizes::Hop {
            slide: args[2].clone(),
            size: args[3].clone(),
        },
        "CUMULATE" => Sizes::Cumulate {
            step: args[2].clone(),
            size: args[3].clone(),
        },
        "SESSION" => Sizes::Session {
            gap: args[2].clone(),
            partition,
        },
        _ => Sizes::Tumble {
            size: args[2].clone(),
        },
    };
    Ok(TableWindow { table, time, sizes })
}

/// The columns after `PARTITION` in a session's table argument: `BY k` or `BY (k1, k2, ...)`.
fn partition_columns(tokens: &[Token]) -> Result<Vec<Vec<Token>>, String> {
    let form = "PARTITION BY <column> or PARTITION BY (<column>, ...)";
    let Some((by, rest)) = tokens
        .split_first()
        .filter(|(by, _)| is_keyword(by, Keyword::BY))
    else {
        return Err(format!("PARTITION must be followed by BY: {form}"));
    };
    let _ = by;
    let columns = match rest {
        [Token::LParen, inner @ .., Token::RParen] => arguments(inner),
        [] => Vec::new(),
        column => vec![column.to_vec()],
    };
    if columns.is_empty() {
        return Err(format!("PARTITION BY must name columns: {form}"));
    }
    Ok(columns)
}

/// `tumble(t, ts, size)` or `hop(t, ts, slide, size)` (RisingWave's window table functions).
fn risingwave_table_function(kind: &str, args: &[Vec<Token>]) -> Result<TableWindow, String> {
    const FORM: &str = "tumble(<table>, <time column>, INTERVAL ...) or hop(<table>, <time column>, <slide>, <size>)";
    match (kind, args) {
        ("TUMBLE", [table, time, size]) => Ok(TableWindow {
            table: table.clone(),
            time: time.clone(),
            sizes: Sizes::Tumble { size: size.clone() },
        }),
        ("HOP", [table, time, slide, size]) => Ok(TableWindow {
            table: table.clone(),
            time: time.clone(),
            sizes: Sizes::Hop {
                slide: slide.clone(),
                size: size.clone(),
            },
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
        ("CUMULATE", _) => Err(
            "cumulate(...) in FROM is no window table function (RisingWave has none): write Flink's \
             TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), <step>, <size>))"
                .to_owned(),
        ),
        ("SESSION", _) => Err(
            "session(...) in FROM is no window table function (RisingWave has none): write Flink's \
             TABLE(SESSION(TABLE t [PARTITION BY (k1, ...)], DESCRIPTOR(ts), <gap>)) or \
             GROUP BY SESSION(ts, <gap>), k1, ..."
                .to_owned(),
        ),
        _ => Err(format!("{kind} in FROM is not supported: write {FORM}")),
    }
}

/// `TUMBLE(ts, size)` / `HOP(ts, slide, size)` / `SESSION(ts, gap)` and their `_START`, `_END`,
/// `_ROWTIME` (Flink's group window functions).
fn group_window_function(kind: &str, args: &[Vec<Token>]) -> Result<Vec<Token>, String> {
    const FORM: &str = "GROUP BY TUMBLE(<time column>, INTERVAL ...) with TUMBLE_START / TUMBLE_END in \
        SELECT, HOP(<time column>, <slide>, <size>) with HOP_START / HOP_END, or \
        SESSION(<time column>, <gap>) with SESSION_START / SESSION_END";
    let (base, expected) = if kind.starts_with("TUMBLE") {
        ("TUMBLE", 2)
    } else if kind.starts_with("HOP") {
        ("HOP", 3)
    } else if kind.starts_with("SESSION") {
        ("SESSION", 2)
    } else if kind == "CUMULATE" {
        return Err(
            "CUMULATE is no group window function (Flink has none): write the window table function \
             FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), <step>, <size>)) ... GROUP BY window_start, window_end"
                .to_owned(),
        );
    } else {
        return Err(format!("{kind} is not supported: {FORM}"));
    };
    if args.len() != expected {
        return Err(if args.len() > expected && base != "SESSION" {
            format!("window offsets are not supported: write {FORM}")
        } else {
            format!("{kind} takes a time column and its sizes: {FORM}")
        });
    }
    let time = &args[0];
    let (start, size) = match base {
        "HOP" => (
            window_start(Some(&args[1]), &args[2], time),
            render(&args[2]),
        ),
        "SESSION" => (
            format!(
                "{}({}, {})",
                functions::SESSION_START,
                render(&args[1]),
                render(time)
            ),
            render(&args[1]),
        ),
        _ => (window_start(None, &args[1], time), render(&args[1])),
    };
    // A session's end is not its start plus the gap: it is the end of the session grouped by.
    let end = if base == "SESSION" {
        format!("{}({size}, {start})", functions::SESSION_END)
    } else {
        format!("{start} + {size}")
    };
    let sql = match kind.strip_prefix(base) {
        Some("" | "_START") => start,
        Some("_END") => format!("({end})"),
        Some("_ROWTIME") => format!("({end} - INTERVAL '1' MILLISECOND)"),
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
    fn hopping_windows_start_at_the_latest_window_holding_the_record() {
        let hop = rewrite(
            "SELECT count(*) FROM t GROUP BY HOP(ts, INTERVAL '1' HOUR, INTERVAL '2' HOUR)",
        );
        assert!(
            hop.unwrap()
                .contains("hop_window_start(INTERVAL '1' HOUR, INTERVAL '2' HOUR, ts)")
        );
    }

    #[test]
    fn cumulating_windows_become_their_start_and_end_functions() {
        let sql = rewrite(
            "SELECT window_start, window_end, count(*) FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), \
             INTERVAL '1' HOUR, INTERVAL '1' DAY)) GROUP BY window_start, window_end",
        )
        .unwrap();
        assert_eq!(
            squash(&sql),
            "SELECT window_start, window_end, count(*) FROM (SELECT *, \
             cumulate_window_start(INTERVAL '1' HOUR, INTERVAL '1' DAY, ts) AS window_start, \
             cumulate_window_end(INTERVAL '1' HOUR, INTERVAL '1' DAY, ts) AS window_end, \
             cumulate_window_end(INTERVAL '1' HOUR, INTERVAL '1' DAY, ts) - INTERVAL '1' MILLISECOND AS window_time \
             FROM t) AS t GROUP BY window_start, window_end"
        );
    }

    #[test]
    fn session_group_windows_end_at_the_end_of_the_session_grouped_by() {
        let sql = rewrite(
            "SELECT SESSION_START(ts, INTERVAL '5' MINUTE) AS s, SESSION_END(ts, INTERVAL '5' MINUTE) AS e, \
             SESSION_ROWTIME(ts, INTERVAL '5' MINUTE) AS r, k, count(*) FROM t \
             GROUP BY SESSION(ts, INTERVAL '5' MINUTE), k",
        )
        .unwrap();
        assert_eq!(
            squash(&sql),
            "SELECT session_window_start(INTERVAL '5' MINUTE, ts) AS s, \
             (session_window_end(INTERVAL '5' MINUTE, session_window_start(INTERVAL '5' MINUTE, ts))) AS e, \
             (session_window_end(INTERVAL '5' MINUTE, session_window_start(INTERVAL '5' MINUTE, ts)) - INTERVAL '1' MILLISECOND) AS r, \
             k, count(*) FROM t GROUP BY session_window_start(INTERVAL '5' MINUTE, ts), k"
        );
    }

    #[test]
    fn session_table_functions_carry_their_partition_columns() {
        for (partition, columns) in [
            ("PARTITION BY k", ", k"),
            ("PARTITION BY (k, j)", ", k, j"),
            ("", ""),
        ] {
            let sql = rewrite(&format!(
                "SELECT * FROM TABLE(SESSION(TABLE t {partition}, DESCRIPTOR(ts), INTERVAL '5' MINUTE)) AS w"
            ))
            .unwrap();
            let start =
                format!("session_window_start(INTERVAL '5' MINUTE, ts, 'PARTITION BY'{columns})");
            assert_eq!(
                squash(&sql),
                format!(
                    "SELECT * FROM (SELECT *, {start} AS window_start, \
                     session_window_end(INTERVAL '5' MINUTE, {start}) AS window_end, \
                     session_window_end(INTERVAL '5' MINUTE, {start}) - INTERVAL '1' MILLISECOND AS window_time \
                     FROM t) AS w"
                )
            );
        }
    }

    #[test]
    fn forms_neither_system_has_and_offsets_are_refused_with_the_form_to_write() {
        for (sql, expected) in [
            (
                "SELECT count(*) FROM t GROUP BY TUMBLE(ts, INTERVAL '1' HOUR, INTERVAL '5' MINUTE)",
                "offsets",
            ),
            (
                "SELECT count(*) FROM t GROUP BY CUMULATE(ts, INTERVAL '1' HOUR, INTERVAL '1' DAY)",
                "TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), <step>, <size>))",
            ),
            (
                "SELECT count(*) FROM cumulate(t, ts, INTERVAL '1' HOUR, INTERVAL '1' DAY)",
                "RisingWave has none",
            ),
            (
                "SELECT count(*) FROM session(t, ts, INTERVAL '1' HOUR)",
                "GROUP BY SESSION(ts, <gap>)",
            ),
            (
                "SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY k, j, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
                "PARTITION BY (k1, k2)",
            ),
            (
                "SELECT * FROM TABLE(TUMBLE(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
                "only SESSION",
            ),
            ("SELECT * FROM t EMIT CHANGES", "EMIT ON WINDOW CLOSE"),
        ] {
            let message = rewrite(sql).unwrap_err();
            assert!(message.contains(expected), "{sql}: {message}");
        }
    }
}
