//! `SHOW GROUPS`: every server group, its topology, which server takes
//! its writes, and its failover state (term, what the failover task is
//! doing, the last failover with each stage's time).

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};
use sextant_backend::{Pool, Topology};

pub struct ShowGroups;

impl AdminCommand for ShowGroups {
    fn syntax(&self) -> &'static str {
        "SHOW GROUPS"
    }
    fn help(&self) -> &'static str {
        "every group: topology, primary, failover (off/auto), HA state, term, failovers, refusals, why, the last failover"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "GROUPS"])
            .then(|| Answer::Table(groups(ctx.pool)))
    }
}

pub fn topology_name(t: Topology) -> &'static str {
    match t {
        Topology::Static => "static",
        Topology::Replication => "replication",
        Topology::GroupReplication => "group_replication",
        Topology::Galera => "galera",
    }
}

fn groups(pool: &Pool) -> Table {
    let rows = pool
        .groups
        .values()
        .map(|g| {
            let r = g.ha.report();
            vec![
                Some(g.name.to_string()),
                Some(topology_name(g.topology).into()),
                g.primary().map(|p| p.addr.to_string()),
                Some(if g.ha.auto() { "auto" } else { "off" }.into()),
                Some(r.state),
                Some(g.ha.term().to_string()),
                Some(g.ha.failovers().to_string()),
                Some(g.ha.refusals().to_string()),
                Some(r.detail).filter(|d| !d.is_empty()),
                Some(r.last).filter(|d| !d.is_empty()),
            ]
        })
        .collect();
    Table {
        columns: [
            "group",
            "topology",
            "primary",
            "failover",
            "ha_state",
            "term",
            "failovers",
            "refusals",
            "detail",
            "last_failover",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}
