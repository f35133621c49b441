//! A statement's plan: everything the session needs to know to run it,
//! decided in one place by pure functions, so that the session only
//! executes and `EXPLAIN ROUTE` shows exactly what a session would do.

use crate::effects::Statement;
use crate::rules::{decide, Cursor, Decision, Rule, SessionFacts, Target};
use sextant_config::{Consistency, ConsistencyScope, RoutingPolicy};
use sextant_sql::Classification;

/// What a statement's group is like, as far as planning goes.
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupFacts {
    /// The group follows its writable server (topology other than static):
    /// a write refused as read-only may move to the new primary.
    pub follow_primary: bool,
    /// Plain reads may share a pipelined server connection
    /// (`pipeline_depth` > 0).
    pub pipelining: bool,
}

/// Which command the plan is for. A prepare runs once and is never
/// retried; an execute follows the route its statement was given at
/// prepare (see [`Prepared`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Query,
    Prepare,
}

/// When a statement may run a second time, on another server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Never: it may have changed something.
    Never,
    /// A plain read: if its server fails before any byte of the answer
    /// reached the client, it runs again elsewhere.
    Read,
    /// A write outside a transaction in a group that follows its primary:
    /// if the server answers only "read-only" (so nothing ran), it runs
    /// again on the new primary.
    WriteAfterSwitchover,
}

impl Retry {
    pub fn name(self) -> &'static str {
        match self {
            Retry::Never => "never",
            Retry::Read => "read",
            Retry::WriteAfterSwitchover => "write-after-switchover",
        }
    }
}

/// What a read must see besides what any replica in rotation has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadRequirement {
    /// read_your_writes: only a server that has applied the newest write
    /// of this session, or of this user.
    pub own_writes: Option<ConsistencyScope>,
    /// monotonic: not older data than the session's previous reads saw;
    /// the read is remembered as seen when it is done.
    pub monotonic: bool,
}

/// Why a statement is not run at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It may write, and the session's transaction runs on a replica
    /// (START TRANSACTION READ ONLY): it would run there, or (DDL) commit
    /// the transaction and run there outside it.
    WriteInReplicaTransaction,
    /// It may write, and state of the session that cannot move (reported
    /// by the server after a read) lives on a replica connection.
    WriteOnReplicaState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub target: Target,
    /// The rule that decided the target.
    pub rule: Rule,
    /// The consistency mode in force (the statement's hint, else the
    /// policy's).
    pub consistency: Consistency,
    pub read: ReadRequirement,
    pub retry: Retry,
    /// A plain read that may share a pipelined connection with other
    /// sessions' reads (the executor adds what only it knows: the
    /// request's size and whether other sessions are busy).
    pub pipeline: bool,
    /// Make the connection it runs on return this session's
    /// LAST_INSERT_ID() first (0 when the session has generated none: the
    /// connection may carry another session's).
    pub restore_insert_id: bool,
    /// Not to be run: the session is bound to a replica and the statement
    /// may write. Nothing that may write runs on a replica, whatever the
    /// hints, settings or pins.
    pub refuse: Option<Refusal>,
    /// A `/*# mode=READONLY */` hint did not apply: the statement may
    /// write, lock or leave state on its connection.
    pub hint_ignored: bool,
}

impl Plan {
    /// The consistency requirement in words, as `EXPLAIN ROUTE` shows it.
    pub fn requirement(&self) -> &'static str {
        match (self.read.own_writes, self.read.monotonic) {
            (Some(ConsistencyScope::User), _) => "own writes (user)",
            (Some(ConsistencyScope::Session), _) => "own writes (session)",
            (None, true) => "monotonic",
            (None, false) if self.rule == Rule::Strong => "strong",
            (None, false) => "none",
        }
    }
}

/// The route of a prepared statement, decided once at prepare as for a
/// fresh session, and finished at each execute by [`plan_execute`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    pub decision: Decision,
    /// What the statement is (for the traffic counters and its effects).
    pub kind: sextant_sql::Kind,
    pub flags: sextant_sql::Flags,
    pub read_only: bool,
    pub may_write: bool,
    /// Its `/*# consistency=... */` hint.
    pub consistency: Option<Consistency>,
    /// Nothing in it depends on or changes its connection's state (no
    /// session variable, lock or function of the connection): its
    /// executions may share a pipelined connection.
    pub plain: bool,
}

impl Prepared {
    pub fn new(c: &Classification<'_>, policy: &RoutingPolicy) -> Prepared {
        Prepared {
            decision: decide(c, SessionFacts::default(), policy, &mut Cursor::default()),
            kind: c.kind,
            flags: c.flags,
            read_only: c.read_only,
            may_write: c.may_write(),
            consistency: consistency_hint(c),
            plain: c.flags.is_empty(),
        }
    }
}

impl Prepared {
    /// The statement, as its effects see it.
    pub fn statement(&self) -> Statement {
        Statement {
            kind: self.kind,
            flags: self.flags,
            read_only: self.read_only,
        }
    }
}

fn consistency_hint(c: &Classification<'_>) -> Option<Consistency> {
    c.hints.get("consistency").and_then(Consistency::from_hint)
}

