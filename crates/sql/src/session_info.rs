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

/// `SHOW WARNINGS | ERRORS [LIMIT [offset,] count]` or
/// `SHOW COUNT(*) WARNINGS | ERRORS`: the conditions of the statement
/// before, which sextant answers itself where it knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diagnostics {
    /// ERRORS (only the conditions of level Error) rather than WARNINGS.
    pub errors: bool,
    /// COUNT(*): one row with the number.
    pub count: bool,
    /// LIMIT's offset and count.
    pub offset: u64,
    pub limit: u64,
}

pub fn diagnostics_show(sql: &[u8], mode: LexMode) -> Option<Diagnostics> {
    let mut t = Lexer::with_mode(sql, mode).filter(|t| t.kind != TokenKind::Hint);
    if !t.next()?.is_word("SHOW") {
        return None;
    }
    let mut w = t.next()?;
    let count = w.is_word("COUNT");
    if count {
        for c in [b'(', b'*', b')'] {
            if !t.next()?.is_punct(c) {
                return None;
            }
        }
        w = t.next()?;
    }
    let errors = match () {
        _ if w.is_word("WARNINGS") => false,
        _ if w.is_word("ERRORS") => true,
        _ => return None,
    };
    let mut d = Diagnostics {
        errors,
        count,
        offset: 0,
        limit: u64::MAX,
    };
    let number = |t: Option<Token>| -> Option<u64> {
        let t = t?;
        (t.kind == TokenKind::Number)
            .then(|| std::str::from_utf8(t.text).ok()?.parse().ok())
            .flatten()
    };
    match t.next() {
        None => return Some(d),
        Some(p) if p.is_punct(b';') => {}
        Some(l) if l.is_word("LIMIT") && !count => {
            let first = number(t.next())?;
            match t.next() {
                None => d.limit = first,
                Some(c) if c.is_punct(b',') => {
                    d.offset = first;
                    d.limit = number(t.next())?;
                }
                Some(c) if c.is_word("OFFSET") => {
                    d.limit = first;
                    d.offset = number(t.next())?;
                }
                Some(p) if p.is_punct(b';') => d.limit = first,
                Some(_) => return None,
            }
        }
        Some(_) => return None,
    }
    // Anything after the end is another statement: not this form.
    t.all(|x| x.is_punct(b';')).then_some(d)
}

/// What a statement asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject<'a> {
    ConnectionId,
    /// `ROW_COUNT()` and `FOUND_ROWS()`: the session's statement before
    /// may have run on another server connection.
    RowCount,
    FoundRows,
    /// `@@warning_count` (of the session, not `@@global.`).
    WarningCount,
    /// A session variable of [`CLIENT_VARIABLES`] (lower case).
    Variable(&'a str),
}

/// The name in `@@x`, `@@session.x` or `@@local.x` (unquoted); None for
/// `@@global.x` and anything else.
fn session_sysvar(sysvar: &[u8]) -> Option<&[u8]> {
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
    Some(
        name.strip_prefix(b"`")
            .and_then(|n| n.strip_suffix(b"`"))
            .unwrap_or(name),
    )
}

/// `@@warning_count`, `@@session.warning_count` or `@@local.warning_count`.
pub fn is_warning_count(sysvar: &[u8]) -> bool {
    session_sysvar(sysvar).is_some_and(|n| n.eq_ignore_ascii_case(b"warning_count"))
}

/// `@@x`, `@@session.x`, `@@local.x` naming a client variable: its name.
pub fn client_variable(sysvar: &[u8]) -> Option<&'static str> {
    let name = session_sysvar(sysvar)?;
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

