//! Whether a replication group's primary is to be replaced, and by which
//! replica: a pure decision over what the monitor saw, so that every rule
//! is tested without servers (the execution that carries a decision out
//! is apart from it).
//!
//! The rules, and what each guards against:
//! - The primary must have failed sextant's checks for `after_ms`, and
//!   every replica that answers must have lost it too (its IO thread no
//!   longer connected): a cut between sextant and a healthy primary never
//!   promotes (a second primary would take writes the first never sees).
//! - Only a replica that answers and may be promoted is a candidate; the
//!   one chosen has received (relay log included) everything every other
//!   replica has received or applied, so that after it applies its relay
//!   log no replica holds a transaction it lacks; when no candidate has,
//!   nothing is promoted (a replica that already applied more would have
//!   to throw it away).
//! - A replica that applied transactions it never received from the
//!   primary (written on it directly: errant) is never promoted, and is
//!   named, since its data differs from the primary's.
//!
//! MariaDB positions are compared here; MySQL GTID sets by the same rules
//! in `failover_mysql.rs`.

use crate::dialect::{show, Position};
use crate::failover_mysql::{choose, MySqlReplica, PrimarySeen};
use crate::gtid_set::GtidSet;
use sextant_backend::gtid::Gtid;

/// What the monitor saw of one replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub addr: String,
    /// It answered the monitor's last check.
    pub answers: bool,
    /// `promotable = false` in its config keeps it out.
    pub promotable: bool,
    /// Its IO thread is connected to the primary (`Slave_IO_Running =
    /// Yes`); `Connecting` or `No` count as lost.
    pub io_connected: bool,
    /// What it received from the primary (`gtid_io_pos`, the relay log
    /// included), one GTID per domain.
    pub received: Vec<Gtid>,
    /// What it applied, its own writes included (`gtid_current_pos`).
    pub applied: Vec<Gtid>,
    /// MySQL: what it received (`Retrieved_Gtid_Set`) and executed
    /// (`@@gtid_executed`); empty on MariaDB.
    pub received_set: GtidSet,
    pub executed_set: GtidSet,
    /// It was acknowledging the primary's commits (semi-sync replica
    /// side on and connected) when the primary was last seen answering.
    pub acked: bool,
    /// How long its IO thread, connected or not, has received nothing
    /// from the primary (neither an event nor a heartbeat), as far as
    /// sextant's checks saw.
    pub silent_ms: u64,
    /// Its `MASTER_HEARTBEAT_PERIOD` (0: none): an idle primary that
    /// answers sends a heartbeat this often.
    pub heartbeat_ms: u64,
}

impl Replica {
    /// Whether it still hears from the primary: its IO thread is
    /// connected and has received something within three heartbeat
    /// periods. A frozen primary (SIGSTOP, a hung machine) keeps its TCP
    /// connections open, so the IO thread says Yes until
    /// slave_net_timeout; the missing heartbeats say it much sooner.
    pub fn hears_primary(&self) -> bool {
        self.io_connected
            && (self.heartbeat_ms == 0 || self.silent_ms < SILENT_HEARTBEATS * self.heartbeat_ms)
    }
}

/// Heartbeat periods without anything received after which a connected
/// replica counts as having lost the primary.
pub const SILENT_HEARTBEATS: u64 = 3;

/// The monitor's view of the group at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// How long the primary has failed every check (0: it answers).
    pub primary_failing_ms: u64,
    pub replicas: Vec<Replica>,
    /// The group runs semi-synchronous replication: a commit was
    /// acknowledged only once a replica had received it.
    pub semi_sync: bool,
    /// A member reported a MySQL (not MariaDB) version: the replicas'
    /// GTID sets are compared, not their MariaDB positions.
    pub mysql: bool,
    /// MySQL: the primary's `@@gtid_executed` and server UUID when it
    /// last answered (what a replica executed beyond both, and beyond
    /// what it received, is errant).
    pub primary_seen: Option<PrimarySeen>,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The primary answers.
    Keep,
    /// Not yet (and why): checked again at the next round.
    Wait(String),
    /// Promote `candidate` once it has applied `apply_to`, then point
    /// `repoint` at it. `errant`: replicas left out, with why.
    Promote {
        candidate: String,
        apply_to: Position,
        repoint: Vec<String>,
        errant: Vec<String>,
    },
    /// No replica can be promoted without losing or diverging (why).
    Refuse(String),
}

