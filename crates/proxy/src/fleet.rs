//! This instance as a member of a fleet (`[cluster]`): joining it, applying
//! the fleet's intents as they arrive (a server's admin state, a routing
//! key), and the admin port's changes written as intents for every
//! instance. Without `[cluster]` none of this runs and admin changes apply
//! to this instance alone, as they always did.

use crate::errors::SessionError;
use crate::shared::Shared;
use sextant_fleet::{Change, Fleet, FleetError, Intent, PushedConfig, Report, Settings};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long an admin change waits for this instance's own watch to bring
/// it back applied before answering.
const APPLY_WAIT: Duration = Duration::from_secs(2);

/// Joins the fleet `[cluster]` names, if any; intents are applied from
/// here on, by a task of their own.
pub(crate) async fn join(shared: &Arc<Shared>) -> Result<(), crate::errors::StartError> {
    let rt = shared.runtime();
    let Some(cluster) = rt.config.cluster.clone() else {
        return Ok(());
    };
    let id = sextant_fleet::id::load_or_make(
        cluster.instance_id.as_deref(),
        std::path::Path::new(&cluster.state_dir),
    )
    .map_err(|e| crate::errors::StartError::Fleet(e.to_string()))?;
    let listen = rt.config.proxy.listen.to_string();
    let admin = cluster
        .advertise
        .clone()
        .or_else(|| rt.config.admin.as_ref().map(|a| a.listen.to_string()))
        .unwrap_or_default();
    let http = rt
        .config
        .admin
        .as_ref()
        .and_then(|a| a.http_listen.as_ref())
        .map(|a| a.to_string());
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let report = Arc::new(move || {
        let Some(s) = weak.upgrade() else {
            return Report::default();
        };
        Report {
            listen: listen.clone(),
            admin: admin.clone(),
            http: http.clone(),
            sessions: s.counters.client_connections.load(Ordering::Relaxed) as u64,
            statements: s.counters.queries.load(Ordering::Relaxed),
        }
    });
    tracing::info!(instance = %id, fleet = %cluster.name, etcd = %cluster.etcd.join(","), "joining the fleet");
    let (fleet, changes) = Fleet::start(Settings::new(&cluster, id), report);
    // No client before the id is this instance's alone in the fleet: a
    // crashed predecessor's record goes when its lease expires.
    let within = Duration::from_millis(cluster.lease_ttl_ms) + Duration::from_secs(7);
    fleet
        .claim_id(within)
        .await
        .map_err(|e| crate::errors::StartError::Fleet(e.to_string()))?;
    // The slot goes into every connection id: the first clients wait for
    // it up to 3 s. Without etcd, sessions opened before it is claimed
    // carry none (a KILL from another instance cannot find them).
    let slotted = {
        let (shared, fleet) = (shared.clone(), fleet.clone());
        tokio::spawn(async move {
            while fleet.slot() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let slot = fleet.slot();
            shared
                .conn_id_prefix
                .store((slot as u32) << 24, Ordering::Relaxed);
            tracing::info!(slot, "connection ids start with this instance's slot");
        })
    };
    {
        // A user's max_connections is shared out over the live instances:
        // recounted as membership changes (kept while etcd is away).
        let (shared, fleet) = (Arc::downgrade(shared), fleet.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                if !fleet.store().reachable {
                    continue;
                }
                let n = fleet.members().len().max(1);
                if shared.fleet_instances.swap(n, Ordering::Relaxed) != n {
                    tracing::info!(instances = n, "the fleet's live instances: each user's max_connections is shared out over them");
                }
            }
        });
    }
    let _ = shared
        .monitors
        .coordinator
        .set(Arc::new(crate::coordinator::FleetCoordinator(
            fleet.clone(),
        )));
    let _ = shared.fleet.set(fleet);
    if tokio::time::timeout(Duration::from_secs(3), slotted)
        .await
        .is_err()
    {
        tracing::warn!("no connection-id slot yet (etcd did not answer within 3 s): until there is one, KILLs from other instances will not find this one's sessions");
    }
    tokio::spawn(apply_changes(shared.clone(), changes));
    Ok(())
}

