//! The topology monitor: one task per server, on its own connection, every
//! interval. It decides whether a server can take reads (reachable, its
//! replication running, its lag within the group's max_replica_lag_ms) and
//! the routing layer reads that through `Server::load()`.
//!
//! Lag comes from a heartbeat: each interval the primary's task writes the
//! time (sextant's clock, microseconds) into a row of its own in
//! `sextant.heartbeat`; a replica's lag is the newest time written minus the
//! newest time it has applied. Both times come from the same clock, so
//! clock skew between servers does not matter, and when the primary stops
//! taking writes the replicas that have everything show no lag.
//! Seconds_Behind_Master is the fallback when the heartbeat cannot be used.

pub mod dialect;
mod error;
pub mod failover;
pub mod failover_mysql;
pub mod grants;
pub mod gtid_set;
pub mod ha;
pub use error::FailoverError;
mod probe;
mod promote;
mod switchover;

use sextant_backend::{
    BackendConn, BackendError, ConnectParams, Flavor, Group, Role, Server, Topology,
};
use sextant_sql::{Catalogue, ServerKind};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone)]
pub struct Settings {
    pub interval: Duration,
    pub user: String,
    pub password: String,
    pub heartbeat: bool,
    pub max_lag_ms: u64,
    /// This sextant instance's heartbeat row.
    pub instance_id: u32,
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// What one server's monitor keeps from one check to the next.
#[derive(Default)]
struct Watch {
    conn: Option<BackendConn>,
    heartbeat_ready: bool,
    /// When the group's catalogue was last read (by the primary's monitor).
    catalogue_at: Option<Instant>,
    /// When the server's limits were last read.
    limits_at: Option<Instant>,
}

impl Watch {
    /// After a failure: the next check starts on a new connection.
    fn reconnect(&mut self) {
        self.conn = None;
        self.heartbeat_ready = false;
    }
}

/// Watches `server` forever.
pub async fn watch(server: Arc<Server>, group: Arc<Group>, s: Settings) {
    let mut w = Watch::default();
    let mut tick = tokio::time::interval(s.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // A check may not take longer than an interval (plus the connect
        // time): a server that hangs is as good as down.
        let budget = s.interval + server.settings.connect_timeout;
        // A failure of the monitor's own connection (killed by an
        // operator, closed by wait_timeout) says nothing of the server
        // until a new connection fails too: one more try on a new one.
        let mut tries = if w.conn.is_some() { 2 } else { 1 };
        let r = loop {
            let r = tokio::time::timeout(budget, check(&server, &group, &s, &mut w)).await;
            tries -= 1;
            if tries == 0 || !matches!(r, Ok(Err(_))) {
                break r;
            }
            w.reconnect();
        };
        let failure = match r {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!(
                "no answer to the monitor within {} ms",
                budget.as_millis()
            )),
        };
        if let Some(why) = failure {
            w.reconnect();
            server.mark_unreachable(&why);
            // Statements waiting on it give up (see the proxy's inflight).
            server.health.note_monitor_failure();
            group.follow();
        }
    }
}

