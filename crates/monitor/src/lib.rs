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

use sextant_backend::{BackendConn, BackendError, ConnectParams, Flavor, Group, Role, Server};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// Watches `server` forever.
pub async fn watch(server: Arc<Server>, group: Arc<Group>, s: Settings) {
    let mut conn: Option<BackendConn> = None;
    let mut heartbeat_ready = false;
    let mut tick = tokio::time::interval(s.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // A check may not take longer than an interval (plus the connect
        // time): a server that hangs is as good as down.
        let budget = s.interval + server.settings.connect_timeout;
        let r = tokio::time::timeout(
            budget,
            check(&server, &group, &s, &mut conn, &mut heartbeat_ready),
        )
        .await;
        let failure = match r {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!(
                "no answer to the monitor within {} ms",
                budget.as_millis()
            )),
        };
        if let Some(why) = failure {
            conn = None;
            heartbeat_ready = false;
            server.mark_unreachable(&why);
            if group.follow_primary {
                group.follow_writable();
            }
        }
    }
}

async fn check(
    server: &Server,
    group: &Group,
    s: &Settings,
    conn: &mut Option<BackendConn>,
    heartbeat_ready: &mut bool,
) -> Result<(), BackendError> {
    if conn.is_none() {
        let p = ConnectParams {
            addr: &server.addr,
            user: &s.user,
            password: &s.password,
            flavor: Flavor::new(0, 45),
            timeout: server.settings.connect_timeout,
            tls: server.settings.tls.as_ref(),
        };
        *conn = Some(BackendConn::connect(&p).await?);
    }
    let Some(c) = conn.as_mut() else {
        return Ok(());
    };
    c.ping().await?;
    if group.follow_primary {
        let rows = c.query_internal("SELECT @@read_only").await?;
        let ro = rows.first().and_then(|r| r.first()).cloned().flatten();
        let writable = matches!(ro.as_deref(), Some("0") | Some("OFF"));
        server.writable.store(writable, Ordering::Relaxed);
        server.reachable.store(true, Ordering::Relaxed);
        group.follow_writable();
    }
    match server.role() {
        Role::Primary => {
            if s.heartbeat {
                if !*heartbeat_ready {
                    let setup = c
                        .exec_internal(
                            "CREATE TABLE IF NOT EXISTS sextant.heartbeat \
                             (instance INT UNSIGNED PRIMARY KEY, ts_us BIGINT NOT NULL)",
                        )
                        .await;
                    if let Err(BackendError::Server { code: 1049, .. }) = setup {
                        c.exec_internal("CREATE DATABASE IF NOT EXISTS sextant")
                            .await?;
                    }
                    *heartbeat_ready = setup.is_ok()
                        || c.exec_internal(
                            "CREATE TABLE IF NOT EXISTS sextant.heartbeat \
                             (instance INT UNSIGNED PRIMARY KEY, ts_us BIGINT NOT NULL)",
                        )
                        .await
                        .is_ok();
                }
                if *heartbeat_ready {
                    let ts = now_us();
                    let sql = format!(
                        "REPLACE INTO sextant.heartbeat VALUES ({}, {ts})",
                        s.instance_id
                    );
                    if c.exec_internal(&sql).await.is_ok() {
                        group.heartbeat_us.store(ts, Ordering::Relaxed);
                    }
                }
            }
            server.lag_ms.store(-1, Ordering::Relaxed);
            server.lagging.store(false, Ordering::Relaxed);
        }
        Role::Replica => {
            let (running, seconds_behind) = replication_status(c).await?;
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
                            lag_ms = Some(((newest - applied) / 1000).max(0));
                        }
                    }
                }
            }
            // What this replica has applied, for read-your-writes routing.
            if let Ok(rows) = c.query_internal("SELECT @@gtid_slave_pos").await {
                if let Some(Some(pos)) = rows.first().and_then(|r| r.first()) {
                    server.set_applied(pos);
                }
            }
            let lag = lag_ms.unwrap_or(-1);
            let lagging = !running || (s.max_lag_ms > 0 && (lag < 0 || lag as u64 > s.max_lag_ms));
            if lagging != server.lagging.load(Ordering::Relaxed) {
                if lagging {
                    tracing::warn!(server = %server.addr, lag_ms = lag, running, "replica out of read rotation: lagging");
                } else {
                    tracing::info!(server = %server.addr, lag_ms = lag, "replica caught up: back in read rotation");
                }
            }
            server.lag_ms.store(lag, Ordering::Relaxed);
            server.lagging.store(lagging, Ordering::Relaxed);
        }
    }
    if !server.reachable.swap(true, Ordering::Relaxed) {
        tracing::info!(server = %server.addr, "server answering again");
    }
    Ok(())
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