/// Applies the fleet's intents in the order etcd gave them.
async fn apply_changes(
    shared: Arc<Shared>,
    mut changes: tokio::sync::mpsc::UnboundedReceiver<Change>,
) {
    while let Some(c) = changes.recv().await {
        let Some(fleet) = shared.fleet.get() else {
            return;
        };
        let r = apply(&shared, &c).await;
        match &r {
            Ok(what) => tracing::info!(revision = c.revision, "fleet intent applied: {what}"),
            Err(why) => {
                tracing::warn!(
                    revision = c.revision,
                    "fleet intent {} refused: {why}",
                    c.intent
                )
            }
        }
        fleet.done(
            c.revision,
            r.err()
                .map(|e| format!("{} (revision {}): {e}", c.intent, c.revision)),
        );
    }
}

async fn apply(shared: &Shared, c: &Change) -> Result<String, String> {
    match &c.intent {
        Intent::Backend(addr) => {
            let state = c.value.as_deref().unwrap_or("online");
            if !["online", "maintenance", "offline"].contains(&state) {
                return Err(format!(
                    "state {state:?} is not online, maintenance or offline"
                ));
            }
            match sextant_admin::commands::maintenance::apply(&shared.runtime().pool, addr, state) {
                true => Ok(format!("backend {addr} {state}")),
                false => Err(format!("no server {addr} in this instance's config")),
            }
        }
        Intent::Routing(key) => match &c.value {
            Some(v) => crate::reload::set_routing(shared, key, v).await,
            // Nothing removes a routing intent today; the file's value
            // comes back at the next reload.
            None => Ok(format!("routing.{key}: intent removed")),
        },
        Intent::Config => {
            let new = match &c.value {
                Some(v) => Some((PushedConfig::decode(v)?.config, c.revision)),
                None => None,
            };
            let old = std::mem::replace(&mut *shared.fleet_config.lock(), new);
            match crate::reload::reload(shared).await {
                Ok(r) => Ok(format!("the fleet's config, revision {}: {r}", c.revision)),
                Err(e) => {
                    *shared.fleet_config.lock() = old;
                    Err(e)
                }
            }
        }
    }
}

/// `PUSH CONFIG`: the file (this instance's own by default), validated as
/// check-config does, stored for the fleet if the fleet's config is still
/// at `base` (default: the revision this instance saw).
pub(crate) async fn push(
    shared: &Shared,
    path: Option<String>,
    base: Option<i64>,
) -> Result<String, SessionError> {
    let fleet = shared.fleet.get().ok_or_else(|| {
        SessionError::PushRefused("this instance is not part of a fleet: [cluster] is not set (RELOAD CONFIG applies a file here)".into())
    })?;
    let path = match path {
        Some(p) => std::path::PathBuf::from(p),
        None => shared.config_path.clone().ok_or_else(|| {
            SessionError::PushRefused(
                "sextant was started without a config file: name one (FROM '<file>')".into(),
            )
        })?,
    };
    // Off the worker threads, and bounded in time: the file (and the
    // password files it names) may be anywhere the admin login points.
    let shown = path.display().to_string();
    let read = tokio::time::timeout(
        PUSH_READ_TIMEOUT,
        tokio::task::spawn_blocking(move || read_valid(&path)),
    )
    .await;
    let text = match read {
        Ok(Ok(r)) => r.map_err(SessionError::PushRefused)?,
        Ok(Err(e)) => return Err(SessionError::PushRefused(format!("{shown}: {e}"))),
        Err(_) => {
            return Err(SessionError::PushRefused(format!(
                "{shown}: not read within {} s",
                PUSH_READ_TIMEOUT.as_secs()
            )))
        }
    };
    let path = std::path::PathBuf::from(&shown);
    let base = base.unwrap_or_else(|| fleet.intent(&Intent::Config).map_or(0, |(_, r)| r));
    let rev = fleet
        .push_config(&PushedConfig::new(text), base)
        .await
        .map_err(fleet_error)?;
    let here = fleet.wait_applied(rev, APPLY_WAIT).await;
    Ok(fleet_info(
        fleet,
        &format!("config {}", path.display()),
        rev,
        here,
    ))
}

