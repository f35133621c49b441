//! What differs between MariaDB and MySQL 8 replication for a failover:
//! how a server's position is written and compared (MariaDB: one GTID per
//! domain; MySQL: a GTID set), and the statements that stop, reset,
//! repoint and fence a server. Pure: the failover task picks the dialect
//! from the server version the monitor saw and runs what this returns.
//!
//! MySQL statements are 8.0.23+ (`CHANGE REPLICATION SOURCE`, `START
//! REPLICA`) with the 8.0.26+ semi-sync plugins (`rpl_semi_sync_source_*`,
//! `rpl_semi_sync_replica_*`).

use crate::gtid_set::GtidSet;
use sextant_backend::gtid::{parse_list, Gtid};
use std::fmt;

/// A MariaDB position as the server writes it.
pub(crate) fn show(list: &[Gtid]) -> String {
    let v: Vec<String> = list
        .iter()
        .map(|g| format!("{}-{}-{}", g.domain, g.server, g.seq))
        .collect();
    v.join(",")
}

/// The GTID positions in `a` and `b`, the newer per domain.
pub(crate) fn merge(a: &[Gtid], b: &[Gtid]) -> Vec<Gtid> {
    let mut out: Vec<Gtid> = a.to_vec();
    for g in b {
        match out.iter_mut().find(|x| x.domain == g.domain) {
            Some(x) if x.seq < g.seq => *x = *g,
            Some(_) => {}
            None => out.push(*g),
        }
    }
    out.sort_by_key(|g| g.domain);
    out
}

/// A MariaDB position from the server's text (none: empty).
pub(crate) fn list(s: Option<&str>) -> Vec<Gtid> {
    s.map(|s| parse_list(s).collect()).unwrap_or_default()
}

/// The GTIDs of `pos` past `base` (by sequence, domain by domain): what a
/// server holds that a primary promoted at `base` never had.
pub(crate) fn beyond(pos: &[Gtid], base: &[Gtid]) -> Vec<Gtid> {
    pos.iter()
        .filter(|g| {
            let b = base
                .iter()
                .filter(|x| x.domain == g.domain)
                .map(|x| x.seq)
                .max()
                .unwrap_or(0);
            g.seq > b
        })
        .copied()
        .collect()
}

/// A server's replication position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    MariaDb(Vec<Gtid>),
    MySql(GtidSet),
}

impl Default for Position {
    fn default() -> Self {
        Position::MariaDb(Vec::new())
    }
}

impl Position {
    /// `s` as `d` writes a position; unreadable text is the empty one.
    pub fn parse(d: Dialect, s: Option<&str>) -> Position {
        match d {
            Dialect::MariaDb => Position::MariaDb(list(s)),
            Dialect::MySql => Position::MySql(s.and_then(GtidSet::parse).unwrap_or_default()),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Position::MariaDb(l) => l.is_empty(),
            Position::MySql(s) => s.is_empty(),
        }
    }

    /// How much it holds, to rank servers of one group (MariaDB: the
    /// sequence numbers' sum; MySQL: the transactions' count).
    pub fn size(&self) -> u64 {
        match self {
            Position::MariaDb(l) => l.iter().map(|g| g.seq).sum(),
            Position::MySql(s) => s.count(),
        }
    }

    /// What it holds that `base` does not (by sequence per domain on
    /// MariaDB, exactly on MySQL); positions of different dialects have
    /// nothing in common, so all of `self` is beyond.
    pub fn beyond(&self, base: &Position) -> Position {
        match (self, base) {
            (Position::MariaDb(a), Position::MariaDb(b)) => Position::MariaDb(beyond(a, b)),
            (Position::MySql(a), Position::MySql(b)) => Position::MySql(a.minus(b)),
            _ => self.clone(),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::MariaDb(l) => f.write_str(&show(l)),
            Position::MySql(s) => write!(f, "{s}"),
        }
    }
}

/// The server family whose statements a group's failover uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    MariaDb,
    MySql,
}