/// A `SET` that only changes the session's own system variables (`SET
/// NAMES`, `SET CHARACTER SET`, `SET [SESSION] x = literal`, ...): the
/// set-up drivers send at connect. Any server of a group can run it, and
/// the value is replayed on every connection the session borrows later.
/// Not: GLOBAL or PERSIST, user variables, TRANSACTION (it belongs to the
/// next transaction's connection), PASSWORD, ROLE, STATEMENT ... FOR, or
/// a value read by a subquery.
pub fn only_session_settings(sql: &[u8], mode: LexMode) -> bool {
    let mut t = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .peekable();
    if !t.next().is_some_and(|w| w.is_word("SET")) {
        return false;
    }
    let mut depth = 0i32;
    let mut start = true;
    let mut any = false;
    while let Some(tok) = t.next() {
        if start {
            start = false;
            any = true;
            let mut n = tok;
            if n.is_word("SESSION") || n.is_word("LOCAL") {
                match t.next() {
                    Some(x) => n = x,
                    None => return false,
                }
            }
            let ok = match n.kind {
                TokenKind::SysVar => session_sysvar(n.text).is_some(),
                TokenKind::Word => ![
                    "GLOBAL",
                    "PERSIST",
                    "PERSIST_ONLY",
                    "TRANSACTION",
                    "PASSWORD",
                    "ROLE",
                    "DEFAULT",
                    "STATEMENT",
                ]
                .iter()
                .any(|w| n.is_word(w)),
                TokenKind::QuotedIdent => true,
                _ => false,
            };
            if !ok {
                return false;
            }
            continue;
        }
        match tok.kind {
            TokenKind::UserVar => return false,
            TokenKind::Word if tok.is_word("SELECT") => return false,
            TokenKind::Punct if tok.is_punct(b'(') => depth += 1,
            TokenKind::Punct if tok.is_punct(b')') => depth -= 1,
            TokenKind::Punct if tok.is_punct(b',') && depth == 0 => start = true,
            TokenKind::Punct if tok.is_punct(b';') => {
                return t.all(|x| x.is_punct(b';')) && any;
            }
            _ => {}
        }
    }
    any && !start
}

/// The session system variables a SET statement assigns, lower case, as
/// the server names them (`SET NAMES` and `SET CHARACTER SET` give the
/// character set variables they change). GLOBAL ones and user variables
/// are left out.
pub fn session_assignments(sql: &[u8], mode: LexMode) -> Vec<String> {
    let tokens: Vec<Token<'_>> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .collect();
    let mut out: Vec<String> = Vec::new();
    if !tokens.first().is_some_and(|t| t.is_word("SET")) {
        return out;
    }
    const CHARSETS: [&str; 4] = [
        "character_set_client",
        "character_set_connection",
        "character_set_results",
        "collation_connection",
    ];
    // Each assignment starts after SET or a comma at depth 0.
    let mut depth = 0i32;
    let mut start = true;
    let mut i = 1;
    while i < tokens.len() {
        let t = &tokens[i];
        if start {
            start = false;
            let mut j = i;
            let mut global = false;
            if tokens[j].is_word("SESSION") || tokens[j].is_word("LOCAL") {
                j += 1;
            } else if tokens[j].is_word("GLOBAL") {
                global = true;
                j += 1;
            }
            if let Some(n) = tokens.get(j) {
                let name = match n.kind {
                    TokenKind::SysVar => {
                        let lower = String::from_utf8_lossy(n.text).to_ascii_lowercase();
                        let rest = lower.trim_start_matches("@@");
                        match rest.split_once('.') {
                            Some(("global", _)) => None,
                            Some((_, v)) => Some(v.to_string()),
                            None => Some(rest.to_string()),
                        }
                    }
                    TokenKind::Word if n.is_word("NAMES") => {
                        out.extend(CHARSETS.iter().map(|s| s.to_string()));
                        None
                    }
                    TokenKind::Word if n.is_word("CHARSET") || n.is_word("CHARACTER") => {
                        out.extend(CHARSETS.iter().map(|s| s.to_string()));
                        None
                    }
                    TokenKind::Word | TokenKind::QuotedIdent => {
                        Some(String::from_utf8_lossy(n.text).to_ascii_lowercase())
                    }
                    _ => None,
                };
                if let Some(name) = name.filter(|_| !global) {
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
            }
        }
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth -= 1;
        } else if t.is_punct(b',') && depth == 0 {
            start = true;
        }
        i += 1;
    }
    out
}

