//! Statements that ask about the client's own connection: `CONNECTION_ID()`
//! and the session variables that sextant keeps for the client rather than
//! on a server connection (timeouts, session tracking). A server would
//! answer with its own connection's values, so the proxy puts the client's
//! values into the text before the statement goes out.
//!
//! Only statements the classifier flagged with
//! [`Flags::SESSION_INFO`](crate::Flags::SESSION_INFO) come here, so the
//! allocation is off the hot path.

use crate::lexer::{LexMode, Lexer, Token, TokenKind};

/// Variables whose session value is the client's, not the server
/// connection's.
pub const CLIENT_VARIABLES: &[&str] = &[
    "wait_timeout",
    "interactive_timeout",
    "net_read_timeout",
    "net_write_timeout",
    "session_track_system_variables",
    "session_track_schema",
    "session_track_state_change",
    "session_track_gtids",
];

/// What a `SHOW [SESSION | LOCAL] STATUS | VARIABLES ...` lists: some of
/// its rows (TLS, compression; timeouts, session tracking) describe the
/// client's own connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionShow {
    Status,
    Variables,
}

pub fn session_show(sql: &[u8], mode: LexMode) -> Option<SessionShow> {
    let mut t = Lexer::with_mode(sql, mode).filter(|t| t.kind != TokenKind::Hint);
    if !t.next().is_some_and(|w| w.is_word("SHOW")) {
        return None;
    }
    let mut w = t.next();
    if w.is_some_and(|w| w.is_word("SESSION") || w.is_word("LOCAL")) {
        w = t.next();
    }
    match w {
        Some(w) if w.is_word("STATUS") => Some(SessionShow::Status),
        Some(w) if w.is_word("VARIABLES") => Some(SessionShow::Variables),
        _ => None,
    }
}

/// What a statement asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject<'a> {
    ConnectionId,
    /// A session variable of [`CLIENT_VARIABLES`] (lower case).
    Variable(&'a str),
}

/// `@@x`, `@@session.x`, `@@local.x` naming a client variable: its name.
pub fn client_variable(sysvar: &[u8]) -> Option<&'static str> {
    let rest = sysvar.strip_prefix(b"@@")?;
    let name = match rest.iter().position(|&c| c == b'.') {
        Some(dot) => {
            let scope = &rest[..dot];
            if !scope.eq_ignore_ascii_case(b"session") && !scope.eq_ignore_ascii_case(b"local") {
                return None;
            }
            &rest[dot + 1..]
        }
        None => rest,
    };
    let name = name
        .strip_prefix(b"`")
        .and_then(|n| n.strip_suffix(b"`"))
        .unwrap_or(name);
    CLIENT_VARIABLES
        .iter()
        .find(|v| v.as_bytes().eq_ignore_ascii_case(name))
        .copied()
}

/// The `session_track_*` variables a SET statement assigns, each with the
/// value when it is written as a literal (None for DEFAULT, a variable or an
/// expression). A server does not always report such a change (a new
/// variable list that leaves the variable out hides it), so the proxy reads
/// them from the statement.
pub fn tracking_assignments(sql: &[u8], mode: LexMode) -> Vec<(&'static str, Option<Vec<u8>>)> {
    let tokens: Vec<Token<'_>> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .collect();
    let mut out = Vec::new();
    if !tokens.first().is_some_and(|t| t.is_word("SET")) {
        return out;
    }
    for (i, t) in tokens.iter().enumerate() {
        let name = match t.kind {
            TokenKind::SysVar => client_variable(t.text),
            TokenKind::Word => CLIENT_VARIABLES
                .iter()
                .find(|v| v.as_bytes().eq_ignore_ascii_case(t.text))
                .copied(),
            _ => None,
        };
        let Some(name) = name.filter(|n| n.starts_with("session_track_")) else {
            continue;
        };
        if !tokens
            .get(i + 1)
            .is_some_and(|n| n.is_punct(b'=') || n.text == b":=")
        {
            continue;
        }
        let ends = |j: usize| {
            tokens
                .get(j)
                .is_none_or(|n| n.is_punct(b',') || n.is_punct(b';'))
        };
        let value = tokens
            .get(i + 2)
            .filter(|_| ends(i + 3))
            .and_then(|v| match v.kind {
                TokenKind::Str => Some(v.text[1..v.text.len().saturating_sub(1).max(1)].to_vec()),
                TokenKind::Number => Some(v.text.to_vec()),
                TokenKind::Word if !v.is_word("DEFAULT") => Some(v.text.to_vec()),
                _ => None,
            });
        out.push((name, value));
    }
    out
}