/// A value between single quotes in a statement.
pub(crate) fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// Where a replica is pointed: the primary, and for a server that was
/// not a replica before (an old primary rejoining), the account and
/// retry it connects with.
pub(crate) struct Source<'a> {
    pub host: &'a str,
    pub port: u16,
    /// Seconds, as the statement takes it.
    pub heartbeat: &'a str,
    pub account: Option<(&'a str, &'a str)>,
}

impl Dialect {
    pub(crate) fn stop_io(self) -> &'static str {
        match self {
            Dialect::MariaDb => "STOP SLAVE IO_THREAD",
            Dialect::MySql => "STOP REPLICA IO_THREAD",
        }
    }

    pub(crate) fn stop(self) -> &'static str {
        match self {
            Dialect::MariaDb => "STOP SLAVE",
            Dialect::MySql => "STOP REPLICA",
        }
    }

    pub(crate) fn start(self) -> &'static str {
        match self {
            Dialect::MariaDb => "START SLAVE",
            Dialect::MySql => "START REPLICA",
        }
    }

    pub(crate) fn reset_all(self) -> &'static str {
        match self {
            Dialect::MariaDb => "RESET SLAVE ALL",
            Dialect::MySql => "RESET REPLICA ALL",
        }
    }

    /// What the server applied, its own writes included (one column).
    pub(crate) fn position(self) -> &'static str {
        match self {
            Dialect::MariaDb => "SELECT @@gtid_binlog_pos",
            Dialect::MySql => "SELECT @@GLOBAL.gtid_executed",
        }
    }

    /// Waits up to `secs` for the server to have applied `pos`; the
    /// answer is 0 when it has.
    pub(crate) fn wait_for(self, pos: &Position, secs: u64) -> String {
        match self {
            Dialect::MariaDb => format!(
                "SELECT MASTER_GTID_WAIT({}, {secs})",
                quoted(&pos.to_string())
            ),
            Dialect::MySql => format!(
                "SELECT WAIT_FOR_EXECUTED_GTID_SET({}, {secs})",
                quoted(&pos.to_string())
            ),
        }
    }

    /// Keeps every account but sextant's (and replication) from writing.
    /// On MySQL that is super_read_only: read_only lets SUPER and
    /// CONNECTION_ADMIN accounts through, which many applications hold.
    pub(crate) fn fence(self) -> &'static str {
        match self {
            Dialect::MariaDb => "SET GLOBAL read_only = 1",
            Dialect::MySql => "SET GLOBAL super_read_only = 1",
        }
    }

    /// Lets sextant's own account write (its term record) while
    /// applications still cannot: nothing on MariaDB, where the account's
    /// READ_ONLY ADMIN passes read_only; on MySQL super_read_only blocks
    /// every account, so it goes off and read_only stays on.
    pub(crate) fn before_record(self) -> Option<&'static str> {
        match self {
            Dialect::MariaDb => None,
            Dialect::MySql => Some("SET GLOBAL super_read_only = 0"),
        }
    }

    /// Writable (on MySQL this turns super_read_only off too).
    pub(crate) fn writable(self) -> &'static str {
        "SET GLOBAL read_only = 0"
    }

    /// The semi-sync sides for a server becoming a primary (`primary`)
    /// or a replica.
    pub(crate) fn semi_sync(self, primary: bool) -> [&'static str; 2] {
        match (self, primary) {
            (Dialect::MariaDb, true) => [
                "SET GLOBAL rpl_semi_sync_slave_enabled = OFF",
                "SET GLOBAL rpl_semi_sync_master_enabled = ON",
            ],
            (Dialect::MariaDb, false) => [
                "SET GLOBAL rpl_semi_sync_master_enabled = OFF",
                "SET GLOBAL rpl_semi_sync_slave_enabled = ON",
            ],
            (Dialect::MySql, true) => [
                "SET GLOBAL rpl_semi_sync_replica_enabled = OFF",
                "SET GLOBAL rpl_semi_sync_source_enabled = ON",
            ],
            (Dialect::MySql, false) => [
                "SET GLOBAL rpl_semi_sync_source_enabled = OFF",
                "SET GLOBAL rpl_semi_sync_replica_enabled = ON",
            ],
        }
    }

    /// The primary side of semi-sync alone (a primary made writable
    /// again after a restart).
    pub(crate) fn semi_sync_primary_on(self) -> &'static str {
        self.semi_sync(true)[1]
    }

    /// Whether the replica side of semi-sync is connected and
    /// acknowledging (one column, ON or OFF).
    pub(crate) fn semi_sync_status(self) -> &'static str {
        match self {
            Dialect::MariaDb => {
                "(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                 WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_SLAVE_STATUS')"
            }
            Dialect::MySql => {
                "(SELECT VARIABLE_VALUE FROM performance_schema.global_status \
                 WHERE VARIABLE_NAME = 'Rpl_semi_sync_replica_status')"
            }
        }
    }

    /// Points a replica at `s` by GTID. A replica repointed keeps its
    /// account; MariaDB's rejoin starts from what the server applied
    /// (current_pos: an old primary's own binlog), a repoint from what it
    /// replicated (slave_pos). MySQL positions by GTID set either way;
    /// GET_SOURCE_PUBLIC_KEY lets the default caching_sha2_password
    /// account log in without TLS.
    pub(crate) fn change_source(self, s: &Source) -> String {
        match self {
            Dialect::MariaDb => {
                let mut out = format!(
                    "CHANGE MASTER TO MASTER_HOST = {}, MASTER_PORT = {}",
                    quoted(s.host),
                    s.port
                );
                match s.account {
                    Some((user, password)) => out.push_str(&format!(
                        ", MASTER_USER = {}, MASTER_PASSWORD = {}, MASTER_USE_GTID = current_pos, MASTER_CONNECT_RETRY = 1",
                        quoted(user),
                        quoted(password)
                    )),
                    None => out.push_str(", MASTER_USE_GTID = slave_pos"),
                }
                out.push_str(&format!(", MASTER_HEARTBEAT_PERIOD = {}", s.heartbeat));
                out
            }
            Dialect::MySql => {
                let mut out = format!(
                    "CHANGE REPLICATION SOURCE TO SOURCE_HOST = {}, SOURCE_PORT = {}",
                    quoted(s.host),
                    s.port
                );
                if let Some((user, password)) = s.account {
                    out.push_str(&format!(
                        ", SOURCE_USER = {}, SOURCE_PASSWORD = {}, SOURCE_CONNECT_RETRY = 1, GET_SOURCE_PUBLIC_KEY = 1",
                        quoted(user),
                        quoted(password)
                    ));
                }
                out.push_str(&format!(
                    ", SOURCE_AUTO_POSITION = 1, SOURCE_HEARTBEAT_PERIOD = {}",
                    s.heartbeat
                ));
                out
            }
        }
    }
}