/// How long PUSH CONFIG waits for its file (and the secrets it names).
const PUSH_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A config file's text if it is valid, else check-config's explanation
/// (which names file, line and key, never the file's content). Read once:
/// what is validated is what is pushed.
fn read_valid(path: &std::path::Path) -> Result<String, String> {
    use sextant_config::files::{read_bounded, MAX_CONFIG_BYTES};
    let shown = path.display().to_string();
    let text = read_bounded(path, MAX_CONFIG_BYTES).map_err(|e| format!("{shown}: {e}"))?;
    sextant_config::Config::parse(&text, &shown).map_err(|e| e.to_string())?;
    Ok(text)
}

/// The fleet a local config's `[cluster]` names, from outside (for the
/// command line).
fn outside(local: &std::path::Path) -> Result<Fleet, String> {
    let config = sextant_config::Config::load(local).map_err(|e| e.to_string())?;
    let cluster = config
        .cluster
        .ok_or_else(|| format!("{}: no [cluster] in it: which fleet?", local.display()))?;
    Ok(Fleet::outside(Settings::new(&cluster, "cli".into())))
}

/// `sextant fleet push FILE`: validates FILE as check-config does and
/// stores it as the config of the fleet `local`'s `[cluster]` names, if
/// the fleet's config is still at `base` (None: the revision FILE's first
/// line names, as `sextant fleet config` writes it; else 0, a first push).
pub async fn cli_push(
    file: &std::path::Path,
    local: &std::path::Path,
    base: Option<i64>,
) -> Result<String, String> {
    let text = read_valid(file)?;
    let base = base.or_else(|| revision_line(&text)).unwrap_or(0);
    let fleet = outside(local)?;
    let rev = fleet
        .push_config(&PushedConfig::new(text), base)
        .await
        .map_err(|e| e.to_string())?;
    Ok(format!(
        "{}: stored as the config of fleet {:?} at revision {rev} (based on {base}); SHOW FLEET shows each instance's config_revision",
        file.display(),
        fleet.name()
    ))
}

/// `sextant fleet config`: the fleet's config now, its first line naming
/// its revision (what `sextant fleet push` of an edited copy is based on).
pub async fn cli_config(local: &std::path::Path) -> Result<String, String> {
    let fleet = outside(local)?;
    match fleet.get(&Intent::Config).await.map_err(|e| e.to_string())? {
        Some((v, rev)) => {
            let p = PushedConfig::decode(&v)?;
            Ok(format!("{REVISION_LINE}{rev} (pushed by {})\n{}", p.by, p.config))
        }
        None => Err(format!(
            "fleet {:?} has no pushed config: each instance runs its own file (sextant fleet push FILE stores one)",
            fleet.name()
        )),
    }
}

const REVISION_LINE: &str = "# sextant fleet config revision ";