async fn check(
    server: &Server,
    group: &Group,
    s: &Settings,
    w: &mut Watch,
) -> Result<(), BackendError> {
    let Watch {
        conn,
        heartbeat_ready,
        catalogue_at,
        limits_at,
    } = w;
    if conn.is_none() {
        let p = ConnectParams {
            addr: &server.addr,
            user: &s.user,
            password: &s.password,
            flavor: Flavor::new(0, 45),
            timeout: server.settings.connect_timeout,
            tls: server.settings.tls.as_ref(),
            min_wait_timeout: None,
            server_key: server.settings.server_key.as_deref(),
        };
        let c = BackendConn::connect(&p).await?;
        // What executable comments mean to it (the pool notes it too).
        server.health.note_version(&c.server_version);
        *conn = Some(c);
    }
    let Some(c) = conn.as_mut() else {
        return Ok(());
    };
    let mut write_stalled = false;
    c.ping().await?;
    if !matches!(limits_at, Some(t) if t.elapsed() < LIMITS_EVERY) {
        // sextant's connections keep their prepared statements within a
        // share of it (see Server::stmt_cap).
        // And the largest statement it takes: sextant refuses a larger
        // one itself (1153) rather than send it to be dropped.
        let rows = c
            .query_internal("SELECT @@global.max_prepared_stmt_count, @@global.max_allowed_packet")
            .await?;
        let value = |i: usize| {
            rows.first()
                .and_then(|r| r.get(i))
                .cloned()
                .flatten()
                .and_then(|v| v.parse::<u32>().ok())
        };
        if let Some(n) = value(0) {
            server.health.set_stmt_limit(n);
        }
        if let Some(n) = value(1) {
            server.health.set_packet_limit(n);
        }
        *limits_at = Some(Instant::now());
    }
    let cluster = matches!(
        group.topology,
        Topology::GroupReplication | Topology::Galera
    );
    match group.topology {
        Topology::Static => {}
        Topology::Replication => {
            let rows = c.query_internal("SELECT @@read_only").await?;
            let ro = rows.first().and_then(|r| r.first()).cloned().flatten();
            let writable = matches!(ro.as_deref(), Some("0") | Some("OFF"));
            server.health.set_writable(writable);
        }
        Topology::GroupReplication => {
            let m = group_replication_member(c).await?;
            set_member(server, m);
        }
        Topology::Galera => {
            let m = galera_node(c).await?;
            set_member(server, m);
        }
    }
    if group.follow_primary {
        server.health.set_reachable(true);
        group.follow();
    }
    // In a multi-writer cluster several members are writers; one of them
    // (the group's primary) writes the heartbeat, so that heartbeats do not
    // conflict with each other.
    let heartbeat_writer = group.primary().is_some_and(|p| std::ptr::eq(&**p, server));
    match server.role() {
        Role::Primary if !heartbeat_writer => {
            server.health.set_lag(-1, false);
        }
        Role::Primary => {
            let due = !matches!(catalogue_at, Some(t) if t.elapsed() < CATALOGUE_EVERY);
            if group.catalogue_stale.swap(false, Ordering::Relaxed) || due {
                refresh_catalogue(c, group).await?;
                *catalogue_at = Some(Instant::now());
            }
            if s.heartbeat {
                // Writes (and DDL) can wait while the server still answers
                // (a Galera cluster evicting a dead node, a full disk):
                // that stalls writes, it does not make the server
                // unreachable. The connection, maybe mid-statement, is
                // dropped after the check.
                let write = heartbeat(c, s.instance_id, heartbeat_ready);
                match tokio::time::timeout(s.interval, write).await {
                    Ok(Ok(Some(ts))) => group.heartbeat_us.store(ts, Ordering::Relaxed),
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        tracing::warn!(server = %server.addr, "the heartbeat write did not finish within the monitor interval: writes to this server are stalled");
                        write_stalled = true;
                    }
                }
            }
            server.health.set_lag(-1, false);
        }
        Role::Replica => {
            // Cluster members have no replication threads of their own to
            // watch; their health is their member state (above).
            let (running, seconds_behind) = if cluster {
                (true, None)
            } else {
                replication_status(c).await?
            };
            let mut lag_ms = seconds_behind.map(|s| s * 1000);
            let newest = group.heartbeat_us.load(Ordering::Relaxed);
            if s.heartbeat && newest > 0 {
                let sql = format!(
                    "SELECT ts_us FROM sextant.heartbeat WHERE instance = {}",
                    s.instance_id
                );
                if let Ok(rows) = c.query_internal(&sql).await {
                    if let Some(Some(v)) = rows.first().and_then(|r| r.first()) {
                        if let Ok(applied) = v.parse::<i64>() {
                            server.health.set_heartbeat_applied_us(applied);
                            lag_ms = Some(((newest - applied) / 1000).max(0));
                        }
                    }
                }
            }
            // What this replica has applied, for read-your-writes routing.
            // Galera nodes log every write set in their binlog under the
            // cluster's GTIDs; MariaDB replicas record what they applied in
            // gtid_slave_pos; MySQL servers in gtid_executed.
            let applied = if !c.is_mariadb() {
                "SELECT @@gtid_executed"
            } else if cluster {
                "SELECT @@gtid_binlog_pos"
            } else {
                "SELECT @@gtid_slave_pos"
            };
            if let Ok(rows) = c.query_internal(applied).await {
                if let Some(Some(pos)) = rows.first().and_then(|r| r.first()) {
                    server.health.set_applied(pos);
                }
            }
            let lag = lag_ms.unwrap_or(-1);
            // A replica whose lag cannot be known is not trusted; a cluster
            // member without a heartbeat is judged by its state alone.
            let unknown_is_lagging = !cluster;
            let lagging = !running
                || (s.max_lag_ms > 0
                    && ((lag < 0 && unknown_is_lagging)
                        || (lag >= 0 && lag as u64 > s.max_lag_ms)));
            if lagging != server.health.lagging() {
                if lagging {
                    tracing::warn!(server = %server.addr, lag_ms = lag, running, "replica out of read rotation: lagging");
                } else {
                    tracing::info!(server = %server.addr, lag_ms = lag, "replica caught up: back in read rotation");
                }
            }
            server.health.set_lag(lag, lagging);
        }
    }
    if write_stalled {
        *conn = None;
        *heartbeat_ready = false;
    }
    if !server.health.set_reachable(true) {
        tracing::info!(server = %server.addr, "server answering again");
    }
    Ok(())
}

