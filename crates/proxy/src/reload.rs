//! Live config changes: SIGHUP or the admin port's `RELOAD CONFIG` read the
//! config file again and swap in the runtime it describes. A group whose
//! settings did not change keeps its servers, pools and health (a changed
//! weight is applied to them in place); a user whose entry did not change
//! keeps it. Sessions keep the user entry they logged in with, so a
//! rebuilt group serves its old sessions until they end: its monitors run
//! until then (`Monitors::retire`).
//!
//! An invalid file is refused with the same explanation `check-config`
//! gives, and the running config stays.

use crate::shared::{Runtime, Shared};
use sextant_backend::Group;
use sextant_config::Config;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Which monitor tasks watch which group, so that a reload can start them
/// for new groups and stop them for groups nobody uses any more.
#[derive(Default)]
pub struct Monitors {
    inner: Mutex<MonitorSet>,
}

#[derive(Default)]
struct MonitorSet {
    /// By group name: the group watched and its members' tasks.
    live: HashMap<String, (Arc<Group>, Vec<JoinHandle<()>>)>,
    /// Groups a reload replaced, watched while sessions still use them.
    retired: Vec<(Arc<Group>, Vec<JoinHandle<()>>)>,
}

impl Monitors {
    fn lock(&self) -> std::sync::MutexGuard<'_, MonitorSet> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watches every group of `rt` that is not watched yet (by pointer:
    /// a rebuilt group is a new one); with `restart`, every group anew (the
    /// monitor's own settings changed). Groups gone from `rt` are retired.
    pub fn follow(&self, rt: &Runtime, restart: bool) {
        let mut set = self.lock();
        let names: Vec<String> = set.live.keys().cloned().collect();
        for name in names {
            let keep = !restart
                && rt
                    .pool
                    .groups
                    .get(&name)
                    .is_some_and(|g| Arc::ptr_eq(g, &set.live[&name].0));
            if !keep {
                if let Some(old) = set.live.remove(&name) {
                    match restart {
                        true => old.1.iter().for_each(|h| h.abort()),
                        false => set.retired.push(old),
                    }
                }
            }
        }
        if restart {
            // Retired groups too get a monitor with the new settings.
            let retired = std::mem::take(&mut set.retired);
            for (g, handles) in retired {
                handles.iter().for_each(|h| h.abort());
                let tasks = spawn_monitors(rt, &g);
                set.retired.push((g, tasks));
            }
        }
        for (name, g) in &rt.pool.groups {
            if !set.live.contains_key(name) {
                let tasks = spawn_monitors(rt, g);
                set.live.insert(name.clone(), (g.clone(), tasks));
            }
        }
    }

    /// Stops watching retired groups that no session uses any more, and
    /// gives their servers' upkeep to `each` meanwhile.
    pub fn upkeep_retired(&self, mut each: impl FnMut(&Group)) {
        let mut set = self.lock();
        set.retired.retain(|(g, handles)| {
            // Held by: this list, and each monitor task of it.
            let users = Arc::strong_count(g).saturating_sub(1 + handles.len());
            let finished = handles.iter().filter(|h| h.is_finished()).count();
            if users + finished == 0 {
                tracing::info!(group = %g.name, "a replaced group's last session ended: its monitors stop");
                handles.iter().for_each(|h| h.abort());
                return false;
            }
            each(g);
            true
        });
    }
}

fn spawn_monitors(rt: &Runtime, g: &Arc<Group>) -> Vec<JoinHandle<()>> {
    let Some(settings) = monitor_settings(rt, &g.name) else {
        return Vec::new();
    };
    g.members
        .iter()
        .map(|s| {
            tokio::spawn(sextant_monitor::watch(
                s.clone(),
                g.clone(),
                settings.clone(),
            ))
        })
        .collect()
}

/// The monitor's settings for group `name`, or None when the monitor is
/// off (or has no account to log in with).
fn monitor_settings(rt: &Runtime, name: &str) -> Option<sextant_monitor::Settings> {
    let m = &rt.config.monitor;
    if !m.enabled {
        return None;
    }
    let (user, password) = match (&m.user, &m.password, rt.config.users.first()) {
        (Some(u), Some(p), _) => (u.clone(), p.clone()),
        (_, _, Some(u)) => (
            u.backend_user().to_string(),
            u.backend_password().to_string(),
        ),
        _ => return None,
    };
    let max_lag_ms = rt
        .config
        .groups
        .get(name)
        .map(|c| c.max_replica_lag_ms)
        .unwrap_or(0);
    Some(sextant_monitor::Settings {
        interval: Duration::from_millis(m.interval_ms),
        user,
        password,
        heartbeat: m.heartbeat,
        max_lag_ms,
        instance_id: sextant_monitor::instance_id(),
    })
}

