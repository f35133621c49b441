//! The routing rules: which role a statement goes to, and the rule that
//! chose it, in priority order (docs/routing.md lists them).

use sextant_config::RoutingPolicy;
use sextant_sql::{Classification, Flags, Kind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Primary,
    /// Any replica of the group (the primary if none is available).
    Replica,
}

/// The rule that decided. Listed in priority order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Rule {
    /// The session's state lives on its current server connection.
    Pinned,
    /// `/*# mode=READWRITE */` or `/*# mode=READONLY */`.
    Hint,
    Transaction,
    /// primary_preferred (Cetus: master-preferred).
    PrimaryPreferred,
    /// START TRANSACTION READ ONLY: the whole transaction on a replica.
    ReadOnlyTransaction,
    /// Reads a result of the session's previous statement
    /// (LAST_INSERT_ID(), FOUND_ROWS(), ROW_COUNT()).
    PreviousStatement,
    /// The statement will tie the session to its connection (user
    /// variables, temporary tables, named locks, ...): done on the primary
    /// so that later writes in the same session can follow.
    SessionBound,
    LockingRead,
    Write,
    /// Calls a function that is not built in: a stored function may write.
    StoredFunction,
    /// Reads a table the server's catalogue did not list when last read:
    /// it may be a view created since that calls such a function.
    UnknownTable,
    /// read_primary_percent (Cetus: read-master-percentage) sent this read
    /// to the primary.
    ReadPrimaryPercent,
    Read,
    /// A read the rules sent to a replica, moved to the primary by its
    /// consistency mode (`strong`). Decided by `plan`, after the
    /// rules above.
    Strong,
    /// A prepared statement executed with a cursor: the session keeps the
    /// connection while the cursor is open, and writes may follow, so the
    /// cursor is opened on the primary.
    Cursor,
}

impl Rule {
    /// Every rule, in priority order.
    pub const ALL: [Rule; 15] = [
        Rule::Pinned,
        Rule::Hint,
        Rule::Transaction,
        Rule::PrimaryPreferred,
        Rule::ReadOnlyTransaction,
        Rule::PreviousStatement,
        Rule::SessionBound,
        Rule::LockingRead,
        Rule::Write,
        Rule::StoredFunction,
        Rule::UnknownTable,
        Rule::ReadPrimaryPercent,
        Rule::Read,
        Rule::Strong,
        Rule::Cursor,
    ];

    /// Its position in [`Rule::ALL`] (for counters kept in an array).
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Rule::Pinned => "pinned",
            Rule::Hint => "hint",
            Rule::Transaction => "transaction",
            Rule::PrimaryPreferred => "primary-preferred",
            Rule::ReadOnlyTransaction => "read-only-transaction",
            Rule::PreviousStatement => "previous-statement",
            Rule::SessionBound => "session-bound",
            Rule::LockingRead => "locking-read",
            Rule::Write => "write",
            Rule::StoredFunction => "stored-function",
            Rule::UnknownTable => "unknown-table",
            Rule::ReadPrimaryPercent => "read-primary-percent",
            Rule::Read => "read",
            Rule::Strong => "strong-consistency",
            Rule::Cursor => "cursor",
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
    /// The connection the session is bound to (its transaction, or state
    /// that cannot move) is on a replica: a read-only transaction, or state
    /// the server reported after a read.
    pub on_replica: bool,
}

/// Per-session routing state: no shared counters, so deciding takes no
/// lock and touches no shared cache line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursor {
    /// Round-robin position.
    pub rr: u64,
    /// read_primary_percent accumulator: every read adds the percentage,
    /// and each time it reaches 100 that read goes to the primary, so the
    /// share is exact over any run of reads, not just on average.
    pub percent_acc: u32,
}