/// Writes this instance's heartbeat row (creating its table first if
/// needed); the time written, or None when it could not be.
async fn heartbeat(
    c: &mut BackendConn,
    instance_id: u32,
    ready: &mut bool,
) -> Result<Option<i64>, BackendError> {
    const TABLE: &str = "CREATE TABLE IF NOT EXISTS sextant.heartbeat \
                         (instance INT UNSIGNED PRIMARY KEY, ts_us BIGINT NOT NULL)";
    if !*ready {
        let setup = c.exec_internal(TABLE).await;
        if let Err(BackendError::Server { code: 1049, .. }) = setup {
            c.exec_internal("CREATE DATABASE IF NOT EXISTS sextant")
                .await?;
        }
        *ready = setup.is_ok() || c.exec_internal(TABLE).await.is_ok();
    }
    if !*ready {
        return Ok(None);
    }
    let ts = now_us();
    let sql = format!("REPLACE INTO sextant.heartbeat VALUES ({instance_id}, {ts})");
    Ok(c.exec_internal(&sql).await.ok().map(|_| ts))
}

/// How often a server's limits (max_prepared_stmt_count) are read again.
const LIMITS_EVERY: Duration = Duration::from_secs(30);

/// How often the primary's catalogue is read again when no DDL went
/// through sextant (DDL run elsewhere is seen this late).
const CATALOGUE_EVERY: Duration = Duration::from_secs(10);

/// Most table names the catalogue keeps: beyond that, reads of tables it
/// does not list are not sent to the primary for it (a server with this
/// many tables would spend more on the listing than it saves).
const MAX_TABLES: usize = 200_000;

/// Reads what classification needs from the primary's catalogue: its
/// flavor, stored functions and UDFs, the views with their definitions,
/// and the names of all tables (a read of any other name may be of a view
/// created since).
async fn refresh_catalogue(c: &mut BackendConn, group: &Group) -> Result<(), BackendError> {
    let kind = if c.is_mariadb() {
        ServerKind::MariaDb
    } else {
        ServerKind::MySql
    };
    // One statement, so that the monitor's reads stay few on the server's
    // counters; UDFs only for an account that may read the mysql schema.
    const ROUTINES_AND_VIEWS: &str =
        "SELECT 'f', ROUTINE_NAME, NULL FROM information_schema.ROUTINES \
         WHERE ROUTINE_TYPE = 'FUNCTION' \
         UNION ALL SELECT 'v', TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS \
         WHERE TABLE_SCHEMA NOT IN ('sys', 'mysql', 'information_schema', 'performance_schema') \
         UNION ALL SELECT DISTINCT 't', TABLE_NAME, NULL FROM information_schema.TABLES";
    let rows = match c
        .query_internal(&format!(
            "{ROUTINES_AND_VIEWS} UNION ALL SELECT 'f', name, NULL FROM mysql.func"
        ))
        .await
    {
        Ok(rows) => rows,
        Err(BackendError::Server { .. }) => c.query_internal(ROUTINES_AND_VIEWS).await?,
        Err(e) => return Err(e),
    };
    let mut functions = Vec::new();
    let mut views = Vec::new();
    let mut tables = Vec::new();
    for r in rows {
        let mut r = r.into_iter();
        let (Some(Some(what)), Some(Some(name))) = (r.next(), r.next()) else {
            continue;
        };
        match what.as_str() {
            "f" => functions.push(name),
            "t" => tables.push(name),
            _ => views.push((name, r.next().flatten().unwrap_or_default())),
        }
    }
    let hidden = views.iter().filter(|(_, d)| d.trim().is_empty()).count();
    let mut cat = Catalogue::new(Some(kind), functions, views);
    let old = group.catalogue.load();
    if tables.len() <= MAX_TABLES {
        cat = cat.with_tables(tables).keep_invisible(&old);
    } else if old.kind.is_none() {
        tracing::warn!(group = %group.name, tables = tables.len(), "more tables than sextant lists: a view created without going through sextant is known only at the next catalogue read (10 s)");
    }
    if old.kind.is_none() || old.writing_views() != cat.writing_views() {
        tracing::info!(
            group = %group.name,
            writing_views = cat.writing_views(),
            "catalogue read: reads of views that call functions go to the primary"
        );
        if hidden > 0 {
            tracing::warn!(
                group = %group.name,
                views = hidden,
                "the monitor account cannot read these views' definitions (grant it SHOW VIEW): reads of them go to the primary"
            );
        }
    }
    group.catalogue.store(Arc::new(cat));
    Ok(())
}

