//! A statement's digest text: what it does without its values. Every
//! string and number becomes `?`, a list of them (`IN (1, 2, 3)`, a row of
//! VALUES) becomes `?,...`, comments and hints go, and spacing is one
//! blank where the statement had any. Statements that differ only in
//! their values share a digest, and a digest never carries a value, so
//! it can be logged (the slow log) or listed (query digests) without
//! leaking a password or personal data a statement held.

use crate::lexer::{LexMode, Lexer, TokenKind};

/// Longest digest kept; longer ones end with `...`.
pub const MAX_DIGEST: usize = 1024;

/// Writes `sql`'s digest into `out` (cleared first).
pub fn digest(sql: &[u8], mode: LexMode, out: &mut String) {
    out.clear();
    let base = sql.as_ptr() as usize;
    let mut prev_end = 0usize;
    // The output ends with `?` then a comma not written yet.
    let mut pending_comma = false;
    // Inside a run of `?, ?, ...` collapsed to one `?`.
    let mut in_list = false;
    for t in Lexer::with_mode(sql, mode) {
        let start = t.text.as_ptr() as usize - base;
        let end = start + t.text.len();
        if t.kind == TokenKind::Hint {
            prev_end = end + 2;
            continue;
        }
        let gap = start > prev_end;
        // (A quoted name's text is inside its quotes; a string's is not.)
        prev_end = match t.kind {
            TokenKind::QuotedIdent => end + 1,
            _ => end,
        };
        // A word starting with a digit is a number with a fraction or an
        // exponent, or a hex literal (0xBEEF): a value too.
        let literal = matches!(t.kind, TokenKind::Str | TokenKind::Number)
            || t.kind == TokenKind::Word && t.text.first().is_some_and(u8::is_ascii_digit);
        if t.is_punct(b',') && !pending_comma && (in_list || out.ends_with('?')) {
            pending_comma = true;
            continue;
        }
        if pending_comma {
            pending_comma = false;
            if literal {
                in_list = true;
                continue;
            }
            if in_list {
                out.push_str(",...");
                in_list = false;
            }
            out.push(',');
        } else if in_list {
            out.push_str(",...");
            in_list = false;
        }
        if gap && !out.is_empty() && !out.ends_with('(') && !t.is_punct(b')') {
            out.push(' ');
        }
        match t.kind {
            _ if literal => out.push('?'),
            // `'user'@'host'` lexes as a string and a quoted user
            // variable: the host is a value.
            TokenKind::UserVar if matches!(t.text.get(1), Some(b'\'' | b'"')) => out.push_str("@?"),
            TokenKind::QuotedIdent => {
                out.push('`');
                push_text(out, t.text);
                out.push('`');
            }
            _ => push_text(out, t.text),
        }
        if out.len() > MAX_DIGEST {
            let mut cut = MAX_DIGEST;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str("...");
            return;
        }
    }
    if in_list {
        out.push_str(",...");
    }
    if pending_comma {
        out.push(',');
    }
}

/// A token's text, as is when it is UTF-8 (nearly always: the check is
/// cheap), else with U+FFFD for what is not.
#[inline]
fn push_text(out: &mut String, text: &[u8]) {
    match std::str::from_utf8(text) {
        Ok(s) => out.push_str(s),
        Err(_) => out.push_str(&String::from_utf8_lossy(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(sql: &str) -> String {
        let mut out = String::new();
        digest(sql.as_bytes(), LexMode::DEFAULT, &mut out);
        out
    }

    #[test]
    fn values_become_placeholders() {
        let cases = [
            (
                "SELECT c FROM sbtest1 WHERE id=42",
                "SELECT c FROM sbtest1 WHERE id=?",
            ),
            (
                "SELECT  c\n FROM t WHERE name = 'O''Brien' AND x > -1.5e3",
                "SELECT c FROM t WHERE name = ? AND x > -?",
            ),
            (
                "SELECT * FROM t WHERE id IN (1, 2, 3)",
                "SELECT * FROM t WHERE id IN (?,...)",
            ),
            (
                "SELECT * FROM t WHERE id IN (7)",
                "SELECT * FROM t WHERE id IN (?)",
            ),
            (
                "INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')",
                "INSERT INTO t (a, b) VALUES (?,...), (?,...)",
            ),
            ("SELECT a, b FROM t", "SELECT a, b FROM t"),
            ("SELECT f(1, a) FROM t", "SELECT f(?, a) FROM t"),
            (
                "/* app: checkout */ SELECT /*# group=\"a\" */ 1",
                "SELECT ?",
            ),
            (
                "SET PASSWORD FOR 'app'@'%' = PASSWORD('s3cret')",
                "SET PASSWORD FOR ?@? = PASSWORD(?)",
            ),
            (
                "CREATE USER x IDENTIFIED BY \"hunter2\"",
                "CREATE USER x IDENTIFIED BY ?",
            ),
            (
                "SELECT `select` FROM `my table`",
                "SELECT `select` FROM `my table`",
            ),
            (
                "SELECT ?, ? FROM t WHERE id = ?",
                "SELECT ?, ? FROM t WHERE id = ?",
            ),
        ];
        for (sql, want) in cases {
            assert_eq!(d(sql), want, "{sql}");
        }
    }

    #[test]
    fn same_shape_same_digest_and_bounded() {
        assert_eq!(
            d("SELECT 1 FROM t WHERE a = 'x'"),
            d("select 1 from t where a = 'yy'")
                .replace("select", "SELECT")
                .replace("from", "FROM")
                .replace("where", "WHERE")
        );
        let long = format!("SELECT {} FROM t", vec!["col"; 1000].join(" + "));
        let out = d(&long);
        assert!(out.len() <= MAX_DIGEST + 3 && out.ends_with("..."));
    }
}
