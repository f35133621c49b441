//! What client libraries send on connect (`SET NAMES ...`, `SELECT
//! @@version_comment`, `SELECT 1`): answered so that any MySQL client can
//! use the admin port.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};

pub struct Client;

impl AdminCommand for Client {
    fn syntax(&self) -> &'static str {
        "SELECT 1"
    }
    fn help(&self) -> &'static str {
        "a liveness check (client libraries' SET and SELECT @@variable on connect are answered too)"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        let w: Vec<&str> = q.words.iter().map(String::as_str).collect();
        match w.as_slice() {
            ["SELECT", "1"] => Some(Answer::Table(Table {
                columns: vec!["1".into()],
                rows: vec![vec![Some("1".into())]],
            })),
            ["SET", ..] => Some(match unknown_variable(q.sql) {
                None => Answer::Ok,
                Some(name) => Answer::UnknownVariable(format!(
                    "Unknown system variable '{name}': the admin port's SET changes the routing keys {} (SET BACKEND and SET MAINTENANCE for servers; SHOW VARIABLES lists the keys with their values)",
                    sextant_config::Routing::KEYS.join(", ")
                )),
            }),
            ["SELECT", rest @ ..]
                if !rest.is_empty() && rest.iter().all(|w| w.starts_with("@@")) =>
            {
                Some(Answer::Table(system_variables(q.sql)))
            }
            _ => None,
        }
    }
}

/// Session variables client libraries set on connect, which the admin
/// port accepts and ignores (it has no session state to change).
const CLIENT_VARIABLES: &[&str] = &[
    "autocommit",
    "sql_mode",
    "time_zone",
    "names",
    "character",
    "transaction",
    "transaction_isolation",
    "tx_isolation",
    "transaction_read_only",
    "tx_read_only",
    "wait_timeout",
    "interactive_timeout",
    "net_read_timeout",
    "net_write_timeout",
    "sql_select_limit",
    "max_execution_time",
    "sql_auto_is_null",
    "sql_safe_updates",
    "group_concat_max_len",
    "lc_messages",
    "query_cache_type",
    "default_storage_engine",
    "foreign_key_checks",
    "unique_checks",
    "sql_notes",
    "sql_warnings",
];

/// The first name a `SET` assigns that the admin port does not know:
/// neither a client library's session variable (`character_set_*`,
/// `collation_*`, `session_track_*`, `sql_*` included), nor a user
/// variable, nor a routing key (those reach [`super::routing::SetRouting`]
/// first). None: the statement is one a client library sends, answered
/// OK.
fn unknown_variable(sql: &str) -> Option<&str> {
    let rest = super::strip_words(sql, &["SET"])?;
    let mut quote = None;
    let mut start = 0;
    let mut assignments = Vec::new();
    for (i, c) in rest.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, ',') => {
                assignments.push(&rest[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    assignments.push(&rest[start..]);
    assignments.into_iter().find_map(|a| {
        let mut words = a.split(|c: char| c.is_whitespace() || c == '=' || c == ';');
        let mut name = words.find(|w| !w.is_empty())?;
        while ["SESSION", "GLOBAL", "LOCAL", "PERSIST"]
            .iter()
            .any(|s| name.eq_ignore_ascii_case(s))
        {
            name = words.find(|w| !w.is_empty())?;
        }
        let lower = name.to_ascii_lowercase();
        let bare = lower
            .trim_start_matches("@@")
            .trim_start_matches("session.")
            .trim_start_matches("local.")
            .trim_matches('`');
        let known = (name.starts_with('@') && !name.starts_with("@@"))
            || CLIENT_VARIABLES.contains(&bare)
            || ["character_set_", "collation_", "session_track_", "sql_"]
                .iter()
                .any(|p| bare.starts_with(p));
        (!known).then_some(name)
    })
}

/// `SELECT @@a, @@b`: what a client library asks on connect.
fn system_variables(sql: &str) -> Table {
    let names: Vec<&str> = sql
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| w.starts_with("@@"))
        .collect();
    let mut columns = Vec::new();
    let mut row = Vec::new();
    for n in names {
        let var = n
            .trim_start_matches('@')
            .rsplit('.')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let value = match var.as_str() {
            "max_allowed_packet" => Some("16777216".to_string()),
            "wait_timeout" | "interactive_timeout" => Some("28800".into()),
            "version_comment" => Some("sextant admin".into()),
            "version" => Some(concat!("8.0.0-sextant-admin-", env!("CARGO_PKG_VERSION")).into()),
            "autocommit" => Some("1".into()),
            _ => None,
        };
        columns.push(n.to_string());
        row.push(value);
    }
    Table {
        columns,
        rows: vec![row],
    }
}