fn revision_line(text: &str) -> Option<i64> {
    let rest = text.lines().next()?.strip_prefix(REVISION_LINE)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// An admin change: for the whole fleet when there is one (written to
/// etcd, then applied here by the watch like everywhere else), else here.
pub(crate) async fn set_backend(
    shared: &Shared,
    addr: &str,
    state: &str,
) -> Result<String, SessionError> {
    let Some(fleet) = shared.fleet.get() else {
        sextant_admin::commands::maintenance::apply(&shared.runtime().pool, addr, state);
        return Ok(String::new());
    };
    let rev = fleet
        .set(&Intent::Backend(addr.to_string()), state, None)
        .await
        .map_err(fleet_error)?;
    let here = fleet.wait_applied(rev, APPLY_WAIT).await;
    Ok(fleet_info(
        fleet,
        &format!("backend {addr} {state}"),
        rev,
        here,
    ))
}

/// `SET <routing key> = <value>`: checked here first (a value this
/// instance refuses is not written), then as [`set_backend`].
pub(crate) async fn set_routing(
    shared: &Shared,
    key: &str,
    value: &str,
) -> Result<String, SessionError> {
    let Some(fleet) = shared.fleet.get() else {
        return crate::reload::set_routing(shared, key, value)
            .await
            .map_err(SessionError::RoutingRefused);
    };
    let canonical = sextant_config::Config::routing_key(key);
    let mut config = shared.runtime().config.clone();
    config
        .routing
        .set(key, value)
        .map_err(SessionError::RoutingRefused)?;
    config
        .recheck()
        .map_err(|e| SessionError::RoutingRefused(e.to_string()))?;
    let now = config.routing.get(&canonical).unwrap_or_default();
    let rev = fleet
        .set(&Intent::Routing(canonical.clone()), &now, None)
        .await
        .map_err(fleet_error)?;
    let here = fleet.wait_applied(rev, APPLY_WAIT).await;
    Ok(fleet_info(
        fleet,
        &format!("routing.{canonical} = {now}"),
        rev,
        here,
    ))
}

/// What the admin client is told of a change the fleet's store refused.
fn fleet_error(e: FleetError) -> SessionError {
    SessionError::Fleet(e.to_string())
}

fn fleet_info(fleet: &Fleet, what: &str, rev: i64, here: bool) -> String {
    match here {
        true => format!(
            "{what}: intent of fleet {:?} at revision {rev}, applied here; every instance applies it (SHOW FLEET shows each one's applied_revision)",
            fleet.name()
        ),
        false => format!(
            "{what}: intent of fleet {:?} at revision {rev}; not yet applied here after {} ms (SHOW FLEET shows each one's applied_revision)",
            fleet.name(),
            APPLY_WAIT.as_millis()
        ),
    }
}

/// A KILL of session `id` when another instance of the fleet holds it:
/// carried out there, over its admin port (with this instance's admin
/// login), as `as_user` may (None: as the admin). None: the session is
/// this instance's to look for.
pub(crate) async fn remote_kill(
    shared: &Shared,
    id: u32,
    query_only: bool,
    as_user: Option<&str>,
) -> Option<Result<(), crate::errors::SessionError>> {
    let fleet = shared.fleet.get()?;
    let slot = (id >> 24) as u8;
    if slot == 0 || slot == fleet.slot() {
        return None;
    }
    let Some(owner) = fleet.member_of_slot(slot) else {
        return Some(Err(SessionError::NoSuchThread(id as u64)));
    };
    let sql = format!(
        "KILL {}{id}{}",
        if query_only { "QUERY " } else { "" },
        as_user.map(|u| format!(" AS '{u}'")).unwrap_or_default()
    );
    if !shared.peers.admit() {
        return Some(Err(SessionError::Fleet(format!(
            "session {id} is on instance {} of the fleet, and this instance already forwarded {} KILLs in the last second; retry",
            owner.id,
            crate::peers::KILLS_PER_SECOND
        ))));
    }
    let login = peer_login(fleet);
    let r = shared
        .peers
        .exec(&peer_params(&owner.admin, &login), &sql)
        .await;
    tracing::info!(session = id, instance = %owner.id, query_only, "KILL forwarded to the instance holding the session: {}", match &r { Ok(()) => "done".to_string(), Err(e) => e.to_string() });
    Some(match r {
        Ok(()) => Ok(()),
        Err(sextant_backend::BackendError::Server { code: 1094, .. }) => {
            Err(SessionError::NoSuchThread(id as u64))
        }
        Err(sextant_backend::BackendError::Server { code: 1095, .. }) => {
            Err(SessionError::KillDenied(id as u64))
        }
        Err(e) => Err(SessionError::Fleet(format!(
            "session {id} is on instance {} of the fleet ({}), which did not carry the KILL out: {e}",
            owner.id, owner.admin
        ))),
    })
}

/// The login a fleet's instances use with each other's admin ports: a
/// credential derived from the fleet's secret, never the `[admin]` login.
fn peer_login(fleet: &sextant_fleet::Fleet) -> (String, String) {
    (crate::shared::PEER_USER.to_string(), fleet.peer_password())
}

/// How this instance logs in to another's admin port (see [`peer_login`]).
fn peer_params<'a>(
    addr: &'a str,
    login: &'a (String, String),
) -> sextant_backend::ConnectParams<'a> {
    sextant_backend::ConnectParams {
        addr,
        user: &login.0,
        password: &login.1,
        flavor: sextant_backend::Flavor::new(0, crate::frontend::DEFAULT_CHARSET),
        timeout: Duration::from_secs(2),
        tls: None,
        min_wait_timeout: None,
        // A peer is never sent the password to a key it offers itself.
        server_key: None,
    }
}

