//! Which server connection the session holds: choosing a server for a
//! plan's target, borrowing a connection and bringing it to the session's
//! state, holding it for the hold window, giving it back.

use super::consistency::{mono_ok, wait_ended, wait_sql};
use super::Session;
use crate::errors::SessionError;
use sextant_backend::gtid::Gtid;
use sextant_backend::shared_wait::Claim;
use sextant_backend::{Binding, Group, Lease, Role, Server, MAX_GROUP_SERVERS};
use sextant_config::Balance;
use sextant_protocol::consts::status;
use sextant_routing::Pins;
use sextant_routing::{pick, SessionFacts, Target};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Session {
    /// How the server reads this session's statements: its sql_mode and
    /// client character set, as the server reported them (or as the client
    /// chose at login).
    pub(super) fn lex_mode(&self) -> sextant_sql::LexMode {
        use sextant_sql::{LexMode, Multibyte};
        let multibyte = match self.vars.vars.get("character_set_client") {
            Some(cs) => Multibyte::of_charset(cs),
            None => Multibyte::of_collation(self.flavor.charset),
        };
        let sql_mode = self.vars.vars.get("sql_mode").map_or("", |m| &**m);
        LexMode::of_session(sql_mode, multibyte).on(self.group.server_version())
    }

    /// What routing needs to know about the session.
    pub(super) fn facts(&self) -> SessionFacts {
        let pinned = self.pinned();
        SessionFacts {
            pinned,
            // By what the server takes, not the role it has in routing
            // now: a transaction open on a primary that a switchover took
            // out of routing (not yet read-only) goes on there.
            on_replica: pinned && self.binding.leases().any(|a| !a.server.health.writable()),
            // With autocommit off every statement is part of a transaction
            // even before the server reports one open: the server's
            // AUTOCOMMIT status flag says so.
            in_transaction: self.in_transaction()
                || self.status & status::AUTOCOMMIT == 0
                || self.pending_begin.is_some(),
        }
    }

    pub(super) fn in_transaction(&self) -> bool {
        self.binding.in_transaction()
    }

    pub(super) fn pinned(&self) -> bool {
        !self.pins.is_empty() || self.binding.in_transaction() || self.binding.opaque()
    }

    /// Makes sure a server connection suitable for `target` is attached and
    /// carries the session's state.
    pub(super) async fn attach(&mut self, target: Target) -> Result<(), SessionError> {
        // A pooled connection found dead while the session's state was
        // being set on it (its server went away since it was last used):
        // nothing of the client's statement was sent, so outside a
        // transaction the statement takes another connection (which waits
        // for a primary as any write does when its server is gone).
        let may_retry = !self.pinned();
        match self.attach_once(target).await {
            Err(SessionError::Backend(
                sextant_backend::BackendError::Io { addr, .. }
                | sextant_backend::BackendError::Closed { addr },
            )) if may_retry && !self.pinned() => {
                tracing::debug!(parent: &self.span, server = %addr, "a pooled connection was dead: another one");
                // Those idle beside it likely died with it.
                if let Some(s) = self.group.members.iter().find(|m| *m.addr == *addr) {
                    s.discard_idle();
                }
                Box::pin(self.attach_once(target)).await
            }
            r => r,
        }
    }

    async fn attach_once(&mut self, target: Target) -> Result<(), SessionError> {
        let lost = self.held_conn();
        if let Err(mut e) = self.drop_replaced() {
            // Nothing of the statement was sent there: its transaction,
            // if recorded, runs again on the new primary and the statement
            // follows it.
            if !self.replayable(lost) {
                return Err(e);
            }
            if let Err(why) = Box::pin(self.replay()).await {
                e.not_replayed(&why);
                return Err(e);
            }
        }
        if target == Target::Replica {
            self.fleet_need().await;
        }
        if let Some(a) = self.binding.direct() {
            let fits = self.pinned()
                || self.stay
                || match target {
                    Target::Primary => {
                        a.server.role() == Role::Primary
                            && !a.server.health.in_maintenance()
                            && (self.group.writer_count() <= 1
                                || self.group.is_writer_for(
                                    &a.server,
                                    self.vars.schema.as_deref().unwrap_or("").as_bytes(),
                                ))
                    }
                    // Right after a write, reads stay on the primary
                    // connection: the session reads its own writes.
                    Target::Replica => {
                        let mono = !self.stmt.mono
                            || mono_ok(self.seen_us, self.sticky.as_ref(), &a.server);
                        let has = self.stmt.need.is_none_or(|g| {
                            a.server.role() == Role::Primary
                                || a.server.health.has_applied(g.pack())
                        });
                        let takes = self.group.takes_reads(&a.server)
                            && (!self.stmt.to_primary || a.server.role() == Role::Primary);
                        if takes && mono && !has && self.wait_here(&a.server) {
                            // The held replica may have it already: the
                            // wait goes ahead of the read.
                            self.stmt.wait.pending = self.stmt.need;
                            self.hold_until = None;
                            return Ok(());
                        }
                        // (Only while that server is still the primary: a
                        // switchover takes it out of routing, and a session
                        // that kept it for its reads would start its next
                        // transaction there.)
                        (takes && has && mono)
                            || (self.primary_reads_until.is_some_and(|t| Instant::now() < t)
                                && a.server.role() == Role::Primary)
                    }
                };
            if fits {
                self.hold_until = None;
                return Ok(());
            }
            self.release();
        }
        let group = self.group.clone();
        let server = match target {
            Target::Primary => self.primary_of(&group).await?,
            Target::Replica => match (self.pick_reader(), self.stmt.need) {
                (Some(s), Some(g)) if must_wait(&s, g) => match self.follow_wait(&s, g).await {
                    Followed::Applied => s,
                    Followed::GaveUp => {
                        self.stmt.wait.gave_up = true;
                        self.read_primary(&group).await?
                    }
                    Followed::Own if self.stmt.wait.pipelined => {
                        // Attached below; the wait goes ahead of the read.
                        self.stmt.wait.pending = Some(g);
                        s
                    }
                    Followed::Own => {
                        if Box::pin(self.wait_on_replica(s, g)).await {
                            return Ok(());
                        }
                        self.read_primary(&group).await?
                    }
                },
                (Some(s), _) => s,
                (None, Some(_)) => self.read_primary(&group).await?,
                (None, None) => self.primary_of(&group).await?,
            },
        };
        let conn = match self.borrow_from(&server).await {
            Ok(c) => c,
            Err(e) if target == Target::Replica && server.role() == Role::Replica => {
                if let Some(g) = self.stmt.wait.pending.take() {
                    server.health.shared_wait.ended(g.pack());
                }
                // A read never fails while the primary is up.
                tracing::info!(parent: &self.span, server = %server.addr, "replica unavailable, reading from the primary: {e}");
                let p = self.primary_of(&group).await?;
                let (p, c) = match self.borrow_from(&p).await {
                    Ok(c) => (p, c),
                    Err(e) if e.server_gone_at_open() => self.primary_failed(&group, &p, e).await?,
                    Err(e) => return Err(e.into()),
                };
                self.binding = Binding::Direct(Lease::new(p, c));
                return self.sync_attached().await;
            }
            // The group's primary does not answer: say which group (the
            // others are served).
            Err(e)
                if e.server_gone_at_open()
                    && (target == Target::Primary || server.role() == Role::Primary) =>
            {
                // (By target too: another session may have found it down
                // since, and the group then has no primary at all.)
                let (p, c) = self.primary_failed(&group, &server, e).await?;
                self.binding = Binding::Direct(Lease::new(p, c));
                return self.sync_attached().await;
            }
            Err(e) => return Err(e.into()),
        };
        tracing::trace!(parent: &self.span, server = %server.addr, "attached");
        self.binding = Binding::Direct(Lease::new(server, conn));
        self.sync_attached().await
    }

    /// A held connection of a primary that a failover or switchover has
    /// replaced since it was opened is closed, unused: whatever the
    /// session began there (a transaction, locks, temporary tables) must
    /// not go on, or commit, on a server that may take writes again (a
    /// frozen one that resumes) and whose writes the new primary never
    /// gets. A session that held nothing there just moves on; one that
    /// did is told its state is gone (the transaction rolled back).
    fn drop_replaced(&mut self) -> Result<(), SessionError> {
        let Some(a) = self.binding.direct() else {
            return Ok(());
        };
        if !a.server.replaced_since(a.conn()) {
            return Ok(());
        }
        let (server, in_trx, pinned) = (a.server.clone(), self.in_transaction(), self.pinned());
        tracing::info!(parent: &self.span, server = %server.addr, in_transaction = in_trx, "a connection of a replaced primary: closed");
        self.detach_discard();
        if !pinned {
            return Ok(());
        }
        Err(SessionError::FailedOver {
            group: self.group.name.to_string(),
            addr: server.addr.to_string(),
            term: server.health.replaced_term(),
            what: match in_trx {
                true => "transaction (rolled back)",
                false => "state held on one connection (locks, temporary tables)",
            },
            retry: match in_trx {
                true => "; run the transaction again",
                false => "",
            },
            replay: String::new(),
        })
    }

    /// A server for a read by the balancing policy, among those that have
    /// what the read must see (read_your_writes, monotonic): replicas
    /// known to have the session's write first; if none, the primary (when
    /// it takes reads) or a replica that can wait for the write
    /// ([`must_wait`]). Keeping to replicas that need no wait spares a
    /// statement; counting waiting replicas in keeps reads off a primary
    /// that takes reads whenever the replicas have not been seen to apply
    /// the newest write.
    pub(super) fn pick_reader(&mut self) -> Option<Arc<Server>> {
        if self.stmt.to_primary {
            return None;
        }
        let need = self.stmt.need.map(|g| g.pack());
        let fresh = self.pick_among(|s| {
            need.is_none_or(|g| s.role() == Role::Replica && s.health.has_applied(g))
        });
        if fresh.is_some() || need.is_none() {
            return fresh;
        }
        let waitable = self.waitable();
        // Such a read completes after the replica's apply delay, or at
        // once on a primary that takes reads: turn by turn, the primary
        // would get its share and the replicas' readers would idle through
        // the delay. By queue instead (reads waiting on a replica count as
        // queued there), the primary takes reads while it has the shorter
        // queue. Among replicas alone every choice waits: the usual turns.
        let by_queue = match self.user.policy().balance {
            b @ Balance::LeastLatency => b,
            _ if self.group.primary_weight() > 0 => Balance::LeastOutstanding,
            b => b,
        };
        self.pick_by(by_queue, |s| {
            s.role() == Role::Primary || may_wait(waitable, s)
        })
    }

    /// A server for a read by the balancing policy among usable members
    /// that pass `ok` and the monotonic rule.
    fn pick_among(&mut self, ok: impl Fn(&Server) -> bool) -> Option<Arc<Server>> {
        self.pick_by(self.user.policy().balance, ok)
    }

    /// [`Self::pick_among`] by the given balancing mode.
    fn pick_by(&mut self, balance: Balance, ok: impl Fn(&Server) -> bool) -> Option<Arc<Server>> {
        let group = &self.group;
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let (mono, seen_us) = (self.stmt.mono, self.seen_us);
        let sticky = if mono { self.sticky.as_ref() } else { None };
        let (weights, n) = read_weights(group);
        let i = pick(
            balance,
            &weights[..n],
            |i| {
                let s = &group.members[i];
                s.load()
                    .filter(|_| ok(s) && (!mono || mono_ok(seen_us, sticky, s)))
            },
            &mut self.cursor,
            self.rng,
        )?;
        Some(group.members[i].clone())
    }

    /// Whether a read needing the session's write may wait for it on
    /// `server`: waits are on (causal_wait_ms), none of this statement's
    /// has timed out, and none for that write timed out there lately.
    fn wait_here(&self, server: &Server) -> bool {
        may_wait(self.waitable(), server)
    }

    /// The write a read may wait for on a replica (None: it may not).
    fn waitable(&self) -> Option<u64> {
        // Galera nodes apply write sets outside replication's position
        // (MASTER_GTID_WAIT would never return): reads wait for the
        // monitor to see a node's binlog position instead.
        let on = self.user.policy().causal_wait_ms > 0
            && !self.stmt.wait.gave_up
            && self.group.topology != sextant_config::Topology::Galera;
        self.stmt.need.filter(|_| on).map(|g| g.pack())
    }

    /// The primary, for a read that must see a write no replica is known
    /// to have (and none could wait for in time).
    async fn read_primary(&mut self, group: &Arc<Group>) -> Result<Arc<Server>, SessionError> {
        let p = self.primary_of(group).await?;
        p.health.causal.primary_read();
        Ok(p)
    }

    /// A read that must wait for write `g` on replica `s`: if another
    /// read's wait for it (or a later write) is in flight there, waits for
    /// that one's end without holding a server connection (up to
    /// causal_wait_ms), and says whether the replica has the write now.
    /// `Own`: none is in flight, and this read's wait is the one others
    /// follow.
    async fn follow_wait(&mut self, s: &Server, g: Gtid) -> Followed {
        let budget = Duration::from_millis(self.user.policy().causal_wait_ms);
        if s.health
            .shared_wait
            .claim(g.pack(), budget.as_micros() as i64)
            == Claim::Own
        {
            return Followed::Own;
        }
        self.follow_claimed(s, g, true).await
    }

    /// For a read that could go on a pipe (which carries no wait): if a
    /// wait for write `g` (or a later one) is in flight on `s`, follows it
    /// without claiming one. `Own`: none is in flight, or the one followed
    /// ended without an answer; the read goes the usual way and sends its
    /// own. Followers then run on the pipe like any read: released together
    /// when the wait ends, they would otherwise each take a connection of
    /// their own, and the replica pays a round trip per read again.
    pub(super) async fn follow_for_pipe(&mut self, s: &Server, g: Gtid) -> Followed {
        if self.waitable().is_none() || !s.health.shared_wait.covers(g.pack()) {
            return Followed::Own;
        }
        let outcome = self.follow_claimed(s, g, false).await;
        if outcome == Followed::GaveUp {
            self.stmt.wait.gave_up = true;
        }
        outcome
    }

    /// Follows the wait in flight for `g` on `s` (up to causal_wait_ms);
    /// when it ends without an answer, `claim` says whether this read
    /// claims the next one (`Own`) or just says so.
    async fn follow_claimed(&mut self, s: &Server, g: Gtid, claim: bool) -> Followed {
        let budget = Duration::from_millis(self.user.policy().causal_wait_ms);
        let (p, h) = (g.pack(), &s.health);
        let started = Instant::now();
        let _following = h.following();
        let outcome = h
            .shared_wait
            .follow(started + budget, || {
                if h.has_applied(p) {
                    Some(Followed::Applied)
                } else if !h.may_wait_for(p) {
                    Some(Followed::GaveUp)
                } else if !h.shared_wait.covers(p) {
                    // The wait followed ended without an answer (killed,
                    // connection lost): this read sends one, or follows a
                    // newer one.
                    (!claim || h.shared_wait.claim(p, budget.as_micros() as i64) == Claim::Own)
                        .then_some(Followed::Own)
                } else {
                    None
                }
            })
            .await
            .unwrap_or(Followed::GaveUp);
        h.causal.followed(started.elapsed().as_micros() as u64);
        outcome
    }

    /// A pooled connection of `server`, as this session's user logs in to
    /// the servers.
    pub(super) async fn borrow_from(
        &self,
        server: &sextant_backend::Server,
    ) -> Result<sextant_backend::BackendConn, sextant_backend::BackendError> {
        server
            .acquire(
                &self.user.backend_user,
                &self.user.backend_password,
                self.flavor,
            )
            .await
    }

    /// The wait as a round trip of its own (a statement that is not sent
    /// right after it is attached, e.g. a prepare): up to causal_wait_ms
    /// on `server`. True when it caught up and is now attached.
    async fn wait_on_replica(&mut self, server: Arc<Server>, g: Gtid) -> bool {
        let Ok(conn) = self.borrow_from(&server).await else {
            return false;
        };
        self.binding = Binding::Direct(Lease::new(server, conn));
        self.stmt.wait.pending = Some(g);
        Box::pin(self.wait_now()).await && self.sync_attached().await.is_ok()
    }

    /// The pending wait (attach chose a replica for it) as a round trip
    /// of its own on the attached connection. False: it timed out or
    /// failed, the connection is given back, and the statement must be
    /// attached again (to the primary).
    pub(super) async fn wait_now(&mut self) -> bool {
        let (Some(g), Some(a)) = (self.stmt.wait.pending.take(), self.binding.direct_mut()) else {
            return true;
        };
        let sql = wait_sql(&g, self.user.policy().causal_wait_ms);
        let started = std::time::Instant::now();
        let answer = a.conn_mut().query_internal(&sql).await;
        let rows = answer.as_deref().unwrap_or_default();
        let ok = wait_ended(&a.server, &g, started, rows);
        if !ok {
            self.stmt.wait.gave_up = true;
            match answer {
                Ok(_) | Err(sextant_backend::BackendError::Server { .. }) => self.release(),
                Err(_) => self.detach_discard(),
            }
        }
        ok
    }

    /// The group's primary, waiting up to its primary_wait_ms when none is
    /// known (switchover in progress, split brain).
    /// A primary an operator put in maintenance takes nothing new (its
    /// open transactions finish): a write waits for it to come back or for
    /// another primary as it would for a switchover, then fails saying so.
    /// Where session set-up (the login's database, `USE`, a `SET` of the
    /// session's own variables) runs: the primary while it answers, else
    /// any server of the group. Only the set-up is answered there; what
    /// it set is replayed on every connection the session borrows later,
    /// so one group without a primary does not keep clients from logging
    /// in and reaching the others.
    pub(super) fn setup_target(&self) -> Target {
        let schema = self.vars.schema.as_deref().unwrap_or("").as_bytes();
        let up = self
            .group
            .writer_for(schema)
            .is_some_and(|p| p.health.reachable() && !p.health.in_maintenance());
        match up {
            true => Target::Primary,
            false => Target::Replica,
        }
    }

    /// Attaches a connection for session set-up: the primary's if it
    /// answers (known down, or failing to connect now, before the monitor
    /// has noticed), else a replica's. Returns the target to plan with.
    pub(super) async fn setup_connection(&mut self) -> Target {
        if self.setup_target() == Target::Primary {
            self.stmt.setup = true;
            let attached = self.attach(Target::Primary).await;
            self.stmt.setup = false;
            match attached {
                Ok(()) => return Target::Primary,
                Err(e) => {
                    tracing::debug!(parent: &self.span, "session set-up on a replica: {e}");
                    self.detach_discard();
                }
            }
        }
        Target::Replica
    }

    /// After a connection to `server`, the group's primary, failed with
    /// `e`: nothing was sent, so where the group waits for primaries the
    /// statement waits for one (this one back, or the one a failover
    /// makes) and gets a connection there; else the error names the group.
    pub(super) async fn primary_failed(
        &self,
        group: &Arc<Group>,
        server: &Arc<Server>,
        e: sextant_backend::BackendError,
    ) -> Result<(Arc<Server>, sextant_backend::BackendConn), SessionError> {
        let unreachable = |why: String| SessionError::PrimaryUnreachable {
            group: group.name.to_string(),
            addr: server.addr.to_string(),
            why,
        };
        if group.primary_wait.is_zero() || self.stmt.setup {
            return Err(unreachable(e.to_string()));
        }
        server.mark_unreachable(&e.to_string());
        group.follow();
        let p = match self.primary_of(group).await {
            Err(SessionError::NoPrimary { waited_ms, .. }) => {
                return Err(unreachable(format!(
                    "{e}; no other primary within {waited_ms} ms"
                )))
            }
            r => r?,
        };
        match self.borrow_from(&p).await {
            Ok(c) => Ok((p, c)),
            Err(e2) if e2.server_gone_at_open() => Err(SessionError::PrimaryUnreachable {
                group: group.name.to_string(),
                addr: p.addr.to_string(),
                why: e2.to_string(),
            }),
            Err(e2) => Err(e2.into()),
        }
    }

    pub(super) async fn primary_of(&self, group: &Arc<Group>) -> Result<Arc<Server>, SessionError> {
        let schema = self.vars.schema.as_deref().unwrap_or("").as_bytes();
        let usable = || {
            group
                .writer_for(schema)
                .filter(|p| !p.health.in_maintenance())
        };
        if let Some(p) = usable() {
            return Ok(p.clone());
        }
        let deadline = Instant::now() + group.primary_wait;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if let Some(p) = usable() {
                return Ok(p.clone());
            }
        }
        let waited_ms = group.primary_wait.as_millis() as u64;
        match group.writer_for(schema) {
            Some(p) => Err(SessionError::PrimaryInMaintenance {
                group: group.name.to_string(),
                addr: p.addr.to_string(),
                waited_ms,
            }),
            // The primary is known but does not answer (down, or cut off
            // from sextant): say so, rather than that none is writable.
            None => match group
                .members
                .iter()
                .find(|m| m.health.writable() && !m.health.reachable())
            {
                Some(m) => Err(SessionError::PrimaryUnreachable {
                    group: group.name.to_string(),
                    addr: m.addr.to_string(),
                    why: format!(
                        "{}; waited {waited_ms} ms for it or another",
                        m.health.last_error().unwrap_or_else(|| "no answer".into())
                    ),
                }),
                None => Err(SessionError::NoPrimary {
                    group: group.name.to_string(),
                    waited_ms,
                }),
            },
        }
    }

    pub(super) async fn sync_attached(&mut self) -> Result<(), SessionError> {
        let stale_schema = self.vars.schema.is_none()
            && self
                .binding
                .direct()
                .is_some_and(|a| a.conn().vars.schema.is_some());
        if stale_schema {
            // A session without a current database must not get another
            // session's, and no statement unsets one (a reset keeps it): a
            // new connection takes this one's place in the pool.
            if let Binding::Direct(lease) = std::mem::take(&mut self.binding) {
                let server = lease.server.clone();
                if let Some(old) = lease.into_conn() {
                    let c = Box::pin(server.replace(
                        old,
                        &self.user.backend_user,
                        &self.user.backend_password,
                        self.flavor,
                    ))
                    .await?;
                    self.binding = Binding::Direct(Lease::new(server, c));
                }
            }
        }
        let Some(a) = self.binding.direct_mut() else {
            return Ok(());
        };
        let conn = a.conn();
        if conn.vars != self.vars || conn.track.insert_id_set || !conn.vars.client_side.is_empty() {
            if let Err(e) = Box::pin(a.conn_mut().sync_to(&self.vars)).await {
                self.detach_discard();
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// LAST_INSERT_ID() is per server connection: if this statement runs
    /// on another connection than the write that generated the id, make
    /// that connection return it too.
    pub(super) async fn restore_last_insert_id(&mut self) {
        let Some(a) = self.binding.direct_mut() else {
            return;
        };
        let here = (a.server.addr.clone(), a.conn().connection_id);
        if self.last_insert_conn.as_ref() == Some(&here) {
            return;
        }
        let sql = format!("DO LAST_INSERT_ID({})", self.last_insert_id);
        if a.conn_mut().exec_internal(&sql).await.is_ok() {
            self.last_insert_conn = Some(here);
        }
    }

    /// After a statement: keep the connection if the session is pinned,
    /// hold it briefly otherwise.
    pub(super) fn after_statement(&mut self) {
        if !self.binding.is_bound() || self.pinned() {
            self.hold_until = None;
            return;
        }
        let waiters = self.binding.leases().any(|a| a.server.has_waiters());
        // Conditions a client reads right after its statement (SHOW
        // WARNINGS, as MySQLdb and the mysql client do) are only on this
        // connection: it stays a while longer, unless others wait for it.
        let hold = match self.last.holds_warnings() {
            true => self.hold.max(WARNINGS_HOLD),
            false => self.hold,
        };
        if hold.is_zero() || waiters {
            self.release();
        } else {
            self.hold_until = Some(Instant::now() + hold);
        }
    }

    /// Gives the held connection(s) back to their pools.
    pub(super) fn release(&mut self) {
        self.hold_until = None;
        // Lent to others from now on, the connection may come back with
        // another session's LAST_INSERT_ID() and FOUND_ROWS().
        self.last_insert_conn = None;
        self.last = self.last.released();
        self.binding.release();
    }

    /// Closes the held connection(s): their state is unknown. Whatever
    /// kept the session on them (transaction, locks, variables) went with
    /// them.
    pub(super) fn detach_discard(&mut self) {
        self.pins = Pins::empty();
        self.hold_until = None;
        self.last_insert_conn = None;
        self.last = self.last.released();
        self.binding.discard();
    }
}

/// How long a connection whose statement left warnings stays with the
/// session for the statement that reads them.
const WARNINGS_HOLD: std::time::Duration = std::time::Duration::from_secs(1);

/// How a read that followed another read's wait goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Followed {
    /// The replica has the write: the read goes there, without a wait.
    Applied,
    /// The wait timed out (or this read's budget ran out): the primary.
    GaveUp,
    /// No wait to follow: this read sends its own.
    Own,
}

/// Whether a read that must see write `g` has to wait for it on `server`
/// first: a replica not known to have applied it.
pub(super) fn must_wait(server: &Server, g: Gtid) -> bool {
    server.role() == Role::Replica && !server.health.has_applied(g.pack())
}

/// Whether a read needing write `need` may wait for it on `server`: a
/// replica where no wait for it (or a later write) timed out lately.
fn may_wait(need: Option<u64>, server: &Server) -> bool {
    need.is_some_and(|g| server.role() == Role::Replica && server.health.may_wait_for(g))
}

/// Each member's read weight by its current role, on the stack.
fn read_weights(group: &Group) -> ([u32; MAX_GROUP_SERVERS], usize) {
    let mut w = [0u32; MAX_GROUP_SERVERS];
    let n = group.members.len().min(MAX_GROUP_SERVERS);
    for (i, slot) in w.iter_mut().enumerate().take(n) {
        *slot = group.read_weight(i);
    }
    (w, n)
}

/// The server connection's variables become the session's (`vars`), after
/// a statement changed them. The session's own timeouts are its own: the
/// server connection reports only the ones just set.
pub(super) fn adopt_vars(
    vars: &mut sextant_backend::SessionVars,
    from: &sextant_backend::SessionVars,
) {
    let mut mine = std::mem::take(&mut vars.client_side);
    vars.clone_from(from);
    mine.extend(from.client_side.iter().map(|(k, v)| (k.clone(), v.clone())));
    vars.client_side = mine;
}
