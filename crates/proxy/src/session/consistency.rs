//! What a read must see (docs/consistency.md), and what the session
//! remembers for it: its writes' GTIDs (read_your_writes), the server and
//! time of its last read (monotonic), the id its last insert generated
//! (LAST_INSERT_ID() wherever it lands); and the wait on a replica for a
//! write it is not yet known to have.

use super::Session;
use sextant_backend::gtid::Gtid;
use sextant_backend::position::Unknown;
use sextant_backend::{Role, Server};
use sextant_config::ConsistencyScope;
use sextant_routing::{Plan, Rule, Target};
use std::sync::Arc;

/// monotonic: `s` may serve a read of a session that last read from
/// `sticky` at `seen_us` if it is that server, the primary, or has applied
/// a heartbeat written after then.
pub(super) fn mono_ok(seen_us: i64, sticky: Option<&Arc<Server>>, s: &Arc<Server>) -> bool {
    seen_us == 0
        || s.role() == Role::Primary
        || sticky.is_some_and(|t| Arc::ptr_eq(t, s))
        || s.health.heartbeat_applied_us() >= seen_us
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// What the answer to a wait says.
pub(super) fn caught_up(rows: &[Vec<Option<String>>]) -> bool {
    matches!(rows, [row] if row.first().and_then(|v| v.as_deref()) == Some("0"))
}

/// The wait statement for `g` within the session's budget.
pub(super) fn wait_sql(g: &Gtid, budget_ms: u64) -> String {
    g.wait_sql(budget_ms as f64 / 1000.0)
}

/// Books the end of a wait for `g` on `server` (`rows`: its answer, if
/// any): a wait that caught up teaches sextant the replica's position
/// (reads needing that write go there without waiting), and so does the
/// position the answer carries; one that timed out keeps further waits off
/// the replica until it is seen to catch up.
pub(super) fn wait_ended(
    server: &Server,
    g: &Gtid,
    started: std::time::Instant,
    rows: &[Vec<Option<String>>],
) -> bool {
    let ok = caught_up(rows);
    let us = started.elapsed().as_micros() as u64;
    server.health.causal.wait(us, ok);
    if let [row] = rows {
        if let Some(Some(list)) = row.get(1) {
            for p in sextant_backend::gtid::parse_list(list) {
                server.health.note_applied(p.pack());
            }
        }
    }
    if ok {
        server.health.note_applied(g.pack());
    } else {
        server.health.note_wait_failed(g.pack());
    }
    server.health.shared_wait.ended(g.pack());
    ok
}

impl Session {
    /// Takes the plan's read requirement for the statement about to run:
    /// which write a replica must have applied, whether it may not go back
    /// in time.
    pub(super) fn require(&mut self, plan: &Plan) {
        self.stmt = super::stmt::Stmt {
            need: plan.read.own_writes.and_then(|s| self.own_write(s)),
            fleet: plan.read.own_writes == Some(ConsistencyScope::User)
                && self.shared.fleet.get().is_some()
                && self.group.topology != sextant_config::Topology::Galera,
            mono: plan.read.monotonic,
            ..Default::default()
        };
        if plan.rule == Rule::Hint && plan.target == Target::Replica && !self.pinned() {
            // A READONLY hint outranks the hold window after a write: the
            // window is there for reading one's own writes, which the
            // read's consistency requirement (above) already looks after.
            self.primary_reads_until = None;
        }
    }

    /// After the statement: its requirements end, and a monotonic read is
    /// remembered as seen.
    pub(super) fn read_done(&mut self) {
        if std::mem::take(&mut self.stmt).mono {
            self.note_seen();
        }
    }

    /// In a fleet, with `consistency_scope = "user"`: the read must also
    /// see the user's writes other instances acknowledged before it
    /// arrived. Each committed on the group's primary before its OK, so
    /// the primary's position read after this moment covers them; one such
    /// read at a time serves every statement of the group that arrived
    /// before it was sent. If the position cannot be read within the wait
    /// budget, the read goes to the primary.
    pub(super) async fn fleet_need(&mut self) {
        if !std::mem::take(&mut self.stmt.fleet) {
            return;
        }
        let group = self.group.clone();
        let Some(primary) = group.primary() else {
            return;
        };
        let user = self.user.clone();
        let flavor = self.flavor;
        // Longer than a wait: past it the read goes to the primary, which
        // a slow primary can least afford.
        let budget = self.user.policy().causal_wait_ms.max(250);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(budget);
        let pos = &group.primary_position;
        let read = || async move {
            primary_position(
                pos,
                primary,
                &user.backend_user,
                &user.backend_password,
                flavor,
            )
            .await
        };
        match group.primary_position.after_now(deadline, read).await {
            Ok(Some(g)) => {
                let local_newer = self
                    .stmt
                    .need
                    .is_some_and(|l| l.domain == g.domain && l.seq > g.seq);
                if !local_newer {
                    self.stmt.need = Some(g);
                }
            }
            Ok(None) => {}
            // Another instance's write may be newer than anything a
            // replica is known to have: the primary has them all.
            Err(_) => self.stmt.to_primary = true,
        }
    }

    /// The newest write of this session, or of any session of its user.
    pub(super) fn own_write(&self, scope: ConsistencyScope) -> Option<Gtid> {
        match scope {
            ConsistencyScope::Session => self.last_write,
            ConsistencyScope::User => self.user_newest().load().or(self.last_write),
        }
    }

    /// monotonic: after a read, remember where and when.
    fn note_seen(&mut self) {
        self.sticky = self.binding.direct().map(|a| a.server.clone());
        self.seen_us = now_us();
    }

    /// Records the GTID of a write the server just reported (the relay
    /// published it for the user already; again here for writes answered
    /// another way).
    pub(super) fn note_write(&mut self, g: Gtid) {
        self.last_write = Some(g);
        self.user_newest().publish(&g);
    }

    /// The newest write of any session of this user where this session
    /// is: its group of a sharded layout, else its user's group.
    pub(super) fn user_newest(&self) -> &sextant_backend::gtid::Newest {
        user_newest(self.sharding.as_deref(), &self.group, &self.user)
    }
}

/// The primary's newest write in its own domain (MariaDB: its
/// `gtid_domain_id` in `gtid_binlog_pos`; MySQL: its `server_uuid` in
/// `gtid_executed`), read on the connection `pos` keeps (borrowed from the
/// pool once, then kept for these reads); `Ok(None)`: the primary has
/// written nothing there.
async fn primary_position(
    pos: &sextant_backend::position::PrimaryPosition,
    primary: &Arc<Server>,
    user: &str,
    password: &str,
    flavor: sextant_backend::Flavor,
) -> Result<Option<Gtid>, Unknown> {
    let mariadb = primary.health.server_version().is_none_or(|v| v.mariadb);
    let sql = match mariadb {
        true => "SELECT @@gtid_binlog_pos, @@gtid_domain_id",
        false => "SELECT @@gtid_executed, @@server_uuid",
    };
    let mut conn = match pos.take_conn(primary) {
        Some(c) => c,
        None => primary
            .acquire(user, password, flavor)
            .await
            .map_err(|_| Unknown)?,
    };
    let rows = match conn.query_internal(sql).await {
        Ok(rows) => {
            pos.keep_conn(primary.clone(), conn);
            rows
        }
        Err(e) => {
            match e {
                sextant_backend::BackendError::Server { .. } => {
                    pos.keep_conn(primary.clone(), conn)
                }
                _ => primary.discard(conn),
            }
            return Err(Unknown);
        }
    };
    let cell = |i: usize| rows.first()?.get(i)?.as_deref();
    let (Some(list), Some(own)) = (cell(0), cell(1)) else {
        return Err(Unknown);
    };
    let own_domain = match mariadb {
        true => own.trim().parse::<u32>().ok(),
        false => {
            sextant_backend::gtid::Gtid::parse_mysql(&format!("{}:1", own.trim())).map(|g| g.domain)
        }
    }
    .ok_or(Unknown)?;
    let own = sextant_backend::gtid::parse_list(list).find(|g| g.domain == own_domain);
    Ok(own)
}

/// [`Session::user_newest`] from the session's fields (borrowed apart from
/// its connection while a statement is relayed).
pub(super) fn user_newest<'u>(
    sharding: Option<&crate::runtime::Sharding>,
    group: &Arc<sextant_backend::Group>,
    user: &'u crate::runtime::UserEntry,
) -> &'u sextant_backend::gtid::Newest {
    sharding
        .and_then(|sh| sh.groups.iter().position(|g| Arc::ptr_eq(g, group)))
        .and_then(|i| user.shard_writes.get(i))
        .unwrap_or(&user.latest_write)
}
