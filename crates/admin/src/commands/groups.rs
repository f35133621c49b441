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

pub struct Switchover;

impl AdminCommand for Switchover {
    fn syntax(&self) -> &'static str {
        "SWITCHOVER GROUP <group> [TO '<addr>']"
    }
    fn help(&self) -> &'static str {
        "a planned change of primary (failover = \"auto\" groups): writes are held, the old primary is made read-only, the target applies everything, takes the writes, and the old primary replicates from it"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        let rest = q
            .after(&["SWITCHOVER", "GROUP"])?
            .trim()
            .trim_end_matches(';')
            .trim();
        let mut words = rest.splitn(2, char::is_whitespace);
        let group = words
            .next()
            .filter(|g| !g.is_empty())?
            .trim_matches('`')
            .to_string();
        let tail = words.next().unwrap_or("").trim();
        let to = if tail.is_empty() {
            None
        } else {
            let Some(addr) = super::strip_words(tail, &["TO"]) else {
                return Some(Answer::Error(format!(
                    "expected SWITCHOVER GROUP {group} [TO '<addr>'], got {tail:?}"
                )));
            };
            let addr = addr.trim();
            let unquoted = addr
                .strip_prefix('\'')
                .and_then(|a| a.strip_suffix('\''))
                .or_else(|| addr.strip_prefix('"').and_then(|a| a.strip_suffix('"')));
            match unquoted {
                Some(a) if !a.is_empty() => Some(a.to_string()),
                _ => {
                    return Some(Answer::Error(format!(
                        "the target is a quoted address: TO '{addr}'"
                    )))
                }
            }
        };
        Some(Answer::Switchover { group, to })
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