/// The sequence number `list` holds in `domain` (0: none).
fn seq_in(list: &[Gtid], domain: u32) -> u64 {
    list.iter()
        .filter(|g| g.domain == domain)
        .map(|g| g.seq)
        .max()
        .unwrap_or(0)
}

/// Whether `a` holds at least what `b` holds, domain by domain.
fn covers(a: &[Gtid], b: &[Gtid]) -> bool {
    b.iter().all(|g| seq_in(a, g.domain) >= g.seq)
}

/// The domains where `r` applied past what it received: writes of its
/// own, which the primary never had.
fn errant(r: &Replica) -> Vec<Gtid> {
    r.applied
        .iter()
        .filter(|g| g.seq > seq_in(&r.received, g.domain))
        .copied()
        .collect()
}

/// The decision for `view`, where the primary counts as failed after
/// `after_ms` of failed checks.
pub fn decide(view: &View, after_ms: u64) -> Decision {
    if view.primary_failing_ms == 0 {
        return Decision::Keep;
    }
    if view.primary_failing_ms < after_ms {
        return Decision::Wait(format!(
            "the primary has failed sextant's checks for {} ms of the {after_ms} ms failover_after_ms asks",
            view.primary_failing_ms
        ));
    }
    let answering: Vec<&Replica> = view.replicas.iter().filter(|r| r.answers).collect();
    if answering.is_empty() {
        return Decision::Refuse("no replica answers sextant".into());
    }
    if let Some(r) = answering.iter().find(|r| r.hears_primary()) {
        return Decision::Wait(format!(
            "replica {} is still connected to the primary: the primary may be cut off from sextant only",
            r.addr
        ));
    }
    if view.semi_sync {
        // With semi-sync an acknowledged commit is in the relay log of a
        // replica that was acknowledging; one that does not answer now
        // may hold commits no other has.
        if let Some(r) = view.replicas.iter().find(|r| !r.answers && r.acked) {
            return Decision::Refuse(format!(
                "semi-sync: replica {} was acknowledging commits and does not answer: it may hold acknowledged transactions no other replica has",
                r.addr
            ));
        }
        if !answering.iter().any(|r| r.acked) {
            return Decision::Refuse(
                "semi-sync: no replica that answers was acknowledging the primary's commits when it failed (the primary may have fallen back to asynchronous replication): an acknowledged transaction may be on none of them".into(),
            );
        }
    }
    if view.mysql {
        return decide_mysql(&answering, view.primary_seen.as_ref());
    }
    let mut left_out = Vec::new();
    let mut candidates = Vec::new();
    for r in &answering {
        let own = errant(r);
        if !own.is_empty() {
            left_out.push(format!(
                "{}: applied transactions the primary never sent it ({})",
                r.addr,
                show(&own)
            ));
        } else if r.promotable {
            candidates.push(*r);
        }
    }
    if candidates.is_empty() {
        let why = match left_out.is_empty() {
            true => "no replica that answers may be promoted (promotable = false)".to_string(),
            false => format!("no replica can be promoted: {}", left_out.join("; ")),
        };
        return Decision::Refuse(why);
    }
    // The one that received the most; it must hold what every other
    // replica received or applied.
    let best = candidates
        .iter()
        .copied()
        .max_by_key(|r| {
            let total: u64 = r.received.iter().map(|g| g.seq).sum();
            // Among those that received as much, the one with the least
            // relay log left to apply (a replica far behind in applying
            // would keep writes waiting while it catches up); then the
            // first listed (a stable, configured order).
            let applied: u64 = r.applied.iter().map(|g| g.seq).sum();
            (
                total,
                applied,
                std::cmp::Reverse(answering.iter().position(|x| x.addr == r.addr)),
            )
        })
        .expect("candidates is not empty");
    // Errant replicas count too, for what they received from the
    // primary: it may be acknowledged commits no other replica has.
    let behind: Vec<&str> = answering
        .iter()
        .filter(|r| r.addr != best.addr)
        .filter(|r| {
            !covers(&best.received, &r.received)
                || (errant(r).is_empty() && !covers(&best.received, &r.applied))
        })
        .map(|r| r.addr.as_str())
        .collect();
    if !behind.is_empty() {
        return Decision::Refuse(format!(
            "no candidate has received everything the others have: {} (best {}) lacks what {} holds",
            best.addr,
            show(&best.received),
            behind.join(", ")
        ));
    }
    Decision::Promote {
        candidate: best.addr.clone(),
        apply_to: Position::MariaDb(best.received.clone()),
        repoint: answering
            .iter()
            .filter(|r| r.addr != best.addr && errant(r).is_empty())
            .map(|r| r.addr.clone())
            .collect(),
        errant: left_out,
    }
}

