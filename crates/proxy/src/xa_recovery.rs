//! Recovery of distributed transactions: at start, every
//! `recover_interval_ms`, and at once when a session could not finish a
//! commit, each group's primary is asked for its prepared branches
//! (`XA RECOVER`); this instance's branches are committed when the
//! decision log holds their commit and rolled back when it does not
//! (`sextant_xa::recover::plan` decides). A primary that failed over is
//! asked the same way: MariaDB replicates prepared branches, so the new
//! primary holds them.
//!
//! The admin port's `SHOW XA` reads what the last pass left unresolved,
//! and `XA COMMIT | ROLLBACK '<gtrid>'` there resolves one by hand
//! ([`resolve`]).

use crate::frontend::DEFAULT_CHARSET;
use crate::runtime::{Runtime, Sharding};
use crate::shared::Shared;
use sextant_backend::{Flavor, Group, Lease};
use sextant_xa::recover::{self, Action, Found};
use sextant_xa::{Coordinator, InDoubt};
use std::sync::Arc;
use std::time::Duration;

pub async fn run(shared: Arc<Shared>, coord: Arc<Coordinator>, mut claim: Claim) {
    // The monitor needs a moment to find each group's primary.
    tokio::time::sleep(Duration::from_millis(200)).await;
    loop {
        let rt = shared.runtime.load_full();
        if let Some(sh) = rt.sharding.clone() {
            // Another live sextant with this id would find this instance's
            // branches its own, and this one its: neither may resolve any.
            if let Held::Other = claim.hold(&rt, &sh, 0).await {
                tracing::error!(instance = %coord.instance, "XA recovery stopped: another sextant holds this instance id ({}); give each instance its own [xa] instance_id", claim.name);
                drop(rt);
                tokio::time::sleep(coord.recover_interval.max(Duration::from_secs(1))).await;
                continue;
            }
            let p = pass(&rt, &sh, &coord).await;
            shared.counters.xa_recovered_branches.fetch_add(
                (p.committed + p.rolled_back) as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        drop(rt);
        tokio::select! {
            _ = tokio::time::sleep(coord.recover_interval) => {}
            _ = coord.wake.notified() => {}
        }
    }
}

/// This instance's claim to its id among the sextants sharing the
/// servers: a named lock on the first group's primary, held by a
/// connection of its own for as long as the process runs (the server
/// frees it when the process ends, however it ends).
pub struct Claim {
    pub name: String,
    lease: Option<Lease>,
}

/// Whether the claim is held.
#[derive(Debug)]
pub enum Held {
    Yes,
    /// Another connection (another sextant) holds the lock.
    Other,
    /// The primary cannot be asked now.
    Unknown(String),
}

impl Claim {
    pub fn new(instance: &str) -> Claim {
        Claim {
            name: format!("sextant-xa:{instance}"),
            lease: None,
        }
    }

    /// Holds the lock, waiting up to `wait_s` seconds for it (a crashed
    /// predecessor's connection may take a moment to be noticed gone).
    pub async fn hold(&mut self, rt: &Runtime, sh: &Sharding, wait_s: u32) -> Held {
        if let Some(l) = self.lease.as_mut() {
            let q = format!("SELECT IS_USED_LOCK('{}') = CONNECTION_ID()", self.name);
            match l.conn_mut().query_internal(&q).await {
                Ok(rows) if first(&rows) == Some("1") => return Held::Yes,
                _ => {
                    if let Some(l) = self.lease.take() {
                        l.discard();
                    }
                }
            }
        }
        let Some(primary) = sh.groups.first().and_then(|g| g.primary()) else {
            return Held::Unknown("no primary is known".into());
        };
        let Some((user, password)) = account(rt) else {
            return Held::Unknown("no user is configured".into());
        };
        let conn = match primary
            .acquire(&user, &password, Flavor::new(0, DEFAULT_CHARSET))
            .await
        {
            Ok(c) => c,
            Err(e) => return Held::Unknown(e.to_string()),
        };
        let mut lease = Lease::new(primary.clone(), conn);
        let q = format!("SELECT GET_LOCK('{}', {wait_s})", self.name);
        let got = lease.conn_mut().query_internal(&q).await;
        match got.as_ref().map(|r| first(r)) {
            Ok(Some("1")) => {
                self.lease = Some(lease);
                Held::Yes
            }
            Ok(Some("0")) => {
                lease.discard();
                Held::Other
            }
            _ => {
                lease.discard();
                Held::Unknown(match got {
                    Err(e) => e.to_string(),
                    Ok(_) => "GET_LOCK returned NULL".into(),
                })
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Never back to the pool: the lock would go with it.
        if let Some(l) = self.lease.take() {
            l.discard();
        }
    }
}

fn first(rows: &[Vec<Option<String>>]) -> Option<&str> {
    rows.first()?.first()?.as_deref()
}

/// What one pass did.
#[derive(Debug, Default)]
pub struct Pass {
    pub committed: usize,
    pub rolled_back: usize,
    pub unresolved: usize,
}

/// One recovery pass over every group.
pub async fn pass(rt: &Runtime, sh: &Sharding, coord: &Arc<Coordinator>) -> Pass {
    // Before any group is asked: a branch XA RECOVER lists may belong to a
    // session that finishes it before this pass decides.
    let watch = coord.watch();
    let mut leases: Vec<Option<Lease>> = Vec::with_capacity(sh.groups.len());
    let mut found = Vec::new();
    let mut all_asked = true;
    let mut rows = Vec::new();
    for (i, g) in sh.groups.iter().enumerate() {
        match prepared_in(rt, g).await {
            Ok((lease, xids)) => {
                found.extend(xids.into_iter().map(|xid| Found { group: i, xid }));
                leases.push(Some(lease));
            }
            Err(e) => {
                all_asked = false;
                tracing::warn!(group = %g.name, "XA recovery cannot ask the group's primary: {e}");
                leases.push(None);
            }
        }
    }
    let committed = |g: &str| coord.log.committed(g);
    let flying = |g: &str| watch.live(g);
    let actions = recover::plan(&found, coord.owner(), &committed, &flying);
    let mut out = Pass::default();
    let mut remaining = Vec::new();
    let now = sextant_xa::log::now_ms();
    for a in actions {
        let (f, verb) = match &a {
            Action::Commit(f) => (f, "COMMIT"),
            Action::Rollback(f) => (f, "ROLLBACK"),
            Action::InFlight(f) => {
                remaining.push(f.clone());
                continue;
            }
            Action::Foreign(f) => {
                rows.push(in_doubt(sh, &leases, f, "other instance", None, now));
                continue;
            }
        };
        let sql = format!("XA {verb} {}", f.xid.sql());
        let res = match leases.get_mut(f.group).and_then(Option::as_mut) {
            Some(l) => l.conn_mut().exec_internal(&sql).await,
            None => continue,
        };
        let action = match verb {
            "COMMIT" => "commit",
            _ => "rollback",
        };
        match res {
            Ok(()) => {
                tracing::info!(gtrid = %f.xid.gtrid_text(), group = %sh.router.group_name(f.group), "XA recovery: branch {action} done");
                match verb {
                    "COMMIT" => out.committed += 1,
                    _ => out.rolled_back += 1,
                }
            }
            Err(e) => {
                tracing::warn!(gtrid = %f.xid.gtrid_text(), group = %sh.router.group_name(f.group), "XA recovery: branch {action} failed: {e}");
                if !matches!(e, sextant_backend::BackendError::Server { .. }) {
                    if let Some(l) = leases.get_mut(f.group).and_then(Option::take) {
                        l.discard();
                    }
                }
                out.unresolved += 1;
                remaining.push(f.clone());
                rows.push(in_doubt(sh, &leases, f, action, Some(e.to_string()), now));
            }
        }
    }
    if all_asked {
        let pending = coord.log.pending();
        for g in recover::finished(
            pending.iter().map(|d| d.gtrid.as_str()),
            &remaining,
            &flying,
        ) {
            coord.log.finished(&g);
        }
    }
    coord.set_in_doubt(rows);
    out
}

fn in_doubt(
    sh: &Sharding,
    leases: &[Option<Lease>],
    f: &Found,
    action: &'static str,
    error: Option<String>,
    now: u64,
) -> InDoubt {
    InDoubt {
        gtrid: f.xid.gtrid_text(),
        bqual: f.xid.bqual_text(),
        group: f.group,
        server: leases.get(f.group).and_then(Option::as_ref).map_or_else(
            || sh.router.group_name(f.group).to_string(),
            |l| l.server.addr.to_string(),
        ),
        action,
        error,
        seen_ms: now,
    }
}

/// A connection to the group's primary and the branches prepared there.
async fn prepared_in(
    rt: &Runtime,
    g: &Arc<Group>,
) -> Result<(Lease, Vec<sextant_xa::Xid>), String> {
    let Some(primary) = g.primary() else {
        return Err("no primary is known".into());
    };
    let (user, password) = account(rt).ok_or("no user is configured")?;
    let conn = primary
        .acquire(&user, &password, Flavor::new(0, DEFAULT_CHARSET))
        .await
        .map_err(|e| e.to_string())?;
    let mut lease = Lease::new(primary.clone(), conn);
    let rows = match lease.conn_mut().query_internal("XA RECOVER").await {
        Ok(r) => r,
        Err(e) => {
            lease.discard();
            return Err(e.to_string());
        }
    };
    let xids = rows
        .iter()
        .filter_map(|r| match r.as_slice() {
            [Some(f), Some(gl), Some(bl), Some(data)] => {
                sextant_xa::Xid::from_recover_row(f, gl, bl, data.as_bytes())
            }
            _ => None,
        })
        .collect();
    Ok((lease, xids))
}

/// The server account recovery uses: the first user's.
fn account(rt: &Runtime) -> Option<(String, String)> {
    let u = rt.config.users.first()?;
    Some((
        u.backend_user().to_string(),
        u.backend_password().to_string(),
    ))
}

/// Resolves one transaction by hand (the admin port's `XA COMMIT` /
/// `XA ROLLBACK`): every prepared branch of `gtrid` on every group.
/// Returns how many branches it resolved.
pub async fn resolve(shared: &Shared, gtrid: &str, commit: bool) -> Result<usize, String> {
    let coord = shared
        .xa
        .as_ref()
        .ok_or("this sextant has no sharded layout, so no distributed transactions")?;
    if coord.in_flight(gtrid) {
        return Err(format!(
            "{gtrid} is being carried out by a session of this sextant; it resolves itself"
        ));
    }
    let ours = gtrid.starts_with(coord.owner());
    if !commit && ours && coord.log.committed(gtrid) {
        return Err(format!(
            "the decision log says {gtrid} commits: some branches may have committed already, so rolling back the others would half-commit it"
        ));
    }
    let rt = shared.runtime.load_full();
    let sh = rt.sharding.clone().ok_or("no sharded layout")?;
    if commit && ours && !coord.log.committed(gtrid) {
        // Logged first, so that recovery does not roll back a branch this
        // command has not reached yet.
        coord
            .log
            .commit(gtrid, 0)
            .await
            .map_err(|_| "the decision log is closed".to_string())?
            .map_err(|e| e.to_string())?;
    }
    let mut n = 0;
    let verb = if commit { "COMMIT" } else { "ROLLBACK" };
    for g in sh.groups.iter() {
        let (mut lease, xids) = prepared_in(&rt, g)
            .await
            .map_err(|e| format!("group {}: {e}", g.name))?;
        for x in xids.iter().filter(|x| x.gtrid == gtrid.as_bytes()) {
            lease
                .conn_mut()
                .exec_internal(&format!("XA {verb} {}", x.sql()))
                .await
                .map_err(|e| format!("group {}: {e}", g.name))?;
            n += 1;
        }
    }
    if commit && ours {
        coord.log.finished(gtrid);
    }
    coord.wake.notify_one();
    Ok(n)
}
