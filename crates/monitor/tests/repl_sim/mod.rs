//! SIMULATOR, not MySQL: a scripted model of a MySQL 8 GTID replication
//! group, for the failover tests (MySQL 8 cannot be installed on these
//! machines). Each node listens on a port, logs any account in (as
//! 8.0.36), and answers the statements sextant's monitor and failover
//! task send, by the documented behaviour of MySQL 8.0.26+:
//! - `@@GLOBAL.gtid_executed`, performance_schema's replication
//!   connection tables, SHOW REPLICA STATUS; MariaDB's statements are
//!   refused with a syntax error, as MySQL refuses them;
//! - `STOP/START/RESET REPLICA`, `CHANGE REPLICATION SOURCE TO` (refused
//!   while the IO thread runs, or without SOURCE_AUTO_POSITION = 1, the
//!   only positioning a failover may use), `WAIT_FOR_EXECUTED_GTID_SET`;
//! - read_only and super_read_only (super_read_only stops every account,
//!   sextant's too; read_only lets sextant's SUPER account through);
//! - semi-sync: a commit on a primary with the source side on is
//!   acknowledged only when a replica with the replica side on received
//!   it;
//! - every write (sextant's term record, a test's transaction) gets a
//!   GTID with the writing node's UUID, and replicas receive and apply
//!   from their source every tick.
//!
//! A GTID set here is one interval per UUID (`uuid:1-n` executed,
//! `uuid:a-b` received): enough for these histories, and read the way
//! MySQL prints it.

use parking_lot::Mutex;
use sextant_protocol::packets::{coltype, write_err, write_simple_ok, write_text_resultset};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::sim::{login, read_packet};

#[derive(Debug, Default, Clone)]
pub struct Node {
    pub addr: String,
    pub port: u16,
    pub uuid: String,
    pub dead: bool,
    pub read_only: bool,
    pub super_read_only: bool,
    /// Per UUID: transactions 1..=n applied.
    pub executed: BTreeMap<String, u64>,
    /// Per UUID: the interval its IO thread received since its relay log
    /// began.
    pub received: BTreeMap<String, (u64, u64)>,
    pub source: Option<usize>,
    pub io_on: bool,
    pub sql_on: bool,
    /// A test's knob: the IO thread receives nothing (a slow network),
    /// until it is pointed at a source again.
    pub paused: bool,
    pub heartbeats: u64,
    pub heartbeat_period: String,
    pub semi_source: bool,
    pub semi_replica: bool,
    pub has_table: bool,
    /// `sextant.failover`'s row: term, primary_addr, promoted_at.
    pub term_row: Option<(String, String, String)>,
    /// Every statement it was sent, in order.
    pub log: Vec<String>,
}

pub type World = Arc<Mutex<Vec<Node>>>;

pub fn format_set(executed: &BTreeMap<String, u64>) -> String {
    let v: Vec<String> = executed
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(u, n)| match n {
            1 => format!("{u}:1"),
            n => format!("{u}:1-{n}"),
        })
        .collect();
    v.join(",")
}

fn format_received(r: &BTreeMap<String, (u64, u64)>) -> String {
    let v: Vec<String> = r
        .iter()
        .map(|(u, (a, b))| match a == b {
            true => format!("{u}:{a}"),
            false => format!("{u}:{a}-{b}"),
        })
        .collect();
    v.join(",")
}

