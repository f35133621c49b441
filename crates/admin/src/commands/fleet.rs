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
/// each with this instance's view of the store; then a row per key under
/// the fleet's prefix that no member signed (`ignored`), marked so.
pub fn table(
    members: &[Member],
    ignored: &[String],
    me: &str,
    store: &StoreState,
    now_ms: u64,
) -> Table {
    let columns = [
        "id",
        "this",
        "slot",
        "host",
        "listen",
        "admin",
        "version",
        "applied_revision",
        "refused",
        "sessions",
        "statements_per_s",
        "config_revision",
        "needs_restart",
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
    let mut rows: Vec<Vec<Option<String>>> = members
        .iter()
        .map(|m| {
            vec![
                Some(m.id.clone()),
                Some(if m.id == me { "yes" } else { "" }.to_string()),
                Some(m.slot.to_string()),
                Some(m.host.clone()),
                Some(m.listen.clone()),
                Some(m.admin.clone()),
                Some(m.version.clone()),
                Some(m.applied_revision.to_string()),
                m.refused.clone(),
                Some(m.sessions.to_string()),
                Some(m.statements_per_s.to_string()),
                Some(m.config_revision.to_string()),
                Some(m.needs_restart.join(", ")),
                Some((now_ms.saturating_sub(m.started_ms) / 1000).to_string()),
                Some(now_ms.saturating_sub(m.updated_ms).to_string()),
                Some(store.clone()),
            ]
        })
        .collect();
    for key in ignored {
        let mut row = vec![None; columns.len()];
        row[0] = Some(key.clone());
        row[1] = Some("ignored: not signed with the fleet's secret".into());
        rows.push(row);
    }
    Table { columns, rows }
}

pub struct ShowFleetSessions;

impl AdminCommand for ShowFleetSessions {
    fn syntax(&self) -> &'static str {
        "SHOW FLEET SESSIONS"
    }
    fn help(&self) -> &'static str {
        "SHOW SESSIONS of every live instance of the fleet, each row with its instance (asked over their admin ports)"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "FLEET", "SESSIONS"])
            .then_some(Answer::ShowFleetSessions)
    }
}

pub struct PushConfig;

impl AdminCommand for PushConfig {
    fn syntax(&self) -> &'static str {
        "PUSH CONFIG [FROM '<file>'] [BASED ON <revision>]"
    }
    fn help(&self) -> &'static str {
        "validates a config file (this instance's own by default) as check-config does and stores it as the fleet's config, if the fleet's is still at the revision given (default: the one this instance runs); every instance applies it as a reload, keeping its own local keys"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        let rest = q
            .after(&["PUSH", "CONFIG"])?
            .trim()
            .trim_end_matches(';')
            .trim();
        Some(parse_push(rest).unwrap_or_else(|| Answer::Error(self.syntax().to_string())))
    }
}

fn parse_push(mut rest: &str) -> Option<Answer> {
    let mut path = None;
    let mut base = None;
    while !rest.is_empty() {
        if let Some(r) = super::strip_words(rest, &["FROM"]) {
            let r = r.trim_start();
            let quote = r.chars().next().filter(|c| *c == '\'' || *c == '"')?;
            let end = r[1..].find(quote)? + 1;
            path = Some(r[1..end].to_string());
            rest = r[end + 1..].trim_start();
        } else if let Some(r) = super::strip_words(rest, &["BASED", "ON"]) {
            let r = r.trim_start();
            let end = r.find(char::is_whitespace).unwrap_or(r.len());
            base = Some(r[..end].parse::<i64>().ok().filter(|b| *b >= 0)?);
            rest = r[end..].trim_start();
        } else {
            return None;
        }
    }
    Some(Answer::PushConfig { path, base })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_config_reads_its_file_and_base() {
        let p = |s: &str| match parse_push(s) {
            Some(Answer::PushConfig { path, base }) => Some((path, base)),
            _ => None,
        };
        assert_eq!(p(""), Some((None, None)));
        assert_eq!(
            p("FROM '/etc/s.toml'"),
            Some((Some("/etc/s.toml".into()), None))
        );
        assert_eq!(
            p("from \"/a b.toml\" based on 42"),
            Some((Some("/a b.toml".into()), Some(42)))
        );
        assert_eq!(p("BASED ON 0"), Some((None, Some(0))));
        assert_eq!(p("BASED ON x"), None);
        assert_eq!(p("FROM /no/quotes"), None);
        assert_eq!(p("NOW"), None);
    }
}
