#![doc = include_str!("../README.md")]
//!
//! ## How depth is counted
//!
//! sqlparser bounds the nesting it parses by recursion (parentheses, unary operators, subqueries), but a
//! chain of left-associative binary operators is parsed in a loop into an arbitrarily deep tree, which
//! DataFusion then walks by recursion: this crate bounds both.
//!
//! The depth it measures is an upper bound of the nesting of the expression trees the query parses into:
//! every bracket (`(`, `[`, `{`) and every `CASE ... END` opens a level, and every operator (`+`, `=`,
//! `AND`, `OR`, `IS`, `::`, ...) adds one to the level it is in, until a comma or a clause keyword
//! (`SELECT`, `FROM`, `WHERE`, `WHEN`, `AS`, ...) starts a sibling expression. The depth of a point of
//! the query is the sum over the levels enclosing it.
//!
//! The bound keeps the recursion finite, not small: a query at [`MAX_EXPRESSION_DEPTH`] needs more than
//! tokio's default 2 MiB thread stack in a debug build. The `weir-engine` binary and `weir` run their
//! threads with 64 MiB stacks (only the pages used are committed); a process that plans queries checked
//! by this crate must give the threads that plan them a stack of that order too.
//!
//! Weir's reference engine checks every query step of every operation with it, and `weir sql` (the
//! shell, `-c` and the Flight SQL server) every statement, so a query is refused the same way wherever it
//! is written.

use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer, Word};

/// The deepest expression nesting a query may have (see the module documentation for how it is counted).
///
/// A 200-term `a OR b OR ...` or `1 + 1 + ...` is within it; longer chains should be written as
/// `x IN (...)` lists (which do not nest) or split over query steps.
pub const MAX_EXPRESSION_DEPTH: usize = 200;

/// A query whose expressions nest deeper than [`MAX_EXPRESSION_DEPTH`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the query nests expressions {depth} levels deep at line {line}, column {column}, deeper than the \
     {limit} levels Weir plans: write long chains of OR / AND / + as `x IN (...)` lists, or split \
     the expression over several query steps"
)]
pub struct QueryTooDeep {
    /// The depth reached: the limit plus one (counting stops there).
    pub depth: usize,
    /// The limit, [`MAX_EXPRESSION_DEPTH`].
    pub limit: usize,
    /// Line (from 1) of the token where the limit was passed.
    pub line: u64,
    /// Column (from 1) of that token.
    pub column: u64,
}

/// Checks that `sql` nests its expressions at most [`MAX_EXPRESSION_DEPTH`] levels deep.
///
/// Call it on every SQL text before handing it to a parser or planner that recurses (DataFusion's). SQL that does not tokenise passes: the parser reports it. The check is one
/// pass over the tokens with no recursion, so it cannot itself exhaust the stack.
///
/// ```
/// use weir_query_depth::{MAX_EXPRESSION_DEPTH, check_query_depth};
///
/// assert!(check_query_depth("SELECT a + b * (c - 1) AS x FROM t WHERE a = 1 OR b = 2").is_ok());
///
/// let deep = format!("SELECT {} AS x FROM t", vec!["1"; 300].join(" + "));
/// let error = check_query_depth(&deep).unwrap_err();
/// assert!(error.depth > MAX_EXPRESSION_DEPTH);
/// assert!(error.to_string().contains("deeper than"));
/// ```
pub fn check_query_depth(sql: &str) -> Result<(), QueryTooDeep> {
    deepest(sql, MAX_EXPRESSION_DEPTH).map(|_| ())
}