/// The highest transaction number per UUID in a GTID set's text.
fn set_ends(s: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for part in s.split(',') {
        let mut it = part.trim().split(':');
        let Some(uuid) = it.next().filter(|u| !u.is_empty()) else {
            continue;
        };
        let end = it
            .filter_map(|iv| iv.rsplit('-').next()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        out.insert(uuid.to_ascii_lowercase(), end);
    }
    out
}

impl Node {
    pub fn holds(&self, gtid: &str) -> bool {
        let Some((u, n)) = gtid.rsplit_once(':') else {
            return false;
        };
        n.parse::<u64>()
            .is_ok_and(|n| self.executed.get(u).copied().unwrap_or(0) >= n)
    }

    fn apply(&mut self) {
        for (u, (a, b)) in self.received.clone() {
            let e = self.executed.entry(u).or_insert(0);
            if a <= *e + 1 && b > *e {
                *e = b;
            }
        }
    }

    fn receive(&mut self, from: &BTreeMap<String, u64>) {
        for (u, n) in from {
            let have = self
                .received
                .get(u)
                .map_or(0, |r| r.1)
                .max(self.executed.get(u).copied().unwrap_or(0));
            if *n > have {
                let start = self.received.get(u).map_or(have + 1, |r| r.0);
                self.received.insert(u.clone(), (start, *n));
            }
        }
    }

    /// A write of its own: the next GTID of its UUID.
    fn write(&mut self) -> String {
        let n = self.executed.entry(self.uuid.clone()).or_insert(0);
        *n += 1;
        format!("{}:{n}", self.uuid)
    }
}

/// Starts `n` nodes: node 0 the primary, the others its replicas, semi-
/// sync on both sides when `semi`.
pub async fn start(n: usize, semi: bool) -> World {
    let mut nodes = Vec::new();
    let mut listeners = Vec::new();
    for i in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = l.local_addr().expect("addr");
        nodes.push(Node {
            addr: a.to_string(),
            port: a.port(),
            uuid: format!("{:08x}-71ca-11e1-9e33-c80aa94295{i:02}", 0x3e11_fa47 + i),
            read_only: i > 0,
            super_read_only: i > 0,
            source: (i > 0).then_some(0),
            io_on: i > 0,
            sql_on: i > 0,
            heartbeat_period: "0.5".into(),
            semi_source: semi && i == 0,
            semi_replica: semi && i > 0,
            ..Node::default()
        });
        listeners.push(l);
    }
    let world: World = Arc::new(Mutex::new(nodes));
    for (i, l) in listeners.into_iter().enumerate() {
        tokio::spawn(listen(l, world.clone(), i));
    }
    tokio::spawn(replicate(world.clone()));
    world
}

/// Replication: every 20 ms each running replica receives what its live
/// source executed (and hears a heartbeat), and applies what it received.
async fn replicate(w: World) {
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut nodes = w.lock();
        for i in 0..nodes.len() {
            let Some(s) = nodes[i].source else { continue };
            if nodes[i].dead || nodes[s].dead {
                continue;
            }
            if nodes[i].io_on && !nodes[i].paused {
                let from = nodes[s].executed.clone();
                let (table, row) = (nodes[s].has_table, nodes[s].term_row.clone());
                let r = &mut nodes[i];
                r.receive(&from);
                r.heartbeats += 1;
                if r.sql_on {
                    r.has_table |= table;
                    if row.is_some() {
                        r.term_row = row;
                    }
                }
            }
            if nodes[i].sql_on {
                nodes[i].apply();
            }
        }
    }
}

/// A transaction committed on node `i` by an application: its GTID and
/// whether it was acknowledged (with semi-sync on, only once a replica
/// received it); None when the node refuses writes or is down.
pub fn commit(w: &World, i: usize) -> Option<(String, bool)> {
    let mut nodes = w.lock();
    if nodes[i].dead || nodes[i].read_only {
        return None;
    }
    let gtid = nodes[i].write();
    if !nodes[i].semi_source {
        return Some((gtid, true));
    }
    let from = nodes[i].executed.clone();
    let acker = (0..nodes.len()).find(|&r| {
        let n = &nodes[r];
        n.source == Some(i) && n.io_on && !n.paused && !n.dead && n.semi_replica
    });
    if let Some(r) = acker {
        nodes[r].receive(&from);
    }
    Some((gtid, acker.is_some()))
}

