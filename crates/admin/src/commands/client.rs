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
            ["SET", ..] => Some(Answer::Ok),
            ["SELECT", rest @ ..]
                if !rest.is_empty() && rest.iter().all(|w| w.starts_with("@@")) =>
            {
                Some(Answer::Table(system_variables(q.sql)))
            }
            _ => None,
        }
    }
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
