//! Carrying a failover out: the candidate applies what it received, stops
//! replicating, becomes writable under a new term, and the other replicas
//! follow it; later, the old primary is fenced and rejoined (or left out
//! as diverged). Each step is a statement whose failure leaves the group
//! as the next round can judge it again: nothing is routed to the
//! candidate until it is writable and its term written.

use crate::dialect::{list, merge};
use crate::dialect::{quoted, Dialect, Position, Source};
use crate::ha::{first_cell, Task, TERMS_TABLE};
use crate::FailoverError;
use sextant_backend::{clock_ms, BackendError};
use std::time::Instant;

/// How long the candidate may take to apply its relay log: a candidate
/// far behind keeps writes waiting, and beyond this the failover is
/// retried rather than left hanging on one statement.
const CATCH_UP_S: u64 = 60;

/// How long the term's record may wait beyond a statement's usual bound
/// (a semi-sync acknowledgement: MariaDB's rpl_semi_sync_master_timeout
/// defaults to 10 s).
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(12);

/// The heartbeat period (seconds, as CHANGE MASTER takes it) for
/// replicas that sextant points at a primary: enough heartbeats within
/// `failover_after_ms` that their silence tells a frozen primary from a
/// quiet one (see `Replica::hears_primary`); at most 1 s.
pub(crate) fn heartbeat_period(after_ms: u64) -> String {
    let ms = (after_ms / (2 * crate::failover::SILENT_HEARTBEATS)).clamp(100, 1000);
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// `host:port` as CHANGE MASTER takes it (a Unix socket cannot be
/// replicated from).
fn host_port(addr: &str) -> Option<(String, u16)> {
    let (h, p) = addr.rsplit_once(':')?;
    let h = h.trim_start_matches('[').trim_end_matches(']');
    Some((h.to_string(), p.parse().ok()?))
}

/// A promotion done.
pub(crate) struct Promoted {
    pub(crate) term: u64,
    /// The new primary's position when it took over.
    pub(crate) at: Position,
    pub(crate) catch_up_ms: u64,
    pub(crate) repoint_ms: u64,
    pub(crate) not_repointed: Vec<String>,
}

impl Task {
    /// Promotes member `c` in place of `old` (failing for `failing_ms`),
    /// once it applied `apply_to`; then points `repoint` at it.
    pub(crate) async fn promote(
        &mut self,
        old: usize,
        c: usize,
        apply_to: &Position,
        repoint: &[usize],
        failing_ms: u64,
    ) {
        let g = self.group.clone();
        let addr = self.member(c).addr.to_string();
        let started = Instant::now();
        g.ha.set_state(
            "promoting",
            &format!("{addr} applies what it received ({apply_to})"),
        );
        if self.last_failure.is_none() {
            tracing::warn!(group = %g.name, candidate = %addr, old = %self.member(old).addr, "failover: the primary failed {failing_ms} ms ago and the replicas lost it too");
        }
        // The decision found that the candidate received all it will: the
        // replicas stop receiving at once (a frozen primary makes each
        // stop slow), and the candidate applies its relay log meanwhile.
        let mut replicas = repoint.to_vec();
        replicas.push(c);
        let d = self.dialect();
        self.on_each_at_once(&replicas, d.stop_io()).await;
        match self.promote_steps(old, c, apply_to, repoint).await {
            Ok(done) => {
                let summary = format!(
                    "term {}: {} -> {addr}; detection {failing_ms} ms, catch-up {} ms, promotion {} ms (replicas repointed in {} ms{}); at {}",
                    done.term,
                    self.member(old).addr,
                    done.catch_up_ms,
                    started.elapsed().as_millis() as u64 - done.catch_up_ms,
                    done.repoint_ms,
                    if done.not_repointed.is_empty() {
                        String::new()
                    } else {
                        format!("; not repointed: {}", done.not_repointed.join("; "))
                    },
                    done.at,
                );
                tracing::warn!(group = %g.name, "failover done: {summary}");
                self.last_failure = None;
                g.ha.note_failover(summary);
                g.ha.set_state("healthy", "");
            }
            Err(e) => {
                // Back to receiving from whatever primary they had (the
                // candidate too, unless it was already made a primary).
                self.on_each_at_once(&replicas, d.start()).await;
                let why = format!("promoting {addr} failed, retried each round: {e}");
                if self.last_failure.as_deref() != Some(why.as_str()) {
                    tracing::error!(group = %g.name, "{why}");
                }
                g.ha.set_state("primary failing", &why);
                self.last_failure = Some(why);
            }
        }
    }

    /// The promotion, in an order where every step's failure leaves a
    /// group the next round can judge again, and no moment has two
    /// servers routed to: the candidate applies what it received, stops
    /// replicating, takes the other replicas (semi-sync on first, so that
    /// they connect acknowledging), records the new term, and only then
    /// becomes writable, after the old primary left sextant's routing.
    pub(crate) async fn promote_steps(
        &mut self,
        old: usize,
        c: usize,
        apply_to: &Position,
        repoint: &[usize],
    ) -> Result<Promoted, FailoverError> {
        let g = self.group.clone();
        let d = self.dialect();
        let t0 = Instant::now();
        if !apply_to.is_empty() {
            let sql = d.wait_for(apply_to, CATCH_UP_S);
            // The wait is long by design: bound by its own timeout.
            let budget = self.budget(c) + std::time::Duration::from_secs(CATCH_UP_S);
            let r = match tokio::time::timeout(budget, self.query(c, &sql)).await {
                Ok(r) => r?,
                Err(_) => return Err(self.timeout(c, budget)),
            };
            let v = r.first().and_then(|r| r.first()).cloned().flatten();
            if v.as_deref() != Some("0") {
                return Err(FailoverError::Step(format!(
                    "it did not apply its relay log within {CATCH_UP_S} s"
                )));
            }
        }
        let catch_up_ms = t0.elapsed().as_millis() as u64;
        self.exec(c, &[d.stop(), d.reset_all()]).await?;
        let at = match d {
            Dialect::MariaDb => {
                let rows = self
                    .query(c, "SELECT @@gtid_binlog_pos, @@gtid_slave_pos")
                    .await?;
                let f = |k: usize| rows.first().and_then(|r| r.get(k)).cloned().flatten();
                Position::MariaDb(merge(&list(f(0).as_deref()), &list(f(1).as_deref())))
            }
            Dialect::MySql => {
                let rows = self.query(c, d.position()).await?;
                Position::parse(d, first_cell(&rows).as_deref())
            }
        };
        if self.s.semi_sync {
            self.exec(c, &d.semi_sync(true)).await?;
        }
        let t1 = Instant::now();
        let mut not_repointed = Vec::new();
        for &r in repoint {
            if let Err(e) = self.repoint(r, c).await {
                not_repointed.push(format!("{}: {e}", self.member(r).addr));
            }
        }
        let repoint_ms = t1.elapsed().as_millis() as u64;
        // In a fleet the term also comes from its record: one higher than
        // any instance has seen.
        let recorded = match &self.s.coordinator {
            Some(c) => c.newest_term(&g.name).await,
            None => None,
        };
        let term = g.ha.term().max(recorded.map_or(0, |r| r.0)) + 1;
        let record = format!(
            "REPLACE INTO sextant.failover VALUES ({}, {term}, {}, {}, {})",
            quoted(&g.name),
            quoted(&self.member(c).addr),
            quoted(&at.to_string()),
            clock_ms()
        );
        if let Some(sql) = d.before_record() {
            self.query(c, sql).await?;
        }
        // With semi-sync the record waits for a replica's acknowledgement
        // (the replicas repointed just before connect within moments; the
        // server gives up waiting after rpl_semi_sync_master_timeout).
        let budget = self.budget(c) + RECORD_WAIT;
        // Any other failure stops the promotion: a primary whose term is
        // not on the servers cannot fence the one before it.
        match self.query_within(c, &record, budget).await {
            Ok(_) => {}
            Err(FailoverError::Backend(BackendError::Server {
                code: 1049 | 1146, ..
            })) => {
                self.exec(c, &["CREATE DATABASE IF NOT EXISTS sextant", TERMS_TABLE])
                    .await?;
                self.query_within(c, &record, budget).await?;
            }
            Err(e) => return Err(e),
        }
        self.fence(old, term);
        if let Err(e) = self.query(c, d.writable()).await {
            // Still the primary of the term before.
            self.unfence(old);
            return Err(e);
        }
        // Sessions still holding its connections (a transaction there)
        // are told it is gone at their next statement.
        self.member(old).health.mark_replaced(term);
        g.ha.see_term(term);
        if let Some(co) = self.s.coordinator.clone() {
            let base = recorded.map_or(0, |r| r.1);
            let addr = self.member(c).addr.to_string();
            match co.record_term(&g.name, term, &addr, base).await {
                Ok(true) => {}
                // The servers hold the term too (sextant.failover): the
                // other instances read it there.
                Ok(false) => {
                    tracing::warn!(group = %g.name, term, "the fleet's term record changed meanwhile (or this instance no longer decides): term {term} is on the servers only")
                }
                Err(e) => {
                    tracing::warn!(group = %g.name, term, "term {term} not recorded in the fleet's store: {e}")
                }
            }
        }
        self.promoted_at = at.clone();
        self.set_leader(Some(c));
        self.leader_down = false;
        let m = self.member(c).clone();
        m.health.set_reachable(true);
        m.health.set_writable(true);
        g.follow();
        Ok(Promoted {
            term,
            at,
            catch_up_ms,
            repoint_ms,
            not_repointed,
        })
    }

    /// Points replica `r` at the new primary `c` by GTID.
    async fn repoint(&mut self, r: usize, c: usize) -> Result<(), FailoverError> {
        let addr = self.member(c).addr.to_string();
        let (host, port) = host_port(&addr).ok_or_else(|| {
            FailoverError::Step(format!("{addr} is not host:port; repoint it by hand"))
        })?;
        let d = self.dialect();
        let change = d.change_source(&Source {
            host: &host,
            port,
            heartbeat: &heartbeat_period(self.s.after_ms),
            account: None,
        });
        self.exec(r, &[d.stop(), &change, d.start()]).await
    }

    /// An old primary that answers: read-only at once; then, if it holds
    /// nothing the current primary did not have when it was promoted, a
    /// replica of it.
    pub(crate) async fn rejoin(&mut self, i: usize) -> Result<(), FailoverError> {
        let Some(li) = self.leader else {
            return Ok(());
        };
        let d = self.dialect();
        self.exec(i, &[d.fence()]).await?;
        let m = self.member(i).clone();
        m.health.set_writable(false);
        let rows = self.query(i, d.position()).await?;
        let pos = Position::parse(d, first_cell(&rows).as_deref());
        // MariaDB compares sequence numbers per domain, so the old
        // primary is measured against where the new one began (the new
        // one's own later writes have higher numbers); MySQL's sets are
        // compared exactly, with what the new primary holds now.
        let base = match d {
            Dialect::MariaDb => self.promoted_at.clone(),
            Dialect::MySql => {
                let rows = self.query(li, d.position()).await?;
                Position::parse(d, first_cell(&rows).as_deref())
            }
        };
        let extra = pos.beyond(&base);
        let term = self.group.ha.term();
        if !extra.is_empty() {
            let state = format!(
                "diverged: holds transactions the primary of term {term} never had ({extra}); left out for a person to decide"
            );
            if m.health.member_state().as_deref() != Some(state.as_str()) {
                tracing::error!(group = %self.group.name, server = %m.addr, "old primary {state}");
                m.health.set_member(false, Some(state));
            }
            return Ok(());
        }
        let Some((user, password)) = self.s.replication.clone() else {
            let state = "fenced: read-only; not rejoined (no replication_user configured)";
            m.health.set_member(false, Some(state.into()));
            return Ok(());
        };
        let addr = self.member(li).addr.to_string();
        let (host, port) = host_port(&addr).ok_or_else(|| {
            FailoverError::Step(format!("{addr} is not host:port; rejoin it by hand"))
        })?;
        let change = d.change_source(&Source {
            host: &host,
            port,
            heartbeat: &heartbeat_period(self.s.after_ms),
            account: Some((&user, &password)),
        });
        let mut steps = vec![d.stop().to_string()];
        if self.s.semi_sync {
            steps.extend(d.semi_sync(false).map(String::from));
        }
        steps.push(change);
        steps.push(d.start().into());
        for s in &steps {
            self.query(i, s).await?;
        }
        tracing::warn!(group = %self.group.name, server = %m.addr, primary = %addr, term, "old primary rejoined as a replica");
        self.unfence(i);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split() {
        assert_eq!(host_port("10.0.0.1:3306"), Some(("10.0.0.1".into(), 3306)));
        assert_eq!(host_port("[::1]:3307"), Some(("::1".into(), 3307)));
        assert_eq!(host_port("/run/mysqld.sock"), None);
    }

    #[test]
    fn heartbeats_fit_three_times_in_failover_after_ms() {
        assert_eq!(heartbeat_period(3000), "0.500");
        assert_eq!(heartbeat_period(500), "0.100");
        assert_eq!(heartbeat_period(600_000), "1.000");
    }
}
