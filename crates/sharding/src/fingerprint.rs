//! A statement's shape: its text with every literal and `?` replaced by a
//! numbered placeholder (`$1`, `$2`, ...), and the values those
//! placeholders stood for. Statements that differ only in their values
//! share a shape, so the parse and analysis of a shape is done once and
//! cached; each statement then only looks its values up.
//!
//! Built with sextant's own lexer (the one the classifier uses), which
//! knows MySQL's strings, comments and sql_mode: the parser never sees the
//! values, so a string that happens to contain SQL changes nothing.

use sextant_sql::{string_literal, LexMode, Lexer, TokenKind};
use std::borrow::Cow;

impl Lit<'_> {
    /// A number as the text gives it: an integer in i64 or u64, else
    /// one sextant does not place.
    pub fn number(text: &str) -> Lit<'static> {
        match (text.parse::<i64>(), text.parse::<u64>()) {
            (Ok(i), _) => Lit::Int(i),
            (_, Ok(u)) => Lit::Big(u),
            _ => Lit::Other,
        }
    }

    /// Minus the value, where it is one sextant places.
    pub fn negated(&self) -> Lit<'static> {
        match self {
            Lit::Int(i) => i.checked_neg().map_or(Lit::Big(1 << 63), Lit::Int),
            Lit::Big(u) if *u == 1 << 63 => Lit::Int(i64::MIN),
            _ => Lit::Other,
        }
    }

    /// The same value, owning its bytes.
    pub fn into_owned(self) -> Lit<'static> {
        match self {
            Lit::Int(i) => Lit::Int(i),
            Lit::Big(u) => Lit::Big(u),
            Lit::Str(s) => Lit::Str(std::borrow::Cow::Owned(s.into_owned())),
            Lit::Null => Lit::Null,
            Lit::Other => Lit::Other,
        }
    }
}

/// A value a statement gave for a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lit<'a> {
    Int(i64),
    /// An integer past i64::MAX (up to 2^64 - 1): negated, 2^63 is
    /// i64::MIN; a LIMIT may be as large.
    Big(u64),
    /// A string's bytes, unescaped.
    Str(Cow<'a, [u8]>),
    Null,
    /// A value sextant does not place (a number out of range, a decimal,
    /// a prepared parameter of another type): routed as "any".
    Other,
}

/// One slot of a shape: a literal of the text, or the n-th `?` (a
/// prepared statement's parameter, known only at execution).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot<'a> {
    Lit(Lit<'a>),
    Param(u16),
}

/// What one pass of the lexer learned about a statement besides its
/// shape: facts the analysis of its parse tree double-checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// How many SELECT keywords it has (a subquery or UNION has several).
    pub selects: u32,
    /// It calls an aggregate or window function somewhere.
    pub aggregate: bool,
    /// It has a name starting with `$`, which the shape's placeholders
    /// could be mistaken for: it is parsed as written.
    pub dollar_name: bool,
    /// A SELECT asks for SQL_CALC_FOUND_ROWS.
    pub calc_found_rows: bool,
    /// It calls a window function (`... OVER`).
    pub window: bool,
    /// The first value it reads that may differ from one server connection
    /// to another, or from one call to the next (`UUID()`, `NOW()`, a user
    /// or system variable): a write of it to every copy of a global table
    /// would leave the copies different.
    pub volatile: Option<&'static str>,
}

/// Functions whose value may differ between two connections running the
/// same statement: the time (each group's clock and moment), random
/// values, and the connection's own state.
const VOLATILE: &[&str] = &[
    "connection_id",
    "current_date",
    "current_time",
    "current_timestamp",
    "current_user",
    "curdate",
    "curtime",
    "found_rows",
    "last_insert_id",
    "localtime",
    "localtimestamp",
    "nextval",
    "now",
    "rand",
    "random_bytes",
    "row_count",
    "session_user",
    "sys_guid",
    "sysdate",
    "system_user",
    "unix_timestamp",
    "user",
    "utc_date",
    "utc_time",
    "utc_timestamp",
    "uuid",
    "uuid_short",
];

/// The name as written in a refusal.
fn volatile_name(t: &sextant_sql::Token<'_>) -> Option<&'static str> {
    match t.kind {
        TokenKind::UserVar => Some("a user variable"),
        TokenKind::SysVar => Some("a system variable"),
        TokenKind::Word => VOLATILE
            .iter()
            .find(|v| t.text.eq_ignore_ascii_case(v.as_bytes()))
            .copied(),
        _ => None,
    }
}

/// Words that may follow SELECT before its select list and change how the
/// server runs it, not what it returns (DISTINCTROW is DISTINCT; the
/// parser knows neither and would read them as a column with an alias).
/// They are left out of the shape; the groups get the text as written.
const SELECT_MODIFIERS: &[&str] = &[
    "sql_calc_found_rows",
    "sql_no_cache",
    "sql_cache",
    "high_priority",
    "straight_join",
    "sql_small_result",
    "sql_big_result",
    "sql_buffer_result",
    "distinctrow",
];

/// Functions whose result depends on more than one row.
pub(crate) const AGGREGATES: &[&str] = &[
    "avg",
    "bit_and",
    "bit_or",
    "bit_xor",
    "count",
    "group_concat",
    "json_arrayagg",
    "json_objectagg",
    "max",
    "min",
    "std",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "sum",
    "var_pop",
    "var_samp",
    "variance",
];

/// Writes `sql`'s shape into `shape` and its slots into `slots` (both
/// cleared first).
pub fn fingerprint<'a>(
    sql: &'a [u8],
    mode: LexMode,
    shape: &mut Vec<u8>,
    slots: &mut Vec<Slot<'a>>,
) -> Tokens {
    write_shape(sql, mode, shape, slots, true)
}

