//! The assignments of a `SET` that gives session variables plain literals
//! (`SET autocommit = 1`, `SET SESSION time_zone = '+00:00'`,
//! `SET @@wait_timeout = 600, sql_mode = 'ANSI'`): what a proxy needs to
//! tell whether the statement would change nothing. Anything else (an
//! expression, DEFAULT, GLOBAL, a user variable, NAMES, a string with an
//! escape or an introducer) is not such a SET.

use crate::{LexMode, Lexer, TokenKind};

/// How many assignments one such SET may have (more: not one).
pub const MAX_ASSIGNMENTS: usize = 4;

/// The literal a variable is given, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Literal<'a> {
    /// A quoted string's contents (no escapes in it).
    Str(&'a [u8]),
    /// Unsigned decimal digits.
    Digits(&'a [u8]),
    /// A bare word: ON, OFF, TRUE or FALSE as written.
    Word(&'a [u8]),
}

/// One assignment: the variable's name as written (without `@@`,
/// `SESSION.` or `LOCAL.`) and its literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment<'a> {
    pub name: &'a [u8],
    pub value: Literal<'a>,
}

/// The assignments of `sql` when it is `SET` followed only by session
/// variables given literals; None otherwise. Allocates nothing.
pub fn literal_assignments(
    sql: &[u8],
    mode: LexMode,
) -> Option<([Assignment<'_>; MAX_ASSIGNMENTS], usize)> {
    let mut t = Lexer::with_mode(sql, mode).filter(|t| t.kind != TokenKind::Hint);
    if !t.next()?.is_word("SET") {
        return None;
    }
    let blank = Assignment {
        name: b"",
        value: Literal::Word(b""),
    };
    let mut out = [blank; MAX_ASSIGNMENTS];
    let mut n = 0;
    loop {
        let mut tok = t.next()?;
        if tok.is_word("SESSION") || tok.is_word("LOCAL") {
            tok = t.next()?;
        }
        let name = match tok.kind {
            TokenKind::Word if !RESERVED.iter().any(|w| tok.is_word(w)) => tok.text,
            TokenKind::SysVar => session_name(tok.text)?,
            _ => return None,
        };
        let eq = t.next()?;
        // (`:=` is read as two tokens, and `: =` is not the same
        // statement to the server: left to it.)
        if !eq.is_punct(b'=') {
            return None;
        }
        let v = t.next()?;
        let value = match v.kind {
            TokenKind::Str => Literal::Str(plain_string(v.text)?),
            TokenKind::Number if v.text.iter().all(u8::is_ascii_digit) => Literal::Digits(v.text),
            TokenKind::Word if ["ON", "OFF", "TRUE", "FALSE"].iter().any(|w| v.is_word(w)) => {
                Literal::Word(v.text)
            }
            _ => return None,
        };
        if n == MAX_ASSIGNMENTS {
            return None;
        }
        out[n] = Assignment { name, value };
        n += 1;
        match t.next() {
            None => return Some((out, n)),
            Some(c) if c.is_punct(b',') => continue,
            Some(_) => return None,
        }
    }
}

/// Words after SET (or SESSION) that do not name a session variable.
const RESERVED: &[&str] = &[
    "GLOBAL",
    "PERSIST",
    "PERSIST_ONLY",
    "TRANSACTION",
    "PASSWORD",
    "ROLE",
    "DEFAULT",
    "STATEMENT",
    "NAMES",
    "CHARACTER",
    "CHARSET",
    "SESSION",
    "LOCAL",
];

/// `@@x`, `@@session.x`, `@@local.x`: x. Not `@@global.x`, nor a quoted
/// form.
fn session_name(text: &[u8]) -> Option<&[u8]> {
    let rest = text.strip_prefix(b"@@")?;
    let name = match rest.iter().position(|&c| c == b'.') {
        None => rest,
        Some(i) => {
            let scope = &rest[..i];
            if !(scope.eq_ignore_ascii_case(b"session") || scope.eq_ignore_ascii_case(b"local")) {
                return None;
            }
            &rest[i + 1..]
        }
    };
    let plain = !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    plain.then_some(name)
}

/// A quoted string's contents when it has no escape, no doubled quote and
/// no prefix: exactly the bytes the server takes.
fn plain_string(text: &[u8]) -> Option<&[u8]> {
    let q = *text.first()?;
    if !(q == b'\'' || q == b'"') || text.len() < 2 || text[text.len() - 1] != q {
        return None;
    }
    let inner = &text[1..text.len() - 1];
    (!inner.iter().any(|&c| c == b'\\' || c == q)).then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Option<Vec<(String, String)>> {
        let (a, n) = literal_assignments(sql.as_bytes(), LexMode::DEFAULT)?;
        Some(
            a[..n]
                .iter()
                .map(|a| {
                    let v = match a.value {
                        Literal::Str(s) => format!("str:{}", String::from_utf8_lossy(s)),
                        Literal::Digits(s) => format!("num:{}", String::from_utf8_lossy(s)),
                        Literal::Word(s) => format!("word:{}", String::from_utf8_lossy(s)),
                    };
                    (String::from_utf8_lossy(a.name).into_owned(), v)
                })
                .collect(),
        )
    }

    #[test]
    fn literal_sets_are_read_and_everything_else_is_not() {
        type Case<'a> = (&'a str, Option<&'a [(&'a str, &'a str)]>);
        let cases: &[Case<'_>] = &[
            ("SET autocommit = 1", Some(&[("autocommit", "num:1")])),
            ("set autocommit=ON", Some(&[("autocommit", "word:ON")])),
            (
                "SET SESSION time_zone = '+00:00'",
                Some(&[("time_zone", "str:+00:00")]),
            ),
            (
                "SET @@session.wait_timeout = 600, LOCAL sql_mode = \"ANSI\"",
                Some(&[("wait_timeout", "num:600"), ("sql_mode", "str:ANSI")]),
            ),
            ("SET @@local.x = FALSE", Some(&[("x", "word:FALSE")])),
            ("SET @@x = true", Some(&[("x", "word:true")])),
            (
                "SET /*# hint */ autocommit = 0",
                Some(&[("autocommit", "num:0")]),
            ),
            ("SET autocommit := 1", None),
            ("SET GLOBAL autocommit = 1", None),
            ("SET @@global.autocommit = 1", None),
            ("SET @a = 1", None),
            ("SET NAMES utf8mb4", None),
            ("SET CHARACTER SET utf8mb4", None),
            ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", None),
            ("SET SESSION TRANSACTION READ ONLY", None),
            ("SET autocommit = DEFAULT", None),
            ("SET autocommit = 1 + 0", None),
            ("SET autocommit = -1", None),
            ("SET wait_timeout = 1.5", None),
            ("SET wait_timeout = 0x10", None),
            ("SET time_zone = _utf8'+00:00'", None),
            ("SET sql_mode = 'a\\'b'", None),
            ("SET sql_mode = 'a''b'", None),
            ("SET sql_mode = CONCAT('A', 'NSI')", None),
            ("SET autocommit = 1; SELECT 1", None),
            ("SET autocommit = 1,", None),
            ("SET `autocommit` = 1", None),
            ("SET STATEMENT max_statement_time = 1 FOR SELECT 1", None),
            ("SET a = 1, b = 2, c = 3, d = 4, e = 5", None),
            ("SET x = @@y", None),
            ("SET x = y", None),
            ("SELECT 1", None),
            ("SET", None),
            ("SET x", None),
            ("SET x =", None),
        ];
        for (sql, want) in cases {
            let want = want.map(|w| {
                w.iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect::<Vec<_>>()
            });
            assert_eq!(parse(sql), want, "{sql}");
        }
    }
}
