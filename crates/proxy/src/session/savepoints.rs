//! Savepoints of a sharded transaction that has run nothing yet. Its
//! BEGIN is held back until the first statement names a group (so that
//! the transaction may span groups); a SAVEPOINT before that has no branch
//! to go to. Sextant keeps such savepoints and sets them in the branch the
//! transaction starts with, where rolling back to one undoes what ran
//! there since. (ORMs' nested atomic blocks send BEGIN, SAVEPOINT, then
//! their first statement. Sent on to the default group, the savepoint was
//! not where the statement ran: ROLLBACK TO got 1305 and the write stayed.)

use sextant_sql::{LexMode, Lexer, TokenKind};

/// A savepoint statement.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Op {
    Set(String),
    Release(String),
    RollbackTo(String),
}

/// Reads `SAVEPOINT x`, `RELEASE SAVEPOINT x` and `ROLLBACK [WORK] TO
/// [SAVEPOINT] x`; None for anything else.
pub(super) fn op(sql: &[u8], mode: LexMode) -> Option<Op> {
    let mut t = Lexer::with_mode(sql, mode).filter(|t| t.kind != TokenKind::Hint);
    let first = t.next()?;
    let op = if first.is_word("SAVEPOINT") {
        Op::Set(name(t.next()?)?)
    } else if first.is_word("RELEASE") {
        let w = t.next()?;
        if !w.is_word("SAVEPOINT") {
            return None;
        }
        Op::Release(name(t.next()?)?)
    } else if first.is_word("ROLLBACK") {
        let mut w = t.next()?;
        if w.is_word("WORK") {
            w = t.next()?;
        }
        if !w.is_word("TO") {
            return None;
        }
        let mut w = t.next()?;
        if w.is_word("SAVEPOINT") {
            w = t.next()?;
        }
        Op::RollbackTo(name(w)?)
    } else {
        return None;
    };
    // Anything after the name (but a semicolon) is not a form read here.
    match t.next() {
        None => Some(op),
        Some(p) if p.is_punct(b';') && t.next().is_none() => Some(op),
        Some(_) => None,
    }
}

fn name(t: sextant_sql::Token<'_>) -> Option<String> {
    match t.kind {
        TokenKind::Word => Some(String::from_utf8_lossy(t.text).into_owned()),
        TokenKind::QuotedIdent => {
            let inner = t
                .text
                .strip_prefix(b"`")
                .and_then(|x| x.strip_suffix(b"`"))
                .unwrap_or(t.text);
            Some(String::from_utf8_lossy(inner).replace("``", "`"))
        }
        _ => None,
    }
}

/// Savepoints set, oldest first (names compare without case, as the
/// server's do).
#[derive(Debug, Default)]
pub(super) struct Held(Vec<String>);

impl Held {
    /// Applies `op` as the server would; Err: the savepoint it names does
    /// not exist (the server's 1305).
    pub(super) fn apply(&mut self, op: Op) -> Result<(), String> {
        let at = |names: &[String], n: &str| names.iter().position(|x| x.eq_ignore_ascii_case(n));
        match op {
            Op::Set(n) => {
                // Setting a name again moves it to the end.
                if let Some(i) = at(&self.0, &n) {
                    self.0.remove(i);
                }
                self.0.push(n);
            }
            Op::Release(n) => match at(&self.0, &n) {
                Some(i) => self.0.truncate(i),
                None => return Err(n),
            },
            Op::RollbackTo(n) => match at(&self.0, &n) {
                Some(i) => self.0.truncate(i + 1),
                None => return Err(n),
            },
        }
        Ok(())
    }

    /// The statements that set them again, oldest first.
    pub(super) fn statements(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|n| format!("SAVEPOINT `{}`", n.replace('`', "``")))
            .collect()
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Option<Op> {
        op(s.as_bytes(), LexMode::DEFAULT)
    }

    #[test]
    fn forms() {
        assert_eq!(read("SAVEPOINT a"), Some(Op::Set("a".into())));
        assert_eq!(read("savepoint `s 1`;"), Some(Op::Set("s 1".into())));
        assert_eq!(read("RELEASE SAVEPOINT a"), Some(Op::Release("a".into())));
        assert_eq!(read("ROLLBACK TO a"), Some(Op::RollbackTo("a".into())));
        assert_eq!(
            read("rollback work to savepoint `x``y`"),
            Some(Op::RollbackTo("x`y".into()))
        );
        assert_eq!(read("ROLLBACK"), None);
        assert_eq!(read("ROLLBACK WORK"), None);
        assert_eq!(read("SAVEPOINT a, b"), None);
        assert_eq!(read("SELECT 1"), None);
    }

    #[test]
    fn held_as_the_server_keeps_them() {
        let mut h = Held::default();
        h.apply(Op::Set("a".into())).unwrap();
        h.apply(Op::Set("b".into())).unwrap();
        h.apply(Op::Set("c".into())).unwrap();
        h.apply(Op::RollbackTo("B".into())).unwrap();
        assert_eq!(h.statements(), ["SAVEPOINT `a`", "SAVEPOINT `b`"]);
        assert_eq!(h.apply(Op::RollbackTo("c".into())), Err("c".into()));
        h.apply(Op::Set("a".into())).unwrap();
        assert_eq!(h.statements(), ["SAVEPOINT `b`", "SAVEPOINT `a`"]);
        h.apply(Op::Release("b".into())).unwrap();
        assert!(h.is_empty());
        assert_eq!(h.apply(Op::Release("a".into())), Err("a".into()));
    }
}
