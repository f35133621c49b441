//! The bank the distributed-transaction tests run: accounts sharded over
//! the four groups of a sharded lab (`--shards 4`), a log of transfers
//! sharded by its own id, clients moving money between accounts in
//! transactions that touch three or four groups, and the checks that no
//! transfer is there in part.

use super::{direct, free_port, hash_layout, lab, shard_groups};
use mysql::prelude::Queryable;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub const DB: &str = "sextant_xa";

/// A database whose tables have a copy in every group.
pub const GLOBAL: &str = "sextant_xa_global";

/// The sharded layout over the lab's four groups, with `xa` (an `[xa]`
/// table) for the coordinator.
pub fn layout(xa: &str) -> String {
    let mut g = shard_groups("primary_wait_ms = 15000\n");
    g += xa;
    g + &hash_layout(
        4,
        &format!(
            r#"
[sharding.default]
{DB} = "data1"

[sharding.all]
{GLOBAL} = ["data1", "data2", "data3", "data4"]

[[sharding.table]]
vdb = 1
db = "{DB}"
table = "acct"
pkey = "id"

[[sharding.table]]
vdb = 1
db = "{DB}"
table = "transfers"
pkey = "id"
"#
        ),
    )
}

/// A fresh directory for a coordinator's decision log and id.
pub fn xa_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "sextant-xa-log-{}-{}",
        std::process::id(),
        free_port()
    ))
}

/// An `[xa]` table: its log in `dir`, recovery every `recover_ms`, and
/// `extra` lines.
pub fn xa_table(dir: &std::path::Path, recover_ms: u64, extra: &str) -> String {
    format!(
        "[xa]\nlog_dir = \"{}\"\nrecover_interval_ms = {recover_ms}\n{extra}",
        dir.display()
    )
}

/// Accounts 1..=`accounts` of 1000 each, sharded by id over the four
/// groups (id mod 4), an empty transfer log, and the global table, on
/// every group's primary; nothing a crashed test left stays prepared.
pub fn fresh_bank(accounts: i64) {
    for (k, (p, _)) in lab().shards.iter().enumerate() {
        let mut c = direct(*p);
        resolve_leftovers(&mut c);
        for sql in [
            format!("DROP DATABASE IF EXISTS {DB}"),
            format!("CREATE DATABASE {DB}"),
            format!("DROP DATABASE IF EXISTS {GLOBAL}"),
            format!("CREATE DATABASE {GLOBAL}"),
            format!("CREATE TABLE {GLOBAL}.rates (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"),
            format!("CREATE TABLE {DB}.acct (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB"),
            format!("CREATE TABLE {DB}.transfers (id BIGINT PRIMARY KEY, src BIGINT, dst BIGINT, amount BIGINT) ENGINE=InnoDB"),
        ] {
            c.query_drop(sql).unwrap();
        }
        let rows: Vec<String> = (1..=accounts)
            .filter(|id| id % 4 == k as i64)
            .map(|id| format!("({id}, 1000)"))
            .collect();
        if !rows.is_empty() {
            c.query_drop(format!("INSERT INTO {DB}.acct VALUES {}", rows.join(",")))
                .unwrap();
        }
    }
}

/// Rolls back every branch left prepared on this server.
pub fn resolve_leftovers(c: &mut mysql::Conn) {
    let rows: Vec<(i64, i64, i64, Vec<u8>)> = c.query("XA RECOVER").unwrap();
    for (f, g, _, data) in rows {
        let hex = |x: &[u8]| x.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let (gt, bq) = data.split_at(g as usize);
        let _ = c.query_drop(format!("XA ROLLBACK X'{}',X'{}',{f}", hex(gt), hex(bq)));
    }
}

/// Every account's balance, read on each group's primary directly.
pub fn balances() -> Vec<(i64, i64)> {
    let mut all = Vec::new();
    for (p, _) in &lab().shards {
        let rows: Vec<(i64, i64)> = direct(*p)
            .query(format!("SELECT id, balance FROM {DB}.acct"))
            .unwrap();
        all.extend(rows);
    }
    all.sort();
    all
}

/// The transfers logged, read on each primary directly.
pub fn transfers() -> BTreeMap<i64, (i64, i64, i64)> {
    let mut all = BTreeMap::new();
    for (p, _) in &lab().shards {
        let rows: Vec<(i64, i64, i64, i64)> = direct(*p)
            .query(format!("SELECT id, src, dst, amount FROM {DB}.transfers"))
            .unwrap();
        for (id, s, d, a) in rows {
            all.insert(id, (s, d, a));
        }
    }
    all
}

/// Prepared branches on every primary (formatID, data), read directly.
pub fn prepared_everywhere() -> Vec<(i64, String)> {
    let mut all = Vec::new();
    for (p, _) in &lab().shards {
        let rows: Vec<(i64, i64, i64, Vec<u8>)> = direct(*p).query("XA RECOVER").unwrap();
        all.extend(
            rows.into_iter()
                .map(|(f, _, _, d)| (f, String::from_utf8_lossy(&d).into_owned())),
        );
    }
    all
}

