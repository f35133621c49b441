//! Routing policy. Pure functions of a statement's classification and the
//! session's situation; the proxy does the I/O. Returning a rule with each
//! decision lets operators ask why a statement went where it went.

use sextant_config::{Balance, RoutingPolicy};
use sextant_sql::{Classification, Flags, Kind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Primary,
    /// Any replica of the group (the primary if none is available).
    Replica,
}

/// The rule that decided. Listed in priority order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// read_primary_percent (Cetus: read-master-percentage) sent this read
    /// to the primary.
    ReadPrimaryPercent,
    Read,
}

impl Rule {
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
            Rule::ReadPrimaryPercent => "read-primary-percent",
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
        // A hint cannot move a statement out of its transaction.
        if mode.eq_ignore_ascii_case(b"READONLY") && !s.in_transaction {
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
    if c.flags.contains(Flags::STORED_FUNCTION) {
        return d(Target::Primary, Rule::StoredFunction);
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

/// A server's load as seen by the balancer; None when it cannot be used.
#[derive(Debug, Clone, Copy, Default)]
pub struct Load {
    pub outstanding: u32,
    /// Moving average of response time in microseconds (0 = no sample yet).
    pub latency_us: u64,
}

/// Picks a server for a read among `weights.len()` candidates.
pub fn pick(
    balance: Balance,
    weights: &[u32],
    load: impl Fn(usize) -> Option<Load>,
    cur: &mut Cursor,
    random: u64,
) -> Option<usize> {
    // A server of weight 0 takes no reads.
    let load = |i: usize| load(i).filter(|_| weights[i] > 0);
    let n = weights.len();
    if n == 0 {
        return None;
    }
    match balance {
        Balance::RoundRobin => pick_weighted(weights, |i| load(i).is_some(), &mut cur.rr),
        Balance::Weighted => {
            let total: u64 = (0..n)
                .filter(|&i| load(i).is_some())
                .map(|i| weights[i] as u64)
                .sum();
            if total == 0 {
                return None;
            }
            let mut r = random % total;
            (0..n).filter(|&i| load(i).is_some()).find(|&i| {
                if r < weights[i] as u64 {
                    true
                } else {
                    r -= weights[i] as u64;
                    false
                }
            })
        }
        Balance::LeastLatency if cur.rr % 8 == 7 => {
            // One pick in eight explores in turn, so a server that was slow
            // once gets new samples instead of being shunned for good.
            pick_weighted(weights, |i| load(i).is_some(), &mut cur.rr)
        }
        Balance::LeastOutstanding | Balance::LeastLatency => {
            // Scan from a rotating start so ties spread out.
            let start = (cur.rr % n as u64) as usize;
            cur.rr = cur.rr.wrapping_add(1);
            let mut best: Option<(usize, u128)> = None;
            for k in 0..n {
                let i = (start + k) % n;
                let Some(l) = load(i) else { continue };
                let w = weights[i].max(1) as u128;
                // Cost per unit of weight, compared without division.
                let cost = match balance {
                    Balance::LeastOutstanding => (l.outstanding as u128 + 1) * 1_000_000 / w,
                    // Latency scaled by the queue it would join, so that
                    // concurrent reads do not all pile onto the fastest.
                    _ => l.latency_us as u128 * (l.outstanding as u128 + 1) * 1_000 / w,
                };
                if best.is_none_or(|(_, c)| cost < c) {
                    best = Some((i, cost));
                }
            }
            best.map(|(i, _)| i)
        }
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

    #[test]
    fn balance_modes() {
        let mut cur = Cursor::default();
        let loads = [
            Load {
                outstanding: 5,
                latency_us: 900,
            },
            Load {
                outstanding: 1,
                latency_us: 300,
            },
            Load {
                outstanding: 3,
                latency_us: 100,
            },
        ];
        let up = |i: usize| Some(loads[i]);
        assert_eq!(
            pick(Balance::LeastOutstanding, &[1, 1, 1], up, &mut cur, 0),
            Some(1)
        );
        assert_eq!(
            pick(Balance::LeastLatency, &[1, 1, 1], up, &mut cur, 0),
            Some(2)
        );
        // Weight counts: 3 in flight on a weight-4 server beats 1 on weight 1.
        assert_eq!(
            pick(Balance::LeastOutstanding, &[1, 1, 4], up, &mut cur, 0),
            Some(2)
        );
        let only0 = |i: usize| (i == 0).then_some(loads[0]);
        for b in [
            Balance::RoundRobin,
            Balance::Weighted,
            Balance::LeastOutstanding,
            Balance::LeastLatency,
        ] {
            assert_eq!(pick(b, &[1, 1, 1], only0, &mut cur, 7), Some(0), "{b:?}");
            assert_eq!(pick(b, &[1, 1], |_| None, &mut cur, 7), None, "{b:?}");
        }
        let mut hits = [0u32; 2];
        for r in 0..400u64 {
            hits[pick(
                Balance::Weighted,
                &[1, 3],
                |_| Some(Load::default()),
                &mut cur,
                r,
            )
            .unwrap()] += 1;
        }
        assert_eq!(hits, [100, 300]);
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