/// A write made on node `i` directly, whatever its read_only says (a
/// DBA's fix on a replica): an errant transaction.
pub fn write_directly(w: &World, i: usize) -> String {
    w.lock()[i].write()
}

async fn listen(l: TcpListener, w: World, i: usize) {
    let mut id = 10;
    while let Ok((s, _)) = l.accept().await {
        if w.lock()[i].dead {
            continue;
        }
        id += 1;
        let w = w.clone();
        tokio::spawn(async move {
            let _ = serve(s, w, i, id).await;
        });
    }
}

enum Answer {
    Ok,
    Rows(Vec<&'static str>, Vec<Vec<Option<String>>>),
    Err(u16, &'static str, String),
}

fn one(names: Vec<&'static str>, values: Vec<String>) -> Answer {
    Answer::Rows(names, vec![values.into_iter().map(Some).collect()])
}

async fn serve(mut s: TcpStream, w: World, i: usize, id: u32) -> Option<()> {
    login(&mut s, id).await?;
    let mut out = Vec::new();
    loop {
        let p = read_packet(&mut s).await?;
        out.clear();
        let answer = {
            let mut nodes = w.lock();
            if nodes[i].dead {
                return None;
            }
            match p.first() {
                Some(0x01) => return Some(()),
                Some(0x03) => {
                    let q = String::from_utf8_lossy(&p[1..]).to_string();
                    nodes[i].log.push(q.clone());
                    answer(&mut nodes, i, &q)
                }
                _ => Answer::Ok,
            }
        };
        match answer {
            Answer::Ok => write_simple_ok(&mut out, 1, 2),
            Answer::Rows(names, rows) => {
                let cols: Vec<(&str, u8)> =
                    names.iter().map(|n| (*n, coltype::VAR_STRING)).collect();
                write_text_resultset(&mut out, 1, &cols, &rows, false, 2);
            }
            Answer::Err(code, state, msg) => write_err(&mut out, 1, code, state, &msg),
        }
        s.write_all(&out).await.ok()?;
    }
}

/// The number after `key = ` in a statement.
fn value_after<'a>(q: &'a str, key: &str) -> Option<&'a str> {
    let at = q.find(key)? + key.len();
    let rest = q[at..].trim_start().strip_prefix('=')?.trim_start();
    Some(rest.split([',', ' ', ')']).next().unwrap_or(""))
}

/// The values of `REPLACE INTO t VALUES (...)`, unquoted.
fn values(q: &str) -> Vec<String> {
    let Some(at) = q.find("VALUES (") else {
        return Vec::new();
    };
    let body = q[at + 8..].trim_end().trim_end_matches(')');
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' if quoted && chars.peek() == Some(&'\'') => {
                chars.next();
                cur.push('\'');
            }
            '\'' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

const SUPER_RO: &str = "The MySQL server is running with the --super-read-only option so it cannot execute this statement";