/// Words that end a select-list item.
const ITEM_END: &[&str] = &[
    "FROM",
    "INTO",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "FOR",
    "LOCK",
    "WINDOW",
];

/// `sql` with each subject replaced by the SQL expression `answer` gives
/// for it (None leaves it as it is). A subject that is a whole select-list
/// item without an alias gets its own text as alias, so the column keeps
/// the name it has on a direct connection. None when nothing was replaced.
pub fn rewrite(
    sql: &[u8],
    mode: LexMode,
    mut answer: impl FnMut(Subject<'_>) -> Option<String>,
) -> Option<Vec<u8>> {
    let tokens: Vec<Token<'_>> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .collect();
    let at = |t: &Token<'_>| t.text.as_ptr() as usize - sql.as_ptr() as usize;
    let is_set = tokens.first().is_some_and(|t| t.is_word("SET"));
    let mut out = Vec::with_capacity(sql.len() + 32);
    let mut copied = 0usize;
    let mut replaced = false;
    let mut depth = 0i32;
    // Depths at which a select list is open.
    let mut lists: Vec<i32> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        let mut found: Option<(Subject<'_>, usize)> = None;
        match t.kind {
            TokenKind::Punct => match t.text[0] {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    while lists.last().is_some_and(|&d| d > depth) {
                        lists.pop();
                    }
                }
                b';' => {
                    depth = 0;
                    lists.clear();
                }
                _ => {}
            },
            TokenKind::Word => {
                if t.is_word("SELECT") {
                    lists.push(depth);
                } else if lists.last() == Some(&depth) && ITEM_END.iter().any(|w| t.is_word(w)) {
                    lists.pop();
                } else if t.text.eq_ignore_ascii_case(b"CONNECTION_ID")
                    && tokens.get(i + 1).is_some_and(|n| n.is_punct(b'('))
                    && tokens.get(i + 2).is_some_and(|n| n.is_punct(b')'))
                {
                    found = Some((Subject::ConnectionId, i + 2));
                }
            }
            TokenKind::SysVar => {
                let assigned = is_set
                    && tokens
                        .get(i + 1)
                        .is_some_and(|n| n.is_punct(b'=') || n.text == b":=");
                if let Some(v) = client_variable(t.text).filter(|_| !assigned) {
                    found = Some((Subject::Variable(v), i));
                }
            }
            _ => {}
        }
        if let Some((subject, last)) = found {
            if let Some(expr) = answer(subject) {
                let start = at(&t);
                let end = at(&tokens[last]) + tokens[last].text.len();
                let prev = i.checked_sub(1).map(|p| tokens[p]);
                let next = tokens.get(last + 1);
                let whole = lists.last() == Some(&depth)
                    && prev.is_some_and(|p| p.is_word("SELECT") || p.is_punct(b','))
                    && next.is_none_or(|n| {
                        n.is_punct(b',')
                            || n.is_punct(b';')
                            || n.is_punct(b')')
                            || ITEM_END.iter().any(|w| n.is_word(w))
                    });
                out.extend_from_slice(&sql[copied..start]);
                out.extend_from_slice(expr.as_bytes());
                if whole {
                    out.extend_from_slice(b" AS `");
                    for &c in &sql[start..end] {
                        if c == b'`' {
                            out.push(b'`');
                        }
                        out.push(c);
                    }
                    out.push(b'`');
                }
                copied = end;
                replaced = true;
                i = last;
            }
        }
        i += 1;
    }
    if !replaced {
        return None;
    }
    out.extend_from_slice(&sql[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(sql: &str) -> String {
        let out = rewrite(sql.as_bytes(), LexMode::DEFAULT, |s| match s {
            Subject::ConnectionId => Some("CAST(7 AS UNSIGNED)".into()),
            Subject::Variable("wait_timeout") => Some("5".into()),
            Subject::Variable(_) => None,
        });
        out.map(|o| String::from_utf8(o).unwrap())
            .unwrap_or_else(|| "(unchanged)".into())
    }

    #[test]
    fn rewrites() {
        let cases = [
            (
                "SELECT CONNECTION_ID()",
                "SELECT CAST(7 AS UNSIGNED) AS `CONNECTION_ID()`",
            ),
            ("select connection_id() id", "select CAST(7 AS UNSIGNED) id"),
            (
                "SELECT connection_id() AS id",
                "SELECT CAST(7 AS UNSIGNED) AS id",
            ),
            (
                "SELECT @@wait_timeout, @@SESSION.wait_timeout FROM dual",
                "SELECT 5 AS `@@wait_timeout`, 5 AS `@@SESSION.wait_timeout` FROM dual",
            ),
            ("SELECT @@global.wait_timeout", "(unchanged)"),
            ("SELECT @@interactive_timeout", "(unchanged)"),
            (
                "SELECT CONCAT('a', @@wait_timeout, 'b')",
                "SELECT CONCAT('a', 5, 'b')",
            ),
            (
                "SELECT a FROM t WHERE id = CONNECTION_ID() ORDER BY a, @@wait_timeout",
                "SELECT a FROM t WHERE id = CAST(7 AS UNSIGNED) ORDER BY a, 5",
            ),
            ("KILL CONNECTION_ID()", "KILL CAST(7 AS UNSIGNED)"),
            ("SET @@session.wait_timeout = 10", "(unchanged)"),
            ("SET @w = @@wait_timeout", "SET @w = 5"),
            (
                "SELECT (SELECT CONNECTION_ID()), 1",
                "SELECT (SELECT CAST(7 AS UNSIGNED) AS `CONNECTION_ID()`), 1",
            ),
            ("SELECT 'CONNECTION_ID()', `@@wait_timeout`", "(unchanged)"),
            (
                "SELECT 1; SELECT @@wait_timeout",
                "SELECT 1; SELECT 5 AS `@@wait_timeout`",
            ),
            (
                "SELECT /*# x=1 */ CONNECTION_ID()",
                "SELECT /*# x=1 */ CAST(7 AS UNSIGNED) AS `CONNECTION_ID()`",
            ),
        ];
        for (sql, want) in cases {
            assert_eq!(run(sql), want, "{sql}");
        }
    }

    #[test]
    fn assignments() {
        let got = tracking_assignments(
            b"SET SESSION session_track_system_variables = 'a,b', @@session_track_schema=OFF, \
              session_track_state_change = DEFAULT, wait_timeout = 5, @@session.session_track_gtids = @x",
            LexMode::DEFAULT,
        );
        assert_eq!(
            got,
            vec![
                ("session_track_system_variables", Some(b"a,b".to_vec())),
                ("session_track_schema", Some(b"OFF".to_vec())),
                ("session_track_state_change", None),
                ("session_track_gtids", None),
            ]
        );
        assert!(
            tracking_assignments(b"SELECT @@session_track_schema", LexMode::DEFAULT).is_empty()
        );
        assert!(
            tracking_assignments(b"SET @@global.session_track_schema = 0", LexMode::DEFAULT)
                .is_empty()
        );
    }

    #[test]
    fn session_shows() {
        use SessionShow::*;
        for (sql, want) in [
            ("SHOW STATUS LIKE 'Ssl%'", Some(Status)),
            ("show session status", Some(Status)),
            ("SHOW LOCAL STATUS WHERE Variable_name = 'x'", Some(Status)),
            ("SHOW GLOBAL STATUS LIKE 'Ssl%'", None),
            ("SHOW VARIABLES LIKE 'wait%'", Some(Variables)),
            ("SHOW GLOBAL VARIABLES", None),
            ("SELECT 'SHOW STATUS'", None),
        ] {
            assert_eq!(
                session_show(sql.as_bytes(), LexMode::DEFAULT),
                want,
                "{sql}"
            );
        }
    }

    #[test]
    fn names() {
        assert_eq!(client_variable(b"@@wait_timeout"), Some("wait_timeout"));
        assert_eq!(
            client_variable(b"@@LOCAL.Wait_Timeout"),
            Some("wait_timeout")
        );
        assert_eq!(client_variable(b"@@global.wait_timeout"), None);
        assert_eq!(client_variable(b"@@sql_mode"), None);
    }
}
