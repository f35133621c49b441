//! Recovery of distributed transactions: at start, every
//! `recover_interval_ms`, and at once when a session could not finish a
//! commit, each group's primary is asked for its prepared branches
//! (`XA RECOVER`). This instance's branches, and in a fleet those of
//! instances known gone (their lease expired), are settled by the
//! decision row in the transaction's decider group: committed when it
//! says commit, rolled back otherwise, a rollback row written first so
//! that an owner still deciding cannot commit after
//! (`sextant_xa::decision`; `sextant_xa::recover::plan` decides who acts).
//! Branches from before decisions were kept with the data follow the
//! local decision log. A primary that failed over is asked the same way:
//! MariaDB replicates prepared branches and the decision rows, so the new
//! primary holds both.
//!
//! The admin port's `SHOW XA` reads what the last pass left unresolved,
//! and `XA COMMIT | ROLLBACK '<gtrid>'` there resolves one by hand
//! ([`resolve`]).

use crate::frontend::DEFAULT_CHARSET;
use crate::runtime::{Runtime, Sharding};
use crate::shared::Shared;
use sextant_backend::BackendError;
use sextant_backend::{Flavor, Group, Lease};
use sextant_xa::decision::{self, Verdict};
use sextant_xa::recover::{self, Action, Context, Found};
use sextant_xa::{Coordinator, InDoubt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub async fn run(shared: Arc<Shared>, coord: Arc<Coordinator>, mut claim: Claim) {
    // The monitor needs a moment to find each group's primary.
    tokio::time::sleep(Duration::from_millis(200)).await;
    loop {
        let rt = shared.runtime.load_full();
        if let Some(sh) = rt.sharding.clone() {
            // Another live sextant with this id would find this instance's
            // branches its own, and this one its: neither may resolve any,
            // and this one decides no commit until the id is its own.
            let held = claim.hold(&rt, &sh, 0).await;
            let was = coord.id_claimed();
            coord.set_id_claimed(matches!(held, Held::Yes));
            match held {
                Held::Yes if !was => {
                    tracing::info!(instance = %coord.instance, "this instance's id is claimed on a majority of the groups: transactions over several groups are taken")
                }
                Held::Yes => {}
                Held::Other(group) => {
                    tracing::error!(instance = %coord.instance, group = %group, "XA recovery stopped and transactions over several groups refused: another sextant holds this instance id ({}); give each instance its own [xa] instance_id", claim.name);
                }
                Held::Unknown(why) => {
                    tracing::warn!(instance = %coord.instance, "this instance's id is not claimed yet ({why}): XA recovery waits, and transactions over several groups are refused");
                }
            }
            if !coord.id_claimed() {
                drop(rt);
                tokio::time::sleep(coord.recover_interval.max(Duration::from_secs(1))).await;
                continue;
            }
            let fleet = shared.fleet.get().cloned();
            let p = pass(&rt, &sh, &coord, fleet.as_deref()).await;
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
/// servers: a named lock on every group's primary, each held by a
/// connection of its own for as long as the process runs (a server frees
/// it when the process ends, however it ends). The id is claimed once a
/// majority of the groups' locks are held at one time: two processes with
/// one id cannot both have a majority, whichever primaries either could
/// reach when it started. Once claimed it stays claimed while no other
/// process holds any of the locks (a group's primary may be away for a
/// while; its lock is taken again when it is back).
pub struct Claim {
    pub name: String,
    leases: Vec<Option<Lease>>,
    claimed: bool,
}

/// Whether the claim is held.
#[derive(Debug)]
pub enum Held {
    Yes,
    /// Another connection (another sextant) holds the lock in this group.
    Other(String),
    /// Not on a majority of the groups: why.
    Unknown(String),
}

/// One group's lock.
enum One {
    Yes,
    Other,
    Unknown(String),
}

impl Claim {
    pub fn new(instance: &str) -> Claim {
        Claim {
            name: format!("sextant-xa:{instance}"),
            leases: Vec::new(),
            claimed: false,
        }
    }

    /// Holds the locks, waiting up to `wait_s` seconds for each (a
    /// crashed predecessor's connection may take a moment to be noticed
    /// gone).
    pub async fn hold(&mut self, rt: &Runtime, sh: &Sharding, wait_s: u32) -> Held {
        let n = sh.groups.len();
        self.leases.resize_with(n, || None);
        let (mut held, mut other, mut why) = (0, None, Vec::new());
        for (i, g) in sh.groups.iter().enumerate() {
            match self.hold_one(rt, i, g, wait_s).await {
                One::Yes => held += 1,
                One::Other => {
                    other.get_or_insert_with(|| g.name.to_string());
                }
                One::Unknown(e) => why.push(format!("group {}: {e}", g.name)),
            }
        }
        if let Some(group) = other {
            // Two processes that split the locks between them would wait
            // for each other forever: the one without a majority lets go.
            if held * 2 <= n {
                for l in self.leases.iter_mut().filter_map(Option::take) {
                    l.discard();
                }
            }
            self.claimed = false;
            return Held::Other(group);
        }
        // Once claimed, primaries that are away (their locks gone with
        // them) do not unclaim it: no other process holds any lock.
        if held * 2 > n || self.claimed {
            self.claimed = true;
            return Held::Yes;
        }
        Held::Unknown(format!(
            "held on {held} of {n} groups' primaries, and a majority is needed ({})",
            why.join("; ")
        ))
    }

    async fn hold_one(
        &mut self,
        rt: &Runtime,
        i: usize,
        g: &sextant_backend::Group,
        wait_s: u32,
    ) -> One {
        let Some(primary) = g.primary() else {
            return One::Unknown("no primary is known".into());
        };
        if let Some(l) = self.leases[i].as_mut() {
            let q = format!("SELECT IS_USED_LOCK('{}') = CONNECTION_ID()", self.name);
            let same = Arc::ptr_eq(&l.server, primary);
            match l.conn_mut().query_internal(&q).await {
                Ok(rows) if same && first(&rows) == Some("1") => return One::Yes,
                _ => {
                    if let Some(l) = self.leases[i].take() {
                        l.discard();
                    }
                }
            }
        }
        let mut lease = match recovery_lease(rt, primary).await {
            Ok(l) => l,
            Err(e) => return One::Unknown(e),
        };
        let q = format!("SELECT GET_LOCK('{}', {wait_s})", self.name);
        let got = lease.conn_mut().query_internal(&q).await;
        match got.as_ref().map(|r| first(r)) {
            Ok(Some("1")) => {
                self.leases[i] = Some(lease);
                One::Yes
            }
            Ok(Some("0")) => {
                lease.discard();
                One::Other
            }
            _ => {
                lease.discard();
                One::Unknown(match got {
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
        for l in self.leases.iter_mut().filter_map(Option::take) {
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

/// One recovery pass over every group. `fleet`: the fleet this instance
/// is part of, which says which instances are gone.
pub async fn pass(
    rt: &Runtime,
    sh: &Sharding,
    coord: &Arc<Coordinator>,
    fleet: Option<&sextant_fleet::Fleet>,
) -> Pass {
    // Before any group is asked: a branch XA RECOVER lists may belong to a
    // session that finishes it before this pass decides.
    let watch = coord.watch();
    let asked = std::time::Instant::now();
    let mut leases: Vec<Option<Lease>> = Vec::with_capacity(sh.groups.len());
    let mut found = Vec::new();
    let mut all_asked = true;
    let mut rows = Vec::new();
    for (i, g) in sh.groups.iter().enumerate() {
        match prepared_in(rt, g).await {
            Ok((mut lease, xids)) => {
                found.extend(xids.into_iter().map(|xid| Found { group: i, xid }));
                let addr = lease.server.addr.to_string();
                if !coord.has_table(&addr) {
                    match ensure_table(&mut lease).await {
                        Ok(()) => coord.table_made(&addr),
                        Err(e) => {
                            tracing::warn!(group = %g.name, "cannot create {}: {e}; distributed commits deciding in this group fail until it exists", decision::TABLE)
                        }
                    }
                }
                leases.push(Some(lease));
            }
            Err(e) => {
                all_asked = false;
                tracing::warn!(group = %g.name, "XA recovery cannot ask the group's primary: {e}");
                leases.push(None);
            }
        }
    }
    let names: Vec<&str> = (0..sh.groups.len())
        .map(|i| sh.router.group_name(i))
        .collect();
    let committed = |g: &str| coord.log.committed(g);
    let flying = |g: &str| watch.live(g);
    // An owner is gone for a branch once a member list asked for after
    // the branch was first seen has no record of it.
    let first_seen = coord.first_seen(found.iter().map(|f| f.xid.gtrid.as_slice()), asked);
    let gone = |g: &str| {
        let (Some(f), Some(o), Some(t)) = (
            fleet,
            sextant_xa::xid::owner_of(g.as_bytes()),
            first_seen.get(g.as_bytes()),
        ) else {
            return false;
        };
        f.is_gone(o, *t)
    };
    let cx = Context {
        owner: coord.owner(),
        groups: &names,
        committed: &committed,
        in_flight: &flying,
        gone: &gone,
    };
    let actions = recover::plan(&found, &cx);
    let mut out = Pass::default();
    let mut remaining = Vec::new();
    let now = sextant_xa::log::now_ms();
    // Each settled transaction's verdict, read (or written) once.
    let mut verdicts: HashMap<Vec<u8>, Result<Verdict, String>> = HashMap::new();
    // Transactions settled here, by decider: their rows go once no branch
    // of them is left.
    let mut settled: HashMap<Vec<u8>, usize> = HashMap::new();
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
            Action::Undecidable(f) => {
                remaining.push(f.clone());
                rows.push(in_doubt(
                    sh,
                    &leases,
                    f,
                    "decide by hand",
                    Some("its decision is in a group no longer configured".into()),
                    now,
                ));
                continue;
            }
            Action::Settle { found: f, decider } => {
                let v = match verdicts.get(&f.xid.gtrid) {
                    Some(v) => v.clone(),
                    None => {
                        let v = match leases.get_mut(*decider).and_then(Option::as_mut) {
                            Some(l) => settle(l, &f.xid.gtrid).await,
                            None => Err(format!(
                                "its decider group {} cannot be asked",
                                sh.router.group_name(*decider)
                            )),
                        };
                        verdicts.insert(f.xid.gtrid.clone(), v.clone());
                        v
                    }
                };
                match v {
                    Ok(Verdict::Commit) => {
                        settled.insert(f.xid.gtrid.clone(), *decider);
                        (f, "COMMIT")
                    }
                    Ok(Verdict::Rollback) => {
                        settled.insert(f.xid.gtrid.clone(), *decider);
                        (f, "ROLLBACK")
                    }
                    Err(why) => {
                        out.unresolved += 1;
                        remaining.push(f.clone());
                        rows.push(in_doubt(sh, &leases, f, "settle", Some(why), now));
                        continue;
                    }
                }
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
                if !matches!(e, BackendError::Server { .. }) {
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
        for (gtrid, decider) in settled {
            if !remaining.iter().any(|f| f.xid.gtrid == gtrid) {
                coord.settled(decider, &String::from_utf8_lossy(&gtrid));
            }
        }
        sweep_old_rows(&mut leases, &found, coord, &flying).await;
    }
    remove_settled_rows(&mut leases, coord).await;
    // A connection that ran a statement of settle()'s with a session
    // setting is not given back to the pool.
    for l in leases.into_iter().flatten() {
        l.discard();
    }
    coord.set_in_doubt(rows);
    out
}

/// Makes sure `server` (a group's primary) has the decision table, with
/// the recovery account (the first user's), once per server and process:
/// a session about to record its first decision there calls it, so that
/// a commit right after start does not wait for recovery's first pass.
pub async fn ensure_decision_table(
    rt: &Runtime,
    server: &Arc<sextant_backend::Server>,
    coord: &Coordinator,
) -> Result<(), String> {
    let addr = server.addr.to_string();
    if coord.has_table(&addr) {
        return Ok(());
    }
    let mut lease = recovery_lease(rt, server).await?;
    let r = ensure_table(&mut lease).await;
    lease.discard();
    r.map_err(|e| e.to_string())?;
    coord.table_made(&addr);
    Ok(())
}

/// A connection to `server` with sextant's own account for transactions
/// (`[xa] user`, see `Config::xa_account`): recovery's, and the one a
/// session records its decision with.
pub(crate) async fn recovery_lease(
    rt: &Runtime,
    server: &Arc<sextant_backend::Server>,
) -> Result<Lease, String> {
    let (user, password) = account(rt).ok_or("no user is configured")?;
    let conn = server
        .acquire(&user, &password, Flavor::new(0, DEFAULT_CHARSET))
        .await
        .map_err(|e| e.to_string())?;
    Ok(Lease::new(server.clone(), conn))
}

/// Creates the decision table on a group's primary (once per server and
/// process: the statements are replicated even when it exists).
async fn ensure_table(l: &mut Lease) -> Result<(), BackendError> {
    for sql in decision::CREATE {
        l.conn_mut().exec_internal(sql).await?;
    }
    Ok(())
}

/// The verdict of the transaction `gtrid` on its decider's primary: its
/// decision row, or, when it has none, a rollback row written now. The
/// primary key makes that insert race the owner's own: if the owner's row
/// is there uncommitted (it is deciding right now), the insert waits for
/// it, and fails with a duplicate key once it commits. Err: it cannot be
/// told now (the owner is still deciding, or the server failed).
async fn settle(l: &mut Lease, gtrid: &[u8]) -> Result<Verdict, String> {
    // Not long behind an owner that is deciding: the next pass asks again.
    l.conn_mut()
        .exec_internal("SET SESSION innodb_lock_wait_timeout = 2")
        .await
        .map_err(|e| e.to_string())?;
    decide(l, gtrid, Verdict::Rollback).await.map_err(|e| {
        if e.contains("1205") || e.contains("Lock wait timeout") {
            "its owner is recording its decision right now".to_string()
        } else {
            e
        }
    })
}

/// Removes the decision rows of transactions that finished.
async fn remove_settled_rows(leases: &mut [Option<Lease>], coord: &Coordinator) {
    let mut by_group: HashMap<usize, Vec<Vec<u8>>> = HashMap::new();
    for (g, gtrid) in coord.take_settled() {
        by_group.entry(g).or_default().push(gtrid);
    }
    for (g, gtrids) in by_group {
        let Some(l) = leases.get_mut(g).and_then(Option::as_mut) else {
            // Not reachable now: the sweep of old rows removes them later.
            continue;
        };
        for chunk in gtrids.chunks(500) {
            if let Some(sql) = decision::delete_sql(chunk.iter().map(Vec::as_slice)) {
                if let Err(e) = l.conn_mut().exec_internal(&sql).await {
                    tracing::debug!("removing settled decision rows: {e}");
                }
            }
        }
    }
}

/// Removes decision rows older than `decision::KEEP_S` whose transaction
/// has no branch prepared anywhere (every group was asked) and no session
/// of this instance carries out: what a gone instance left.
async fn sweep_old_rows(
    leases: &mut [Option<Lease>],
    found: &[Found],
    coord: &Coordinator,
    live: &(dyn Fn(&str) -> bool + Sync),
) {
    for l in leases.iter_mut().flatten() {
        let Ok(rows) = l
            .conn_mut()
            .query_internal(&decision::old_rows_sql(1000))
            .await
        else {
            continue;
        };
        let old: Vec<Vec<u8>> = rows
            .iter()
            .filter_map(|r| decision::unhex(r.first()?.as_deref()?))
            .filter(|g| {
                !found.iter().any(|f| f.xid.gtrid == *g)
                    && !live(&String::from_utf8_lossy(g))
                    && !coord.in_flight(&String::from_utf8_lossy(g))
            })
            .collect();
        if let Some(sql) = decision::delete_sql(old.iter().map(Vec::as_slice)) {
            if let Err(e) = l.conn_mut().exec_internal(&sql).await {
                tracing::debug!("removing old decision rows: {e}");
            }
        }
    }
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
    let mut lease = recovery_lease(rt, primary).await?;
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
    rt.config.xa_account()
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
    let rt = shared.runtime.load_full();
    let sh = rt.sharding.clone().ok_or("no sharded layout")?;
    let mut found: Vec<(Lease, Vec<sextant_xa::Xid>)> = Vec::new();
    for g in sh.groups.iter() {
        let (lease, xids) = prepared_in(&rt, g)
            .await
            .map_err(|e| format!("group {}: {e}", g.name))?;
        let mine = xids
            .into_iter()
            .filter(|x| x.gtrid == gtrid.as_bytes())
            .collect();
        found.push((lease, mine));
    }
    let names: Vec<&str> = (0..sh.groups.len())
        .map(|i| sh.router.group_name(i))
        .collect();
    let decider = found.iter().enumerate().find_map(|(i, (_, xids))| {
        xids.iter().find_map(|x| {
            match x.decider(
                sextant_xa::xid::GroupRef {
                    name: names[i],
                    index: i,
                },
                &names,
            ) {
                sextant_xa::xid::Decider::Group(d) => Some(d),
                _ => None,
            }
        })
    });
    let want = if commit {
        Verdict::Commit
    } else {
        Verdict::Rollback
    };
    let ours = gtrid.starts_with(coord.owner());
    if let Some(d) = decider {
        // The decision row rules: written now if there is none, and a
        // command against it is refused.
        let l = &mut found[d].0;
        let v = decide(l, gtrid.as_bytes(), want).await?;
        if v != want {
            return Err(format!(
                "the decision row of {gtrid} in group {} says {}: doing otherwise would half-commit it",
                names[d],
                if v == Verdict::Commit { "commit" } else { "roll back" }
            ));
        }
    } else {
        if !commit && ours && coord.log.committed(gtrid) {
            return Err(format!(
                "the decision log says {gtrid} commits: some branches may have committed already, so rolling back the others would half-commit it"
            ));
        }
        if commit && ours && !coord.log.committed(gtrid) {
            // Logged first, so that recovery does not roll back a branch
            // this command has not reached yet.
            coord
                .log
                .commit(gtrid, 0)
                .await
                .map_err(|_| "the decision log is closed".to_string())?
                .map_err(|e| e.to_string())?;
        }
    }
    let mut n = 0;
    let verb = if commit { "COMMIT" } else { "ROLLBACK" };
    for (i, (lease, xids)) in found.iter_mut().enumerate() {
        for x in xids.iter() {
            lease
                .conn_mut()
                .exec_internal(&format!("XA {verb} {}", x.sql()))
                .await
                .map_err(|e| format!("group {}: {e}", names[i]))?;
            n += 1;
        }
    }
    if decider.is_none() && commit && ours {
        coord.log.finished(gtrid);
    }
    if let Some(d) = decider {
        coord.settled(d, gtrid);
    }
    for (l, _) in found {
        l.discard();
    }
    coord.wake.notify_one();
    Ok(n)
}

/// The decision of `gtrid` on its decider's primary, `want` written when
/// there is none yet (a duplicate key: another wrote one first).
async fn decide(l: &mut Lease, gtrid: &[u8], want: Verdict) -> Result<Verdict, String> {
    let conn = l.conn_mut();
    let read = decision::select_sql(gtrid);
    let rows = conn
        .query_internal(&read)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(v) = decision::verdict_of(&rows) {
        return Ok(v);
    }
    let owner = sextant_xa::xid::owner_of(gtrid).unwrap_or("");
    match conn
        .exec_internal(&decision::insert_sql(gtrid, want, owner))
        .await
    {
        Ok(()) => Ok(want),
        Err(BackendError::Server { code: 1062, .. }) => {
            let rows = conn
                .query_internal(&read)
                .await
                .map_err(|e| e.to_string())?;
            decision::verdict_of(&rows).ok_or_else(|| "its decision row could not be read".into())
        }
        Err(e) => Err(e.to_string()),
    }
}
