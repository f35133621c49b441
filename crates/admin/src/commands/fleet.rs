//! `SHOW FLEET`: the instances of this one's fleet (`[cluster]`), as their
//! records in etcd say, and whether this instance reaches etcd.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};
use sextant_fleet::{Member, StoreState};

pub struct ShowFleet;

impl AdminCommand for ShowFleet {
    fn syntax(&self) -> &'static str {
        "SHOW FLEET"
    }
    fn help(&self) -> &'static str {
        "the fleet's live instances ([cluster]): addresses, version, the intent revision each applied (and its last refusal), sessions, statements/s; and whether etcd answers"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "FLEET"]).then_some(Answer::ShowFleet)
    }
}

/// The table of SHOW FLEET: one row per live instance (this one marked),
/// each with this instance's view of the store.
pub fn table(members: &[Member], me: &str, store: &StoreState, now_ms: u64) -> Table {
    let columns = [
        "id",
        "this",
        "host",
        "listen",
        "admin",
        "version",
        "applied_revision",
        "refused",
        "sessions",
        "statements_per_s",
        "up_s",
        "renewed_ms_ago",
        "store",
    ]
    .map(String::from)
    .to_vec();
    let store = match (store.reachable, &store.error) {
        (true, _) => "reachable".to_string(),
        (false, e) => format!(
            "unreachable for {} s ({}); the list is as last seen",
            now_ms.saturating_sub(store.since_ms) / 1000,
            e.as_deref().unwrap_or("no answer")
        ),
    };
    let rows = members
        .iter()
        .map(|m| {
            vec![
                Some(m.id.clone()),
                Some(if m.id == me { "yes" } else { "" }.to_string()),
                Some(m.host.clone()),
                Some(m.listen.clone()),
                Some(m.admin.clone()),
                Some(m.version.clone()),
                Some(m.applied_revision.to_string()),
                m.refused.clone(),
                Some(m.sessions.to_string()),
                Some(m.statements_per_s.to_string()),
                Some((now_ms.saturating_sub(m.started_ms) / 1000).to_string()),
                Some(now_ms.saturating_sub(m.updated_ms).to_string()),
                Some(store.clone()),
            ]
        })
        .collect();
    Table { columns, rows }
}
