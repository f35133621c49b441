//! The fleet's intents as a reload keeps them: the routing keys set on an
//! admin port of any instance stay on top of the file's values, the
//! servers' admin states stay on the rebuilt groups, and the fleet's record
//! says which pushed config this instance runs. Nothing here without
//! `[cluster]`.

use crate::shared::Shared;
use sextant_fleet::Intent;

/// What a reload applies again on top of the file: the fleet's routing
/// intents (the servers' states are applied to the new runtime after).
pub(crate) fn routing_intents(shared: &Shared) -> Vec<(String, String)> {
    let Some(fleet) = shared.fleet.get() else {
        return Vec::new();
    };
    fleet
        .intents()
        .into_iter()
        .filter_map(|(i, v, _)| match i {
            Intent::Routing(k) => Some((k, v)),
            _ => None,
        })
        .collect()
}

/// The servers' states the fleet intends, applied to the runtime now (after
/// a reload built new groups).
pub(crate) fn reapply_backend_states(shared: &Shared) {
    let Some(fleet) = shared.fleet.get() else {
        return;
    };
    let rt = shared.runtime();
    for (i, v, _) in fleet.intents() {
        if let Intent::Backend(addr) = i {
            sextant_admin::commands::maintenance::apply(&rt.pool, &addr, &v);
        }
    }
}

/// What the fleet's record says of the config this instance runs.
pub(crate) fn running_config(shared: &Shared, revision: i64, needs_restart: &[&str]) {
    if let Some(f) = shared.fleet.get() {
        f.running_config(
            revision,
            needs_restart.iter().map(|s| s.to_string()).collect(),
        );
    }
}
