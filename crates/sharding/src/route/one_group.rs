//! Statements whose form sextant's parser does not read (EXPLAIN,
//! `GROUP BY ... WITH ROLLUP`, `UPDATE ... ORDER BY`) still have a place:
//! the statement without that form is routed, and when it runs in one
//! group the statement runs there as written, the server's own answer.
//! Over several groups it is refused, naming the form.

use super::{Route, Router};
use sextant_sql::{LexMode, Lexer};

/// Whether the statement starts with EXPLAIN (or DESCRIBE), read
/// without allocating: it is asked of every statement naming no table.
pub(super) fn explains(sql: &[u8], mode: LexMode) -> bool {
    Lexer::with_mode(sql, mode)
        .next()
        .is_some_and(|t| ["EXPLAIN", "DESCRIBE", "DESC"].iter().any(|w| t.is_word(w)))
}

/// The statement without the one form the parser does not read, and the
/// form's name; None if it has none of them (or taking it out would
/// change which parameter is which).
pub(super) fn without_form(sql: &[u8], mode: LexMode) -> Option<(Vec<u8>, &'static str)> {
    let at = |t: &[u8]| t.as_ptr() as usize - sql.as_ptr() as usize;
    let tokens: Vec<_> = Lexer::with_mode(sql, mode)
        .filter(|t| {
            // Only tokens of the text itself (not of a rewritten comment).
            let p = t.text.as_ptr() as usize;
            p >= sql.as_ptr() as usize && p + t.text.len() <= sql.as_ptr() as usize + sql.len()
        })
        .collect();
    let first = tokens.first()?;
    if ["EXPLAIN", "DESCRIBE", "DESC"]
        .iter()
        .any(|w| first.is_word(w))
    {
        let mut i = 1;
        loop {
            let t = tokens.get(i)?;
            if t.is_word("EXTENDED") || t.is_word("PARTITIONS") {
                i += 1;
            } else if t.is_word("FORMAT") {
                // FORMAT = JSON
                i += 3;
            } else {
                break;
            }
        }
        let t = tokens.get(i)?;
        // EXPLAIN ANALYZE (MySQL) runs the statement; EXPLAIN of a table
        // is its columns, EXPLAIN FOR CONNECTION another session's plan.
        let explains = ["SELECT", "UPDATE", "DELETE", "INSERT", "REPLACE", "WITH"]
            .iter()
            .any(|w| t.is_word(w))
            || t.is_punct(b'(');
        return explains.then(|| (sql[at(t.text)..].to_vec(), "EXPLAIN"));
    }
    let mut depth = 0i32;
    let mut order: Option<usize> = None;
    for (i, t) in tokens.iter().enumerate() {
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth -= 1;
        }
        let next = tokens.get(i + 1);
        if t.is_word("WITH") && next.is_some_and(|n| n.is_word("ROLLUP")) {
            let (a, b) = (at(t.text), next.map_or(0, |n| at(n.text) + n.text.len()));
            let mut out = sql[..a].to_vec();
            out.push(b' ');
            out.extend_from_slice(&sql[b..]);
            return Some((out, "GROUP BY ... WITH ROLLUP"));
        }
        if depth == 0
            && first.is_word("UPDATE")
            && t.is_word("ORDER")
            && next.is_some_and(|n| n.is_word("BY"))
        {
            order = Some(i);
        }
        if let Some(o) =
            order.filter(|_| depth == 0 && (t.is_word("LIMIT") || i + 1 == tokens.len()))
        {
            let end = match t.is_word("LIMIT") {
                true => i,
                false => tokens.len(),
            };
            if tokens[o..end].iter().any(|t| t.is_punct(b'?')) {
                return None;
            }
            let a = at(tokens[o].text);
            let b = tokens.get(end).map_or(sql.len(), |t| at(t.text));
            let mut out = sql[..a].to_vec();
            out.push(b' ');
            out.extend_from_slice(&sql[b..]);
            return Some((out, "UPDATE ... ORDER BY"));
        }
    }
    None
}

impl Router {
    /// Where a statement goes that was refused for a form the parser does
    /// not read, from `inner`, the route of it without that form.
    pub(super) fn in_one_group(&self, inner: Route, form: &str) -> Route {
        let set = match inner {
            Route::One(_) | Route::Session | Route::AnyOf(_) | Route::Refuse(_) => return inner,
            Route::Scatter(set) | Route::Broadcast(set) => set,
            Route::Merge(m) => m.groups,
            Route::Write(w) => w.groups,
        };
        Route::Refuse(format!(
            "{form} over {} groups ({}): the groups' answers do not combine into the server's; restrict it by the shard key to one group, where it runs as written",
            set.len(),
            self.names_of(set)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_comes_out_and_nothing_else_does() {
        let m = LexMode::DEFAULT;
        let out = |s: &str| {
            without_form(s.as_bytes(), m).map(|(v, f)| (String::from_utf8(v).unwrap(), f))
        };
        assert_eq!(
            out("EXPLAIN EXTENDED SELECT 1 FROM t"),
            Some(("SELECT 1 FROM t".into(), "EXPLAIN"))
        );
        assert_eq!(
            out("desc format = json update t set a = 1"),
            Some(("update t set a = 1".into(), "EXPLAIN"))
        );
        assert_eq!(out("EXPLAIN t"), None);
        assert_eq!(out("EXPLAIN ANALYZE SELECT 1"), None);
        assert_eq!(out("EXPLAIN FOR CONNECTION 12"), None);
        assert_eq!(
            out("SELECT a, COUNT(*) FROM t GROUP BY a WITH ROLLUP LIMIT 3"),
            Some((
                "SELECT a, COUNT(*) FROM t GROUP BY a   LIMIT 3".into(),
                "GROUP BY ... WITH ROLLUP"
            ))
        );
        assert_eq!(
            out("UPDATE t SET a = (SELECT 1 ORDER BY 1) WHERE k = 3 ORDER BY a DESC LIMIT 2"),
            Some((
                "UPDATE t SET a = (SELECT 1 ORDER BY 1) WHERE k = 3  LIMIT 2".into(),
                "UPDATE ... ORDER BY"
            ))
        );
        assert_eq!(
            out("UPDATE t SET a = 1 ORDER BY a"),
            Some(("UPDATE t SET a = 1  ".into(), "UPDATE ... ORDER BY"))
        );
        // Taking out a placeholder would renumber the parameters.
        assert_eq!(out("UPDATE t SET a = 1 ORDER BY a + ? LIMIT 1"), None);
        assert_eq!(out("SELECT 'WITH ROLLUP' FROM t"), None);
        assert!(explains(b"/* x */ EXPLAIN SELECT 1", m));
        assert!(!explains(b"SELECT 1", m));
    }
}
