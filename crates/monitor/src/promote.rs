//! Carrying a failover out: the candidate applies what it received, stops
//! replicating, becomes writable under a new term, and the other replicas
//! follow it; later, the old primary is fenced and rejoined (or left out
//! as diverged). Each step is a statement whose failure leaves the group
//! as the next round can judge it again: nothing is routed to the
//! candidate until it is writable and its term written.

use crate::failover::show;
use crate::ha::{beyond, first_cell, list, merge, Task, TERMS_TABLE};
use crate::FailoverError;
use sextant_backend::gtid::Gtid;
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

/// A value between single quotes in a statement.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

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
    pub(crate) at: Vec<Gtid>,
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
        apply_to: &[Gtid],
        repoint: &[usize],
        failing_ms: u64,
    ) {
        let g = self.group.clone();
        let addr = self.member(c).addr.to_string();
        let started = Instant::now();
        g.ha.set_state(
            "promoting",
            &format!("{addr} applies what it received ({})", show(apply_to)),
        );
        if self.last_failure.is_none() {
            tracing::warn!(group = %g.name, candidate = %addr, old = %self.member(old).addr, "failover: the primary failed {failing_ms} ms ago and the replicas lost it too");
        }
        // The decision found that the candidate received all it will: the
        // replicas stop receiving at once (a frozen primary makes each
        // stop slow), and the candidate applies its relay log meanwhile.
        let mut replicas = repoint.to_vec();
        replicas.push(c);
        self.on_each_at_once(&replicas, "STOP SLAVE IO_THREAD")
            .await;
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
                    show(&done.at),
                );
                tracing::warn!(group = %g.name, "failover done: {summary}");
                self.last_failure = None;
                g.ha.note_failover(summary);
                g.ha.set_state("healthy", "");
            }
            Err(e) => {
                // Back to receiving from whatever primary they had (the
                // candidate too, unless it was already made a primary).
                self.on_each_at_once(&replicas, "START SLAVE").await;
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
        apply_to: &[Gtid],
        repoint: &[usize],
    ) -> Result<Promoted, FailoverError> {
        let g = self.group.clone();
        let t0 = Instant::now();
        if !apply_to.is_empty() {
            let sql = format!(
                "SELECT MASTER_GTID_WAIT({}, {CATCH_UP_S})",
                quoted(&show(apply_to))
            );
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
        self.exec(c, &["STOP SLAVE", "RESET SLAVE ALL"]).await?;
        let rows = self
            .query(c, "SELECT @@gtid_binlog_pos, @@gtid_slave_pos")
            .await?;
        let f = |k: usize| rows.first().and_then(|r| r.get(k)).cloned().flatten();
        let at = merge(&list(f(0).as_deref()), &list(f(1).as_deref()));
        if self.s.semi_sync {
            self.exec(
                c,
                &[
                    "SET GLOBAL rpl_semi_sync_slave_enabled = OFF",
                    "SET GLOBAL rpl_semi_sync_master_enabled = ON",
                ],
            )
            .await?;
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
            quoted(&show(&at)),
            clock_ms()
        );
        // With semi-sync the record waits for a replica's acknowledgement
        // (the replicas repointed just before connect within moments; the
        // server gives up waiting after rpl_semi_sync_master_timeout).
        let budget = self.budget(c) + RECORD_WAIT;
        if let Err(FailoverError::Backend(BackendError::Server {
            code: 1049 | 1146, ..
        })) = self.query_within(c, &record, budget).await
        {
            self.exec(c, &["CREATE DATABASE IF NOT EXISTS sextant", TERMS_TABLE])
                .await?;
            self.query_within(c, &record, budget).await?;
        }
        self.fence(old, term);
        if let Err(e) = self.query(c, "SET GLOBAL read_only = 0").await {
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
        let change = format!(
            "CHANGE MASTER TO MASTER_HOST = {}, MASTER_PORT = {port}, MASTER_USE_GTID = slave_pos, \
             MASTER_HEARTBEAT_PERIOD = {}",
            quoted(&host),
            heartbeat_period(self.s.after_ms)
        );
        self.exec(r, &["STOP SLAVE", &change, "START SLAVE"]).await
    }

    /// An old primary that answers: read-only at once; then, if it holds
    /// nothing the current primary did not have when it was promoted, a
    /// replica of it.
    pub(crate) async fn rejoin(&mut self, i: usize) -> Result<(), FailoverError> {
        let Some(li) = self.leader else {
            return Ok(());
        };
        self.exec(i, &["SET GLOBAL read_only = 1"]).await?;
        let m = self.member(i).clone();
        m.health.set_writable(false);
        let rows = self.query(i, "SELECT @@gtid_binlog_pos").await?;
        let pos = list(first_cell(&rows).as_deref());
        let extra = beyond(&pos, &self.promoted_at);
        let term = self.group.ha.term();
        if !extra.is_empty() {
            let state = format!(
                "diverged: holds transactions the primary of term {term} never had ({}); left out for a person to decide",
                show(&extra)
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
        let change = format!(
            "CHANGE MASTER TO MASTER_HOST = {}, MASTER_PORT = {port}, MASTER_USER = {}, \
             MASTER_PASSWORD = {}, MASTER_USE_GTID = current_pos, MASTER_CONNECT_RETRY = 1, \
             MASTER_HEARTBEAT_PERIOD = {}",
            quoted(&host),
            quoted(&user),
            quoted(&password),
            heartbeat_period(self.s.after_ms)
        );
        let mut steps = vec!["STOP SLAVE".to_string()];
        if self.s.semi_sync {
            steps.push("SET GLOBAL rpl_semi_sync_master_enabled = OFF".into());
            steps.push("SET GLOBAL rpl_semi_sync_slave_enabled = ON".into());
        }
        steps.push(change);
        steps.push("START SLAVE".into());
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
    fn statement_values_are_quoted() {
        assert_eq!(quoted("a'b\\c"), "'a''b\\\\c'");
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