/// MySQL's replica connection, one row (none when the server is not a
/// replica): its state (ON, OFF, CONNECTING), what it received, the
/// heartbeats it received, the heartbeat period in seconds, and its
/// source's host and port. SHOW REPLICA STATUS has no heartbeat count;
/// performance_schema has all of them.
pub(crate) const MYSQL_REPLICA_STATUS: &str =
    "SELECT s.SERVICE_STATE, s.RECEIVED_TRANSACTION_SET, s.COUNT_RECEIVED_HEARTBEATS, \
     c.HEARTBEAT_INTERVAL, c.HOST, c.PORT FROM performance_schema.replication_connection_status s \
     JOIN performance_schema.replication_connection_configuration c \
     ON c.CHANNEL_NAME = s.CHANNEL_NAME WHERE s.CHANNEL_NAME = ''";

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn positions_by_dialect() {
        let m = Position::parse(Dialect::MariaDb, Some("0-1-10,1-2-5"));
        assert_eq!(m.to_string(), "0-1-10,1-2-5");
        assert_eq!(m.size(), 15);
        let base = Position::parse(Dialect::MariaDb, Some("0-2-12"));
        assert_eq!(m.beyond(&base).to_string(), "1-2-5");
        let a = Position::parse(Dialect::MySql, Some(&format!("{U}:1-10")));
        let b = Position::parse(Dialect::MySql, Some(&format!("{U}:1-7")));
        assert_eq!(a.size(), 10);
        assert_eq!(a.beyond(&b).to_string(), format!("{U}:8-10"));
        assert!(b.beyond(&a).is_empty());
        assert!(Position::parse(Dialect::MySql, Some("not a set")).is_empty());
        // Different dialects share nothing.
        assert_eq!(a.beyond(&m), a);
    }

    #[test]
    fn statements() {
        let rejoin = Source {
            host: "10.0.0.2",
            port: 3306,
            heartbeat: "0.500",
            account: Some(("repl", "p'w")),
        };
        let repoint = Source {
            account: None,
            ..rejoin
        };
        let golden = [
            (
                Dialect::MariaDb.change_source(&repoint),
                "CHANGE MASTER TO MASTER_HOST = '10.0.0.2', MASTER_PORT = 3306, MASTER_USE_GTID = slave_pos, MASTER_HEARTBEAT_PERIOD = 0.500",
            ),
            (
                Dialect::MariaDb.change_source(&rejoin),
                "CHANGE MASTER TO MASTER_HOST = '10.0.0.2', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = 'p''w', MASTER_USE_GTID = current_pos, MASTER_CONNECT_RETRY = 1, MASTER_HEARTBEAT_PERIOD = 0.500",
            ),
            (
                Dialect::MySql.change_source(&repoint),
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST = '10.0.0.2', SOURCE_PORT = 3306, SOURCE_AUTO_POSITION = 1, SOURCE_HEARTBEAT_PERIOD = 0.500",
            ),
            (
                Dialect::MySql.change_source(&rejoin),
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST = '10.0.0.2', SOURCE_PORT = 3306, SOURCE_USER = 'repl', SOURCE_PASSWORD = 'p''w', SOURCE_CONNECT_RETRY = 1, GET_SOURCE_PUBLIC_KEY = 1, SOURCE_AUTO_POSITION = 1, SOURCE_HEARTBEAT_PERIOD = 0.500",
            ),
            (
                Dialect::MySql.wait_for(&Position::parse(Dialect::MySql, Some(&format!("{U}:1-3"))), 60),
                "SELECT WAIT_FOR_EXECUTED_GTID_SET('3e11fa47-71ca-11e1-9e33-c80aa9429562:1-3', 60)",
            ),
            (
                Dialect::MariaDb.wait_for(&Position::parse(Dialect::MariaDb, Some("0-1-3")), 60),
                "SELECT MASTER_GTID_WAIT('0-1-3', 60)",
            ),
        ];
        for (got, want) in golden {
            assert_eq!(got, want);
        }
        assert_eq!(Dialect::MySql.fence(), "SET GLOBAL super_read_only = 1");
        assert_eq!(Dialect::MariaDb.before_record(), None);
        assert_eq!(
            Dialect::MySql.semi_sync(true),
            [
                "SET GLOBAL rpl_semi_sync_replica_enabled = OFF",
                "SET GLOBAL rpl_semi_sync_source_enabled = ON"
            ]
        );
    }

    #[test]
    fn values_are_quoted() {
        assert_eq!(quoted("a'b\\c"), "'a''b\\\\c'");
    }

    #[test]
    fn positions_merge_and_compare_by_domain() {
        let a = list(Some("0-1-10,1-2-5"));
        let b = list(Some("0-3-12,2-1-1"));
        assert_eq!(show(&merge(&a, &b)), "0-3-12,1-2-5,2-1-1");
        assert_eq!(
            show(&beyond(&list(Some("0-1-13,1-2-5")), &merge(&a, &b))),
            "0-1-13"
        );
        assert!(beyond(&a, &merge(&a, &b)).is_empty());
        assert_eq!(show(&beyond(&list(Some("3-1-1")), &a)), "3-1-1");
    }
}