fn answer(nodes: &mut [Node], i: usize, q: &str) -> Answer {
    let u = q.trim().to_ascii_uppercase();
    let live_source = nodes[i].source.filter(|&s| !nodes[s].dead);
    let source_port: Vec<u16> = nodes.iter().map(|x| x.port).collect();
    let n = &mut nodes[i];
    let io_state = match (n.source, n.io_on) {
        (None, _) => None,
        (Some(_), false) => Some(("OFF", "No")),
        (Some(_), true) if live_source.is_some() => Some(("ON", "Yes")),
        (Some(_), true) => Some(("CONNECTING", "Connecting")),
    };
    if u == "SELECT @@READ_ONLY" {
        return one(vec!["@@read_only"], vec![(n.read_only as u8).to_string()]);
    }
    if u.starts_with("SELECT @@GLOBAL.MAX_PREPARED_STMT_COUNT") {
        return one(vec!["a", "b"], vec!["16382".into(), "67108864".into()]);
    }
    if u.starts_with("SELECT @@CHARACTER_SET_CLIENT") {
        let v = ["utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_0900_ai_ci"];
        return one(vec!["a", "b", "c", "d"], v.map(String::from).to_vec());
    }
    if u == "SELECT @@GTID_EXECUTED" || u == "SELECT @@GLOBAL.GTID_EXECUTED" {
        return one(vec!["@@gtid_executed"], vec![format_set(&n.executed)]);
    }
    if u == "SELECT @@GLOBAL.GTID_EXECUTED, @@SERVER_UUID" {
        return one(
            vec!["a", "b"],
            vec![format_set(&n.executed), n.uuid.clone()],
        );
    }
    if u.starts_with("SELECT @@GLOBAL.GTID_EXECUTED,") {
        let semi = n.semi_replica && io_state.is_some_and(|s| s.0 == "ON");
        let semi = match u.contains("RPL_SEMI_SYNC_REPLICA_STATUS") && semi {
            true => "ON",
            false => "OFF",
        };
        return one(vec!["a", "b"], vec![format_set(&n.executed), semi.into()]);
    }
    if u.starts_with("SHOW ALL SLAVES STATUS")
        || u.contains("@@GTID_BINLOG_POS")
        || u.contains("MASTER")
    {
        return Answer::Err(1064, "42000", "You have an error in your SQL syntax".into());
    }
    if u.starts_with("SELECT S.SERVICE_STATE") {
        let names = vec![
            "SERVICE_STATE",
            "RECEIVED_TRANSACTION_SET",
            "COUNT_RECEIVED_HEARTBEATS",
            "HEARTBEAT_INTERVAL",
            "HOST",
            "PORT",
        ];
        let rows = match (io_state, n.source) {
            (Some((state, _)), Some(s)) => vec![vec![
                Some(state.to_string()),
                Some(format_received(&n.received)),
                Some(n.heartbeats.to_string()),
                Some(n.heartbeat_period.clone()),
                Some("127.0.0.1".into()),
                Some(source_port[s].to_string()),
            ]],
            _ => vec![],
        };
        return Answer::Rows(names, rows);
    }
    if u.starts_with("SHOW REPLICA STATUS") {
        let names = vec![
            "Replica_IO_Running",
            "Replica_SQL_Running",
            "Seconds_Behind_Source",
            "Retrieved_Gtid_Set",
            "Executed_Gtid_Set",
        ];
        let rows = match io_state {
            None => vec![],
            Some((_, io)) => vec![vec![
                Some(io.into()),
                Some(if n.sql_on { "Yes" } else { "No" }.into()),
                Some("0".into()),
                Some(format_received(&n.received)),
                Some(format_set(&n.executed)),
            ]],
        };
        return Answer::Rows(names, rows);
    }
    if u.starts_with("SELECT WAIT_FOR_EXECUTED_GTID_SET(") {
        if n.sql_on {
            n.apply();
        }
        let want = q.split('\'').nth(1).unwrap_or("");
        let done = set_ends(want)
            .iter()
            .all(|(id, end)| n.executed.get(id).copied().unwrap_or(0) >= *end);
        return one(vec!["r"], vec![if done { "0" } else { "1" }.into()]);
    }
    match u.as_str() {
        "STOP REPLICA IO_THREAD" => {
            n.io_on = false;
            return Answer::Ok;
        }
        "STOP REPLICA" => {
            n.io_on = false;
            n.sql_on = false;
            return Answer::Ok;
        }
        "START REPLICA" => {
            if n.source.is_none() {
                return Answer::Err(3078, "HY000", "no replication source is configured".into());
            }
            n.io_on = true;
            n.sql_on = true;
            return Answer::Ok;
        }
        "RESET REPLICA ALL" => {
            if n.io_on || n.sql_on {
                return Answer::Err(3082, "HY000", "replica threads are running".into());
            }
            n.source = None;
            n.received.clear();
            return Answer::Ok;
        }
        _ => {}
    }
    if let Some(rest) = u.strip_prefix("SET GLOBAL ") {
        let (var, val) = rest.split_once('=').unwrap_or((rest, ""));
        let on = matches!(val.trim(), "1" | "ON");
        match var.trim() {
            "READ_ONLY" => {
                n.read_only = on;
                if !on {
                    n.super_read_only = false;
                }
            }
            "SUPER_READ_ONLY" => {
                n.super_read_only = on;
                if on {
                    n.read_only = true;
                }
            }
            "RPL_SEMI_SYNC_SOURCE_ENABLED" => n.semi_source = on,
            "RPL_SEMI_SYNC_REPLICA_ENABLED" => n.semi_replica = on,
            _ => return Answer::Err(1193, "HY000", format!("Unknown system variable '{var}'")),
        }
        return Answer::Ok;
    }
    if u.starts_with("CHANGE REPLICATION SOURCE TO") {
        if n.io_on {
            return Answer::Err(3085, "HY000", "stop the replica IO thread first".into());
        }
        if value_after(&u, "SOURCE_AUTO_POSITION") != Some("1") {
            return Answer::Err(1064, "42000", "a failover must position by GTID".into());
        }
        let port = value_after(&u, "SOURCE_PORT").and_then(|p| p.parse::<u16>().ok());
        if let Some(p) = value_after(&u, "SOURCE_HEARTBEAT_PERIOD") {
            n.heartbeat_period = p.to_string();
        }
        let Some(port) = port else {
            return Answer::Err(1064, "42000", "no SOURCE_PORT".into());
        };
        let Some(s) = nodes.iter().position(|x| x.port == port) else {
            return Answer::Err(2003, "HY000", format!("no server at port {port}"));
        };
        let n = &mut nodes[i];
        n.source = Some(s);
        n.paused = false;
        n.received.clear();
        return Answer::Ok;
    }
    let writes = u.starts_with("REPLACE INTO SEXTANT.FAILOVER") || u.starts_with("CREATE ");
    if writes && n.super_read_only {
        return Answer::Err(1290, "HY000", SUPER_RO.into());
    }
    if u.starts_with("CREATE ") {
        n.write();
        n.has_table |= u.contains("SEXTANT.FAILOVER");
        return Answer::Ok;
    }
    if u.starts_with("REPLACE INTO SEXTANT.FAILOVER") {
        if !n.has_table {
            return Answer::Err(
                1146,
                "42S02",
                "Table 'sextant.failover' doesn't exist".into(),
            );
        }
        let v = values(q);
        if v.len() == 5 {
            n.term_row = Some((v[1].clone(), v[2].clone(), v[3].clone()));
        }
        n.write();
        return Answer::Ok;
    }
    if u.starts_with("SELECT TERM, PRIMARY_ADDR, PROMOTED_AT FROM SEXTANT.FAILOVER") {
        if !n.has_table {
            return Answer::Err(
                1146,
                "42S02",
                "Table 'sextant.failover' doesn't exist".into(),
            );
        }
        let rows = n
            .term_row
            .iter()
            .map(|(t, a, p)| vec![Some(t.clone()), Some(a.clone()), Some(p.clone())])
            .collect();
        return Answer::Rows(vec!["term", "primary_addr", "promoted_at"], rows);
    }
    Answer::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_reads_sets_as_mysql_prints_them() {
        let ends = set_ends("aa:1-5:7-9,\nbb:3");
        assert_eq!(ends.get("aa"), Some(&9));
        assert_eq!(ends.get("bb"), Some(&3));
        assert_eq!(
            values("REPLACE INTO sextant.failover VALUES ('g', 2, 'a''b', 'x:1-3', 5)"),
            [
                "'g'".replace('\'', ""),
                "2".into(),
                "a'b".into(),
                "x:1-3".into(),
                "5".into()
            ]
        );
    }
}