/// The candidate among answering MySQL replicas, by their GTID sets.
fn decide_mysql(answering: &[&Replica], primary_seen: Option<&PrimarySeen>) -> Decision {
    let replicas: Vec<MySqlReplica> = answering
        .iter()
        .map(|r| MySqlReplica {
            addr: r.addr.clone(),
            promotable: r.promotable,
            received: r.received_set.clone(),
            executed: r.executed_set.clone(),
        })
        .collect();
    match choose(&replicas, primary_seen) {
        Ok(c) => Decision::Promote {
            candidate: c.candidate,
            apply_to: Position::MySql(c.wait_for),
            repoint: c.repoint,
            errant: c.left_out,
        },
        Err(why) => Decision::Refuse(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(list: &str) -> Vec<Gtid> {
        sextant_backend::gtid::parse_list(list).collect()
    }

    fn replica(addr: &str, received: &str, applied: &str) -> Replica {
        Replica {
            addr: addr.into(),
            answers: true,
            promotable: true,
            io_connected: false,
            received: g(received),
            applied: g(applied),
            acked: false,
            silent_ms: 0,
            heartbeat_ms: 0,
            received_set: GtidSet::default(),
            executed_set: GtidSet::default(),
        }
    }

    const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const E: &str = "eeeeeeee-71ca-11e1-9e33-c80aa9429562";

    /// A MySQL replica that received `from..=to` and executed `1..=done`.
    fn mysql(addr: &str, from: u64, to: u64, done: u64) -> Replica {
        Replica {
            received_set: GtidSet::parse(&format!("{U}:{from}-{to}")).unwrap(),
            executed_set: GtidSet::parse(&format!("{U}:1-{done}")).unwrap(),
            ..replica(addr, "", "")
        }
    }

    /// The MySQL primary as last seen: transactions 1-100 of its UUID.
    fn seen_at_100() -> PrimarySeen {
        PrimarySeen {
            executed: GtidSet::parse(&format!("{U}:1-100")).unwrap(),
            uuid: U.into(),
        }
    }

    fn mysql_view(failing: u64, replicas: Vec<Replica>) -> View {
        View {
            mysql: true,
            ..view(failing, replicas)
        }
    }

    fn view(failing: u64, replicas: Vec<Replica>) -> View {
        View {
            primary_failing_ms: failing,
            replicas,
            semi_sync: false,
            mysql: false,
            primary_seen: None,
        }
    }

    fn semi(failing: u64, replicas: Vec<Replica>) -> View {
        View {
            semi_sync: true,
            ..view(failing, replicas)
        }
    }

    #[test]
    fn decisions() {
        let a = replica("a:1", "0-1-100", "0-1-100");
        let b = replica("b:1", "0-1-120", "0-1-110");
        let promote = |c: &str, to: &str, repoint: &[&str]| Decision::Promote {
            candidate: c.into(),
            apply_to: Position::MariaDb(g(to)),
            repoint: repoint.iter().map(|s| s.to_string()).collect(),
            errant: vec![],
        };
        type Check<'a> = Box<dyn Fn(&Decision) -> bool + 'a>;
        let cases: Vec<(&str, View, Check)> = vec![
            (
                "a primary that answers is kept",
                view(0, vec![a.clone()]),
                Box::new(|d| *d == Decision::Keep),
            ),
            (
                "failing, but not for long enough",
                view(2_000, vec![a.clone(), b.clone()]),
                Box::new(|d| matches!(d, Decision::Wait(w) if w.contains("2000 ms of the 3000"))),
            ),
            (
                "the replica that received the most, even if it applied less",
                view(3_000, vec![a.clone(), b.clone()]),
                Box::new(move |d| *d == promote("b:1", "0-1-120", &["a:1"])),
            ),
            (
                "a replica still connected to the primary: sextant alone lost it",
                view(
                    9_000,
                    vec![
                        a.clone(),
                        Replica {
                            io_connected: true,
                            ..b.clone()
                        },
                    ],
                ),
                Box::new(
                    |d| matches!(d, Decision::Wait(w) if w.contains("b:1 is still connected")),
                ),
            ),
            (
                "a connected replica that hears no heartbeat: the primary is frozen",
                view(
                    9_000,
                    vec![
                        a.clone(),
                        Replica {
                            io_connected: true,
                            heartbeat_ms: 1_000,
                            silent_ms: 3_000,
                            ..b.clone()
                        },
                    ],
                ),
                Box::new(|d| *d == promote("b:1", "0-1-120", &["a:1"])),
            ),
            (
                "a connected replica whose heartbeats are late but not missing",
                view(
                    9_000,
                    vec![
                        a.clone(),
                        Replica {
                            io_connected: true,
                            heartbeat_ms: 1_000,
                            silent_ms: 2_999,
                            ..b.clone()
                        },
                    ],
                ),
                Box::new(
                    |d| matches!(d, Decision::Wait(w) if w.contains("b:1 is still connected")),
                ),
            ),
            (
                "without heartbeats a connected replica always counts as hearing",
                view(
                    9_000,
                    vec![
                        a.clone(),
                        Replica {
                            io_connected: true,
                            silent_ms: 600_000,
                            ..b.clone()
                        },
                    ],
                ),
                Box::new(|d| matches!(d, Decision::Wait(_))),
            ),
            (
                "as much received: the one with less left to apply",
                view(
                    9_000,
                    vec![
                        replica("a:1", "0-1-500", "0-1-20"),
                        replica("b:1", "0-1-500", "0-1-490"),
                    ],
                ),
                Box::new(|d| *d == promote("b:1", "0-1-500", &["a:1"])),
            ),
            (
                "MySQL servers: GTID sets compared, not MariaDB positions",
                View {
                    primary_seen: Some(seen_at_100()),
                    ..mysql_view(
                        9_000,
                        vec![mysql("a:1", 90, 110, 105), mysql("b:1", 90, 120, 101)],
                    )
                },
                Box::new(|d| {
                    matches!(d, Decision::Promote { candidate, apply_to, repoint, .. }
                        if candidate == "b:1" && apply_to.to_string() == format!("{U}:1-120")
                            && *repoint == ["a:1".to_string()])
                }),
            ),
            (
                "MySQL servers: still connected replicas keep the primary",
                mysql_view(
                    9_000,
                    vec![Replica {
                        io_connected: true,
                        ..mysql("a:1", 90, 110, 105)
                    }],
                ),
                Box::new(|d| matches!(d, Decision::Wait(_))),
            ),
            (
                "MySQL servers: an errant replica ahead of the clean one refuses",
                View {
                    primary_seen: Some(seen_at_100()),
                    ..mysql_view(
                        9_000,
                        vec![
                            Replica {
                                executed_set: GtidSet::parse(&format!("{U}:1-130,{E}:1")).unwrap(),
                                ..mysql("e:1", 90, 130, 130)
                            },
                            mysql("b:1", 90, 120, 120),
                        ],
                    )
                },
                Box::new(
                    |d| matches!(d, Decision::Refuse(w) if w.contains(&format!("e:1 ({U}:121-130)"))),
                ),
            ),
            (
                "replicas that do not answer neither vote nor count",
                view(
                    9_000,
                    vec![
                        Replica {
                            answers: false,
                            io_connected: true,
                            ..b.clone()
                        },
                        a.clone(),
                    ],
                ),
                Box::new(|d| *d == promote("a:1", "0-1-100", &[])),
            ),
            (
                "no replica answers",
                view(
                    9_000,
                    vec![Replica {
                        answers: false,
                        ..a.clone()
                    }],
                ),
                Box::new(|d| matches!(d, Decision::Refuse(w) if w.contains("no replica answers"))),
            ),
            (
                "promotable = false is respected, if another holds all",
                view(
                    9_000,
                    vec![
                        Replica {
                            promotable: false,
                            ..a.clone()
                        },
                        b.clone(),
                    ],
                ),
                Box::new(move |d| *d == promote("b:1", "0-1-120", &["a:1"])),
            ),
            (
                "the only candidate lacks what an unpromotable replica received",
                view(
                    9_000,
                    vec![
                        a.clone(),
                        Replica {
                            promotable: false,
                            ..b.clone()
                        },
                    ],
                ),
                Box::new(
                    |d| matches!(d, Decision::Refuse(w) if w.contains("a:1 (best 0-1-100) lacks what b:1 holds")),
                ),
            ),
            (
                "errant transactions: never promoted, named, not repointed",
                view(
                    9_000,
                    vec![replica("e:1", "0-1-90", "0-1-90,7-5-3"), a.clone()],
                ),
                Box::new(|d| match d {
                    Decision::Promote {
                        candidate,
                        repoint,
                        errant,
                        ..
                    } => {
                        candidate == "a:1"
                            && repoint.is_empty()
                            && errant.len() == 1
                            && errant[0].contains(
                                "e:1: applied transactions the primary never sent it (7-5-3)",
                            )
                    }
                    _ => false,
                }),
            ),
            (
                "an errant replica that received more than every clean one: refused",
                view(
                    9_000,
                    vec![replica("e:1", "0-1-130", "0-1-130,7-5-3"), a.clone()],
                ),
                Box::new(
                    |d| matches!(d, Decision::Refuse(w) if w.contains("lacks what e:1 holds")),
                ),
            ),
            (
                "every replica errant: refused",
                view(9_000, vec![replica("e:1", "0-1-130", "0-1-131")]),
                Box::new(
                    |d| matches!(d, Decision::Refuse(w) if w.contains("never sent it (0-1-131)")),
                ),
            ),
            (
                "domains count one by one: none holds all",
                view(
                    9_000,
                    vec![
                        replica("x:1", "0-1-100,1-2-5", "0-1-100,1-2-5"),
                        replica("y:1", "0-1-90,1-2-50", "0-1-90,1-2-50"),
                    ],
                ),
                Box::new(|d| matches!(d, Decision::Refuse(_))),
            ),
            (
                "ties go to the first listed",
                view(
                    9_000,
                    vec![
                        replica("p:1", "0-1-100", "0-1-100"),
                        replica("q:1", "0-1-100", "0-1-100"),
                    ],
                ),
                Box::new(move |d| *d == promote("p:1", "0-1-100", &["q:1"])),
            ),
            (
                "semi-sync: the acknowledging replica answers",
                semi(
                    9_000,
                    vec![
                        a.clone(),
                        Replica {
                            acked: true,
                            ..b.clone()
                        },
                    ],
                ),
                Box::new(move |d| *d == promote("b:1", "0-1-120", &["a:1"])),
            ),
            (
                "semi-sync: an acknowledging replica does not answer",
                semi(
                    9_000,
                    vec![
                        Replica {
                            acked: true,
                            ..a.clone()
                        },
                        Replica {
                            acked: true,
                            answers: false,
                            ..b.clone()
                        },
                    ],
                ),
                Box::new(
                    |d| matches!(d, Decision::Refuse(w) if w.contains("b:1 was acknowledging")),
                ),
            ),
            (
                "semi-sync: no replica was acknowledging",
                semi(9_000, vec![a.clone(), b.clone()]),
                Box::new(|d| matches!(d, Decision::Refuse(w) if w.contains("fallen back"))),
            ),
        ];
        let mut failures = Vec::new();
        for (name, v, ok) in &cases {
            let d = decide(v, 3_000);
            if !ok(&d) {
                failures.push(format!("{name}: {d:?}"));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }
}
