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

use crate::runtime::Runtime;
use crate::shared::Shared;
use sextant_config::Config;
use std::sync::Arc;

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
    crate::shutdown::notify_systemd(&reloading);
    let r = apply(shared).await;
    if r.is_ok() {
        // Bounded: a primary that does not answer delays no reload.
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            crate::accounts::warn(shared),
        )
        .await;
    }
    crate::shutdown::notify_systemd(&[
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
    let local = Config::load(path).map_err(|e| e.to_string())?;
    let pushed = shared.fleet_config.lock().clone();
    let mut config = match &pushed {
        Some((text, rev)) => {
            let label = format!("(the fleet's config, revision {rev})");
            let c = Config::parse(text, &label).map_err(|e| e.to_string())?;
            let c = Config::with_local_keys(c, &local);
            c.recheck()
                .map_err(|e| format!("{label} with this instance's local keys: {e}"))?;
            c
        }
        None => local,
    };
    // The fleet's routing intents stay on top of the file's values.
    for (k, v) in crate::intents::routing_intents(shared) {
        if let Err(e) = config.routing.set(&k, &v) {
            tracing::warn!(
                "fleet intent routing.{k} = {v} does not apply to the reloaded config: {e}"
            );
        }
    }
    let old = shared.runtime.load_full();
    let need_restart = restart_only_changes(&old.config, &config);
    let monitor_changed = old.config.monitor != config.monitor;
    let auth = crate::frontend::build_auth(&config, Some((&shared.auth.load(), &old.config)))
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
    crate::intents::reapply_backend_states(shared);
    crate::intents::running_config(shared, pushed.map_or(0, |(_, rev)| rev), &r.need_restart);
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