/// Waits until no server holds a prepared branch; the time it took.
pub fn until_no_prepared(within: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let left = prepared_everywhere();
        if left.is_empty() {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < within,
            "prepared branches still on the servers after {within:?}: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Adds `delta` to account `id`'s balance (through sextant).
pub fn add(c: &mut mysql::Conn, id: i64, delta: i64) -> mysql::Result<()> {
    c.query_drop(format!(
        "UPDATE acct SET balance = balance + {delta} WHERE id = {id}"
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Committed,
    Failed,
    /// The connection was lost during COMMIT, or sextant said it cannot
    /// know: either outcome is right, as long as it is all or nothing.
    Unknown,
}

/// A transfer a client tried: id, source, destination, amount, outcome.
pub type Tried = (i64, i64, i64, i64, Seen);

/// One client doing transfers until `stop`, reconnecting while its
/// sextant is down; `ports` are tried in turn from client `n`'s own (an
/// instance that is gone sends it to the next). Returns every transfer it
/// tried.
pub fn transfer_client(
    ports: &[u16],
    n: u64,
    accounts: i64,
    stop: &std::sync::atomic::AtomicBool,
) -> Vec<Tried> {
    use std::sync::atomic::Ordering;
    let url = |port: u16| format!("mysql://app:apppass@127.0.0.1:{port}/{DB}?prefer_socket=false");
    let mut seen = Vec::new();
    let mut rng = (n + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut conn: Option<mysql::Conn> = None;
    let mut turn = n as usize;
    let mut k = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match mysql::Conn::new(
                mysql::Opts::from_url(&url(ports[turn % ports.len()])).unwrap(),
            ) {
                Ok(mut c) => {
                    // A distributed deadlock is no server's to see: a short
                    // lock wait ends one.
                    let _ = c.query_drop("SET SESSION innodb_lock_wait_timeout = 3");
                    conn.insert(c)
                }
                Err(_) => {
                    turn += 1;
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            },
        };
        let a = (next() % accounts as u64) as i64 + 1;
        let mut b = (next() % accounts as u64) as i64 + 1;
        if a == b {
            b = b % accounts + 1;
        }
        let amount = (next() % 100) as i64 + 1;
        k += 1;
        let id = (n as i64) * 1_000_000_000 + k;
        // Accounts are locked in id order: no two transfers wait for each
        // other across groups.
        let ((id1, d1), (id2, d2)) = match a < b {
            true => ((a, -amount), (b, amount)),
            false => ((b, amount), (a, -amount)),
        };
        let body = (|| -> mysql::Result<()> {
            c.query_drop("BEGIN")?;
            add(c, id1, d1)?;
            add(c, id2, d2)?;
            c.query_drop(format!(
                "INSERT INTO transfers (id, src, dst, amount) VALUES ({id}, {a}, {b}, {amount})"
            ))
        })();
        let outcome = match body {
            Err(_) => {
                if c.query_drop("ROLLBACK").is_err() {
                    conn = None;
                    turn += 1;
                }
                Seen::Failed
            }
            Ok(()) => match c.query_drop("COMMIT") {
                Ok(()) => Seen::Committed,
                Err(mysql::Error::MySqlError(e)) if e.code != 1180 => Seen::Failed,
                Err(mysql::Error::MySqlError(_)) => Seen::Unknown,
                Err(_) => {
                    conn = None;
                    turn += 1;
                    Seen::Unknown
                }
            },
        };
        seen.push((id, a, b, amount, outcome));
    }
    seen
}

/// The bank's invariants after its clients stopped and recovery ran:
/// every transfer answered committed is logged, none answered failed is,
/// the total is unchanged, and every account is what the logged transfers
/// make it (no transfer is there in part). Returns how many transfers
/// were answered committed, failed and unknown.
pub fn check_bank(seen: &[Tried], accounts: i64) -> (usize, usize, usize) {
    let logged = transfers();
    let count = |o: Seen| seen.iter().filter(|s| s.4 == o).count();
    for (id, a, b, amount, o) in seen {
        match o {
            Seen::Committed => assert_eq!(
                logged.get(id),
                Some(&(*a, *b, *amount)),
                "transfer {id} was answered committed and is not there"
            ),
            Seen::Failed => assert!(
                !logged.contains_key(id),
                "transfer {id} was answered failed and is there"
            ),
            Seen::Unknown => {}
        }
    }
    let now = balances();
    assert_eq!(
        now.iter().map(|(_, b)| b).sum::<i64>(),
        1000 * accounts,
        "money was made or lost"
    );
    let mut want: BTreeMap<i64, i64> = (1..=accounts).map(|i| (i, 1000)).collect();
    for (src, dst, amount) in logged.values() {
        *want.get_mut(src).unwrap() -= amount;
        *want.get_mut(dst).unwrap() += amount;
    }
    let got: BTreeMap<i64, i64> = now.into_iter().collect();
    assert_eq!(got, want, "a transfer is there in part");
    (
        count(Seen::Committed),
        count(Seen::Failed),
        count(Seen::Unknown),
    )
}