/// The statement as the server reads it, for parsing as written: with its
/// values, without comments, the content of executable comments the
/// server runs kept, and SELECT's modifiers left out as in the shape.
pub fn as_read(sql: &[u8], mode: LexMode) -> Vec<u8> {
    let mut out = Vec::with_capacity(sql.len());
    write_shape(sql, mode, &mut out, &mut Vec::new(), false);
    out
}

fn write_shape<'a>(
    sql: &'a [u8],
    mode: LexMode,
    shape: &mut Vec<u8>,
    slots: &mut Vec<Slot<'a>>,
    placeholders: bool,
) -> Tokens {
    shape.clear();
    slots.clear();
    let mut facts = Tokens::default();
    let base = sql.as_ptr() as usize;
    let mut prev_end = 0usize;
    let mut params = 0u16;
    let mut after_aggregate_name = false;
    // Right after SELECT, or after its modifiers, DISTINCT or ALL.
    let mut select_head = false;
    let mut insert = false;
    let mut lexer = Lexer::with_mode(sql, mode).peekable();
    while let Some(t) = lexer.next() {
        let (start, end) = {
            let s = t.text.as_ptr() as usize - base;
            match t.kind {
                // The token's text is inside the quotes.
                TokenKind::QuotedIdent => {
                    (s.saturating_sub(1), (s + t.text.len() + 1).min(sql.len()))
                }
                _ => (s, s + t.text.len()),
            }
        };
        if t.kind == TokenKind::Hint {
            prev_end = end + 2;
            continue;
        }
        if select_head && t.kind == TokenKind::Word {
            let modifier = SELECT_MODIFIERS
                .iter()
                .any(|m| t.text.eq_ignore_ascii_case(m.as_bytes()));
            // A column of that name is followed by what ends a select item.
            let column = match lexer.peek() {
                None => true,
                Some(n) => {
                    n.is_punct(b',') || n.is_punct(b'.') || n.is_word("from") || n.is_word("as")
                }
            };
            if modifier && !column {
                if t.is_word("sql_calc_found_rows") {
                    facts.calc_found_rows = true;
                }
                if t.is_word("distinctrow") {
                    if !shape.is_empty() {
                        shape.push(b' ');
                    }
                    shape.extend_from_slice(b"DISTINCT");
                }
                prev_end = end;
                continue;
            }
            select_head = t.is_word("distinct") || t.is_word("all");
        } else {
            select_head = false;
        }
        if t.is_word("select") {
            select_head = true;
        }
        if start > prev_end && !shape.is_empty() {
            shape.push(b' ');
        }
        prev_end = end;
        if after_aggregate_name && t.is_punct(b'(') || t.is_word("over") {
            facts.aggregate = true;
        }
        if t.is_word("over") {
            facts.window = true;
        }
        if facts.volatile.is_none() {
            // A function is one when called; CURRENT_TIMESTAMP and its
            // kind are also without parentheses.
            if let Some(v) = volatile_name(&t).filter(|v| {
                t.kind != TokenKind::Word
                    || v.starts_with("current_")
                    || v.starts_with("local")
                    || v.starts_with("utc_")
                    || lexer.peek().is_some_and(|n| n.is_punct(b'('))
            }) {
                facts.volatile = Some(v);
            }
        }
        if shape.is_empty() && (t.is_word("insert") || t.is_word("replace")) {
            insert = true;
        }
        // INSERT ... VALUE (...) is VALUES (...), which the parser knows.
        if insert && t.is_word("value") && lexer.peek().is_some_and(|n| n.is_punct(b'(')) {
            if !shape.is_empty() {
                shape.push(b' ');
            }
            shape.extend_from_slice(b"VALUES");
            prev_end = end;
            continue;
        }
        // `!(...)` is NOT (...), which the parser knows (a bare `!` binds
        // tighter than NOT and is left as it is).
        if t.is_punct(b'!') && lexer.peek().is_some_and(|n| n.is_punct(b'(')) {
            if !shape.is_empty() {
                shape.push(b' ');
            }
            shape.extend_from_slice(b"NOT ");
            prev_end = end;
            continue;
        }
        after_aggregate_name = t.kind == TokenKind::Word
            && AGGREGATES
                .iter()
                .any(|a| t.text.eq_ignore_ascii_case(a.as_bytes()));
        let slot = match t.kind {
            _ if !placeholders => None,
            TokenKind::Str => Some(Slot::Lit(Lit::Str(string_literal(t.text, mode)))),
            TokenKind::Number => Some(Slot::Lit(
                std::str::from_utf8(t.text).map_or(Lit::Other, Lit::number),
            )),
            TokenKind::Punct if t.text == b"?" => {
                params += 1;
                Some(Slot::Param(params - 1))
            }
            TokenKind::Word if t.text.eq_ignore_ascii_case(b"null") => Some(Slot::Lit(Lit::Null)),
            _ => None,
        };
        if t.kind == TokenKind::Word && t.text.first() == Some(&b'$') {
            facts.dollar_name = true;
        }
        if t.is_word("select") {
            facts.selects += 1;
        }
        match slot {
            Some(s) => {
                slots.push(s);
                use std::io::Write;
                let _ = write!(shape, "${}", slots.len());
            }
            None => shape.extend_from_slice(&sql[start..end]),
        }
    }
    facts
}

