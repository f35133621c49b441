//! The routing keys, live: `SET <routing key> = <value>` (carried out by
//! the proxy on its running config: open sessions follow at their next
//! statement) and `SHOW VARIABLES` (their values now).

use super::{strip_words, AdminCommand, Query};
use crate::{Answer, Context, Table};

pub struct SetRouting;

impl AdminCommand for SetRouting {
    fn syntax(&self) -> &'static str {
        "SET <routing key> = <value>"
    }
    fn help(&self) -> &'static str {
        "changes a [routing] key of the running config (SHOW VARIABLES lists them; Cetus's master-preferred and read-master-percentage too); the file is not written"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        let (key, value) = routing_assignment(q.sql)?;
        Some(Answer::SetRouting { key, value })
    }
}

pub struct ShowVariables;

impl AdminCommand for ShowVariables {
    fn syntax(&self) -> &'static str {
        "SHOW VARIABLES"
    }
    fn help(&self) -> &'static str {
        "the routing keys SET can change, with their values now"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        if !q.is(&["SHOW", "VARIABLES"]) {
            return None;
        }
        let r = &ctx.config.routing;
        let rows = sextant_config::Routing::KEYS
            .iter()
            .map(|k| vec![Some(k.to_string()), r.get(k)])
            .collect();
        Some(Answer::Table(Table {
            columns: vec!["variable".into(), "value".into()],
            rows,
        }))
    }
}

/// `SET key = value` naming a [routing] key (Cetus's names too).
fn routing_assignment(sql: &str) -> Option<(String, String)> {
    let rest = strip_words(sql, &["SET"])?;
    let (key, value) = rest.split_once('=')?;
    let key = key.trim().trim_start_matches("@@").trim_matches('`');
    let canonical = sextant_config::Config::routing_key(key);
    if !sextant_config::Routing::KEYS.contains(&canonical.as_str()) {
        return None;
    }
    let value = value.trim().trim_end_matches(';').trim();
    Some((canonical, value.to_string()))
}
