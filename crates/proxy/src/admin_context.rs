//! What admin commands see of the running process, for the admin port,
//! the HTTP endpoints and the fleet's peer calls alike.

use crate::shared::Shared;

/// Runs `f` with what admin commands see now (the runtime, counters and
/// sessions); the admin port and the HTTP endpoints both read through it.
pub(crate) fn with_context<R>(
    shared: &Shared,
    f: impl FnOnce(&sextant_admin::Context<'_>) -> R,
) -> R {
    let rt = shared.runtime();
    let list = || {
        shared
            .sessions
            .list()
            .into_iter()
            .map(|(id, h)| sextant_admin::SessionRow {
                id,
                user: h.user.name.clone(),
                client: h.peer.to_string(),
                group: h.user.group.name.to_string(),
                running: h.running().and_then(|(idx, thread)| {
                    let server = h.user.group.members.get(idx)?;
                    Some((server.addr.to_string(), thread))
                }),
            })
            .collect()
    };
    let ctx = sextant_admin::Context {
        config: &rt.config,
        sessions: &list,
        sharding: rt.sharding.as_ref().map(|s| &s.router),
        pool: &rt.pool,
        counters: &shared.counters,
        users: rt
            .config
            .users
            .iter()
            .filter_map(|u| {
                let e = rt.users.get(&u.name)?;
                Some((u.name.as_str(), e.policy(), &*e.group.name))
            })
            .collect(),
        user_sessions: rt
            .users
            .iter()
            .map(|(name, e)| {
                (
                    name.as_str(),
                    e.connections.load(std::sync::atomic::Ordering::Relaxed),
                    e.statements.load(std::sync::atomic::Ordering::Relaxed),
                )
            })
            .collect(),
    };
    f(&ctx)
}
