//! Splitting SQL text into statements: at each `;` outside string literals, quoted identifiers and
//! comments. A sans-IO core: the shell feeds it lines as they are typed, `-c` feeds it the whole text.

/// Where the scanner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Lex {
    /// Plain SQL.
    #[default]
    Code,
    /// Inside `'...'` (a doubled `''` closes and reopens, which keeps it inside).
    SingleQuoted,
    /// Inside `"..."`.
    DoubleQuoted,
    /// After `--`, up to the end of the line.
    LineComment,
    /// Inside `/* ... */`, nested to this depth.
    BlockComment(u32),
}

/// Splits SQL text, fed in pieces, into statements.
///
/// ```
/// use weir_sql::StatementSplitter;
///
/// let mut splitter = StatementSplitter::default();
/// assert!(splitter.push("SELECT 'a;b'\n").is_empty());
/// assert_eq!(splitter.push("FROM t; SELECT 2;\n"), ["SELECT 'a;b'\nFROM t", "SELECT 2"]);
/// assert!(splitter.is_blank());
/// ```
#[derive(Debug, Clone, Default)]
pub struct StatementSplitter {
    /// The text of the statement being read, from its first character.
    pending: String,
    /// How far `pending` is scanned (a byte index at a character boundary).
    scanned: usize,
    lex: Lex,
    /// Whether `pending` holds anything but whitespace and comments.
    has_code: bool,
}

impl StatementSplitter {
    /// Adds text; returns the statements it completed, in order, trimmed and without their `;`. Statements
    /// that hold only whitespace and comments are dropped.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.pending.push_str(text);
        let mut complete = Vec::new();
        while let Some(end) = self.scan(false) {
            let statement = self.pending[..end].trim().to_owned();
            let has_code = self.has_code;
            self.pending.drain(..=end);
            self.scanned = 0;
            self.has_code = false;
            if has_code {
                complete.push(statement);
            }
        }
        complete
    }

    /// The text after the last `;`, if it holds any SQL: what `-c "SELECT 1"` (no `;`) means, or an
    /// unfinished statement at the end of the input.
    pub fn finish(mut self) -> Option<String> {
        let _ = self.scan(true);
        self.has_code.then(|| self.pending.trim().to_owned())
    }

    /// Whether no statement is under way (nothing but whitespace and comments since the last `;`): the shell
    /// shows its first prompt then, and its continuation prompt otherwise.
    pub fn is_blank(&self) -> bool {
        !self.has_code && self.lex == Lex::Code
    }

    /// Scans `pending` from `scanned`; returns the byte index of the first `;` that ends a statement. Stops
    /// before a last character that may start a two-character token (`--`, `/*`, `*/`) unless `at_end`.
    fn scan(&mut self, at_end: bool) -> Option<usize> {
        let bytes = self.pending.as_bytes();
        let mut i = self.scanned;
        while i < bytes.len() {
            let c = bytes[i];
            let next = bytes.get(i + 1).copied();
            if next.is_none() && !at_end && matches!(c, b'-' | b'/' | b'*') {
                break;
            }
            let mut step = 1;
            match self.lex {
                Lex::Code => match (c, next) {
                    (b';', _) => {
                        self.scanned = i;
                        return Some(i);
                    }
                    (b'\'', _) => {
                        self.lex = Lex::SingleQuoted;
                        self.has_code = true;
                    }
                    (b'"', _) => {
                        self.lex = Lex::DoubleQuoted;
                        self.has_code = true;
                    }
                    (b'-', Some(b'-')) => {
                        self.lex = Lex::LineComment;
                        step = 2;
                    }
                    (b'/', Some(b'*')) => {
                        self.lex = Lex::BlockComment(1);
                        step = 2;
                    }
                    (c, _) if !c.is_ascii_whitespace() => self.has_code = true,
                    _ => {}
                },
                Lex::SingleQuoted if c == b'\'' => self.lex = Lex::Code,
                Lex::DoubleQuoted if c == b'"' => self.lex = Lex::Code,
                Lex::LineComment if c == b'\n' => self.lex = Lex::Code,
                Lex::BlockComment(depth) => match (c, next) {
                    (b'*', Some(b'/')) => {
                        self.lex = if depth == 1 {
                            Lex::Code
                        } else {
                            Lex::BlockComment(depth - 1)
                        };
                        step = 2;
                    }
                    (b'/', Some(b'*')) => {
                        self.lex = Lex::BlockComment(depth + 1);
                        step = 2;
                    }
                    _ => {}
                },
                _ => {}
            }
            i += step;
        }
        self.scanned = i.min(bytes.len());
        None
    }
}

/// Splits a whole SQL text into its statements (the last one needs no `;`).
///
/// ```
/// assert_eq!(
///     weir_sql::split_statements("SELECT 1; -- one\nSELECT ';' AS semicolon"),
///     ["SELECT 1", "-- one\nSELECT ';' AS semicolon"],
/// );
/// ```
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut splitter = StatementSplitter::default();
    let mut statements = splitter.push(sql);
    statements.extend(splitter.finish());
    statements
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semicolons_inside_literals_identifiers_and_comments_do_not_end_a_statement() {
        let sql =
            "SELECT 'a;''b' AS \"x;y\" /* c; /* nested; */ still; */ FROM t -- d;\n; SELECT 2";
        assert_eq!(
            split_statements(sql),
            [
                "SELECT 'a;''b' AS \"x;y\" /* c; /* nested; */ still; */ FROM t -- d;",
                "SELECT 2"
            ]
        );
    }

    #[test]
    fn statements_of_only_comments_and_whitespace_are_dropped() {
        assert!(split_statements(" ; -- nothing\n ; /* none */ ;").is_empty());
        assert!(split_statements("").is_empty());
    }

    #[test]
    fn a_comment_marker_split_across_pushes_is_recognised() {
        let mut s = StatementSplitter::default();
        assert!(s.push("SELECT 1 -").is_empty());
        assert!(s.push("- not the end;").is_empty());
        assert!(!s.is_blank());
        assert_eq!(s.push("\n;"), ["SELECT 1 -- not the end;"]);
        assert!(s.is_blank());
    }

    #[test]
    fn any_split_of_the_text_gives_the_same_statements() {
        let sql = "SELECT 'x;' -- a;\n, \"q;\" /* b; */ FROM t; SELECT 2 /* */; VALUES (1)";
        let whole = split_statements(sql);
        for cut in (0..=sql.len()).filter(|&i| sql.is_char_boundary(i)) {
            let mut s = StatementSplitter::default();
            let mut parts = s.push(&sql[..cut]);
            parts.extend(s.push(&sql[cut..]));
            parts.extend(s.finish());
            assert_eq!(parts, whole, "cut at {cut}");
        }
    }

    #[test]
    fn an_open_literal_keeps_the_statement_under_way() {
        let mut s = StatementSplitter::default();
        assert!(s.push("SELECT 'unfinished;\n").is_empty());
        assert!(!s.is_blank());
        assert_eq!(s.push("';"), ["SELECT 'unfinished;\n'"]);
    }
}