/// A value of the statement: a slot, a slot negated (`-?`), or a literal
/// the shape kept (a statement parsed as it was written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    Slot(u16),
    Neg(u16),
    Lit(Lit<'static>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(sql: &str) -> (String, Vec<Slot<'_>>, Tokens) {
        let mut shape = Vec::new();
        let mut slots = Vec::new();
        let t = fingerprint(sql.as_bytes(), LexMode::DEFAULT, &mut shape, &mut slots);
        (String::from_utf8(shape).unwrap(), slots, t)
    }

    #[test]
    fn values_become_numbered_placeholders() {
        let (s, v, t) = fp("SELECT c FROM sbtest1 WHERE id=42 /*# x=y */ AND k <= 'it''s' -- no\n");
        assert_eq!(s, "SELECT c FROM sbtest1 WHERE id=$1 AND k <= $2");
        assert_eq!(
            v,
            [
                Slot::Lit(Lit::Int(42)),
                Slot::Lit(Lit::Str(Cow::Borrowed(b"it's")))
            ]
        );
        assert_eq!(t.selects, 1);
        assert!(!t.aggregate);
        // Another statement of the same shape.
        assert_eq!(fp("SELECT c FROM sbtest1 WHERE id=7 AND k <= 'x'").0, s);
        let (s, v, _) = fp("INSERT INTO `t` (a,b) VALUES (?, NULL),(?,'a\\nb')");
        assert_eq!(s, "INSERT INTO `t` (a,b) VALUES ($1, $2),($3,$4)");
        assert_eq!(
            v,
            [
                Slot::Param(0),
                Slot::Lit(Lit::Null),
                Slot::Param(1),
                Slot::Lit(Lit::Str(Cow::Owned(b"a\nb".to_vec())))
            ]
        );
    }

    #[test]
    fn aggregates_and_subqueries_are_noticed() {
        let (_, _, t) = fp("select count(*) from t where a in (select b from u)");
        assert_eq!(t.selects, 2);
        assert!(t.aggregate);
        // A column named like an aggregate is not one.
        assert!(!fp("select count from t").2.aggregate);
        assert!(fp("select a, row_number() over () from t").2.aggregate);
    }

    #[test]
    fn select_modifiers_are_left_out_of_the_shape() {
        let (s, _, t) = fp("SELECT SQL_CALC_FOUND_ROWS SQL_NO_CACHE a FROM t LIMIT 5");
        assert_eq!(s, "SELECT a FROM t LIMIT $1");
        assert!(t.calc_found_rows);
        let (s, _, t) = fp("select distinctrow high_priority a, b from t");
        assert_eq!(s, "select DISTINCT a, b from t");
        assert!(!t.calc_found_rows);
        // Columns of those names stay.
        assert_eq!(
            fp("SELECT sql_cache, x FROM t").0,
            "SELECT sql_cache, x FROM t"
        );
        assert_eq!(fp("SELECT sql_cache FROM t").0, "SELECT sql_cache FROM t");
        assert_eq!(
            fp("SELECT a, sql_cache b FROM t").0,
            "SELECT a, sql_cache b FROM t"
        );
        // As read: values kept, comments resolved.
        let server = sextant_sql::ServerVersion::parse("10.11.6-MariaDB");
        let read = as_read(
            b"SELECT SQL_NO_CACHE a FROM t WHERE b = 'x' /*!999999 AND c = 1 */ /*!100000 AND d = 2 */",
            LexMode::DEFAULT.on(server),
        );
        assert_eq!(
            String::from_utf8(read).unwrap(),
            "SELECT a FROM t WHERE b = 'x' AND d = 2"
        );
    }

    #[test]
    fn big_numbers_are_not_placed() {
        let (_, v, _) = fp("select 99999999999999999999");
        assert_eq!(v, [Slot::Lit(Lit::Other)]);
    }
}