/// What the monitor learned of a cluster member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Usable: ONLINE in the majority partition (Group Replication);
    /// Synced, ready, in the primary component (Galera).
    pub ok: bool,
    /// May take writes.
    pub writable: bool,
    /// The state as the cluster names it, when not usable.
    pub state: String,
}

fn set_member(server: &Server, m: Member) {
    let was = server.health.member_ok();
    if was != m.ok {
        if m.ok {
            tracing::info!(server = %server.addr, "cluster member usable again");
        } else {
            tracing::warn!(server = %server.addr, state = %m.state, "cluster member out of rotation");
        }
    }
    server.health.set_writable(m.ok && m.writable);
    server.health.set_member(m.ok, (!m.ok).then_some(m.state));
}

/// The member's own row of performance_schema.replication_group_members,
/// and how many members its view has and can reach: a member that cannot
/// reach a majority is in a minority partition and must not be used.
pub const GROUP_REPLICATION_QUERY: &str = "SELECT MEMBER_STATE, MEMBER_ROLE, \
     (SELECT COUNT(*) FROM performance_schema.replication_group_members \
      WHERE MEMBER_STATE <> 'UNREACHABLE'), \
     (SELECT COUNT(*) FROM performance_schema.replication_group_members) \
     FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@server_uuid";

async fn group_replication_member(c: &mut BackendConn) -> Result<Member, BackendError> {
    let rows = c.query_internal(GROUP_REPLICATION_QUERY).await?;
    Ok(group_replication_verdict(
        rows.first().map(|r| r.as_slice()),
    ))
}

/// Judges a member from its row (None: it is not in a group).
pub fn group_replication_verdict(row: Option<&[Option<String>]>) -> Member {
    let Some(row) = row else {
        return Member {
            ok: false,
            writable: false,
            state: "not in a group".into(),
        };
    };
    let field = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    let state = field(0);
    let role = field(1);
    let reachable: u64 = field(2).parse().unwrap_or(0);
    let total: u64 = field(3).parse().unwrap_or(0);
    let majority = reachable * 2 > total;
    let online = state.eq_ignore_ascii_case("ONLINE");
    Member {
        ok: online && majority,
        writable: role.eq_ignore_ascii_case("PRIMARY"),
        state: if online && !majority {
            format!("minority partition ({reachable} of {total} members reachable)")
        } else {
            state
        },
    }
}

async fn galera_node(c: &mut BackendConn) -> Result<Member, BackendError> {
    let (_, rows) = c
        .query_named(
            "SHOW GLOBAL STATUS WHERE Variable_name IN \
             ('wsrep_ready', 'wsrep_local_state', 'wsrep_local_state_comment', \
              'wsrep_cluster_status')",
        )
        .await?;
    let ro = c.query_internal("SELECT @@read_only").await?;
    let read_only = ro.first().and_then(|r| r.first()).cloned().flatten();
    let status: Vec<(String, String)> = rows
        .into_iter()
        .filter_map(|r| {
            let mut it = r.into_iter();
            Some((it.next()??, it.next()??))
        })
        .collect();
    Ok(galera_verdict(&status, read_only.as_deref()))
}

