//! Admin commands. Each answers with a table (or an error message); the
//! server binary speaks the protocol around them.

use sextant_backend::Pool;
use std::sync::atomic::Ordering;

pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
}

pub enum Answer {
    Table(Table),
    Ok,
    Error(String),
}

/// Process-wide counters the admin port reports.
#[derive(Default)]
pub struct Counters {
    pub client_connections: std::sync::atomic::AtomicUsize,
    pub client_connections_total: std::sync::atomic::AtomicU64,
    pub queries: std::sync::atomic::AtomicU64,
    pub client_errors: std::sync::atomic::AtomicU64,
}

pub const COMMANDS: &str = "SHOW BACKENDS, SHOW STATUS, SELECT 1";

pub fn execute(sql: &str, pool: &Pool, counters: &Counters) -> Answer {
    let words: Vec<String> = sql
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase())
        .collect();
    let w: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
    match w.as_slice() {
        ["SHOW", "BACKENDS"] | ["SHOW", "SERVERS"] => Answer::Table(backends(pool)),
        ["SHOW", "STATUS"] => Answer::Table(status(counters)),
        ["SELECT", "1"] => Answer::Table(Table {
            columns: vec!["1".into()],
            rows: vec![vec![Some("1".into())]],
        }),
        // Client libraries send these on connect; answering keeps them happy.
        ["SET", ..] => Answer::Ok,
        ["SELECT", rest @ ..] if !rest.is_empty() && rest.iter().all(|w| w.starts_with("@@")) => {
            Answer::Table(system_variables(sql))
        }
        [] => Answer::Error("empty command".into()),
        _ => Answer::Error(format!(
            "unknown admin command {sql:?}; the admin port understands: {COMMANDS}"
        )),
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

fn backends(pool: &Pool) -> Table {
    let mut rows = Vec::new();
    for s in pool.servers() {
        let st = s.stats();
        rows.push(vec![
            Some(s.group.to_string()),
            Some(s.role.to_string()),
            Some(s.addr.to_string()),
            Some(s.weight.to_string()),
            Some(
                if s.reachable.load(Ordering::Relaxed) {
                    "up"
                } else {
                    "down"
                }
                .into(),
            ),
            Some(st.open.to_string()),
            Some(st.idle.to_string()),
            Some((st.open - st.idle.min(st.open)).to_string()),
            Some(st.waiters.to_string()),
            Some(st.borrows.to_string()),
            Some(st.connects.to_string()),
            Some(st.connect_failures.to_string()),
            s.version.lock().clone(),
            s.last_error.lock().clone(),
        ]);
    }
    Table {
        columns: [
            "group",
            "role",
            "address",
            "weight",
            "state",
            "conn_open",
            "conn_idle",
            "conn_used",
            "waiters",
            "borrows",
            "connects",
            "connect_errors",
            "version",
            "last_error",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}

fn status(c: &Counters) -> Table {
    let v = |n: &str, x: u64| vec![Some(n.to_string()), Some(x.to_string())];
    Table {
        columns: vec!["variable".into(), "value".into()],
        rows: vec![
            v(
                "client_connections",
                c.client_connections.load(Ordering::Relaxed) as u64,
            ),
            v(
                "client_connections_total",
                c.client_connections_total.load(Ordering::Relaxed),
            ),
            v("queries", c.queries.load(Ordering::Relaxed)),
            v("client_errors", c.client_errors.load(Ordering::Relaxed)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_commands_list_the_known_ones() {
        let pool = Pool::default();
        let c = Counters::default();
        match execute("DROP EVERYTHING", &pool, &c) {
            Answer::Error(m) => assert!(m.contains("SHOW BACKENDS"), "{m}"),
            _ => panic!("expected an error"),
        }
        match execute("show backends;", &pool, &c) {
            Answer::Table(t) => assert_eq!(t.columns[0], "group"),
            _ => panic!("expected a table"),
        }
    }
}
