//! Session state that belongs to the client, not to the server connection
//! that happens to serve it.

use std::collections::BTreeMap;

/// What a client has set on its session: system variables (as the server
/// reported them in session-state tracking), the current schema, and the
/// multi-statement option. Compared on every borrow, so it stays small.
#[derive(Debug, Clone, Default)]
pub struct SessionVars {
    pub vars: BTreeMap<Box<str>, Box<str>>,
    pub schema: Option<Box<str>>,
    pub multi_statements: bool,
    /// Timeouts of the client's own connection ([`CLIENT_SIDE`]): sextant
    /// applies them to the client; on a server connection they would close
    /// it in the pool, under other clients. Not part of the comparison.
    pub client_side: BTreeMap<Box<str>, Box<str>>,
}

impl PartialEq for SessionVars {
    fn eq(&self, other: &Self) -> bool {
        self.vars == other.vars
            && self.schema == other.schema
            && self.multi_statements == other.multi_statements
    }
}

impl Eq for SessionVars {}

/// Variables about the client's connection itself, kept out of server
/// connections.
pub const CLIENT_SIDE: &[&str] = &[
    "wait_timeout",
    "interactive_timeout",
    "net_read_timeout",
    "net_write_timeout",
];

/// Variables sextant sets on every server connection for its own use; a
/// client's change to them is not replayed (it would break tracking).
pub const OWN_VARIABLES: &[&str] = &[
    "session_track_system_variables",
    "session_track_schema",
    "session_track_state_change",
    "session_track_gtids",
];

/// What session-state information a client is sent: its own
/// `session_track_*` settings, starting from the server's global values.
/// Server connections track everything for sextant; each client sees only
/// this part, as it would from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracking {
    /// Lower-case names; None is `*` (all).
    pub vars: Option<Vec<Box<str>>>,
    /// The value as the server reported it.
    vars_text: Box<str>,
    pub schema: bool,
    pub state_change: bool,
    pub gtids: bool,
    gtids_text: Box<str>,
    pub transaction_info: bool,
}

impl Default for Tracking {
    /// MariaDB's and MySQL 8's defaults.
    fn default() -> Self {
        const VARS: &str =
            "autocommit,character_set_client,character_set_connection,character_set_results,time_zone";
        Tracking {
            vars_text: VARS.into(),
            gtids_text: "OFF".into(),
            vars: Some(VARS.split(',').map(Box::from).collect()),
            schema: true,
            state_change: false,
            gtids: false,
            transaction_info: false,
        }
    }
}

fn on(value: &[u8]) -> bool {
    value.eq_ignore_ascii_case(b"on") || value == b"1"
}

impl Tracking {
    /// Takes a `session_track_*` value; false when `name` is not one.
    pub fn set(&mut self, name: &[u8], value: &[u8]) -> bool {
        let Some(which) = name
            .len()
            .checked_sub(14)
            .filter(|_| name[..14].eq_ignore_ascii_case(b"session_track_"))
            .map(|_| &name[14..])
        else {
            return false;
        };
        let is = |w: &str| which.eq_ignore_ascii_case(w.as_bytes());
        if is("system_variables") {
            self.vars_text = String::from_utf8_lossy(value).into();
            self.vars = if value.split(|&c| c == b',').any(|v| v.trim_ascii() == b"*") {
                None
            } else {
                Some(
                    value
                        .split(|&c| c == b',')
                        .map(|v| String::from_utf8_lossy(v.trim_ascii()).to_ascii_lowercase())
                        .filter(|v| !v.is_empty())
                        .map(Box::from)
                        .collect(),
                )
            };
        } else if is("schema") {
            self.schema = on(value);
        } else if is("state_change") {
            self.state_change = on(value);
        } else if is("gtids") {
            self.gtids_text = String::from_utf8_lossy(value).into();
            self.gtids = !value.eq_ignore_ascii_case(b"off") && value != b"0";
        } else if is("transaction_info") {
            self.transaction_info = !value.eq_ignore_ascii_case(b"off") && value != b"0";
        } else {
            return false;
        }
        true
    }

    /// Whether a client with these settings is sent `change`.
    pub fn shows(&self, change: &sextant_protocol::packets::StateChange<'_>) -> bool {
        use sextant_protocol::packets::StateChange as C;
        match change {
            C::SystemVariable { name, .. } => match &self.vars {
                None => true,
                Some(list) => list.iter().any(|v| v.as_bytes().eq_ignore_ascii_case(name)),
            },
            C::Schema(_) => self.schema,
            C::StateChanged(_) => self.state_change,
            C::Gtids(_) => self.gtids,
            C::Other(_) => self.transaction_info,
        }
    }

    /// The value `SELECT @@session_track_<which>` shows.
    pub fn value(&self, which: &str) -> Option<String> {
        let flag = |b: bool| if b { "ON" } else { "OFF" }.to_string();
        Some(match which {
            "system_variables" => self.vars_text.to_string(),
            "gtids" => self.gtids_text.to_string(),
            "schema" => flag(self.schema),
            "state_change" => flag(self.state_change),
            _ => return None,
        })
    }
}

/// Pseudo-variables that the server reports but that are results of the
/// last statement rather than settings.
pub const NOT_REPLAYED: &[&str] = &[
    "last_gtid",
    "last_insert_id",
    "insert_id",
    "identity",
    "warning_count",
    "error_count",
];