/// Judges a Galera node from its wsrep status variables and read_only.
pub fn galera_verdict(status: &[(String, String)], read_only: Option<&str>) -> Member {
    let get = |name: &str| {
        status
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let ready = get("wsrep_ready").is_some_and(|v| v.eq_ignore_ascii_case("ON"));
    let synced = get("wsrep_local_state") == Some("4");
    let primary = get("wsrep_cluster_status").is_some_and(|v| v.eq_ignore_ascii_case("Primary"));
    let state = if !primary {
        format!(
            "non-primary component ({})",
            get("wsrep_cluster_status").unwrap_or("unknown")
        )
    } else if !ready {
        "wsrep not ready".into()
    } else {
        get("wsrep_local_state_comment")
            .unwrap_or("not synced")
            .to_string()
    };
    Member {
        ok: ready && synced && primary,
        writable: matches!(read_only, Some("0") | Some("OFF")),
        state,
    }
}

/// (SQL thread running, Seconds_Behind_Master) from SHOW ALL SLAVES STATUS
/// (MariaDB) or SHOW REPLICA STATUS (MySQL 8).
async fn replication_status(c: &mut BackendConn) -> Result<(bool, Option<i64>), BackendError> {
    let (names, rows) = match c.query_named("SHOW ALL SLAVES STATUS").await {
        Ok(r) => r,
        Err(BackendError::Server { .. }) => c.query_named("SHOW REPLICA STATUS").await?,
        Err(e) => return Err(e),
    };
    let col = |want: &[&str]| {
        names
            .iter()
            .position(|n| want.iter().any(|w| n.eq_ignore_ascii_case(w)))
    };
    let (Some(sql), Some(behind)) = (
        col(&["Slave_SQL_Running", "Replica_SQL_Running"]),
        col(&["Seconds_Behind_Master", "Seconds_Behind_Source"]),
    ) else {
        // Not a replica at all: nothing to lag behind.
        return Ok((true, Some(0)));
    };
    let Some(row) = rows.first() else {
        return Ok((false, None));
    };
    let running = row.get(sql).cloned().flatten().as_deref() == Some("Yes");
    let seconds = row
        .get(behind)
        .cloned()
        .flatten()
        .and_then(|v| v.parse().ok());
    Ok((running, seconds))
}

pub fn instance_id() -> u32 {
    rand::random::<u32>() | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(ready: &str, state: &str, comment: &str, cluster: &str) -> Vec<(String, String)> {
        [
            ("wsrep_ready", ready),
            ("wsrep_local_state", state),
            ("wsrep_local_state_comment", comment),
            ("wsrep_cluster_status", cluster),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .to_vec()
    }

    #[test]
    fn galera_nodes_are_judged_by_wsrep_state() {
        let m = galera_verdict(&status("ON", "4", "Synced", "Primary"), Some("0"));
        assert!(m.ok && m.writable);
        let m = galera_verdict(&status("ON", "4", "Synced", "Primary"), Some("1"));
        assert!(m.ok && !m.writable, "read_only node: reads only");
        let m = galera_verdict(&status("ON", "2", "Donor/Desynced", "Primary"), Some("0"));
        assert!(!m.ok);
        assert_eq!(m.state, "Donor/Desynced");
        let m = galera_verdict(&status("OFF", "1", "Joining", "non-Primary"), Some("0"));
        assert!(!m.ok);
        assert!(m.state.starts_with("non-primary component"), "{}", m.state);
        assert!(!galera_verdict(&[], Some("0")).ok);
    }

    #[test]
    fn group_replication_members_need_online_and_a_majority() {
        let row =
            |a: &str, b: &str, r: &str, t: &str| [a, b, r, t].map(|v| Some(v.to_string())).to_vec();
        let m = group_replication_verdict(Some(&row("ONLINE", "PRIMARY", "3", "3")));
        assert!(m.ok && m.writable);
        let m = group_replication_verdict(Some(&row("ONLINE", "SECONDARY", "2", "3")));
        assert!(m.ok && !m.writable);
        let m = group_replication_verdict(Some(&row("ONLINE", "PRIMARY", "2", "4")));
        assert!(!m.ok, "half is not a majority");
        let m = group_replication_verdict(Some(&row("RECOVERING", "SECONDARY", "3", "3")));
        assert!(!m.ok);
        assert!(!group_replication_verdict(None).ok);
    }
}