/// The deepest point of `sql`, or the error at the first token deeper than `limit`.
fn deepest(sql: &str, limit: usize) -> Result<usize, QueryTooDeep> {
    let dialect = GenericDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql)
        .with_unescape(false)
        .tokenize_with_location()
    else {
        return Ok(0);
    };
    let mut levels = Levels::default();
    let mut deepest = levels.depth;
    for token in &tokens {
        match &token.token {
            Token::LParen | Token::LBracket | Token::LBrace => levels.open(Opener::Bracket),
            Token::RParen | Token::RBracket | Token::RBrace => levels.close(Opener::Bracket),
            Token::Comma | Token::SemiColon => levels.sibling(),
            Token::Word(word) if word.quote_style.is_none() => match word.keyword {
                Keyword::CASE => levels.open(Opener::Case),
                Keyword::END => levels.close(Opener::Case),
                keyword if SEPARATORS.contains(&keyword) => levels.sibling(),
                keyword if OPERATOR_WORDS.contains(&keyword) => levels.operator(),
                _ => {}
            },
            token if is_operator(token) => levels.operator(),
            _ => {}
        }
        if levels.depth > limit {
            return Err(QueryTooDeep {
                depth: levels.depth,
                limit,
                line: token.span.start.line,
                column: token.span.start.column,
            });
        }
        deepest = deepest.max(levels.depth);
    }
    Ok(deepest)
}

/// Keywords that start a sibling expression (or a clause) at the level they are in.
const SEPARATORS: &[Keyword] = &[
    Keyword::SELECT,
    Keyword::FROM,
    Keyword::WHERE,
    Keyword::GROUP,
    Keyword::HAVING,
    Keyword::ORDER,
    Keyword::LIMIT,
    Keyword::OFFSET,
    Keyword::ON,
    Keyword::JOIN,
    Keyword::UNION,
    Keyword::EXCEPT,
    Keyword::INTERSECT,
    Keyword::WHEN,
    Keyword::THEN,
    Keyword::ELSE,
    Keyword::AS,
    Keyword::WITH,
    Keyword::QUALIFY,
    Keyword::WINDOW,
    Keyword::VALUES,
];

/// Keywords that are operators: each nests the expression it is in one level deeper.
const OPERATOR_WORDS: &[Keyword] = &[
    Keyword::AND,
    Keyword::OR,
    Keyword::XOR,
    Keyword::NOT,
    Keyword::IS,
    Keyword::LIKE,
    Keyword::ILIKE,
    Keyword::SIMILAR,
    Keyword::BETWEEN,
    Keyword::IN,
    Keyword::AT,
    Keyword::COLLATE,
    Keyword::DIV,
    Keyword::REGEXP,
    Keyword::RLIKE,
    Keyword::OVERLAPS,
    Keyword::MEMBER,
    Keyword::ESCAPE,
];

/// Whether a token (not a word, bracket or separator) is an operator: everything but literals,
/// whitespace and name punctuation.
fn is_operator(token: &Token) -> bool {
    !matches!(
        token,
        Token::EOF
            | Token::Word(Word { .. })
            | Token::Number(..)
            | Token::Char(_)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::TripleSingleQuotedString(_)
            | Token::TripleDoubleQuotedString(_)
            | Token::DollarQuotedString(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
            | Token::TripleSingleQuotedByteStringLiteral(_)
            | Token::TripleDoubleQuotedByteStringLiteral(_)
            | Token::SingleQuotedRawStringLiteral(_)
            | Token::DoubleQuotedRawStringLiteral(_)
            | Token::TripleSingleQuotedRawStringLiteral(_)
            | Token::TripleDoubleQuotedRawStringLiteral(_)
            | Token::NationalStringLiteral(_)
            | Token::QuoteDelimitedStringLiteral(_)
            | Token::NationalQuoteDelimitedStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::UnicodeStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::Whitespace(_)
            | Token::Period
            | Token::Placeholder(_)
    )
}

/// What opened a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opener {
    /// The query itself.
    Query,
    /// `(`, `[` or `{`.
    Bracket,
    /// `CASE`.
    Case,
}

/// The open levels at a point of the query, with the operators seen in each since its last sibling.
#[derive(Debug)]
struct Levels {
    /// Each open level and its operator count.
    open: Vec<(Opener, usize)>,
    /// Levels plus operators over all open levels: the depth at this point.
    depth: usize,
}

impl Default for Levels {
    fn default() -> Self {
        Self {
            open: vec![(Opener::Query, 0)],
            depth: 1,
        }
    }
}

