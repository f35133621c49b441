//! Which server connection the session holds: choosing a server for a
//! plan's target, borrowing a connection and bringing it to the session's
//! state, holding it for the hold window, giving it back.

use super::consistency::mono_ok;
use super::Session;
use crate::errors::SessionError;
use sextant_backend::{Binding, Group, Lease, Role, Server, MAX_GROUP_SERVERS};
use sextant_protocol::consts::status;
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
            on_replica: pinned
                && self
                    .binding
                    .leases()
                    .any(|a| a.server.role() == Role::Replica),
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
        if let Some(a) = self.binding.direct() {
            let fits = self.pinned()
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
                        let fresh = self.need.is_none_or(|g| {
                            a.server.role() == Role::Primary
                                || a.server.health.has_applied(g.pack())
                        }) && (!self.mono
                            || mono_ok(self.seen_us, self.sticky.as_ref(), &a.server));
                        (self.group.takes_reads(&a.server) && fresh)
                            || self.primary_reads_until.is_some_and(|t| Instant::now() < t)
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
            Target::Replica => match (self.pick_reader(), self.need) {
                (Some(s), _) => s,
                (None, Some(g)) if self.user.policy().causal_wait_ms > 0 => {
                    if Box::pin(self.wait_on_replica(&group, g)).await {
                        return Ok(());
                    }
                    self.primary_of(&group).await?
                }
                (None, _) => self.primary_of(&group).await?,
            },
        };
        let conn = match server
            .acquire(
                &self.user.backend_user,
                &self.user.backend_password,
                self.flavor,
            )
            .await
        {
            Ok(c) => c,
            Err(e) if target == Target::Replica && server.role() == Role::Replica => {
                // A read never fails while the primary is up.
                tracing::info!(parent: &self.span, server = %server.addr, "replica unavailable, reading from the primary: {e}");
                let p = self.primary_of(&group).await?;
                let c = p
                    .acquire(
                        &self.user.backend_user,
                        &self.user.backend_password,
                        self.flavor,
                    )
                    .await?;
                self.binding = Binding::Direct(Lease::new(p, c));
                return self.sync_attached().await;
            }
            Err(e) => return Err(e.into()),
        };
        tracing::trace!(parent: &self.span, server = %server.addr, "attached");
        self.binding = Binding::Direct(Lease::new(server, conn));
        self.sync_attached().await
    }

    /// A server for a read by the balancing policy, among those that have
    /// what the read must see (read_your_writes, monotonic).
    pub(super) fn pick_reader(&mut self) -> Option<Arc<Server>> {
        let group = &self.group;
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let need = self.need.map(|g| g.pack());
        let (mono, seen_us) = (self.mono, self.seen_us);
        let sticky = if mono { self.sticky.as_ref() } else { None };
        let (weights, n) = read_weights(group);
        let i = pick(
            self.user.policy().balance,
            &weights[..n],
            |i| {
                let s = &group.members[i];
                s.load().filter(|_| {
                    need.is_none_or(|g| s.role() == Role::Primary || s.health.has_applied(g))
                        && (!mono || mono_ok(seen_us, sticky, s))
                })
            },
            &mut self.cursor,
            self.rng,
        )?;
        Some(group.members[i].clone())
    }

    /// read_your_writes with causal_wait_ms: no replica is known to have
    /// the write yet, so wait on one (MASTER_GTID_WAIT) for up to
    /// causal_wait_ms. True when it caught up and is now attached.
    async fn wait_on_replica(
        &mut self,
        group: &Arc<Group>,
        g: sextant_backend::gtid::Gtid,
    ) -> bool {
        let (weights, n) = read_weights(group);
        let Some(i) = pick(
            self.user.policy().balance,
            &weights[..n],
            |i| {
                group.members[i]
                    .load()
                    .filter(|_| group.members[i].role() == Role::Replica)
            },
            &mut self.cursor,
            self.rng,
        ) else {
            return false;
        };
        let server = group.members[i].clone();
        let Ok(conn) = server
            .acquire(
                &self.user.backend_user,
                &self.user.backend_password,
                self.flavor,
            )
            .await
        else {
            return false;
        };
        // Returned to the pool on any path that does not keep it.
        let mut lease = Lease::new(server, conn);
        let secs = self.user.policy().causal_wait_ms as f64 / 1000.0;
        let sql = g.wait_sql(secs);
        let caught_up = matches!(
            lease.conn_mut().query_internal(&sql).await.as_deref(),
            Ok([row]) if row.first().and_then(|v| v.as_deref()) == Some("0")
        );
        if caught_up {
            self.binding = Binding::Direct(lease);
            return self.sync_attached().await.is_ok();
        }
        false
    }

    /// The group's primary, waiting up to its primary_wait_ms when none is
    /// known (switchover in progress, split brain).
    /// A primary an operator put in maintenance takes nothing new (its
    /// open transactions finish): a write waits for it to come back or for
    /// another primary as it would for a switchover, then fails saying so.
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
            None => Err(SessionError::NoPrimary {
                group: group.name.to_string(),
                waited_ms,
            }),
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

    /// After a statement: keep the connection if the session is pinned,
    /// hold it briefly otherwise.
    pub(super) fn after_statement(&mut self) {
        if !self.binding.is_bound() || self.pinned() {
            self.hold_until = None;
            return;
        }
        let waiters = self.binding.leases().any(|a| a.server.has_waiters());
        if self.hold.is_zero() || waiters {
            self.release();
        } else {
            self.hold_until = Some(Instant::now() + self.hold);
        }
    }

    /// Gives the held connection(s) back to their pools.
    pub(super) fn release(&mut self) {
        self.hold_until = None;
        // Lent to others from now on, the connection may come back with
        // another session's LAST_INSERT_ID().
        self.last_insert_conn = None;
        self.binding.release();
    }

    /// Closes the held connection(s): their state is unknown.
    pub(super) fn detach_discard(&mut self) {
        self.hold_until = None;
        self.last_insert_conn = None;
        self.binding.discard();
    }
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