/// What a reload did, for the log and the admin port.
#[derive(Debug)]
pub struct Reloaded {
    pub groups_kept: usize,
    pub groups_new: usize,
    pub users: usize,
    /// Settings that changed in the file but take effect only at a
    /// restart (the listeners, the threads, the XA coordinator).
    pub need_restart: Vec<&'static str>,
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "config reloaded: {} group(s) kept, {} new or changed; {} user(s)",
            self.groups_kept, self.groups_new, self.users
        )?;
        if !self.need_restart.is_empty() {
            write!(
                f,
                "; {} changed but take(s) effect only at a restart",
                self.need_restart.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Applies a new `[log] level` (set by the binary, which owns the log
/// subscriber; unset when RUST_LOG decides the level).
type LevelHook = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;
static LOG_LEVEL: std::sync::OnceLock<LevelHook> = std::sync::OnceLock::new();

/// Registers what applies a reloaded `[log] level`.
pub fn on_log_level_change(hook: LevelHook) {
    let _ = LOG_LEVEL.set(hook);
}

/// Serialises reloads (SIGHUP and the admin port may ask at once).
static RELOADING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Reads the config file again and applies it. On error the running
/// config stays, and the error says why (as check-config would).
pub async fn reload(shared: &Shared) -> Result<Reloaded, String> {
    let _one = RELOADING.lock().await;
    // systemd waits for READY=1 after RELOADING=1 (with the monotonic
    // time, which newer systemd versions require) before it reports the
    // reload done, whatever its outcome.
    let mut reloading = vec![sd_notify::NotifyState::Reloading];
    if let Ok(now) = sd_notify::NotifyState::monotonic_usec_now() {
        reloading.push(now);
    }
    crate::start::notify_systemd(&reloading);
    let r = apply(shared).await;
    crate::start::notify_systemd(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(match r {
            Ok(_) => "serving (config reloaded)",
            Err(_) => "serving (a config reload was refused: see the log)",
        }),
    ]);
    r
}

async fn apply(shared: &Shared) -> Result<Reloaded, String> {
    let Some(path) = shared.config_path.as_deref() else {
        return Err("sextant was started without a config file; nothing to reload".into());
    };
    let config = Config::load(path).map_err(|e| e.to_string())?;
    let old = shared.runtime.load_full();
    let need_restart = restart_only_changes(&old.config, &config);
    let monitor_changed = old.config.monitor != config.monitor;
    let auth = crate::start::build_auth(&config, Some((&shared.auth.load(), &old.config)))
        .map_err(|e| e.to_string())?;
    let rt = Runtime::build(config, Some(&old)).map_err(|e| e.to_string())?;
    if rt.sharding.is_some() != shared.xa.is_some() {
        return Err(
            "adding or removing [sharding] needs a restart (the transaction coordinator starts with the process)"
                .into(),
        );
    }
    rt.apply_weights();
    rt.apply_policies();
    let groups_kept = rt
        .pool
        .groups
        .iter()
        .filter(|(n, g)| old.pool.groups.get(*n).is_some_and(|o| Arc::ptr_eq(o, g)))
        .count();
    let r = Reloaded {
        groups_kept,
        groups_new: rt.pool.groups.len() - groups_kept,
        users: rt.users.len(),
        need_restart,
    };
    if rt.config.log.level != old.config.log.level {
        if let Some(hook) = LOG_LEVEL.get() {
            hook(&rt.config.log.level).map_err(|e| format!("[log] level: {e}"))?;
        }
    }
    let rt = Arc::new(rt);
    shared.runtime.store(rt.clone());
    shared.auth.store(Arc::new(auth));
    shared.monitors.follow(&rt, monitor_changed);
    Ok(r)
}

/// The admin port's `SET <routing key> = <value>`: the running config's
/// [routing] changed and applied as a reload applies it (open sessions
/// follow at their next statement; hold_ms applies to new sessions). The
/// file is not written: the next reload from the file replaces it.
pub async fn set_routing(shared: &Shared, key: &str, value: &str) -> Result<String, String> {
    let _one = RELOADING.lock().await;
    let old = shared.runtime.load_full();
    let mut config = old.config.clone();
    config.routing.set(key, value)?;
    config.recheck().map_err(|e| e.to_string())?;
    let canonical = Config::routing_key(key);
    let now = config.routing.get(&canonical).unwrap_or_default();
    let rt = Runtime::build(config, Some(&old)).map_err(|e| e.to_string())?;
    rt.apply_weights();
    rt.apply_policies();
    let rt = Arc::new(rt);
    shared.runtime.store(rt.clone());
    shared.monitors.follow(&rt, false);
    Ok(format!(
        "routing.{canonical} = {now} (running config; the file is unchanged until you edit it)"
    ))
}

/// What `new` changes that a running process cannot take on.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut v = Vec::new();
    if old.proxy.listen != new.proxy.listen {
        v.push("[proxy] listen");
    }
    if old.proxy.threads != new.proxy.threads {
        v.push("[proxy] threads");
    }
    if old.proxy.max_connections != new.proxy.max_connections {
        v.push("[proxy] max_connections");
    }
    if old.proxy.server_version != new.proxy.server_version {
        v.push("[proxy] server_version");
    }
    if old.admin != new.admin {
        v.push("[admin]");
    }
    if old.xa != new.xa {
        v.push("[xa]");
    }
    if old.log.format != new.log.format {
        v.push("[log] format");
    }
    v
}

/// Logs the outcome of a reload asked by `by`.
pub fn log_outcome(by: &str, r: &Result<Reloaded, String>) {
    match r {
        Ok(r) => tracing::info!(by, "{r}"),
        Err(e) => tracing::error!(by, "config reload refused, the running config stays: {e}"),
    }
}