/// SHOW FLEET SESSIONS: this instance's SHOW SESSIONS and every other live
/// instance's (asked over its admin port), each row led by its instance.
pub(crate) async fn sessions(shared: &Shared) -> Result<sextant_admin::Table, String> {
    let fleet = shared
        .fleet
        .get()
        .ok_or("this instance is not part of a fleet: [cluster] is not set")?;
    let local = crate::admin_context::with_context(shared, |ctx| {
        sextant_admin::execute("SHOW SESSIONS", ctx)
    });
    let sextant_admin::Answer::Table(mine) = local else {
        return Err("SHOW SESSIONS gave no table".into());
    };
    let mut columns = vec!["instance".to_string()];
    columns.extend(mine.columns.iter().cloned());
    let width = columns.len();
    let mut rows: Vec<Vec<Option<String>>> = mine
        .rows
        .into_iter()
        .map(|r| {
            std::iter::once(Some(fleet.id().to_string()))
                .chain(r)
                .collect()
        })
        .collect();
    let login = peer_login(fleet);
    for m in fleet.members().into_iter().filter(|m| m.id != fleet.id()) {
        let answer = match sextant_backend::BackendConn::connect_peer(&peer_params(
            &m.admin, &login,
        ))
        .await
        {
            Ok(mut c) => c
                .query_internal("SHOW SESSIONS")
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match answer {
            Ok(theirs) => rows.extend(theirs.into_iter().map(|r| {
                std::iter::once(Some(m.id.clone()))
                    .chain(r)
                    .take(width)
                    .collect()
            })),
            Err(e) => {
                let mut r = vec![
                    Some(m.id.clone()),
                    None,
                    Some(format!("(its sessions are unknown: {e})")),
                ];
                r.resize(width, None);
                rows.push(r);
            }
        }
    }
    Ok(sextant_admin::Table { columns, rows })
}

/// SHOW FLEET's table (an error without `[cluster]`).
pub(crate) fn table(shared: &Shared) -> Result<sextant_admin::Table, String> {
    let fleet = shared
        .fleet
        .get()
        .ok_or("this instance is not part of a fleet: [cluster] is not set")?;
    Ok(sextant_admin::commands::fleet::table(
        &fleet.members(),
        &fleet.ignored(),
        fleet.id(),
        &fleet.store(),
        sextant_fleet::now_ms(),
    ))
}

/// Why /readyz should mention the fleet store, if so (it stays ready: an
/// instance serves with the intents it applied while etcd is away).
pub(crate) fn store_note(shared: &Shared) -> Option<String> {
    let store = shared.fleet.get()?.store();
    (!store.reachable).then(|| {
        format!(
            "the fleet store is unreachable ({}); serving with the intents applied so far",
            store.error.unwrap_or_default()
        )
    })
}

/// Leaves the fleet at shutdown (the record goes at once).
pub(crate) async fn leave(shared: &Shared) {
    if let Some(f) = shared.fleet.get() {
        f.leave().await;
    }
}