impl SessionVars {
    /// Records a variable the server reported. Allocates only when the
    /// value changed: writes report last_gtid every time, and that must not
    /// cost an allocation per statement.
    pub fn set_var(&mut self, name: &[u8], value: &[u8]) -> bool {
        let listed = |list: &[&str]| list.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(name));
        if listed(OWN_VARIABLES) || listed(NOT_REPLAYED) {
            return false;
        }
        let mut buf = [0u8; 64];
        let lower: std::borrow::Cow<'_, str> = match name.len() {
            n if n <= buf.len() && name.is_ascii() => {
                buf[..n].copy_from_slice(name);
                buf[..n].make_ascii_lowercase();
                // ASCII is UTF-8.
                std::borrow::Cow::Borrowed(std::str::from_utf8(&buf[..n]).unwrap_or_default())
            }
            _ => std::borrow::Cow::Owned(String::from_utf8_lossy(name).to_ascii_lowercase()),
        };
        let map = if CLIENT_SIDE.contains(&&*lower) {
            &mut self.client_side
        } else {
            &mut self.vars
        };
        if map.get(&*lower).map(|v| v.as_bytes()) == Some(value) {
            return false;
        }
        map.insert(lower.into(), String::from_utf8_lossy(value).into());
        true
    }

    /// A `SET SESSION ...` that turns `from` (a server connection's state)
    /// into `self`. Variables `from` has and `self` lacks go back to the
    /// connection's baseline (`baseline` holds the values a fresh
    /// connection had, for variables where DEFAULT would be wrong, like the
    /// handshake character set). None when the variables already agree.
    pub fn set_statement(
        &self,
        from: &SessionVars,
        baseline: &BTreeMap<Box<str>, Box<str>>,
    ) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        for (k, v) in &self.vars {
            if from.vars.get(k) != Some(v) {
                parts.push(format!("{k} = {}", var_literal(k, v)));
            }
        }
        // A client's timeouts never stay on a server connection.
        let gone = from.vars.keys().filter(|k| !self.vars.contains_key(*k));
        for k in gone.chain(from.client_side.keys()) {
            match baseline.get(k) {
                Some(b) => parts.push(format!("{k} = {}", sql_literal(b))),
                None => parts.push(format!("{k} = DEFAULT")),
            }
        }
        if parts.is_empty() {
            return None;
        }
        // Character set variables interact (setting character_set_connection
        // resets collation_connection), so collation goes last.
        parts.sort_by_key(|p| p.starts_with("collation_"));
        Some(format!("SET SESSION {}", parts.join(", ")))
    }
}

/// Variables whose value may be NULL, which session tracking reports as
/// an empty string (and which no character set is named).
const NULLABLE: &[&str] = &["character_set_results"];

/// `v`, as session tracking reported variable `k`, for a SET statement:
/// an empty value of a variable that may be NULL is NULL (`SET
/// character_set_results = ''` is an error; Connector/J sets it to NULL
/// at every connect).
fn var_literal(k: &str, v: &str) -> String {
    if v.is_empty() && NULLABLE.contains(&k) {
        return "NULL".to_string();
    }
    sql_literal(v)
}

/// Quotes a tracked value for a SET statement: numbers stay bare (integer
/// variables reject strings), NULL stays NULL, everything else is a string.
pub fn sql_literal(v: &str) -> String {
    let numeric = !v.is_empty()
        && v.bytes()
            .enumerate()
            .all(|(i, c)| c.is_ascii_digit() || (c == b'-' && i == 0) || c == b'.')
        && v.bytes().any(|c| c.is_ascii_digit());
    if numeric || v == "NULL" {
        return v.to_string();
    }
    let mut s = String::with_capacity(v.len() + 2);
    s.push('\'');
    for c in v.chars() {
        match c {
            '\'' => s.push_str("''"),
            '\\' => s.push_str("\\\\"),
            c => s.push(c),
        }
    }
    s.push('\'');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_reported_as_empty_is_set_as_null() {
        let mut a = SessionVars::default();
        a.set_var(b"character_set_results", b"");
        a.set_var(b"sql_mode", b"");
        let set = a
            .set_statement(&SessionVars::default(), &BTreeMap::new())
            .unwrap();
        assert!(set.contains("character_set_results = NULL"), "{set}");
        assert!(set.contains("sql_mode = ''"), "{set}");
    }

    #[test]
    fn literals() {
        assert_eq!(sql_literal("10"), "10");
        assert_eq!(sql_literal("-1.5"), "-1.5");
        assert_eq!(
            sql_literal("STRICT_TRANS_TABLES,NO_ZERO_DATE"),
            "'STRICT_TRANS_TABLES,NO_ZERO_DATE'"
        );
        assert_eq!(sql_literal("it's"), "'it''s'");
        assert_eq!(sql_literal("a\\b"), "'a\\\\b'");
        assert_eq!(sql_literal(""), "''");
        assert_eq!(sql_literal("NULL"), "NULL");
        assert_eq!(sql_literal("+00:00"), "'+00:00'");
        assert_eq!(sql_literal("-"), "'-'");
    }

    #[test]
    fn diff_to_set_statement() {
        let mut want = SessionVars::default();
        assert!(want.set_var(b"SQL_MODE", b"ANSI"));
        assert!(!want.set_var(b"sql_mode", b"ANSI"));
        assert!(!want.set_var(b"session_track_schema", b"OFF"));
        want.set_var(b"collation_connection", b"latin1_swedish_ci");
        want.set_var(b"character_set_connection", b"latin1");
        let mut have = SessionVars::default();
        have.set_var(b"time_zone", b"+01:00");
        have.set_var(b"character_set_client", b"latin1");
        let mut base = BTreeMap::new();
        base.insert("character_set_client".into(), "utf8mb4".into());
        let s = want.set_statement(&have, &base).unwrap();
        assert_eq!(
            s,
            "SET SESSION character_set_connection = 'latin1', sql_mode = 'ANSI', \
             character_set_client = 'utf8mb4', time_zone = DEFAULT, \
             collation_connection = 'latin1_swedish_ci'"
        );
        assert!(want.set_statement(&want.clone(), &base).is_none());
    }
}