/// Plans a text statement (or a prepare) for a session.
pub fn plan(
    c: &Classification<'_>,
    s: SessionFacts,
    policy: &RoutingPolicy,
    g: GroupFacts,
    command: Command,
    cur: &mut Cursor,
) -> Plan {
    let d = decide(c, s, policy, cur);
    let mut p = finish(d, c.read_only, consistency_hint(c), s, policy, g);
    p.refuse = refusal(s, c.may_write());
    p.hint_ignored = d.rule != Rule::Hint
        && !s.pinned
        && !s.in_transaction
        && c.hints
            .get("mode")
            .is_some_and(|m| m.eq_ignore_ascii_case(b"READONLY"));
    p.restore_insert_id = c.flags.contains(sextant_sql::Flags::LAST_INSERT_ID);
    if command == Command::Prepare {
        // Preparing needs the tables the statement names, so a replica
        // must have what a read there would need; it changes nothing, so
        // it is neither remembered as seen nor retried.
        p.read.monotonic = false;
        p.retry = Retry::Never;
        p.pipeline = false;
        p.restore_insert_id = false;
    } else {
        p.pipeline = pipelined(&p, g, c.read_only, c.flags.is_empty());
    }
    p
}

/// Plans an execution of a prepared statement: its prepare-time route,
/// unless the session's connection holds a transaction or pinned state, or
/// the execute opens a cursor.
pub fn plan_execute(
    st: &Prepared,
    s: SessionFacts,
    policy: &RoutingPolicy,
    g: GroupFacts,
    cursor: bool,
) -> Plan {
    let d = if s.pinned {
        Decision {
            target: Target::Primary,
            rule: Rule::Pinned,
        }
    } else if s.in_transaction {
        Decision {
            target: Target::Primary,
            rule: Rule::Transaction,
        }
    } else if cursor {
        Decision {
            target: Target::Primary,
            rule: Rule::Cursor,
        }
    } else {
        st.decision
    };
    let mut p = finish(d, st.read_only, st.consistency, s, policy, g);
    p.refuse = refusal(s, st.may_write);
    p.pipeline = pipelined(&p, g, st.read_only, st.plain);
    p
}

/// Whether a planned statement may share a pipelined connection: a plain
/// read bound for a replica that may run again elsewhere.
fn pipelined(p: &Plan, g: GroupFacts, read_only: bool, plain: bool) -> bool {
    g.pipelining && p.retry == Retry::Read && p.target == Target::Replica && read_only && plain
}

/// The invariant's one place: a statement that may write never runs on a
/// replica. The rules send it to the primary; only a session already bound
/// to a replica could run it there, and then it is refused.
fn refusal(s: SessionFacts, may_write: bool) -> Option<Refusal> {
    match (s.on_replica && may_write, s.in_transaction) {
        (false, _) => None,
        (true, true) => Some(Refusal::WriteInReplicaTransaction),
        (true, false) => Some(Refusal::WriteOnReplicaState),
    }
}

/// The consistency requirement and the retry rule of a decided statement.
fn finish(
    d: Decision,
    read_only: bool,
    hint: Option<Consistency>,
    s: SessionFacts,
    policy: &RoutingPolicy,
    g: GroupFacts,
) -> Plan {
    let consistency = hint.unwrap_or(policy.consistency);
    let mut p = Plan {
        target: d.target,
        rule: d.rule,
        consistency,
        read: ReadRequirement::default(),
        retry: Retry::Never,
        pipeline: false,
        restore_insert_id: false,
        refuse: None,
        hint_ignored: false,
    };
    let free = !s.pinned && !s.in_transaction;
    if d.target == Target::Replica {
        // The rules chose a replica only for what may run twice.
        p.retry = Retry::Read;
        match consistency {
            Consistency::Eventual => {}
            Consistency::Strong => {
                p.target = Target::Primary;
                p.rule = Rule::Strong;
            }
            Consistency::Monotonic => p.read.monotonic = true,
            Consistency::ReadYourWrites => p.read.own_writes = Some(policy.consistency_scope),
        }
    } else {
        // A read the rules sent to the primary still counts as seen.
        p.read.monotonic = read_only && consistency == Consistency::Monotonic;
        if g.follow_primary && free {
            p.retry = Retry::WriteAfterSwitchover;
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use sextant_sql::classify;

    #[test]
    fn strong_moves_a_read_to_the_primary_and_keeps_it_retryable() {
        let policy = RoutingPolicy {
            consistency: Consistency::Strong,
            ..Default::default()
        };
        let p = plan(
            &classify(b"SELECT 1"),
            SessionFacts::default(),
            &policy,
            GroupFacts::default(),
            Command::Query,
            &mut Cursor::default(),
        );
        assert_eq!(
            (p.target, p.rule, p.retry),
            (Target::Primary, Rule::Strong, Retry::Read)
        );
        assert_eq!(p.requirement(), "strong");
    }

    #[test]
    fn execute_follows_the_prepared_route_unless_bound() {
        let policy = RoutingPolicy::default();
        let st = Prepared::new(&classify(b"SELECT c FROM t WHERE id = ?"), &policy);
        let g = GroupFacts::default();
        let free = plan_execute(&st, SessionFacts::default(), &policy, g, false);
        assert_eq!((free.target, free.rule), (Target::Replica, Rule::Read));
        let trx = SessionFacts {
            in_transaction: true,
            ..Default::default()
        };
        let p = plan_execute(&st, trx, &policy, g, false);
        assert_eq!(
            (p.target, p.rule, p.retry),
            (Target::Primary, Rule::Transaction, Retry::Never)
        );
    }
}
