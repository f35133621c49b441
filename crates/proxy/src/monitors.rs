//! Which monitor tasks watch which group. A reload starts them for new
//! groups and stops them for groups nobody uses any more; a rebuilt group
//! serves its old sessions until they end, and its monitors run until then.

use crate::runtime::Runtime;
use sextant_backend::Group;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Which monitor tasks watch which group, so that a reload can start them
/// for new groups and stop them for groups nobody uses any more.
#[derive(Default)]
pub struct Monitors {
    inner: Mutex<MonitorSet>,
    /// In a fleet: who decides failovers (set when the fleet is joined,
    /// before any monitor starts).
    pub coordinator: std::sync::OnceLock<Arc<dyn sextant_monitor::ha::Coordinator>>,
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
                let tasks = spawn_monitors(rt, &g, self.coordinator.get());
                set.retired.push((g, tasks));
            }
        }
        for (name, g) in &rt.pool.groups {
            if !set.live.contains_key(name) {
                let tasks = spawn_monitors(rt, g, self.coordinator.get());
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

fn spawn_monitors(
    rt: &Runtime,
    g: &Arc<Group>,
    coordinator: Option<&Arc<dyn sextant_monitor::ha::Coordinator>>,
) -> Vec<JoinHandle<()>> {
    let Some(settings) = monitor_settings(rt, &g.name) else {
        return Vec::new();
    };
    let mut tasks: Vec<JoinHandle<()>> = g
        .members
        .iter()
        .map(|s| {
            tokio::spawn(sextant_monitor::watch(
                s.clone(),
                g.clone(),
                settings.clone(),
            ))
        })
        .collect();
    if let Some(mut f) = failover_settings(rt, &g.name, &settings) {
        f.coordinator = coordinator.cloned();
        if rt.config.cluster.is_some() && f.coordinator.is_none() {
            // Never alone in a fleet: two instances would both promote.
            tracing::error!(group = %g.name, "failover = \"auto\" in a fleet, but this instance has no fleet store to agree with the others through: it does not fail over");
        } else {
            tasks.push(tokio::spawn(sextant_monitor::ha::run(g.clone(), f)));
        }
    }
    tasks
}

/// The failover task's settings for group `name`, when it fails over
/// itself (`failover = "auto"`).
fn failover_settings(
    rt: &Runtime,
    name: &str,
    m: &sextant_monitor::Settings,
) -> Option<sextant_monitor::ha::FailoverSettings> {
    let c = rt.config.groups.get(name)?;
    if c.failover != sextant_config::FailoverMode::Auto {
        return None;
    }
    Some(sextant_monitor::ha::FailoverSettings {
        interval: m.interval,
        user: m.user.clone(),
        password: m.password.clone(),
        after_ms: c.failover_after_ms,
        semi_sync: c.semi_sync,
        replication: c
            .replication_user
            .clone()
            .zip(c.replication_password.clone()),
        // Members in the group's order: the configured primary first.
        promotable: std::iter::once(true)
            .chain(c.replicas.iter().map(|r| r.promotable))
            .collect(),
        coordinator: None,
    })
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