/// What a SET statement assigns to the session's `autocommit`: None when
/// it does not, Some(Some(on)) for a literal (1/0, ON/OFF, TRUE/FALSE),
/// Some(None) for anything else (DEFAULT, a variable, an expression).
/// Turning it on commits an open transaction, which a proxy holding the
/// transaction itself (as XA) must do in its stead.
pub fn autocommit_assignment(sql: &[u8], mode: LexMode) -> Option<Option<bool>> {
    let tokens: Vec<Token<'_>> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .collect();
    if !tokens.first().is_some_and(|t| t.is_word("SET")) {
        return None;
    }
    let mut found = None;
    for (i, t) in tokens.iter().enumerate() {
        let named = match t.kind {
            TokenKind::SysVar => {
                let lower = t.text.to_ascii_lowercase();
                matches!(
                    &lower[..],
                    b"@@autocommit" | b"@@session.autocommit" | b"@@local.autocommit"
                )
            }
            TokenKind::Word => {
                t.is_word("autocommit")
                    && !i
                        .checked_sub(1)
                        .and_then(|j| tokens.get(j))
                        .is_some_and(|p| p.is_word("GLOBAL") || p.is_punct(b'.'))
            }
            _ => false,
        };
        if !named
            || !tokens
                .get(i + 1)
                .is_some_and(|n| n.is_punct(b'=') || n.text == b":=")
        {
            continue;
        }
        let ends = tokens
            .get(i + 3)
            .is_none_or(|n| n.is_punct(b',') || n.is_punct(b';'));
        let value = tokens.get(i + 2).filter(|_| ends).and_then(|v| {
            let text = match v.kind {
                TokenKind::Str => &v.text[1..v.text.len().saturating_sub(1).max(1)],
                TokenKind::Number | TokenKind::Word => v.text,
                _ => return None,
            };
            match text.to_ascii_uppercase().as_slice() {
                b"1" | b"ON" | b"TRUE" => Some(true),
                b"0" | b"OFF" | b"FALSE" => Some(false),
                _ => None,
            }
        });
        found = Some(value);
    }
    found
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

/// Words that may follow SELECT before its first item.
const SELECT_MODIFIERS: &[&str] = &[
    "ALL",
    "DISTINCT",
    "DISTINCTROW",
    "HIGH_PRIORITY",
    "STRAIGHT_JOIN",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "SQL_BUFFER_RESULT",
    "SQL_CACHE",
    "SQL_NO_CACHE",
    "SQL_CALC_FOUND_ROWS",
];

/// An open select list: its depth and the item being read.
struct List {
    depth: i32,
    /// Index of the item's first token (None before it starts).
    item_start: Option<usize>,
    /// A subject of the item was replaced.
    replaced: bool,
}

/// Whether tokens `first..=last` end with an alias (`expr AS name` or
/// `expr name`).
fn has_alias(tokens: &[Token<'_>], first: usize, last: usize) -> bool {
    let is_name = |t: &Token<'_>| {
        matches!(
            t.kind,
            TokenKind::Word | TokenKind::QuotedIdent | TokenKind::Str
        )
    };
    if last <= first || !is_name(&tokens[last]) {
        return false;
    }
    let before = &tokens[last - 1];
    before.is_word("AS")
        || matches!(
            before.kind,
            TokenKind::Word
                | TokenKind::QuotedIdent
                | TokenKind::Number
                | TokenKind::Str
                | TokenKind::SysVar
        )
        || before.is_punct(b')')
}

/// `sql` with each subject replaced by the SQL expression `answer` gives
/// for it (None leaves it as it is). A select-list item that had a subject
/// replaced and has no alias gets its own text as alias, so the column
/// keeps the name it has on a direct connection. None when nothing was
/// replaced.
pub fn rewrite(
    sql: &[u8],
    mode: LexMode,
    mut answer: impl FnMut(Subject<'_>) -> Option<String>,
) -> Option<Vec<u8>> {
    let tokens: Vec<Token<'_>> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .collect();
    let at = |t: &Token<'_>| t.text.as_ptr() as usize - sql.as_ptr() as usize;
    let end_of = |t: &Token<'_>| at(t) + t.text.len();
    let is_set = tokens.first().is_some_and(|t| t.is_word("SET"));
    // Edits: (start, end, text), in order.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut depth = 0i32;
    let mut lists: Vec<List> = Vec::new();
    // Ends the current item of the innermost list at token `last`.
    let close_item =
        |lists: &mut Vec<List>, edits: &mut Vec<(usize, usize, String)>, last: usize| {
            let Some(l) = lists.last_mut() else { return };
            if let Some(first) = l.item_start.take() {
                if l.replaced && last >= first && !has_alias(&tokens, first, last) {
                    let (from, to) = (at(&tokens[first]), end_of(&tokens[last]));
                    let name = String::from_utf8_lossy(&sql[from..to]).replace('`', "``");
                    edits.push((to, to, format!(" AS `{name}`")));
                }
            }
            l.replaced = false;
        };
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        let in_list = lists.last().is_some_and(|l| l.depth == depth);
        // The first token of an item (after SELECT's modifiers or a comma).
        let word_in =
            |list: &[&str]| t.kind == TokenKind::Word && list.iter().any(|w| t.is_word(w));
        let starts = !t.is_punct(b',')
            && !t.is_punct(b')')
            && !t.is_punct(b';')
            && !word_in(ITEM_END)
            && !t.is_word("SELECT");
        if let Some(l) = lists
            .last_mut()
            .filter(|l| in_list && l.item_start.is_none())
        {
            if starts && !word_in(SELECT_MODIFIERS) {
                l.item_start = Some(i);
            }
        }
        match t.kind {
            TokenKind::Punct => match t.text[0] {
                b'(' => depth += 1,
                b')' => {
                    while lists.last().is_some_and(|l| l.depth >= depth) {
                        close_item(&mut lists, &mut edits, i.saturating_sub(1));
                        lists.pop();
                    }
                    depth -= 1;
                }
                b',' if in_list => {
                    close_item(&mut lists, &mut edits, i.saturating_sub(1));
                }
                b';' => {
                    while !lists.is_empty() {
                        close_item(&mut lists, &mut edits, i.saturating_sub(1));
                        lists.pop();
                    }
                    depth = 0;
                }
                _ => {}
            },
            TokenKind::Word if t.is_word("SELECT") => {
                lists.push(List {
                    depth,
                    item_start: None,
                    replaced: false,
                });
                i += 1;
                continue;
            }
            TokenKind::Word if in_list && ITEM_END.iter().any(|w| t.is_word(w)) => {
                close_item(&mut lists, &mut edits, i.saturating_sub(1));
                lists.pop();
                i += 1;
                continue;
            }
            _ => {}
        }
        let mut found: Option<(Subject<'_>, usize)> = None;
        match t.kind {
            TokenKind::Word
                if tokens.get(i + 1).is_some_and(|n| n.is_punct(b'('))
                    && tokens.get(i + 2).is_some_and(|n| n.is_punct(b')')) =>
            {
                let subject = [
                    ("CONNECTION_ID", Subject::ConnectionId),
                    ("ROW_COUNT", Subject::RowCount),
                    ("FOUND_ROWS", Subject::FoundRows),
                ]
                .into_iter()
                .find(|(name, _)| t.text.eq_ignore_ascii_case(name.as_bytes()));
                found = subject.map(|(_, s)| (s, i + 2));
            }
            TokenKind::SysVar => {
                let assigned = is_set
                    && tokens
                        .get(i + 1)
                        .is_some_and(|n| n.is_punct(b'=') || n.text == b":=");
                if let Some(v) = client_variable(t.text).filter(|_| !assigned) {
                    found = Some((Subject::Variable(v), i));
                } else if is_warning_count(t.text) {
                    found = Some((Subject::WarningCount, i));
                }
            }
            _ => {}
        }
        if let Some((subject, last)) = found {
            if let Some(expr) = answer(subject) {
                edits.push((at(&t), end_of(&tokens[last]), expr));
                // Every list holding it names its column after its text.
                for l in lists.iter_mut() {
                    l.replaced = true;
                }
                i = last;
            }
        }
        i += 1;
    }
    while !lists.is_empty() {
        close_item(&mut lists, &mut edits, tokens.len().saturating_sub(1));
        lists.pop();
    }
    if edits.is_empty() {
        return None;
    }
    edits.sort_by_key(|e| (e.0, e.1));
    let mut out = Vec::with_capacity(sql.len() + 64);
    let mut copied = 0;
    for (from, to, text) in edits {
        out.extend_from_slice(&sql[copied..from]);
        out.extend_from_slice(text.as_bytes());
        copied = to;
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
            Subject::RowCount => Some("CAST(-1 AS SIGNED)".into()),
            Subject::FoundRows => None,
            Subject::WarningCount => Some("CAST(1 AS UNSIGNED)".into()),
        });
        out.map(|o| String::from_utf8(o).unwrap())
            .unwrap_or_else(|| "(unchanged)".into())
    }

    #[test]
    fn session_assignments_name_what_a_set_changes() {
        let a = |s: &str| session_assignments(s.as_bytes(), LexMode::DEFAULT);
        assert_eq!(
            a("set sql_mode=CONCAT(@@sql_mode, ',X'), session_track_system_variables = CONCAT(@@global.session_track_system_variables, ',tx_isolation'), @@session.tx_read_only=1, NAMES utf8mb4"),
            [
                "sql_mode",
                "session_track_system_variables",
                "tx_read_only",
                "character_set_client",
                "character_set_connection",
                "character_set_results",
                "collation_connection"
            ]
        );
        assert_eq!(
            a("SET GLOBAL x = 1, SESSION y = 2, @u = 3, @@global.z = 4"),
            ["y"]
        );
        assert!(a("SELECT 1").is_empty());
    }

    #[test]
    fn autocommit_assignments() {
        let a = |s: &str| autocommit_assignment(s.as_bytes(), LexMode::DEFAULT);
        assert_eq!(a("SET autocommit = 1"), Some(Some(true)));
        assert_eq!(a("set @@session.autocommit=ON"), Some(Some(true)));
        assert_eq!(a("SET SESSION autocommit = 'false'"), Some(Some(false)));
        assert_eq!(
            a("SET sql_mode = '', autocommit = 0, names utf8"),
            Some(Some(false))
        );
        assert_eq!(a("SET autocommit = @x"), Some(None));
        assert_eq!(a("SET GLOBAL autocommit = 1"), None);
        assert_eq!(a("SET @@global.autocommit = 1"), None);
        assert_eq!(a("SET @autocommit = 1"), None);
        assert_eq!(a("SELECT @@autocommit"), None);
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
                "SELECT CONCAT('a', 5, 'b') AS `CONCAT('a', @@wait_timeout, 'b')`",
            ),
            (
                "SELECT DISTINCT @@wait_timeout + 1 FROM t",
                "SELECT DISTINCT 5 + 1 AS `@@wait_timeout + 1` FROM t",
            ),
            ("SELECT @@wait_timeout w", "SELECT 5 w"),
            (
                "SELECT @@wait_timeout = @@global.wait_timeout, 2",
                "SELECT 5 = @@global.wait_timeout AS `@@wait_timeout = @@global.wait_timeout`, 2",
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
                "SELECT (SELECT CAST(7 AS UNSIGNED) AS `CONNECTION_ID()`) AS `(SELECT CONNECTION_ID())`, 1",
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
            (
                "SELECT row_count() + 1, FOUND_ROWS()",
                "SELECT CAST(-1 AS SIGNED) + 1 AS `row_count() + 1`, FOUND_ROWS()",
            ),
            ("SELECT FOUND_ROWS()", "(unchanged)"),
            (
                "SELECT @@warning_count, @@session.WARNING_COUNT, @@global.warning_count",
                "SELECT CAST(1 AS UNSIGNED) AS `@@warning_count`, CAST(1 AS UNSIGNED) AS `@@session.WARNING_COUNT`, @@global.warning_count",
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

    #[test]
    fn diagnostics_forms() {
        let d = |s: &str| diagnostics_show(s.as_bytes(), LexMode::DEFAULT);
        let all = |errors, count| Diagnostics {
            errors,
            count,
            offset: 0,
            limit: u64::MAX,
        };
        assert_eq!(d("SHOW WARNINGS"), Some(all(false, false)));
        assert_eq!(d("show errors;"), Some(all(true, false)));
        assert_eq!(d("SHOW COUNT(*) WARNINGS"), Some(all(false, true)));
        assert_eq!(d("SHOW COUNT ( * ) ERRORS"), Some(all(true, true)));
        let limited = |offset, limit| Diagnostics {
            offset,
            limit,
            ..all(false, false)
        };
        assert_eq!(d("SHOW WARNINGS LIMIT 5"), Some(limited(0, 5)));
        assert_eq!(d("SHOW WARNINGS LIMIT 1, 2"), Some(limited(1, 2)));
        assert_eq!(d("SHOW WARNINGS LIMIT 2 OFFSET 1"), Some(limited(1, 2)));
        for other in [
            "SHOW VARIABLES",
            "SHOW WARNINGS LIMIT ?",
            "SHOW WARNINGS; SELECT 1",
            "SHOW COUNT(*) WARNINGS LIMIT 1",
            "SELECT 1",
        ] {
            assert_eq!(d(other), None, "{other}");
        }
    }

    #[test]
    fn session_settings_any_server_can_run() {
        let only = |s: &str| only_session_settings(s.as_bytes(), LexMode::DEFAULT);
        for yes in [
            "SET NAMES utf8mb4",
            "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci",
            "SET CHARACTER SET latin1",
            "SET autocommit = 0",
            "SET SESSION sql_mode = 'ANSI', @@session.time_zone = '+00:00'",
            "SET @@sql_select_limit = DEFAULT, max_join_size = 1000;",
            "set local net_write_timeout=600",
            "SET SESSION TRANSACTION_ISOLATION = 'READ-COMMITTED'",
        ] {
            assert!(only(yes), "{yes}");
        }
        for no in [
            "SET GLOBAL max_connections = 10",
            "SET @@global.sql_mode = ''",
            "SET @x = 1",
            "SET autocommit = 0, @x = 1",
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET SESSION TRANSACTION READ ONLY",
            "SET PASSWORD = PASSWORD('x')",
            "SET ROLE r",
            "SET DEFAULT ROLE r FOR u",
            "SET STATEMENT max_statement_time = 1 FOR SELECT 1",
            "SET sql_mode = (SELECT 'x' FROM t)",
            "SET PERSIST max_connections = 10",
            "SET NAMES utf8mb4; DELETE FROM t",
            "SET",
            "SELECT 1",
        ] {
            assert!(!only(no), "{no}");
        }
    }
}