pub fn decide(
    c: &Classification<'_>,
    s: SessionFacts,
    policy: &RoutingPolicy,
    cur: &mut Cursor,
) -> Decision {
    let d = |target, rule| Decision { target, rule };
    if s.pinned {
        return d(Target::Primary, Rule::Pinned);
    }
    if let Some(mode) = c.hints.get("mode") {
        if mode.eq_ignore_ascii_case(b"READWRITE") {
            return d(Target::Primary, Rule::Hint);
        }
        // A hint cannot move a statement out of its transaction, and only a
        // plain read may go to a replica: a statement that may write, lock
        // or leave state on its connection goes where it would without the
        // hint (a session is never bound to a replica by a hint).
        if mode.eq_ignore_ascii_case(b"READONLY") && !s.in_transaction && c.plain_read() {
            return d(Target::Replica, Rule::Hint);
        }
    }
    if s.in_transaction {
        return d(Target::Primary, Rule::Transaction);
    }
    if policy.primary_preferred {
        return d(Target::Primary, Rule::PrimaryPreferred);
    }
    if c.kind == Kind::Begin
        && c.flags.contains(Flags::READ_ONLY_TRX)
        && policy.read_only_transactions_on_replicas
    {
        return d(Target::Replica, Rule::ReadOnlyTransaction);
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
    if !c.read_only {
        return d(Target::Primary, Rule::Write);
    }
    if c.flags.intersects(Flags::MAY_WRITE_FUNCTION) {
        return d(Target::Primary, Rule::StoredFunction);
    }
    if c.flags.contains(Flags::UNKNOWN_TABLE) {
        return d(Target::Primary, Rule::UnknownTable);
    }
    if policy.read_primary_percent > 0 {
        cur.percent_acc += policy.read_primary_percent as u32;
        if cur.percent_acc >= 100 {
            cur.percent_acc -= 100;
            return d(Target::Primary, Rule::ReadPrimaryPercent);
        }
    }
    d(Target::Replica, Rule::Read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sextant_sql::classify;

    fn run(sql: &str, facts: SessionFacts, policy: &RoutingPolicy) -> Decision {
        decide(
            &classify(sql.as_bytes()),
            facts,
            policy,
            &mut Cursor::default(),
        )
    }

    #[rustfmt::skip]
    #[test]
    fn decisions() {
        let free = SessionFacts::default();
        let trx = SessionFacts { in_transaction: true, ..free };
        let pinned = SessionFacts { pinned: true, ..free };
        let def = RoutingPolicy::default();
        let pp = RoutingPolicy { primary_preferred: true, ..def };
        let no_ro = RoutingPolicy { read_only_transactions_on_replicas: false, ..def };
        let cases: &[(&str, SessionFacts, &RoutingPolicy, Target, Rule)] = &[
            ("SELECT 1", free, &def, Target::Replica, Rule::Read),
            ("SELECT 1", trx, &def, Target::Primary, Rule::Transaction),
            ("SELECT 1", pinned, &def, Target::Primary, Rule::Pinned),
            ("INSERT INTO t VALUES (1)", free, &def, Target::Primary, Rule::Write),
            ("SELECT * FROM t FOR UPDATE", free, &def, Target::Primary, Rule::LockingRead),
            ("/*#mode=READWRITE*/ SELECT 1", free, &def, Target::Primary, Rule::Hint),
            ("/*#mode=READONLY*/ SHOW TABLES", free, &def, Target::Replica, Rule::Hint),
            ("/*#mode=READONLY*/ SELECT 1", trx, &def, Target::Primary, Rule::Transaction),
            // hint > primary_preferred
            ("/*#mode=READONLY*/ SELECT 1", free, &pp, Target::Replica, Rule::Hint),
            ("SELECT 1", free, &pp, Target::Primary, Rule::PrimaryPreferred),
            ("START TRANSACTION READ ONLY", free, &def, Target::Replica, Rule::ReadOnlyTransaction),
            ("START TRANSACTION READ ONLY", free, &no_ro, Target::Primary, Rule::Write),
            ("START TRANSACTION READ ONLY", free, &pp, Target::Primary, Rule::PrimaryPreferred),
            ("SELECT LAST_INSERT_ID()", free, &def, Target::Primary, Rule::PreviousStatement),
            ("SET @a = 1", free, &def, Target::Primary, Rule::SessionBound),
            ("SELECT GET_LOCK('x', 1)", free, &def, Target::Primary, Rule::SessionBound),
            ("SELECT my_func(1)", free, &def, Target::Primary, Rule::StoredFunction),
            ("SELECT db.f()", free, &def, Target::Primary, Rule::StoredFunction),
            ("SELECT COUNT(*), NOW(), CONCAT(a, b) FROM t WHERE id IN (1, 2)", free, &def, Target::Replica, Rule::Read),
            ("SHOW TABLES", free, &def, Target::Primary, Rule::Write),
        ];
        for (sql, facts, policy, target, rule) in cases {
            let got = run(sql, *facts, policy);
            assert_eq!((got.target, got.rule), (*target, *rule), "{sql}");
        }
    }

    #[test]
    fn read_primary_percent_is_exact() {
        for pct in [0u8, 1, 30, 50, 99, 100] {
            let policy = RoutingPolicy {
                read_primary_percent: pct,
                ..Default::default()
            };
            let mut cur = Cursor::default();
            let c = classify(b"SELECT 1");
            let primary = (0..1000)
                .filter(|_| {
                    decide(&c, SessionFacts::default(), &policy, &mut cur).target == Target::Primary
                })
                .count();
            assert_eq!(primary, pct as usize * 10, "{pct}%");
        }
    }
}