impl Levels {
    fn open(&mut self, opener: Opener) {
        self.open.push((opener, 0));
        self.depth += 1;
    }

    /// Closes the innermost level if `opener` opened it (unbalanced SQL is the parser's to report).
    fn close(&mut self, opener: Opener) {
        if self.open.len() > 1
            && let Some(&(top, operators)) = self.open.last()
            && top == opener
        {
            self.open.pop();
            self.depth -= 1 + operators;
        }
    }

    fn sibling(&mut self) {
        if let Some((_, operators)) = self.open.last_mut() {
            self.depth -= *operators;
            *operators = 0;
        }
    }

    fn operator(&mut self) {
        if let Some((_, operators)) = self.open.last_mut() {
            *operators += 1;
            self.depth += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_of(sql: &str) -> usize {
        deepest(sql, usize::MAX).unwrap()
    }

    #[test]
    fn ordinary_queries_are_shallow() {
        assert!(depth_of("SELECT a, b + 1 AS c FROM t WHERE a = 1 AND b < 2") <= 4);
        assert!(depth_of("SELECT count(*) AS n FROM t GROUP BY 1") <= 4);
        let in_list = format!(
            "SELECT * FROM t WHERE x IN ({})",
            vec!["'a'"; 5000].join(", ")
        );
        assert!(depth_of(&in_list) <= 4);
        let columns = (0..2000)
            .map(|i| format!("a{i} + b{i} AS c{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(depth_of(&format!("SELECT {columns} FROM t")) <= 3);
        let case = format!(
            "SELECT CASE {} ELSE 0 END AS x FROM t",
            (0..1000)
                .map(|i| format!("WHEN a = {i} THEN {i}"))
                .collect::<String>()
        );
        assert!(depth_of(&case) <= 4);
    }

    #[test]
    fn chains_brackets_and_case_nest() {
        let chain = |n: usize, op: &str| vec!["a"; n].join(op);
        assert!(depth_of(&format!("SELECT {} FROM t", chain(300, " + "))) >= 300);
        assert!(depth_of(&format!("SELECT * FROM t WHERE {}", chain(500, " OR "))) >= 500);
        let parens = format!("SELECT {}1{} AS x", "(".repeat(1000), ")".repeat(1000));
        assert!(depth_of(&parens) >= 1000);
        let cases = format!(
            "SELECT {}1{} AS x",
            "CASE WHEN a THEN ".repeat(300),
            " END".repeat(300)
        );
        assert!(depth_of(&cases) >= 300);
        let casts = format!("SELECT a{} FROM t", "::text".repeat(300));
        assert!(depth_of(&casts) >= 300);
    }

    #[test]
    fn closing_restores_the_enclosing_depth() {
        let sql = format!("SELECT ({}) + 1 AS x FROM t", vec!["a"; 100].join(" + "));
        // Inside the brackets 100 deep, after them back to the outer level.
        assert!((100..110).contains(&depth_of(&sql)));
        let siblings = format!(
            "SELECT ({x}) AS a, ({x}) AS b, ({x}) AS c FROM t",
            x = vec!["a"; 150].join(" + ")
        );
        assert!(check_query_depth(&siblings).is_ok());
    }

    #[test]
    fn the_check_refuses_past_the_limit_with_a_position() {
        let sql = format!("SELECT\n  {} AS x FROM t", vec!["1"; 300].join(" + "));
        let error = check_query_depth(&sql).unwrap_err();
        assert_eq!(error.line, 2);
        assert_eq!(error.limit, MAX_EXPRESSION_DEPTH);
        assert_eq!(error.depth, MAX_EXPRESSION_DEPTH + 1);
        assert!(check_query_depth(&format!("SELECT {} AS x", vec!["1"; 150].join(" + "))).is_ok());
    }

    #[test]
    fn unbalanced_or_untokenisable_sql_is_left_to_the_parser() {
        assert!(check_query_depth("SELECT ))) END END FROM t").is_ok());
        assert!(check_query_depth("SELECT 'unterminated").is_ok());
    }
}
