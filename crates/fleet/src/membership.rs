//! This instance's record under its lease, renewed every third of the
//! lease's time to live, and the fleet's records read back at each renewal.

use crate::{now_ms, Fleet, Member, Report};
use etcd_client::{
    Compare, CompareOp, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp,
    TxnOpResponse,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) async fn run(fleet: Arc<Fleet>, report: Arc<dyn Fn() -> Report + Send + Sync>) {
    let ttl = fleet.settings.lease_ttl;
    let tick = (ttl / 3).min(Duration::from_secs(1));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let mut keeper: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let mut last: Option<(u64, Instant)> = None;
    loop {
        if fleet.left.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        // The record says which slot the instance's connection ids carry:
        // it is claimed before the first record is written.
        if fleet.slot() == 0 {
            if let Err(e) = fleet.claim_slot().await {
                tracing::debug!("no connection-id slot yet: {e}");
                tokio::time::sleep(tick).await;
                continue;
            }
        }
        let r = report();
        let rate = match last {
            Some((n, at)) if at.elapsed() > Duration::ZERO => {
                r.statements.saturating_sub(n) as f64 / at.elapsed().as_secs_f64()
            }
            _ => 0.0,
        };
        last = Some((r.statements, Instant::now()));
        let (applied_revision, refused, config_revision, needs_restart) = {
            let st = fleet.state.lock();
            (
                st.applied_revision,
                st.refused.clone(),
                st.config_revision,
                st.needs_restart.clone(),
            )
        };
        let me = Member {
            id: fleet.settings.id.clone(),
            slot: fleet.slot(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            host: host.clone(),
            pid: std::process::id(),
            listen: r.listen,
            admin: r.admin,
            http: r.http,
            started_ms: fleet.started_ms,
            applied_revision,
            refused,
            sessions: r.sessions,
            statements_per_s: (rate * 10.0).round() / 10.0,
            config_revision,
            needs_restart,
            updated_ms: now_ms(),
        };
        // (Checked again: leave() may have revoked the lease meanwhile.)
        if fleet.left.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Err(e) = renew(&fleet, &mut keeper, &me).await {
            keeper = None;
            fleet.unreachable(e);
        }
        tokio::time::sleep(tick).await;
    }
}

async fn renew(
    fleet: &Fleet,
    keeper: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    me: &Member,
) -> Result<(), String> {
    let mut c = fleet.client().await.map_err(|e| e.to_string())?;
    let sent = Instant::now();
    let lease = *fleet.lease.lock();
    let lease = match lease {
        Some(id) => {
            // A lease etcd no longer has (it expired while etcd or this
            // instance was away) is replaced.
            let alive = match keep_alive(&mut c, keeper, id).await {
                Ok(alive) => alive,
                // Expired while this instance was away from etcd (and etcd
                // was not): a new lease, below.
                Err(e) if lease_gone(&e) => None,
                Err(e) => return Err(e.to_string()),
            };
            if alive == Some(true) {
                id
            } else {
                *keeper = None;
                *fleet.lease.lock() = None;
                fleet.lease_id(&mut c).await.map_err(|e| e.to_string())?
            }
        }
        None => fleet.lease_id(&mut c).await.map_err(|e| e.to_string())?,
    };
    if me.slot != 0
        && !fleet
            .hold_slot(&mut c, me.slot, lease)
            .await
            .map_err(|e| e.to_string())?
    {
        // Its lease expired while etcd was away and another instance took
        // the slot: ids may now collide in KILLs across the fleet.
        tracing::error!(
            slot = me.slot,
            "this instance's connection-id slot was taken by another instance while it was away from etcd; restart it to claim a new one"
        );
    }
    let record = serde_json::to_string(me).map_err(|e| e.to_string())?;
    let key = fleet.keys.member(&me.id);
    let sealed = fleet.settings.seal.seal(&key, &record);
    // The record claims the id: it is written only where it is this
    // lease's or absent, never over another live process's (one that
    // holds the same id: a copied state directory, a second start).
    let put = || {
        TxnOp::put(
            key.as_str(),
            sealed.as_str(),
            Some(PutOptions::new().with_lease(lease)),
        )
    };
    let ours = Txn::new()
        .when([Compare::lease(key.as_str(), CompareOp::Equal, lease)])
        .and_then([put()]);
    let mut held = c.txn(ours).await.map_err(|e| e.to_string())?.succeeded();
    if !held {
        let create = Txn::new()
            .when([Compare::version(key.as_str(), CompareOp::Equal, 0)])
            .and_then([put()])
            .or_else([TxnOp::get(key.as_str(), None)]);
        let resp = c.txn(create).await.map_err(|e| e.to_string())?;
        held = resp.succeeded();
        if !held {
            let holder = resp
                .op_responses()
                .into_iter()
                .find_map(|r| match r {
                    TxnOpResponse::Get(g) => g.kvs().first().map(|kv| {
                        let m = fleet
                            .settings
                            .seal
                            .open(&key, kv.value())
                            .and_then(|v| serde_json::from_str::<Member>(v).ok());
                        match m {
                            Some(m) => format!("host {}, pid {}", m.host, m.pid),
                            None => "a record not signed with the fleet's secret".to_string(),
                        }
                    }),
                    _ => None,
                })
                .unwrap_or_else(|| "another process".into());
            fleet.id_conflict(&holder);
        }
    }
    if held {
        fleet.id_held();
    }
    // The lease lives (renewed, or granted) as of `sent` at the latest,
    // and the record is there: others see this instance.
    fleet.lease_confirmed(sent);
    let asked = Instant::now();
    let resp = c
        .get(fleet.keys.members(), Some(GetOptions::new().with_prefix()))
        .await
        .map_err(|e| e.to_string())?;
    // Only records a member sealed, each under a lease and under its own
    // id's key.
    let mut members: Vec<Member> = Vec::new();
    for kv in resp.kvs() {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let m = fleet
            .settings
            .seal
            .open(&key, kv.value())
            .filter(|_| kv.lease() != 0)
            .and_then(|v| serde_json::from_str::<Member>(v).ok())
            .filter(|m| key == fleet.keys.member(&m.id));
        fleet.note_ignored(&key, m.is_none());
        members.extend(m);
    }
    members.sort_by(|a, b| a.id.cmp(&b.id));
    fleet.state.lock().members = members;
    fleet.members_asked(asked);
    fleet.reachable();
    Ok(())
}

/// One keep-alive of lease `id` (its stream opened first if need be):
/// whether etcd says it lives.
async fn keep_alive(
    c: &mut etcd_client::Client,
    keeper: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    id: i64,
) -> Result<Option<bool>, etcd_client::Error> {
    if keeper.is_none() {
        *keeper = Some(c.lease_keep_alive(id).await?);
    }
    let Some((k, s)) = keeper.as_mut() else {
        return Ok(None);
    };
    k.keep_alive().await?;
    Ok(s.message().await?.map(|r| r.ttl() > 0))
}

/// Whether etcd answered that the lease does not exist (any more).
fn lease_gone(e: &etcd_client::Error) -> bool {
    match e {
        // gRPC NOT_FOUND (5).
        etcd_client::Error::GRpcStatus(s) => s.code() as i32 == 5,
        other => other.to_string().contains("lease not found"),
    }
}
