//! Routing policy. Pure functions of a statement's classification and the
//! session's situation; the proxy does the I/O. Returning a rule with each
//! decision lets operators ask why a statement went where it went.

use sextant_sql::{Classification, Flags};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Primary,
    /// Any replica of the group (the primary if none is available).
    Replica,
}

/// The rule that decided. Listed roughly in priority order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The session's state lives on its current server connection.
    Pinned,
    /// `/*# mode=READWRITE */` or `/*# mode=READONLY */`.
    Hint,
    Transaction,
    /// Reads a result of the session's previous statement
    /// (LAST_INSERT_ID(), FOUND_ROWS(), ROW_COUNT()).
    PreviousStatement,
    /// The statement will tie the session to its connection (user
    /// variables, temporary tables, named locks, ...): done on the primary
    /// so that later writes in the same session can follow.
    SessionBound,
    LockingRead,
    Write,
    Read,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Pinned => "pinned",
            Rule::Hint => "hint",
            Rule::Transaction => "transaction",
            Rule::PreviousStatement => "previous-statement",
            Rule::SessionBound => "session-bound",
            Rule::LockingRead => "locking-read",
            Rule::Write => "write",
            Rule::Read => "read",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub target: Target,
    pub rule: Rule,
}

/// What the router needs to know about the session.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionFacts {
    pub pinned: bool,
    pub in_transaction: bool,
}

pub fn decide(c: &Classification<'_>, s: SessionFacts) -> Decision {
    let d = |target, rule| Decision { target, rule };
    if s.pinned {
        return d(Target::Primary, Rule::Pinned);
    }
    if let Some(mode) = c.hints.get("mode") {
        if mode.eq_ignore_ascii_case(b"READWRITE") {
            return d(Target::Primary, Rule::Hint);
        }
        if mode.eq_ignore_ascii_case(b"READONLY") && !s.in_transaction {
            return d(Target::Replica, Rule::Hint);
        }
    }
    if s.in_transaction {
        return d(Target::Primary, Rule::Transaction);
    }
    if c.needs_previous_connection() {
        return d(Target::Primary, Rule::PreviousStatement);
    }
    if c.pins_session() {
        return d(Target::Primary, Rule::SessionBound);
    }
    if c.flags.contains(Flags::LOCKING_READ) {
        return d(Target::Primary, Rule::LockingRead);
    }
    if c.read_only {
        d(Target::Replica, Rule::Read)
    } else {
        d(Target::Primary, Rule::Write)
    }
}

/// Weighted round robin over servers, with a cursor owned by the caller
/// (one per session), so picking takes no shared lock and no atomic.
/// `weights[i]` is server i's weight; `usable(i)` says whether it may be
/// used now. Returns None when no server is usable.
pub fn pick_weighted(
    weights: &[u32],
    usable: impl Fn(usize) -> bool,
    cursor: &mut u64,
) -> Option<usize> {
    let total: u64 = weights.iter().map(|&w| w as u64).sum();
    if total == 0 {
        return None;
    }
    for _ in 0..weights.len() {
        let mut slot = *cursor % total;
        *cursor = cursor.wrapping_add(1);
        for (i, &w) in weights.iter().enumerate() {
            if slot < w as u64 {
                if usable(i) {
                    return Some(i);
                }
                break;
            }
            slot -= w as u64;
        }
    }
    // Skipping unusable servers slot by slot may miss the usable ones when
    // weights are large; fall back to a scan.
    (0..weights.len()).find(|&i| usable(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sextant_sql::classify;

    #[rustfmt::skip]
    #[test]
    fn decisions() {
        let free = SessionFacts::default();
        let trx = SessionFacts { in_transaction: true, ..free };
        let pinned = SessionFacts { pinned: true, ..free };
        let cases: &[(&str, SessionFacts, Target, Rule)] = &[
            ("SELECT 1", free, Target::Replica, Rule::Read),
            ("SELECT 1", trx, Target::Primary, Rule::Transaction),
            ("SELECT 1", pinned, Target::Primary, Rule::Pinned),
            ("INSERT INTO t VALUES (1)", free, Target::Primary, Rule::Write),
            ("SELECT * FROM t FOR UPDATE", free, Target::Primary, Rule::LockingRead),
            ("/*#mode=READWRITE*/ SELECT 1", free, Target::Primary, Rule::Hint),
            ("/*#mode=READONLY*/ SHOW TABLES", free, Target::Replica, Rule::Hint),
            ("/*#mode=READONLY*/ SELECT 1", trx, Target::Primary, Rule::Transaction),
            ("SELECT LAST_INSERT_ID()", free, Target::Primary, Rule::PreviousStatement),
            ("SET @a = 1", free, Target::Primary, Rule::SessionBound),
            ("SELECT GET_LOCK('x', 1)", free, Target::Primary, Rule::SessionBound),
            ("SHOW TABLES", free, Target::Primary, Rule::Write),
        ];
        for (sql, facts, target, rule) in cases {
            let got = decide(&classify(sql.as_bytes()), *facts);
            assert_eq!((got.target, got.rule), (*target, *rule), "{sql}");
        }
    }

    #[test]
    fn weighted_round_robin() {
        let mut cursor = 0;
        let mut hits = [0u32; 2];
        for _ in 0..400 {
            hits[pick_weighted(&[1, 3], |_| true, &mut cursor).unwrap()] += 1;
        }
        assert_eq!(hits, [100, 300]);
        let mut hits = [0u32; 2];
        for _ in 0..10 {
            hits[pick_weighted(&[1, 3], |i| i == 0, &mut cursor).unwrap()] += 1;
        }
        assert_eq!(hits, [10, 0]);
        assert_eq!(pick_weighted(&[1, 1], |_| false, &mut cursor), None);
        assert_eq!(pick_weighted(&[], |_| true, &mut cursor), None);
    }
}
